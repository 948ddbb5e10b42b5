"""Miss-ratio curves: exact LRU miss ratio (4 KiB blocks, the Rust core's stack distances)
against cache size, for the original, the twin and the uniform baseline without locality.
The gap between the twin and the baseline is what the model's locality is worth."""

from __future__ import annotations

import numpy as np
from markupsafe import Markup

from ...trace import Trace
from ..figures import COLORS, bytes_label, figure, to_svg
from ..inputs import Bundle
from .base import Section, figure_block, original, table, twin, uniform

POINTS = 40
BLOCK = 4096


def cache_blocks(footprint_blocks: int, points: int = POINTS) -> list[int]:
    """Log-spaced cache sizes from one block to the footprint (distinct, increasing)."""
    top = max(footprint_blocks, 2)
    return sorted({int(x) for x in np.rint(np.geomspace(1, top, points))})


def curves(series: list[tuple[str, Trace]]) -> tuple[list[int], dict[str, list[float]]]:
    from ...validate import lru, lru_each

    sizes = cache_blocks(lru(series[0][1], []).distinct)
    each = lru_each([trace for _, trace in series], sizes)
    return sizes, {name: list(r.miss_ratios) for (name, _), r in zip(series, each, strict=True)}


def mrc_svg(sizes: list[int], ratios: dict[str, list[float]]) -> str:
    from matplotlib.ticker import FuncFormatter

    xs = np.array(sizes, dtype=np.float64) * BLOCK
    styles = {"original": "-", "twin": "--", "uniform": ":"}
    with figure(width=8.4, height=3.2) as (fig, ax):
        for name, ys in ratios.items():
            ax.plot(xs, ys, styles[name], label=name, color=COLORS[name], linewidth=1.6)
        ax.set_xscale("log", base=2)
        ax.xaxis.set_major_formatter(FuncFormatter(bytes_label))
        ax.set_xlabel("LRU cache size")
        ax.set_ylabel("miss ratio")
        ax.set_ylim(0, 1.02)
        ax.legend(loc="lower left")
        return to_svg(fig, "miss-ratio curves")


class MissRatioCurves(Section):
    id = "mrc"
    title = "Miss-ratio curves"
    caption = (
        "Exact LRU miss ratio at 4 KiB blocks against cache size, up to the original's "
        "footprint: original, twin, and the uniform baseline (the twin's mix without "
        "locality, as IOMeter would issue it)."
    )

    def applies(self, bundle: Bundle) -> bool:
        return original(bundle) is not None or twin(bundle) is not None

    def render(self, bundle: Bundle) -> Markup:
        named = (
            ("original", original(bundle)),
            ("twin", twin(bundle)),
            ("uniform", uniform(bundle)),
        )
        series = [(n, t) for n, t in named if t is not None]
        sizes, ratios = curves(series)
        picks = sorted({len(sizes) // 4, len(sizes) // 2, (3 * len(sizes)) // 4, len(sizes) - 1})
        rows = [
            (bytes_label(sizes[i] * BLOCK), *(f"{ratios[n][i]:.3f}" for n in ratios)) for i in picks
        ]
        return Markup("").join(
            [
                figure_block(mrc_svg(sizes, ratios)),
                table(("cache size", *ratios), rows, css="compact"),
            ]
        )
