"""Request-size and inter-arrival-time distributions (cumulative), original vs twin."""

from __future__ import annotations

import numpy as np
from markupsafe import Markup

from ...trace import Trace
from ..figures import COLORS, bytes_label, figure, seconds_label, to_svg
from ..inputs import Bundle
from .base import Section, figure_block, original, twin

MAX_POINTS = 400  # per curve: keeps the SVG small for traces of millions of requests


def cdf(values: np.ndarray, max_points: int = MAX_POINTS) -> tuple[np.ndarray, np.ndarray]:
    """Distinct values and the share of values at or below each; at most `max_points` of
    them (evenly spaced among the distinct values, the last always kept)."""
    if len(values) == 0:
        return np.zeros(0), np.zeros(0)
    xs, counts = np.unique(values, return_counts=True)
    ys = np.cumsum(counts) / len(values)
    if len(xs) > max_points:
        keep = np.unique(np.linspace(0, len(xs) - 1, max_points).round().astype(np.int64))
        xs, ys = xs[keep], ys[keep]
    return xs, ys


def interarrivals_s(trace: Trace) -> np.ndarray:
    """Gaps between consecutive requests of the whole trace (zero gaps dropped: log axis)."""
    gaps = np.diff(trace.df["ts_ns"].to_numpy().astype(np.int64)) / 1e9
    return gaps[gaps > 0]


def distributions_svg(series: list[tuple[str, Trace]]) -> str:
    from matplotlib.ticker import FuncFormatter

    with figure(width=8.4, height=3.0, ncols=2) as (fig, axes):
        size_ax, iat_ax = axes
        for name, trace in series:
            xs, ys = cdf(trace.df["size"].to_numpy())
            size_ax.step(xs, ys, where="post", label=name, color=COLORS[name], linewidth=1.4)
            if trace.meta.timed:
                xs, ys = cdf(interarrivals_s(trace))
                iat_ax.step(xs, ys, where="post", label=name, color=COLORS[name], linewidth=1.4)
        size_ax.set_xscale("symlog", base=2, linthresh=512)
        top = max((float(t.df["size"].max() or 0) for _, t in series), default=0.0)
        size_ax.set_xticks([0] + [1 << k for k in range(9, 31, 3) if (1 << k) <= max(top, 512) * 8])
        size_ax.xaxis.set_major_formatter(FuncFormatter(bytes_label))
        size_ax.set_xlabel("request size")
        size_ax.set_ylabel("share of requests at or below")
        iat_ax.set_xscale("log")
        iat_ax.xaxis.set_major_formatter(FuncFormatter(seconds_label))
        iat_ax.set_xlabel("inter-arrival time (non-zero gaps)")
        if not any(t.meta.timed for _, t in series):
            iat_ax.text(0.5, 0.5, "untimed trace: no inter-arrival times", ha="center",
                        transform=iat_ax.transAxes, color="#5b6573")  # fmt: skip
            iat_ax.set_xticks([])
        for ax in (size_ax, iat_ax):
            ax.set_ylim(0, 1.02)
            if ax.get_lines():
                ax.legend(loc="lower right")
        return to_svg(fig, "request-size and inter-arrival distributions")


class Distributions(Section):
    id = "distributions"
    title = "Request sizes and inter-arrival times"
    caption = "Cumulative distributions over all requests of each trace."

    def applies(self, bundle: Bundle) -> bool:
        return original(bundle) is not None or twin(bundle) is not None

    def render(self, bundle: Bundle) -> Markup:
        series = [
            (n, t)
            for n, t in (("original", original(bundle)), ("twin", twin(bundle)))
            if t is not None
        ]
        return figure_block(distributions_svg(series))
