"""The statistics behind the noise rule: ranks, the Mann-Whitney U test, Student's t, and
:class:`Noise` (one metric's run-to-run spread in the history).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple


class MannWhitney(NamedTuple):
    u: float  # U of the first sample
    p_value: float  # two-sided
    method: str  # "exact" | "normal"


_EXACT_MAX_N = 40  # n1 + n2 up to which the tie-free exact distribution is used


def _ranks(values: Sequence[float]) -> tuple[list[float], list[int]]:
    """Average ranks (1-based) and the sizes of the tie groups."""
    order = sorted(range(len(values)), key=lambda i: values[i])
    ranks = [0.0] * len(values)
    ties = []
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        rank = (i + j) / 2 + 1
        for k in range(i, j + 1):
            ranks[order[k]] = rank
        ties.append(j - i + 1)
        i = j + 1
    return ranks, ties


def u_distribution(n1: int, n2: int) -> list[int]:
    """How many of the C(n1+n2, n1) orderings give U = 0, 1, ..., n1*n2 (no ties).

    These are the coefficients of the Gaussian binomial [n1+n2 choose n1]_q, built with the
    q-Pascal rule [N, k] = [N-1, k-1] + q^k [N-1, k].
    """
    rows: list[list[int]] = [[1]] + [[] for _ in range(n1)]  # rows[k] = [N choose k]_q
    for big_n in range(1, n1 + n2 + 1):
        new = [[1]]
        for k in range(1, min(big_n, n1) + 1):
            coeffs = [0] * (k * (big_n - k) + 1)
            for i, v in enumerate(rows[k - 1]):
                coeffs[i] += v
            for i, v in enumerate(rows[k]):
                coeffs[i + k] += v
            new.append(coeffs)
        rows = new + [[] for _ in range(n1 + 1 - len(new))]
    return rows[n1]


def mann_whitney_u(x: Sequence[float], y: Sequence[float], method: str = "auto") -> MannWhitney:
    """Two-sided Mann-Whitney U test of ``x`` against ``y``.

    ``auto``: exact when there are no ties and n1 + n2 <= 40, else ``normal``: the normal
    approximation with tie and continuity corrections (scipy's ``method="asymptotic"``).
    """
    if method not in ("auto", "exact", "normal"):
        raise ValueError(f"method must be auto, exact or normal, not {method!r}")
    n1, n2 = len(x), len(y)
    if n1 == 0 or n2 == 0:
        raise ValueError("mann_whitney_u needs at least one value on each side")
    ranks, ties = _ranks([*map(float, x), *map(float, y)])
    u1 = sum(ranks[:n1]) - n1 * (n1 + 1) / 2
    n = n1 + n2
    no_ties = all(t == 1 for t in ties)
    if method == "exact" and not no_ties:
        raise ValueError("the exact distribution assumes no ties")
    if method == "exact" or (method == "auto" and no_ties and n <= _EXACT_MAX_N):
        counts = u_distribution(n1, n2)
        u_low = int(round(min(u1, n1 * n2 - u1)))
        p = 2 * sum(counts[: u_low + 1]) / math.comb(n, n1)
        return MannWhitney(u1, min(1.0, p), "exact")
    tie_term = sum(t**3 - t for t in ties)
    var = n1 * n2 / 12 * ((n + 1) - tie_term / (n * (n - 1)))
    if var <= 0:  # every value equal
        return MannWhitney(u1, 1.0, "normal")
    z = max(0.0, abs(u1 - n1 * n2 / 2) - 0.5) / math.sqrt(var)
    return MannWhitney(u1, min(1.0, math.erfc(z / math.sqrt(2))), "normal")


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


def t_quantile(q: float, df: float) -> float:
    """The ``q`` quantile (0.5 < q < 1) of Student's t with ``df`` degrees of freedom."""
    if not 0.5 < q < 1 or df <= 0:
        raise ValueError(f"t_quantile needs 0.5 < q < 1 and df > 0, got q={q}, df={df}")
    lo, hi = 0.0, 1.0
    while t_sf(hi, df) > 1 - q:
        hi *= 2
    for _ in range(100):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if t_sf(mid, df) > 1 - q else (lo, mid)
    return (lo + hi) / 2


@dataclass(frozen=True)
class Noise:
    """One metric's run-to-run spread, from earlier runs of the same spec on the same setup."""

    runs: int  # k: earlier runs that measured it
    sd_log: float  # sample standard deviation of ln(value) over those runs
    floor: float  # |ln(current / baseline)| beyond which a move is outside the noise

    @property
    def factor(self) -> float:
        """The floor as a ratio: a move within ×factor is within the noise."""
        return math.exp(min(self.floor, 700.0))  # beyond e^700 a float overflows

    @classmethod
    def of(cls, values: Sequence[float], alpha: float) -> Noise | None:
        """From per-run values; None when fewer than two are positive."""
        logs = [math.log(v) for v in values if v > 0]
        if len(logs) < 2:
            return None
        sd = statistics.stdev(logs)
        return cls(len(logs), sd, t_quantile(1 - alpha / 2, len(logs) - 1) * math.sqrt(2) * sd)
