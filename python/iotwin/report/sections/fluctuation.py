"""Activity fluctuation (seed 000, Figure 5): the request rate per window over the run, for
the original and the twin on one axis."""

from __future__ import annotations

import numpy as np
from markupsafe import Markup

from ...trace import Trace
from ..figures import COLORS, figure, to_svg
from ..inputs import Bundle
from .base import Section, figure_block, original, twin

WINDOWS = 60


def window_rates(trace: Trace, windows: int = WINDOWS) -> tuple[np.ndarray, np.ndarray]:
    """(window start in s, requests per second) over the trace's span in `windows` windows."""
    ts = trace.df["ts_ns"].to_numpy().astype(np.int64)
    if len(ts) < 2:
        return np.zeros(1), np.zeros(1)
    rel = ts - ts[0]
    span = int(rel[-1]) + 1
    counts = np.bincount((rel * windows) // span, minlength=windows)[:windows]
    width_s = span / windows / 1e9
    return np.arange(windows) * width_s, counts / width_s


def fluctuation_svg(series: list[tuple[str, Trace]]) -> str:
    with figure(width=8.4, height=3.0) as (fig, ax):
        for name, trace in series:
            starts, rates = window_rates(trace)
            ax.step(starts, rates, where="post", label=name, color=COLORS[name], linewidth=1.4)
        ax.set_xlabel("time (s)")
        ax.set_ylabel("requests / s")
        ax.set_ylim(bottom=0)
        ax.legend(loc="upper right")
        return to_svg(fig, "activity fluctuation, original vs twin")


def timed_series(bundle: Bundle) -> list[tuple[str, Trace]]:
    """The original and the twin, those that have times (an untimed trace has no rate)."""
    named = (("original", original(bundle)), ("twin", twin(bundle)))
    return [(n, t) for n, t in named if t is not None and t.meta.timed]


class Fluctuation(Section):
    id = "fluctuation"
    title = "Activity fluctuation"
    caption = (
        f"Requests per second in {WINDOWS} equal windows of each trace's span: the peaks and "
        "troughs the model keeps (seed 000, Figure 5)."
    )

    def applies(self, bundle: Bundle) -> bool:
        return bool(timed_series(bundle))

    def render(self, bundle: Bundle) -> Markup:
        return figure_block(fluctuation_svg(timed_series(bundle)))
