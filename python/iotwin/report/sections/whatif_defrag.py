"""What-if: defragmentation (file-level traces relaid contiguously). Expected JSON
(docs/report.md): {"kind": "whatif-defrag", "device": str (optional),
"before": {"sequential_fraction": .., "mean_ms": ..}, "after": {...}, "speedup": x}."""

from __future__ import annotations

from markupsafe import Markup, escape

from ..figures import COLORS, figure, to_svg
from ..inputs import Bundle, Input
from .base import figure_block, fmt, pct, table
from .whatif import WhatIfSection, need, numbers

SIDE_FIELDS = ("sequential_fraction", "mean_ms")


def defrag_svg(before: dict[str, float], after: dict[str, float]) -> str:
    with figure(width=8.4, height=2.6, ncols=2) as (fig, axes):
        seq_ax, lat_ax = axes
        labels = ["before", "after"]
        colors = [COLORS["uniform"], COLORS["original"]]
        seq_ax.barh(
            labels, [before["sequential_fraction"], after["sequential_fraction"]], color=colors
        )
        seq_ax.set_xlim(0, 1)
        seq_ax.set_xlabel("sequential fraction")
        lat_ax.barh(labels, [before["mean_ms"], after["mean_ms"]], color=colors)
        lat_ax.set_xlabel("mean response time (ms)")
        for ax in (seq_ax, lat_ax):
            ax.invert_yaxis()
        return to_svg(fig, "defragmentation before and after")


class WhatIfDefrag(WhatIfSection):
    kind = "whatif-defrag"
    id = "whatif-defrag"
    title = "What-if: defragmentation"
    caption = (
        "The trace's files relaid contiguously: sequentiality and response time before and after."
    )

    def check(self, item: Input) -> None:
        doc, path = item.data, str(item.path)
        need(doc, path, "", ("before", "after", "speedup"))
        for side in ("before", "after"):
            need(doc[side], path, side, SIDE_FIELDS)
            numbers([doc[side][k] for k in SIDE_FIELDS], path, side)
        numbers([doc["speedup"]], path, "speedup")

    def render(self, bundle: Bundle) -> Markup:
        parts = []
        for item in bundle.all(self.kind):
            doc = item.data
            b, a = doc["before"], doc["after"]
            parts.append(Markup(f"<h3>{escape(item.path.name)}</h3>"))
            parts.append(figure_block(defrag_svg(b, a)))
            rows = [
                (
                    "sequential fraction",
                    pct(b["sequential_fraction"]),
                    pct(a["sequential_fraction"]),
                ),
                (
                    "mean response time",
                    fmt(b["mean_ms"], ".3g", unit="ms"),
                    fmt(a["mean_ms"], ".3g", unit="ms"),
                ),
            ]
            parts.append(table(("", "before", "after"), rows, css="compact"))
            device = f" on {doc['device']}" if doc.get("device") else ""
            parts.append(
                Markup(
                    f'<p class="verdict">speedup{escape(device)}: <b>{doc["speedup"]:.2f}x</b></p>'
                )
            )
        return Markup("").join(parts)
