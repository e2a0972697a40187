"""The checkpoint report's plot: goodput against the checkpoint interval (model estimates).

Takes the ``checkpoint`` block of result.json (``ckpt_estimate.build``) and a matplotlib
``Figure`` class; returns a figure, or None when the block holds no estimate.
"""

from __future__ import annotations

from typing import Any

#: Figure size and colours as the rest of the report (report._FIGSIZE, the first palette colours).
FIGSIZE = (6.4, 3.4)
SYNC, ASYNC, MARK = "#0969da", "#bf3989", "#59636e"


def _label(seconds: float) -> str:
    if seconds >= 2 * 86400:
        return f"{seconds / 86400:.3g} d"
    if seconds >= 2 * 3600:
        return f"{seconds / 3600:.3g} h"
    if seconds >= 120:
        return f"{seconds / 60:.3g} min"
    return f"{seconds:.3g} s"


def goodput_figure(Figure: Any, block: dict[str, Any]) -> Any:
    """Goodput (sync and async saves) against the interval, with the best and the user's."""
    from matplotlib.ticker import FuncFormatter, PercentFormatter

    est = (block or {}).get("estimate") or {}
    curve = est.get("curve") or []
    if not curve:
        return None
    fig = Figure(figsize=FIGSIZE, layout="constrained")
    ax = fig.add_subplot()
    xs = [c["interval_s"] for c in curve]
    ax.plot(xs, [c["sync"] for c in curve], color=SYNC, label="synchronous save")
    if all(c.get("async") is not None for c in curve):
        ax.plot(xs, [c["async"] for c in curve], color=ASYNC, label="asynchronous save")
    for key, colour in (("sync", SYNC), ("async", ASYNC)):
        plan = est.get(key)
        if plan:
            ax.plot(
                [plan["best_interval_s"]], [plan["best_goodput"]], marker="o", color=colour,
                linestyle="none",
            )  # fmt: skip
    user = (est.get("sync") or {}).get("user_interval_s")
    if user:
        ax.axvline(user, color=MARK, linestyle=":", linewidth=1.0)
        ax.annotate(
            f"your interval {_label(user)}", (user, 0.02), xytext=(4, 0),
            textcoords="offset points", fontsize=8, color=MARK, xycoords=("data", "axes fraction"),
        )  # fmt: skip
    ax.set_xscale("log")
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _p: _label(v)))
    lo = min(min(c["sync"] for c in curve), min(c.get("async") or 1.0 for c in curve))
    ax.set_ylim(max(0.0, lo - 0.02), 1.0)
    ax.yaxis.set_major_formatter(PercentFormatter(1.0))
    ax.set_xlabel("checkpoint interval (training time between checkpoints)")
    ax.set_ylabel("goodput (estimate)")
    ax.set_title(
        f"Goodput vs interval: {block['model']['name']}, MTBF {_label(est['mtbf_s'])}", loc="left"
    )
    ax.legend(loc="lower right", fontsize=8)
    return fig
