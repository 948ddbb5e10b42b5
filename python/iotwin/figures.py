"""Figures for the terminal commands' `--plot FILE` (PNG, SVG or PDF by the file's suffix),
drawn with matplotlib's Agg backend so no display is needed."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from .errors import IotwinError
from .source import atomic_output

SUFFIXES = (".png", ".svg", ".pdf")


def check_plot_path(path: str | Path | None) -> None:
    """Refuses a figure file name of the wrong kind before any work is done."""
    if path is not None and Path(path).suffix.lower() not in SUFFIXES:
        raise IotwinError(f"--plot {path}: use a .png, .svg or .pdf file name")


def save_figure(draw: Callable, path: str | Path, panels: int = 1) -> None:
    """Draws `draw(ax)` (with `panels` > 1, `draw([ax, ...])`, side by side) into `path`."""
    path = Path(path)
    check_plot_path(path)
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(
        1, panels, figsize=(6.4 * panels, 4.0), layout="constrained", squeeze=False
    )
    try:
        draw(axes[0][0] if panels == 1 else list(axes[0]))
        for ax in axes[0]:
            ax.grid(alpha=0.3)
        with atomic_output(path) as tmp:
            fig.savefig(tmp, format=path.suffix[1:].lower(), dpi=120)
    finally:
        plt.close(fig)
