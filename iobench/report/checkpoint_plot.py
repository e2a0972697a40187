"""The checkpoint report's plot: goodput against the checkpoint interval (model estimates).

Takes the ``checkpoint`` block of result.json (``ckpt_estimate.build``); returns a
:class:`~.svgplot.Chart`, or None when the block holds no estimate.
"""

from __future__ import annotations

from typing import Any

from .svgplot import Axis, Chart, Rule, Series

#: Colours as the rest of the report (the palette's first and seventh).
SYNC, ASYNC, MARK = "#0969da", "#bf3989", "#59636e"


def _label(seconds: float) -> str:
    if seconds >= 2 * 86400:
        return f"{seconds / 86400:.3g} d"
    if seconds >= 2 * 3600:
        return f"{seconds / 3600:.3g} h"
    if seconds >= 120:
        return f"{seconds / 60:.3g} min"
    return f"{seconds:.3g} s"


def goodput_figure(block: dict[str, Any]) -> Chart | None:
    """Goodput (sync and async saves) against the interval, with the best and the user's."""
    est = (block or {}).get("estimate") or {}
    curve = est.get("curve") or []
    if not curve:
        return None
    xs = [c["interval_s"] for c in curve]
    lines = [Series("synchronous save", tuple(zip(xs, (c["sync"] for c in curve), strict=True)),
                    SYNC)]  # fmt: skip
    if all(c.get("async") is not None for c in curve):
        pts = tuple(zip(xs, (c["async"] for c in curve), strict=True))
        lines.append(Series("asynchronous save", pts, ASYNC))
    for key, colour in (("sync", SYNC), ("async", ASYNC)):
        plan = est.get(key)
        if plan:
            best = ((plan["best_interval_s"], plan["best_goodput"]),)
            lines.append(Series(f"best {key}", best, colour, line=False, marker="o", legend=False))
    rules = []
    user = (est.get("sync") or {}).get("user_interval_s")
    if user:
        rules.append(Rule("x", user, text=f"your interval {_label(user)}", colour=MARK))
    lo = min(min(c["sync"] for c in curve), min(c.get("async") or 1.0 for c in curve))
    y = Axis("goodput (estimate)", lo=max(0.0, lo - 0.02), hi=1.0, fmt=lambda v: f"{v * 100:.4g}%")
    x = Axis("checkpoint interval (training time between checkpoints)", log=True, fmt=_label)
    title = f"Goodput vs interval: {block['model']['name']}, MTBF {_label(est['mtbf_s'])}"
    return Chart(title, x, y, tuple(lines), rules=tuple(rules))
