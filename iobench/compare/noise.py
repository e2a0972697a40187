"""The statistics behind the rule: Student's t, the two-sample t test on log values
(:func:`log_t_test`), the history's test (:func:`prediction_p_value`, :class:`Noise`: one
metric's run-to-run spread and centre), the corrections across metrics (:func:`holm`, :func:`benjamini_hochberg`)
and the sample sizes that would confirm a change (:func:`repeats_to_confirm`,
:func:`runs_to_confirm`). Pure functions; ``docs/concepts/compare.md`` states the rule.
"""

from __future__ import annotations

import functools
import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple


def _beta_cf(a: float, b: float, x: float) -> float:
    """Continued fraction of the incomplete beta function (modified Lentz)."""
    tiny = 1e-300
    c, d = 1.0, 1 - (a + b) * x / (a + 1)
    d = 1 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 500):
        for aa in (
            m * (b - m) * x / ((a - 1 + 2 * m) * (a + 2 * m)),
            -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 1 + 2 * m)),
        ):
            d = 1 + aa * d
            d = 1 / (d if abs(d) > tiny else tiny)
            c = 1 + aa / c
            c = c if abs(c) > tiny else tiny
            h *= d * c
        if abs(d * c - 1) < 1e-15:
            break
    return h


def _beta_inc(a: float, b: float, x: float) -> float:
    """The regularized incomplete beta function I_x(a, b)."""
    if x <= 0:
        return 0.0
    if x >= 1:
        return 1.0
    front = math.exp(
        math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    )
    if x < (a + 1) / (a + b + 2):
        return front * _beta_cf(a, b, x) / a
    return 1 - front * _beta_cf(b, a, 1 - x) / b


def t_sf(t: float, df: float) -> float:
    """P(T > t) for Student's t with ``df`` degrees of freedom."""
    p = 0.5 * _beta_inc(df / 2, 0.5, df / (df + t * t))
    return p if t >= 0 else 1 - p


@functools.lru_cache(maxsize=4096)
def t_quantile(q: float, df: float) -> float:
    """The ``q`` quantile (0.5 < q < 1) of Student's t with ``df`` degrees of freedom: by
    bisection on :func:`t_sf`; from 100 degrees of freedom by the Cornish-Fisher expansion
    around the normal quantile (Abramowitz & Stegun 26.7.5; relative error below 1e-6 there)."""
    if not 0.5 < q < 1 or df <= 0:
        raise ValueError(f"t_quantile needs 0.5 < q < 1 and df > 0, got q={q}, df={df}")
    if df >= 100:
        z = statistics.NormalDist().inv_cdf(q)
        g1 = (z**3 + z) / 4
        g2 = (5 * z**5 + 16 * z**3 + 3 * z) / 96
        g3 = (3 * z**7 + 19 * z**5 + 17 * z**3 - 15 * z) / 384
        g4 = (79 * z**9 + 776 * z**7 + 1482 * z**5 - 1920 * z**3 - 945 * z) / 92160
        return z + g1 / df + g2 / df**2 + g3 / df**3 + g4 / df**4
    lo, hi = 0.0, 1.0
    while t_sf(hi, df) > 1 - q:
        hi *= 2
    for _ in range(100):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if t_sf(mid, df) > 1 - q else (lo, mid)
    return (lo + hi) / 2


#: The most degrees of freedom the history's test gives its reference t distribution. Runs of
#: one spec on a shared host do not scatter log-normally: a neighbour's burst, the hypervisor
#: or a cold cache moves a whole run, and such runs sit further out than Student's t with
#: k - 1 degrees of freedom allows once k is large (measured: docs/validation/compare.md,
#: "Eighth run"). Capped at 4, the reference keeps the tail of Student's t with 4 degrees of
#: freedom however many runs there are: the usual robust choice for data with outliers
#: (Lange, Little & Taylor 1989, "Robust statistical modeling using the t distribution", JASA
#: 84:881-896). A longer history still narrows the spread's estimate (``sqrt(1 + 1/k)``); it
#: never thins the tail. ``None``: no cap, Student's k - 1, exact for independent log-normal
#: runs (``--tail-df normal``).
RUN_TAIL_DF = 4


def history_df(runs: int, tail_df: int | None = RUN_TAIL_DF) -> int:
    """The degrees of freedom of the history's test with ``runs`` earlier runs: ``runs - 1``,
    at most ``tail_df`` (:data:`RUN_TAIL_DF`; ``None``: no cap)."""
    return runs - 1 if tail_df is None else max(1, min(runs - 1, tail_df))


@dataclass(frozen=True)
class Noise:
    """One metric's run-to-run spread, from earlier runs of the same spec on the same setup."""

    runs: int  # k: earlier runs that measured it
    sd_log: float  # sample standard deviation of ln(value) over those runs
    mean_log: float | None = None  # their mean ln(value): the reference a new run is held to

    @property
    def spread(self) -> float:
        """One standard deviation as a ratio: runs of this spec scatter by about ×spread."""
        return math.exp(min(self.sd_log, 700.0))  # beyond e^700 a float overflows

    @classmethod
    def of(cls, values: Sequence[float]) -> Noise | None:
        """From per-run values; None when fewer than two are positive and finite."""
        logs = [math.log(v) for v in values if v > 0 and math.isfinite(v)]
        if len(logs) < 2:
            return None
        return cls(len(logs), statistics.stdev(logs), statistics.fmean(logs))


def history_p_value(moved: float, noise: Noise, tail_df: int | None = RUN_TAIL_DF) -> float | None:
    """Two-sided p of a move of ``moved`` (ln(current / baseline)) between two runs that each
    scatter like the history: t = moved / (sqrt(2) s), k - 1 degrees of freedom at most
    ``tail_df`` (:func:`history_df`; the difference
    of two runs has twice one run's variance). None when the history has no spread. Used when
    the history's runs are not at hand, only their spread (:func:`prediction_p_value` when
    they are)."""
    if noise.runs < 2 or not noise.sd_log > 0:
        return None
    if math.isinf(moved):
        return 0.0
    t = moved / (math.sqrt(2) * noise.sd_log)
    return min(1.0, 2 * t_sf(abs(t), history_df(noise.runs, tail_df)))


def prediction_p_value(
    current_log: float, noise: Noise, tail_df: int | None = RUN_TAIL_DF
) -> float | None:
    """Two-sided p that one new run, ln value ``current_log``, is a draw from the k runs of the
    history (the baseline among them): t = (current_log - mean) / (s sqrt(1 + 1/k)), Student's
    prediction interval for one new observation, with k - 1 degrees of freedom at most
    ``tail_df`` (:func:`history_df`: the runs' heavy tail). Without the cap it is exact when
    the runs are independent log-normal draws; against one baseline run (``history_p_value``,
    sqrt 2 in place of sqrt(1 + 1/k)) it spends no power on that one run's own scatter. None
    when the history has no spread or no mean."""
    if noise.runs < 2 or not noise.sd_log > 0 or noise.mean_log is None:
        return None
    if math.isinf(current_log):
        return 0.0
    t = (current_log - noise.mean_log) / (noise.sd_log * math.sqrt(1 + 1 / noise.runs))
    return min(1.0, 2 * t_sf(abs(t), history_df(noise.runs, tail_df)))


class TTest(NamedTuple):
    """The two-sample t test on ln values (pooled variance)."""

    diff: float  # mean ln(current) - mean ln(baseline)
    sd_log: float  # pooled standard deviation of ln values
    t: float
    df: int
    p_value: float  # two-sided


def log_t_test(baseline: Sequence[float], current: Sequence[float]) -> TTest | None:
    """Student's two-sample t test of mean ln(value), pooled variance, n1 + n2 - 2 degrees of
    freedom. Under "no change" both sides come from one distribution, so the equal-variance
    assumption holds exactly where the false-alarm rate is decided. None when a side has fewer
    than two values, a value is not positive and finite, or there is no spread at all."""
    if len(baseline) < 2 or len(current) < 2:
        return None
    if not all(v > 0 and math.isfinite(v) for v in (*baseline, *current)):
        return None
    lb, lc = [math.log(v) for v in baseline], [math.log(v) for v in current]
    mb, mc = statistics.fmean(lb), statistics.fmean(lc)
    df = len(lb) + len(lc) - 2
    ss = sum((x - mb) ** 2 for x in lb) + sum((x - mc) ** 2 for x in lc)
    if not ss > 0:
        return None
    sd = math.sqrt(ss / df)
    t = (mc - mb) / (sd * math.sqrt(1 / len(lb) + 1 / len(lc)))
    return TTest(mc - mb, sd, t, df, min(1.0, 2 * t_sf(abs(t), df)))


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm's step-down adjusted p-values, in the input order: sorted ascending, the i-th
    (1-based) of m gets max over j <= i of min(1, (m - j + 1) p_(j)). Rejecting every adjusted
    p <= alpha keeps the family-wise error rate <= alpha under any dependence."""
    m = len(p_values)
    order = sorted(range(m), key=lambda i: p_values[i])
    out = [1.0] * m
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p_values[i]))
        out[i] = running
    return out


def benjamini_hochberg(p_values: Sequence[float]) -> list[float]:
    """Benjamini-Hochberg step-up adjusted p-values (q-values), in the input order: sorted
    ascending, the i-th of m gets min over j >= i of min(1, m p_(j) / j)."""
    m = len(p_values)
    order = sorted(range(m), key=lambda i: p_values[i])
    out = [1.0] * m
    running = 1.0
    for rank in range(m - 1, -1, -1):
        i = order[rank]
        running = min(running, m * p_values[i] / (rank + 1))
        out[i] = running
    return out


CORRECTIONS = {"holm": holm, "bh": benjamini_hochberg}


def _detectable(delta: float, sd: float, df: int, level: float, power: float) -> bool:
    return delta / sd >= t_quantile(1 - level / 2, df) + t_quantile(power, df)


def _fewest(ok, lo: int, hi: int) -> int | None:
    """The least n in lo..hi with ``ok(n)`` (``ok`` monotone: false, then true), or None."""
    if not ok(hi):
        return None
    while lo < hi:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if ok(mid) else (mid + 1, hi)
    return lo


def repeats_to_confirm(
    sd_log: float, delta: float, level: float, power: float = 0.8, limit: int = 1000
) -> int | None:
    """The fewest repeats a side (n >= 2) at which a change of ``delta`` (|ln ratio|) is
    confirmed by :func:`log_t_test` at ``level`` with probability ``power``, when ln values
    scatter with ``sd_log``: delta / (sd sqrt(2/n)) >= t(1 - level/2, 2n-2) + t(power, 2n-2).
    None beyond ``limit``."""
    if not sd_log > 0:
        return 2
    # t quantiles exceed the normal ones: the normal-theory n is a lower bound to start from
    z = statistics.NormalDist().inv_cdf
    start = max(
        2, min(limit, math.floor(2 * ((z(1 - level / 2) + z(power)) * sd_log / delta) ** 2))
    )
    return _fewest(
        lambda n: _detectable(delta, sd_log * math.sqrt(2 / n), 2 * n - 2, level, power),
        start,
        limit,
    )


def runs_to_confirm(
    sd_log: float,
    delta: float,
    level: float,
    power: float = 0.8,
    limit: int = 1000,
    tail_df: int | None = RUN_TAIL_DF,
) -> int | None:
    """The fewest earlier runs k (>= 2) whose spread would let :func:`prediction_p_value`
    confirm a change of ``delta`` at ``level`` with probability ``power``: delta / (sd
    sqrt(1 + 1/k)) >= t(1 - level/2, df) + t(power, df), df = :func:`history_df`. None when no
    history of this spread could (beyond ``limit`` runs): the run-to-run scatter itself is too
    wide for one run."""
    if not sd_log > 0:
        return 2
    return _fewest(
        lambda k: _detectable(
            delta, math.sqrt(1 + 1 / k) * sd_log, history_df(k, tail_df), level, power
        ),
        2,
        limit,
    )
