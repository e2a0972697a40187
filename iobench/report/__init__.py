"""Renderings of a RunResult: a terminal summary, markdown, and one self-contained HTML page.

Every figure shown was measured in the run, except the estimate block, which is labelled as a
model output beside its basis. The three renderings share one set of formatted tables, so the
terminal, the markdown and the page never disagree. Nothing here prints, and the HTML page
carries its CSS and its SVG plots inline: it opens offline and can be mailed as one file.

The package is layered, each module importing only those before it: ``cells`` (a titled
``core.table`` table, cell formatters) → ``tables`` (the content: every table as a column spec)
→ ``text`` (terminal and markdown) → ``series`` (the data behind the plots) → ``figures`` (one
chart per kind, as data) → ``plots`` (every plot a run supports) → ``page`` (the HTML page). ``svgplot`` draws
the charts as hand-written SVG (no matplotlib: a page renders in milliseconds). The names
other modules and the tests use are re-exported here.
"""

from __future__ import annotations

from ..core.textfit import MIN_TERMINAL_WIDTH, TERMINAL_WIDTH, stdout_format, terminal_format
from .cells import (
    _CACHE_MEANING,
    METADATA_OPS,
    Section,
    _block_short,
    _value,
    metadata_rates,
)
from .figures import BASELINE_SUFFIX, MIN_LINE_POINTS, _cdf_plot, _tail_plot, _time_plot
from .page import _CSS, _e, _plot_id, render_html, write_report
from .plots import _au_plot, _build_plots
from .series import (
    PARTIAL_MIN_SHARE,
    _cdf,
    latency_bins,
    latency_series,
    sweep_indicative,
    sweep_series,
    sweep_spread,
    time_points,
    timeline_rows,
)
from .tables import (
    _baseline_table,
    _cache_table,
    _estimate_tables,
    _loader_table,
    _phase_table,
    _run_info,
    _sections,
    _verdict,
)
from .text import colour_compare, render_markdown, render_terminal

__all__ = [
    "METADATA_OPS",
    "TERMINAL_WIDTH",
    "_CACHE_MEANING",
    "Section",
    "_block_short",
    "metadata_rates",
    "_value",
    "_phase_table",
    "_loader_table",
    "_estimate_tables",
    "_run_info",
    "_verdict",
    "_baseline_table",
    "_sections",
    "_cache_table",
    "MIN_TERMINAL_WIDTH",
    "terminal_format",
    "stdout_format",
    "colour_compare",
    "render_terminal",
    "render_markdown",
    "sweep_series",
    "sweep_spread",
    "sweep_indicative",
    "latency_bins",
    "timeline_rows",
    "latency_series",
    "PARTIAL_MIN_SHARE",
    "time_points",
    "_cdf",
    "_cdf_plot",
    "BASELINE_SUFFIX",
    "_tail_plot",
    "MIN_LINE_POINTS",
    "_time_plot",
    "_au_plot",
    "_build_plots",
    "_CSS",
    "_e",
    "_plot_id",
    "render_html",
    "write_report",
]
