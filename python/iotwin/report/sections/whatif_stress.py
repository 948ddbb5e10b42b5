"""What-if: early problem detection (seed 001, section 6.1). Expected JSON (`iotwin whatif
stress -o`): {"kind": "whatif-stress", "ramp": [{"intensity": x, "mean_ms": .., "p95_ms": ..,
"regions": [{"region": i, "median_ms": .., "outlier": bool}, ...]}, ...],
"outliers": [i, ...], "breakaway_intensity": x | null, "outlier_rule": str,
"breakaway_rule": str}"""

from __future__ import annotations

from markupsafe import Markup, escape

from ..figures import COLORS, figure, to_svg
from ..inputs import Bundle, Input
from .base import figure_block, table
from .whatif import WhatIfSection, need, numbers


def stress_svg(ramp: list[dict]) -> str:
    with figure(width=8.4, height=2.8, ncols=2) as (fig, axes):
        resp_ax, reg_ax = axes
        xs = [s["intensity"] for s in ramp]
        resp_ax.plot(xs, [s["mean_ms"] for s in ramp], "o-", color=COLORS["original"])
        resp_ax.set_xscale("log")
        resp_ax.set_xlabel("intensity")
        resp_ax.set_ylabel("mean response (ms)")
        last = ramp[-1]["regions"]
        colors = [COLORS["uniform"] if r["outlier"] else COLORS["twin"] for r in last]
        reg_ax.bar([str(r["region"]) for r in last], [r["median_ms"] for r in last], color=colors)
        reg_ax.set_xlabel(f"address region (at {ramp[-1]['intensity']:g}x)")
        reg_ax.set_ylabel("median latency (ms)")
        return to_svg(fig, "stress ramp")


class WhatIfStress(WhatIfSection):
    kind = "whatif-stress"
    id = "whatif-stress"
    title = "What-if: stress ramp"
    caption = (
        "The workload at rising intensity: where response time breaks away, and address "
        "regions whose latency is an outlier against the rest (seed 001, section 6.1)."
    )

    def check(self, item: Input) -> None:
        doc, path = item.data, str(item.path)
        need(doc, path, "", ("ramp", "outliers", "breakaway_intensity"))
        for i, step in enumerate(doc["ramp"]):
            need(step, path, f"ramp[{i}]", ("intensity", "mean_ms", "p95_ms", "regions"))
            numbers([step["intensity"], step["mean_ms"], step["p95_ms"]], path, f"ramp[{i}]")
            for j, r in enumerate(step["regions"]):
                need(r, path, f"ramp[{i}].regions[{j}]", ("region", "median_ms", "outlier"))
        if not doc["ramp"]:
            need({}, path, "ramp", ("intensity",))

    def render(self, bundle: Bundle) -> Markup:
        parts = []
        for item in bundle.all(self.kind):
            doc = item.data
            ramp = doc["ramp"]
            parts.append(Markup(f"<h3>{escape(item.path.name)}</h3>"))
            parts.append(figure_block(stress_svg(ramp)))
            rows = [
                (
                    f"{s['intensity']:g}x",
                    f"{s['mean_ms']:.3g} ms",
                    f"{s['p95_ms']:.3g} ms",
                    ", ".join(str(r["region"]) for r in s["regions"] if r["outlier"]) or "none",
                )
                for s in ramp
            ]
            parts.append(
                table(("intensity", "mean", "p95", "outlier regions"), rows, css="compact")
            )
            b = doc["breakaway_intensity"]
            verdict = f"outlier regions: {', '.join(map(str, doc['outliers'])) or 'none'}; " + (
                f"breaks away from {b:g}x" if b is not None else "no break-away in the ramp"
            )
            parts.append(Markup(f'<p class="verdict">{escape(verdict)}</p>'))
            for rule in ("outlier_rule", "breakaway_rule"):
                if doc.get(rule):
                    parts.append(Markup(f'<p class="note">{escape(doc[rule])}</p>'))
        return Markup("").join(parts)
