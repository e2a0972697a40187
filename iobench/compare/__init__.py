"""Direction- and noise-aware comparison of two runs, its false alarms controlled across every
metric it judges (``docs/concepts/compare.md`` states the rule with its statistics).

A metric's value in a run is the median over its repeats (:func:`stats.summarize`). A metric
is a regression only when it moved the wrong way by more than its threshold **and** the move is
confirmed. The evidence for each metric is a two-sided p-value, from the first that applies:

1. **history** — at least ``min_history`` (3) earlier runs in the history with the same workload
   spec hash, host class and storage, the baseline among them: ``m`` and ``s`` are the mean and
   sample standard deviation of ln(value) over those ``k`` runs; the current run is held to
   them, t = (ln current - m) / (s sqrt(1 + 1/k)) with k - 1 degrees of freedom (Student's
   prediction interval, :func:`prediction_p_value`);
2. **repeats** — both sides at least two repeats: Student's two-sample t test on ln(value),
   pooled variance, n1 + n2 - 2 degrees of freedom (:func:`log_t_test`);
3. otherwise there is no spread to judge by: a move beyond the threshold is **unconfirmed**.

The p-values of every metric with a test are corrected together — Holm (family-wise error rate
<= ``alpha``, 1 %, under any dependence between the metrics) or Benjamini-Hochberg
(``correction="bh"``: the false-discovery rate) — and a move is confirmed when its corrected p
is <= alpha. An unconfirmed move says how many repeats a side (or earlier runs) would confirm a
change of the threshold's size at the spread observed, at level alpha / m with 80 % power.

Marks: ``+`` worse, ``-`` better, ``?`` beyond the threshold, unconfirmed, blank within the
threshold, ``x`` measured on one side only. Exit: 0 no regression, 1 a confirmed regression
(or, with ``fail_on="unconfirmed"``, an unconfirmed move the wrong way), 3 not comparable.

The package is layered, each module importing only those before it: ``options`` (marks,
options, thresholds) → ``noise`` (the statistics: t, the tests, the corrections, the sample
sizes) → ``metric`` (one metric measured, all of them judged, values formatted) → ``runs``
(two runs compared, the history's noise, the automatic baseline, run references) → ``render``
(table, markdown, JSON) → ``trend`` (``history trend``: one series per spec, judged run by
run, with its noise band) → ``trend_render`` (its table, JSON, SVG).
"""

from __future__ import annotations

from ..history import HEADLINE_METRICS
from .metric import CompareRow, compare_metric, format_percent, format_value, judge, measure_metric
from .noise import (
    RUN_TAIL_DF,
    Noise,
    TTest,
    benjamini_hochberg,
    history_df,
    history_p_value,
    holm,
    log_t_test,
    prediction_p_value,
    repeats_to_confirm,
    runs_to_confirm,
    t_quantile,
    t_sf,
)
from .options import (
    FAIL_ON,
    MARK_BETTER,
    MARK_MISSING,
    MARK_SAME,
    MARK_UNCONFIRMED,
    MARK_WORSE,
    CompareOptions,
    is_latency,
    parse_tail_df,
    parse_thresholds,
)
from .render import confirm_text, render_json, render_markdown, render_table
from .runs import (
    CompareReport,
    NoiseBasis,
    RunRef,
    compare_runs,
    history_noise,
    latest_like,
    resolve,
    spec_differences,
)

__all__ = [
    "FAIL_ON",
    "MARK_WORSE",
    "MARK_BETTER",
    "MARK_SAME",
    "MARK_MISSING",
    "MARK_UNCONFIRMED",
    "HEADLINE_METRICS",
    "is_latency",
    "CompareOptions",
    "parse_tail_df",
    "parse_thresholds",
    "TTest",
    "log_t_test",
    "history_p_value",
    "prediction_p_value",
    "holm",
    "benjamini_hochberg",
    "repeats_to_confirm",
    "runs_to_confirm",
    "t_sf",
    "t_quantile",
    "Noise",
    "RUN_TAIL_DF",
    "history_df",
    "CompareRow",
    "compare_metric",
    "measure_metric",
    "judge",
    "confirm_text",
    "format_value",
    "format_percent",
    "RunRef",
    "NoiseBasis",
    "CompareReport",
    "spec_differences",
    "compare_runs",
    "history_noise",
    "latest_like",
    "resolve",
    "render_table",
    "render_markdown",
    "render_json",
]
