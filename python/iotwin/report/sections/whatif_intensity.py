"""What-if: intensity sweep to saturation (seed 000, Figure 3). Expected JSON
(docs/report.md): {"kind": "whatif-intensity", "device": str, "points": [{"scale": x,
"offered_iops": .., "completed_iops": .., "mean_ms": .., "p95_ms": .., "utilisation": ..},
...], "saturation_scale": x or null}. Optional, for a model's twins: "twins": N and
"precision" (`whatif.precision_note`), each point's "ci95": {"completed_iops": h,
"mean_ms": h, "p95_ms": h} (95% half-widths of the means) and "kept_up_share"."""

from __future__ import annotations

import math
from typing import Any

from markupsafe import Markup, escape

from ...errors import IotwinError
from ..figures import COLORS, figure, to_svg
from ..inputs import Bundle, Input
from .base import figure_block, fmt, note, table
from .whatif import WhatIfSection, half_widths, need, numbers

POINT_FIELDS = ("scale", "offered_iops", "completed_iops", "mean_ms", "p95_ms", "utilisation")
NULLABLE = ("offered_iops",)  # null when the workload's arrivals have no span


def intensity_svg(points: list[dict[str, Any]], saturation: float | None, device: str) -> str:
    scales = [p["scale"] for p in points]
    with figure(width=8.4, height=3.0, ncols=2) as (fig, axes):
        rate_ax, lat_ax = axes
        rate_ax.plot(
            scales,
            [math.nan if p["offered_iops"] is None else p["offered_iops"] for p in points],
            "--",
            color=COLORS["uniform"],
            label="offered",
        )
        rate_ax.plot(
            scales,
            [p["completed_iops"] for p in points],
            "o-",
            color=COLORS["original"],
            label="completed",
        )
        rate_ax.set_ylabel("IOPS")
        lat_ax.plot(
            scales, [p["mean_ms"] for p in points], "o-", color=COLORS["original"], label="mean"
        )
        lat_ax.plot(scales, [p["p95_ms"] for p in points], "s--", color=COLORS["twin"], label="p95")
        lat_ax.set_ylabel("response time (ms)")
        lat_ax.set_yscale("log")
        for ax in (rate_ax, lat_ax):
            ax.set_xlabel("intensity (x the workload's rate)")
            if saturation is not None:
                ax.axvline(
                    saturation,
                    color=COLORS["accent"],
                    linestyle=":",
                    linewidth=1,
                    label="saturation",
                )
            ax.legend(loc="upper left", fontsize=8)
        fig.suptitle(f"on {device}", fontsize=9, color="#5b6573")
        return to_svg(fig, "intensity sweep")


class WhatIfIntensity(WhatIfSection):
    kind = "whatif-intensity"
    id = "whatif-intensity"
    title = "What-if: intensity to saturation"
    caption = (
        "The model run at increasing intensity in the simulator: throughput follows the "
        "offered load until the device saturates, then response time climbs "
        "(seed 000, Figure 3)."
    )

    def check(self, item: Input) -> None:
        doc, path = item.data, str(item.path)
        need(doc, path, "", ("device", "points", "saturation_scale"))
        if not isinstance(doc["points"], list) or not doc["points"]:
            raise IotwinError(f"{path}: field 'points': expected a non-empty list")
        for i, p in enumerate(doc["points"]):
            need(p, path, f"points[{i}]", POINT_FIELDS)
            present = [p[k] for k in POINT_FIELDS if not (k in NULLABLE and p[k] is None)]
            numbers(present, path, f"points[{i}]")
            if p.get("ci95") is not None:  # a model's twins: each mean's 95% half-width
                need(p["ci95"], path, f"points[{i}].ci95", ())
                half_widths(list(p["ci95"].values()), path, f"points[{i}].ci95")
        if doc["saturation_scale"] is not None:
            numbers([doc["saturation_scale"]], path, "saturation_scale")
        if "twins" in doc:
            numbers([doc["twins"]], path, "twins")

    def render(self, bundle: Bundle) -> Markup:
        parts = []
        for item in bundle.all(self.kind):
            doc = item.data
            points = sorted(doc["points"], key=lambda p: p["scale"])
            sat = doc["saturation_scale"]
            parts.append(Markup(f"<h3>{escape(item.path.name)}</h3>"))
            parts.append(figure_block(intensity_svg(points, sat, str(doc["device"]))))
            rows = [
                (f"{p['scale']:g}x", fmt(p["offered_iops"], ",.0f"),
                 with_ci(p, "completed_iops", ",.0f"), with_ci(p, "mean_ms", ".3g"),
                 with_ci(p, "p95_ms", ".3g"), f"{p['utilisation']:.0%}")
                for p in points
            ]  # fmt: skip
            headers = (
                "intensity",
                "offered IOPS",
                "completed IOPS",
                "mean ms",
                "p95 ms",
                "utilisation",
            )
            parts.append(table(headers, rows, css="compact"))
            verdict = (
                f"saturates at {sat:g}x the workload's rate"
                if sat is not None
                else "did not saturate in the sweep"
            )
            parts.append(
                Markup(f'<p class="note">{escape(str(doc["device"]))} {escape(verdict)}.</p>')
            )
            if doc.get("twins", 1) > 1:
                from ...whatif import precision_note

                parts.append(note(f"{precision_note(doc, 'of the model')}; ± the 95% interval"))
        return Markup("").join(parts)


def with_ci(p: dict[str, Any], key: str, spec: str) -> str:
    """A point's figure, with ± its 95% half-width where the twins give one."""
    h = (p.get("ci95") or {}).get(key)
    return fmt(p[key], spec) + ("" if h is None else f" ± {fmt(h, spec)}")
