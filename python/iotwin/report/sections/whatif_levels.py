"""What-if: model detail (seed 000, Figure 6). Expected JSON (`iotwin whatif levels -o`):
{"kind": "whatif-levels", "device": str, "original": {"mean_ms": .., "p95_ms": ..},
 "points": [{"levels": L, "mean_ms": .., "p95_ms": .., "mean_error": .., "p95_error": ..}],
 "chosen": L, "within_5pct": L | null}
Optional: "twins": N with each point's "mean_error_range": [low, high] (over N twins), and
"mean_error_ci95" / "p95_error_ci95" (the 95% interval's half-width of the mean error) with
"precision" (how N came about: `whatif.precision_note`)."""

from __future__ import annotations

from markupsafe import Markup, escape

from ..figures import COLORS, figure, to_svg
from ..inputs import Bundle, Input
from .base import figure_block, note, pct, table
from .whatif import WhatIfSection, half_widths, need, numbers

POINT_FIELDS = ("levels", "mean_ms", "p95_ms", "mean_error", "p95_error")


def levels_svg(
    levels: list[float],
    means: list[float],
    original: float,
    device: str,
    spans: list[list[float]] | None = None,
) -> str:
    with figure(width=8.4, height=2.8) as (fig, ax):
        ax.plot(levels, means, "s--", color=COLORS["twin"], label="twin")
        if spans:  # the single twins' range
            low, high = ([original * (1 + s[i]) for s in spans] for i in (0, 1))
            ax.fill_between(levels, low, high, color=COLORS["twin"], alpha=0.2)
        ax.axhline(original, color=COLORS["original"], label="original")
        ax.set_xticks(levels)
        ax.set_xlabel("model levels")
        ax.set_ylabel("mean response (ms)")
        ax.set_ylim(bottom=0)
        ax.set_title(device, fontsize=9)
        ax.legend(loc="best")
        return to_svg(fig, "response time per model level")


def with_interval(p: dict, key: str) -> str:
    """A mean error with its 95% interval's half-width, where the study gives one."""
    ci = p.get(f"{key}_error_ci95")
    return pct(p[f"{key}_error"]) + (f" ± {pct(ci).lstrip('+')}" if ci is not None else "")


class WhatIfLevels(WhatIfSection):
    kind = "whatif-levels"
    id = "whatif-levels"
    title = "What-if: model detail"
    caption = (
        "Simulated mean response time of the twin fitted at each model level against the "
        "original's, and the level the fidelity sweep chose (seed 000, Figure 6)."
    )

    def check(self, item: Input) -> None:
        doc, path = item.data, str(item.path)
        need(doc, path, "", ("device", "original", "points", "chosen"))
        need(doc["original"], path, "original", ("mean_ms", "p95_ms"))
        for i, p in enumerate(doc["points"]):
            need(p, path, f"points[{i}]", POINT_FIELDS)
            numbers([p[k] for k in POINT_FIELDS], path, f"points[{i}]")
            if "mean_error_range" in p:
                numbers(p["mean_error_range"], path, f"points[{i}].mean_error_range", 2)
            half_widths(
                [p.get(k) for k in ("mean_error_ci95", "p95_error_ci95")], path, f"points[{i}]"
            )
        if "twins" in doc:
            numbers([doc["twins"]], path, "twins")

    def render(self, bundle: Bundle) -> Markup:
        parts = []
        for item in bundle.all(self.kind):
            doc = item.data
            pts = doc["points"]
            ranged = doc.get("twins", 1) > 1 and all("mean_error_range" in p for p in pts)
            parts.append(Markup(f"<h3>{escape(item.path.name)}</h3>"))
            svg = levels_svg(
                [p["levels"] for p in pts],
                [p["mean_ms"] for p in pts],
                doc["original"]["mean_ms"],
                str(doc["device"]),
                [p["mean_error_range"] for p in pts] if ranged else None,
            )
            parts.append(figure_block(svg))
            rows = [
                (
                    str(p["levels"]) + (" (chosen)" if p["levels"] == doc["chosen"] else ""),
                    f"{p['mean_ms']:.3g} ms",
                    with_interval(p, "mean"),
                    *([" to ".join(pct(e) for e in p["mean_error_range"])] if ranged else []),
                    f"{p['p95_ms']:.3g} ms",
                    with_interval(p, "p95"),
                )
                for p in pts
            ]
            headers = ("levels", "twin mean", "error", *(["single twins"] if ranged else []),
                       "twin p95", "error")  # fmt: skip
            parts.append(table(headers, rows, css="compact"))
            o = doc["original"]
            within = doc.get("within_5pct")
            verdict = f"original: mean {o['mean_ms']:.3g} ms, p95 {o['p95_ms']:.3g} ms; " + (
                f"smallest level within 5% of its mean: {within}"
                if within is not None
                else "no level within 5% of its mean"
            )
            parts.append(Markup(f'<p class="verdict">{escape(verdict)}</p>'))
            if ranged:
                from ...whatif import precision_note

                interval = "; ± the 95% interval of the mean error" if "precision" in doc else ""
                parts.append(note(f"twin figures: {precision_note(doc, 'per level')}{interval}; "
                                  "the band the range of the single twins"))  # fmt: skip
        return Markup("").join(parts)
