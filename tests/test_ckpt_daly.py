"""Daly's exact exponential goodput: by hand, against a simulation, and against first order."""

from __future__ import annotations

import math
import random

import pytest

from iobench.checkpoint import daly as cd
from iobench.checkpoint import model as cm
from iobench.core.errors import UsageError

H = 3600.0


def test_goodput_exact_by_hand():
    # τ 1 h, δ 60 s, M 10 h, R 15 min: 3600 / (36000·e^{900/36000}·(e^{3660/36000} − 1))
    # e^0.025 = 1.0253151, e^0.1016667 − 1 = 0.1070144: 3600 / 3950.05 = 0.911382
    assert cd.goodput_exact(3600, 60, 36000, 900) == pytest.approx(0.911382, abs=2e-6)
    assert cd.wall_per_work(3600, 60, 36000, 900) == pytest.approx(1 / 0.911382, rel=3e-6)
    # first order says 1 − (60/3600 + (1800 + 900)/36000) = 0.908333: 0.3 points lower here
    assert cm.goodput(3600, 60, 36000, 900) == pytest.approx(0.9083333, abs=1e-7)
    # no failures to speak of: the stall's share only, τ/(τ+δ)
    assert cd.goodput_exact(100, 25, 1e12) == pytest.approx(0.8, rel=1e-9)
    assert cd.goodput_exact(1e6, 60, 100) == 0.0  # a segment never completes


def _simulate(tau, delta, m, r, segments, seed=7):
    """Exponential failures struck anywhere: in work, in the checkpoint, in the restart."""
    rng = random.Random(seed)
    t = work = 0.0
    done = 0
    while done < segments:
        f = rng.expovariate(1 / m)
        if f >= tau + delta:
            t += tau + delta
            work += tau
            done += 1
            continue
        t += f
        while True:  # restart; a failure during it starts it over
            g = rng.expovariate(1 / m)
            if g >= r:
                t += r
                break
            t += g
    return work / t


@pytest.mark.parametrize("tau, delta, m, r", [(300, 50, 1000, 100), (1800, 600, 3000, 900)])
def test_goodput_exact_matches_a_simulation(tau, delta, m, r):
    sim = _simulate(tau, delta, m, r, 60_000)
    exact = cd.goodput_exact(tau, delta, m, r)
    first = cm.goodput(tau, delta, m, r)
    assert sim == pytest.approx(exact, abs=0.006)
    assert abs(first - sim) > 3 * abs(exact - sim)  # the first order is further off here


def _simulate_async(tau, snap, w, m, r, segments, seed=1):
    """Asynchronous saves, event by event: τ of work, the snapshot ``snap`` (stall), then the
    write runs ``w`` (≤ τ) in the background; a failure anywhere rolls back to the last
    checkpoint whose write had finished (one in flight is lost) and restarts (``r``, a failure
    during it starting it over)."""
    rng = random.Random(seed)
    now = pos = durable = 0.0
    pending = None  # (work position, time its write is durable)
    nxt = rng.expovariate(1 / m)
    while now < segments * (tau + snap):
        end = now + tau
        if nxt >= end:
            now, pos = end, pos + tau
            end = now + snap
        if nxt < end:  # struck in the work or in the snapshot
            if pending and pending[1] <= nxt:
                durable = pending[0]
            now, pos, pending = nxt, durable, None
            while (g := rng.expovariate(1 / m)) < r:
                now += g
            now += r
            nxt = now + rng.expovariate(1 / m)
            continue
        now = end
        if pending and pending[1] <= now:
            durable = pending[0]
        pending = (pos, now + w)
    return pos / now


@pytest.mark.parametrize(
    "tau, snap, w, m, r",
    [
        (300, 5, 300, 3000, 100),  # the write fills the interval; w/M = 0.1
        (600, 1, 600, 3600, 60),  # w/M = 1/6: the form's largest error here
        (228, 0.064, 228, 11135, 228),  # plan --async's llama3-405b on 16,384 GPUs at 95 %
        (1800, 30, 900, 10800, 900),
    ],
)
def test_async_form_matches_a_simulation(tau, snap, w, m, r):
    """docs/validation/checkpoint-model.md, section 2: the write-in-flight factor 1 + w/M."""
    sim = _simulate_async(tau, snap, w, m, r, 60_000)
    exact = cd.goodput_exact(tau, snap, m, r, w)
    first = cm.goodput(tau, snap, m, r, w)
    assert sim == pytest.approx(exact, abs=0.012)
    assert abs(exact - sim) < abs(first - sim)  # nearer than the first order, every case


def test_optimum_solves_the_derivative_and_is_the_maximum():
    d, m, r = 60.0, 3 * H, 600.0
    t = cd.optimum_interval_exact(d, m)
    # dG/dτ = 0 ⇔ e^{(τ+δ)/M}·(1 − τ/M) = 1 (w = 0; e^{R/M} cancels)
    assert math.exp((t + d) / m) * (1 - t / m) == pytest.approx(1.0, abs=1e-12)
    g = cd.goodput_exact(t, d, m, r)
    assert g > cd.goodput_exact(t * 0.99, d, m, r) and g > cd.goodput_exact(t * 1.01, d, m, r)
    # Daly's higher-order closed form is within 0.1 % of the exact optimum at δ ≪ M
    assert cm.daly_interval(d, m) == pytest.approx(t, rel=1e-3)
    assert cd.optimum_interval_exact(0, m) == 0.0
    # a write in flight scales the wall time (1 + w/M): the optimum stays, the goodput falls
    tw = cd.optimum_interval_exact(5, m)
    gw = cd.goodput_exact(tw, 5, m, r, 60)
    assert gw == pytest.approx(cd.goodput_exact(tw, 5, m, r) / (1 + 60 / m), rel=1e-12)
    assert gw > cd.goodput_exact(tw * 0.98, 5, m, r, 60)
    assert gw > cd.goodput_exact(tw * 1.02, 5, m, r, 60)


def test_async_form_agrees_with_first_order_when_failures_are_rare():
    # wall per work − 1 = s/τ + τ/2M + (s + w + R)/M + O(1/M²): first order's s/τ + (τ/2 + w + R)/M
    extra = cd.wall_per_work(600, 5, 1e7, 60, 120) - 1
    assert extra == pytest.approx(cm.lost_fraction(600, 5, 1e7, 60, 120), rel=1e-3)


def test_bad_input_is_a_usage_error():
    for bad in ((0, 1, 1), (1, -1, 1), (1, 1, 0), (1, 1, math.inf)):
        with pytest.raises(UsageError):
            cd.goodput_exact(*bad)
    with pytest.raises(UsageError):
        cd.optimum_interval_exact(-1, 10)
