"""The level sweep (seed 000, Figure 6): fidelity and model size against the tree's levels,
with the level `fit --levels auto` chose."""

from __future__ import annotations

from typing import Any

from markupsafe import Markup

from ..figures import COLORS, figure, to_svg
from ..inputs import Bundle
from .base import Section, figure_block, fmt, table


def sweep(bundle: Bundle) -> tuple[list[dict[str, Any]], int | None] | None:
    """(points, chosen level) from a levels JSON or the model's fit record."""
    found = bundle.first("levels")
    if found is not None:
        return found.data["points"], found.data.get("chosen")
    m = bundle.first("model")
    if m is not None and m.data.get("fit", {}).get("level_sweep"):
        return m.data["fit"]["level_sweep"], m.data["levels"]
    return None


def levels_svg(points: list[dict[str, Any]], chosen: int | None) -> str:
    xs = [p["levels"] for p in points]
    with figure(width=8.4, height=3.0) as (fig, ax):
        ax.plot(
            xs, [p["score"] for p in points], "o-", color=COLORS["original"], label="fidelity score"
        )
        ax.set_xlabel("levels of the hierarchy")
        ax.set_ylabel("fidelity score (1 = perfect)")
        ax.set_xticks(xs)
        size_ax = ax.twinx()
        size_ax.plot(
            xs,
            [p["transitions"] for p in points],
            "s--",
            color=COLORS["uniform"],
            label="transitions",
        )
        size_ax.set_yscale("log")
        size_ax.set_ylabel("transitions (log)")
        size_ax.grid(False)
        size_ax.spines["right"].set_visible(True)
        if chosen is not None:
            ax.axvline(chosen, color=COLORS["accent"], linewidth=1, linestyle=":")
            ax.annotate(f"chosen: {chosen}", (chosen, ax.get_ylim()[0]), xytext=(4, 4),
                        textcoords="offset points", color=COLORS["accent"])  # fmt: skip
        lines = ax.get_lines()[:1] + size_ax.get_lines()[:1]
        ax.legend(lines, [str(line.get_label()) for line in lines], loc="lower right")
        return to_svg(fig, "level sweep")


class LevelSweep(Section):
    id = "levels"
    title = "Level sweep"
    caption = (
        "For each number of levels the trace is fitted, a twin synthesized and scored; the "
        "chosen level is the first after which the score changes by less than 2% "
        "(seed 000, Figure 6)."
    )

    def applies(self, bundle: Bundle) -> bool:
        return sweep(bundle) is not None

    def render(self, bundle: Bundle) -> Markup:
        found = sweep(bundle)
        assert found is not None
        points, chosen = found
        rows = [
            (str(p["levels"]), fmt(p["score"], ".3f"), f"{p['transitions']:,}",
             "chosen" if p["levels"] == chosen else "")
            for p in points
        ]  # fmt: skip
        return Markup("").join(
            [
                figure_block(levels_svg(points, chosen)),
                table(("levels", "fidelity score", "transitions", ""), rows, css="compact"),
            ]
        )
