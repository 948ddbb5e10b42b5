"""Figures as inline SVG (matplotlib, Agg): the page needs no network and no files beside it.

Text stays text (`svg.fonttype: none`) so figures are small and sharp; a fixed hash salt and
no date make the same inputs give the same bytes.
"""

from __future__ import annotations

import io
import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

# One colour per role, used by every figure so a reader learns them once.
COLORS = {
    "original": "#1f4e79",
    "twin": "#d9822b",
    "uniform": "#8c8c8c",
    "record": "#2e8b57",
    "accent": "#b22222",
}
STYLE = {
    "svg.fonttype": "none",
    "svg.hashsalt": "iotwin",
    "font.family": "sans-serif",
    "font.size": 9,
    "axes.titlesize": 10,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.grid": True,
    "grid.color": "#e6e6e6",
    "grid.linewidth": 0.6,
    "legend.frameon": False,
    "figure.dpi": 100,
}


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt


@contextmanager
def figure(width: float = 6.4, height: float = 3.2, ncols: int = 1) -> Iterator[tuple[Any, Any]]:
    """A styled figure and its axes (one Axes, or a list of `ncols` when ncols > 1); closed
    afterwards whatever happens."""
    plt = _pyplot()
    with plt.rc_context(STYLE):
        fig, axes = plt.subplots(1, ncols, figsize=(width, height), layout="constrained")
        try:
            yield fig, (axes if ncols == 1 else list(axes))
        finally:
            plt.close(fig)


def to_svg(fig: Any, title: str) -> str:
    """The figure as an <svg> element (no XML prolog), labelled for screen readers."""
    buf = io.StringIO()
    fig.savefig(buf, format="svg", metadata={"Date": None, "Creator": "iotwin"})
    svg = buf.getvalue()
    svg = svg[svg.index("<svg") :]
    label = title.replace("&", "&amp;").replace('"', "&quot;").replace("<", "&lt;")
    return re.sub(r"<svg ", f'<svg role="img" aria-label="{label}" class="figure" ', svg, count=1)


def bytes_label(value: float, _pos: Any = None) -> str:
    """512 B, 4 KiB, 1.5 MiB, 2 GiB: axis ticks for sizes."""
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if abs(value) >= scale:
            return f"{value / scale:.3g} {unit}"
    return f"{value:.3g} B"


def seconds_label(value: float, _pos: Any = None) -> str:
    """1 µs, 250 ms, 3 s: axis ticks for times given in seconds."""
    if value == 0:
        return "0"
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6)):
        if abs(value) >= scale:
            return f"{value / scale:.3g} {unit}"
    return f"{value * 1e9:.3g} ns"
