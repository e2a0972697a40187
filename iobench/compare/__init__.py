"""Direction- and noise-aware comparison of two runs.

A metric's value in a run is the median over its repeats (:func:`stats.summarize`). A metric
is a regression only when it moved the wrong way by more than its threshold **and** the move is
confirmed, by the first of these that applies:

1. **history** — at least ``min_history`` (3) earlier runs in the history with the same workload
   spec hash, host class and storage: ``s`` is the sample standard deviation of ln(value) over
   those runs (each run's value its median over repeats), and the move is beyond the noise when
   ``|ln(current / baseline)| > t(1 − noise_alpha/2, k − 1) · √2 · s`` — a two-sided Student-t
   test at ``noise_alpha`` (0.1 %) that two runs drawn from that run-to-run spread differ so much;
2. **repeats** — both sides have ``min_repeats`` (6) repeats: a two-sided Mann-Whitney U test,
   p < ``alpha`` (1 %); both sides have at least 3: the repeats' ranges (min..max) do not overlap;
3. otherwise the move is **unconfirmed** (``?``, exit 0): one run a side cannot tell noise from
   change; ``--repeat 3`` on both sides or 3 earlier runs in the history would confirm or dismiss
   it.

Whatever the evidence, a move beyond the large margin is confirmed: ×10 for throughput
(``large_factor``: −90 % or +900 %), ×100 for latency (``large_factor_latency``). Identical runs
on a shared 2-core VM differed by up to ×4.4 in bandwidth back to back (×13 over twenty runs),
and p99 latency by ×16 over six.

Marks: ``+`` worse, ``-`` better, ``~`` beyond the threshold but within the noise, ``?`` beyond
the threshold, unconfirmed, blank within the threshold, ``x`` measured on one side only.

The package is layered, each module importing only those before it: ``options`` (marks,
options, thresholds) → ``noise`` (the statistics of the noise rule) → ``metric`` (one metric
compared, its values formatted) → ``runs`` (two runs compared, the history's noise, run
references) → ``render`` (table, markdown, JSON).
"""

from __future__ import annotations

from .metric import CompareRow, compare_metric, format_percent, format_value
from .noise import MannWhitney, Noise, mann_whitney_u, t_quantile, t_sf, u_distribution
from .options import (
    FAIL_ON,
    HEADLINE_METRICS,
    MARK_BETTER,
    MARK_MISSING,
    MARK_NOISE,
    MARK_SAME,
    MARK_UNCONFIRMED,
    MARK_WORSE,
    CompareOptions,
    is_latency,
    parse_thresholds,
)
from .render import render_json, render_markdown, render_table
from .runs import (
    CompareReport,
    NoiseBasis,
    RunRef,
    compare_runs,
    history_noise,
    resolve,
    spec_differences,
)

__all__ = [
    "FAIL_ON",
    "MARK_WORSE",
    "MARK_BETTER",
    "MARK_NOISE",
    "MARK_SAME",
    "MARK_MISSING",
    "MARK_UNCONFIRMED",
    "HEADLINE_METRICS",
    "is_latency",
    "CompareOptions",
    "parse_thresholds",
    "MannWhitney",
    "u_distribution",
    "mann_whitney_u",
    "t_sf",
    "t_quantile",
    "Noise",
    "CompareRow",
    "compare_metric",
    "format_value",
    "format_percent",
    "RunRef",
    "NoiseBasis",
    "CompareReport",
    "spec_differences",
    "compare_runs",
    "history_noise",
    "resolve",
    "render_table",
    "render_markdown",
    "render_json",
]
