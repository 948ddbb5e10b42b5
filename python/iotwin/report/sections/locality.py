"""Spatial locality over time: a heatmap of request density, time across, address up (the
trace's hot ranges and how they move), for the original and its twin side by side."""

from __future__ import annotations

import numpy as np
from markupsafe import Markup

from ...trace import Trace
from ..figures import bytes_label, figure, to_svg
from ..inputs import Bundle
from .base import Section, figure_block, original, twin

TIME_BINS = 120
ADDRESS_BINS = 64


def density(trace: Trace) -> tuple[np.ndarray, float, float]:
    """Requests per (address bin, time bin), the span and the capacity. Time is seconds, or
    the request's number in an untimed trace."""
    if trace.meta.timed:
        ts = trace.df["ts_ns"].to_numpy().astype(np.float64) / 1e9
    else:
        ts = np.arange(trace.df.height, dtype=np.float64)
    off = trace.df["offset"].to_numpy().astype(np.float64)
    span = float(ts[-1] - ts[0]) if len(ts) else 0.0
    capacity = float(max(trace.capacity, 1))
    counts, _, _ = np.histogram2d(
        off, ts - (ts[0] if len(ts) else 0.0), bins=(ADDRESS_BINS, TIME_BINS),
        range=((0.0, capacity), (0.0, max(span, 1e-9))),
    )  # fmt: skip
    return counts, span, capacity


def heatmap_svg(panels: list[tuple[str, Trace]]) -> str:
    from matplotlib.colors import LogNorm
    from matplotlib.ticker import FuncFormatter

    with figure(width=9.2, height=3.4, ncols=len(panels)) as (fig, axes):
        panel_axes = axes if isinstance(axes, list) else [axes]
        image = None
        grids = [(name, *density(t)) for name, t in panels]
        timed = {name: bool(t.meta.timed) for name, t in panels}
        peak = max(float(g[1].max()) for g in grids) or 1.0
        for ax, (name, counts, span, capacity) in zip(panel_axes, grids, strict=True):
            shown = np.where(counts > 0, counts, np.nan)
            image = ax.imshow(
                shown, origin="lower", aspect="auto", interpolation="nearest",
                extent=(0.0, max(span, 1e-9), 0.0, capacity), cmap="viridis",
                norm=LogNorm(vmin=1, vmax=max(peak, 1.0)),
            )  # fmt: skip
            ax.set_facecolor("#f4f4f4")
            ax.grid(False)
            ax.set_title(name)
            ax.set_xlabel("time (s)" if timed[name] else "request number (untimed trace)")
            ax.yaxis.set_major_formatter(FuncFormatter(bytes_label))
        panel_axes[0].set_ylabel("address")
        if image is not None:
            fig.colorbar(image, ax=panel_axes, label="requests per cell", pad=0.02)
        return to_svg(fig, "spatial locality over time")


class LocalityHeatmap(Section):
    id = "locality"
    title = "Spatial locality over time"
    caption = (
        f"Request density in a {TIME_BINS} x {ADDRESS_BINS} grid of time and address "
        "(file-level traces on their virtual device); empty cells are grey."
    )

    def applies(self, bundle: Bundle) -> bool:
        return original(bundle) is not None or twin(bundle) is not None

    def render(self, bundle: Bundle) -> Markup:
        panels = [
            (n, t)
            for n, t in (("original", original(bundle)), ("twin", twin(bundle)))
            if t is not None
        ]
        return figure_block(heatmap_svg(panels))
