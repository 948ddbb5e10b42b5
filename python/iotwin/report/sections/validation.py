"""The validation table in the style of seed 000's Table IV: each metric of the original and
the synthetic trace, their deviation, the tolerance and the verdict."""

from __future__ import annotations

from typing import Any

from markupsafe import Markup, escape

from ..inputs import Bundle
from .base import Section, badge, fmt, table, validation

WEIGHTS_SHOWN = 8


def deviation_cell(m: dict[str, Any], key: str) -> str:
    value = m[key]
    if value is None:
        return "n/a"
    return f"{value:.2%}" if m["kind"] == "relative" else fmt(value, ".4g")


def metric_rows(report: dict[str, Any]) -> tuple[list[tuple[Any, ...]], int]:
    items = list(report["metrics"].items())
    weights = [it for it in items if it[0].startswith("weight[")]
    worst = sorted(weights, key=lambda it: -(it[1]["deviation"] or 0))[:WEIGHTS_SHOWN]
    shown = [it for it in items if not it[0].startswith("weight[")] + worst
    rows = [
        (
            name,
            fmt(m["original"]),
            fmt(m["synthetic"]),
            deviation_cell(m, "deviation"),
            deviation_cell(m, "tolerance"),
            badge(m["pass"]),
        )
        for name, m in shown
    ]
    return rows, len(weights) - len(worst)


class Validation(Section):
    id = "validation"
    title = "Validation: original vs twin"
    caption = (
        "Seed 000's Table IV, extended: deviation is absolute for fractions and relative "
        "for magnitudes (docs/metrics.md)."
    )

    def applies(self, bundle: Bundle) -> bool:
        has_twin = bundle.all("twin") or bundle.all("model")
        return bool(bundle.all("validation") or (bundle.all("trace") and has_twin))

    def render(self, bundle: Bundle) -> Markup:
        report = validation(bundle)
        assert report is not None
        failed = report["failed"]
        verdict = (
            '<span class="badge pass">all metrics within tolerance</span>'
            if report["passed"]
            else f'<span class="badge fail">{len(failed)} out of tolerance</span> '
            + str(escape(", ".join(failed[:8])))
        )
        rows, hidden = metric_rows(report)
        parts = [
            Markup(
                f'<p class="verdict">fidelity score <b>{report["score"]:.3f}</b> '
                f"(1 is a perfect twin) &middot; {verdict}</p>"
            ),
            table(
                ("metric", "original", "synthetic", "deviation", "tolerance", ""),
                rows,
                css="wide validation",
            ),
        ]
        if hidden > 0:
            parts.append(
                Markup(
                    f'<p class="note">{hidden:,} more stream weights, all shown in the JSON.</p>'
                )
            )
        if report.get("streams"):
            stream_rows = [
                (name, *(f"{fmt(ms[k]['original'])} / {fmt(ms[k]['synthetic'])}" for k in
                         ("read_fraction", "sequential_fraction", "mean_size_bytes")))
                for name, ms in report["streams"].items()
            ]  # fmt: skip
            parts.append(Markup("<h3>Heaviest streams (original / synthetic)</h3>"))
            parts.append(
                table(
                    ("stream", "read fraction", "sequential fraction", "mean size (B)"), stream_rows
                )
            )
        return Markup("").join(parts)
