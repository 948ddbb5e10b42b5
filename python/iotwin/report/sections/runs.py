"""Results of `iotwin run` / `replay`: lateness, service and response-time percentiles (the
open loop hides no queueing) and the per-second timeline."""

from __future__ import annotations

from typing import Any

from markupsafe import Markup, escape

from ..figures import COLORS, figure, to_svg
from ..inputs import Bundle
from .base import Section, figure_block, table

QUANTILES = ("p50", "p90", "p99", "p99.9", "max")
MEASURES = (
    ("lateness", "lateness_ns", "issue - scheduled"),
    ("service", "service_ns", "completion - issue"),
    ("response", "response_ns", "completion - scheduled"),
)
STREAMS_SHOWN = 5


def micros(ns: float | None) -> str:
    return "n/a" if ns is None else f"{ns / 1e3:,.1f}"


def percentile_rows(run: dict[str, Any]) -> list[tuple[str, ...]]:
    rows: list[tuple[str, ...]] = []
    heaviest = sorted(run["streams"].values(), key=lambda s: -s["requests"])[:STREAMS_SHOWN]
    for name, s in [("all", run["total"])] + [(s["name"], s) for s in heaviest]:
        for i, (label, key, _) in enumerate(MEASURES):
            h = s.get(key) or {}
            rows.append(
                (
                    name if i == 0 else "",
                    f"{s['requests']:,}" if i == 0 else "",
                    label,
                    *(micros(h.get(q)) for q in QUANTILES),
                )
            )
    return rows


def timeline_svg(run: dict[str, Any]) -> str:
    seconds = [p["second"] for p in run["timeline"]]
    with figure(width=8.4, height=2.6) as (fig, ax):
        reads = [p["reads"] for p in run["timeline"]]
        writes = [p["writes"] for p in run["timeline"]]
        ax.bar(seconds, reads, width=0.8, color=COLORS["original"], label="reads completed")
        ax.bar(
            seconds, writes, width=0.8, bottom=reads, color=COLORS["twin"], label="writes completed"
        )
        ax.plot(seconds, [p["iops"] for p in run["timeline"]], "o-", color=COLORS["accent"],
                markersize=3, linewidth=1, label="requests issued")  # fmt: skip
        ax.set_xlabel("second of the run")
        ax.set_ylabel("requests")
        ax.legend(loc="upper right", fontsize=8)
        return to_svg(fig, "run timeline")


def summary(run: dict[str, Any]) -> str:
    t = run["total"]
    loop = f"closed loop, iodepth {run['iodepth']}" if run["mode"] == "closed" else "open loop"
    state = "stopped early" if run["partial"] else "complete"
    return (
        f"{run['source']} on {run['target']} ({run['target_size']:,} bytes), {run['engine']}, "
        f"{'direct' if run['direct'] else 'buffered'}, {loop}, intensity {run['intensity']:g}, "
        f"{state}: {t['requests']:,} requests in {run['elapsed_s']:,.2f} s, "
        f"{run['iops']:,.0f} IOPS, {run['bandwidth_bps'] / 1e6:,.1f} MB/s, {t['errors']:,} errors."
    )


class RunResults(Section):
    id = "runs"
    title = "Timed runs"
    caption = (
        "Percentiles in microseconds. Lateness = actual - scheduled issue, service = "
        "completion - issue, response = completion - scheduled (docs/engine.md)."
    )

    def applies(self, bundle: Bundle) -> bool:
        return bool(bundle.all("run"))

    def render(self, bundle: Bundle) -> Markup:
        parts = []
        for item in bundle.all("run"):
            run = item.data
            parts.append(Markup(f"<h3>{escape(item.path.name)}</h3>"))
            parts.append(Markup(f"<p>{escape(summary(run))}</p>"))
            parts.append(
                table(
                    ("stream", "requests", "measure", *QUANTILES),
                    percentile_rows(run),
                    numeric_from=3,
                    css="wide",
                )
            )
            if run.get("timeline"):
                parts.append(figure_block(timeline_svg(run), "Requests per second of the run."))
        return Markup("").join(parts)
