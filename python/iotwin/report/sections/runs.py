"""Results of `iotwin run` / `replay`: lateness, service and response-time percentiles (the
open loop hides no queueing) and the per-second timeline."""

from __future__ import annotations

from typing import Any

import numpy as np
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


MAX_BARS = 240


def binned(timeline: list[dict[str, Any]], max_bars: int = MAX_BARS) -> tuple[int, dict]:
    """Long runs' seconds grouped `width` at a time: each group's mean per second."""
    width = max(1, -(-len(timeline) // max_bars))
    groups = -(-len(timeline) // width)
    out: dict[str, np.ndarray] = {}
    for key in ("reads", "writes", "iops"):
        padded = np.full(groups * width, np.nan)
        padded[: len(timeline)] = [p[key] for p in timeline]
        out[key] = np.nanmean(padded.reshape(groups, width), axis=1)
    out["second"] = np.array([p["second"] for p in timeline[::width]], dtype=np.float64)
    return width, out


def timeline_svg(run: dict[str, Any]) -> str:
    width, t = binned(run["timeline"])
    bar = {"width": 0.8 * width, "align": "edge"}
    with figure(width=8.4, height=2.6) as (fig, ax):
        ax.bar(t["second"], t["reads"], color=COLORS["original"], label="reads completed", **bar)
        ax.bar(t["second"], t["writes"], bottom=t["reads"], color=COLORS["twin"],
               label="writes completed", **bar)  # fmt: skip
        ax.plot(t["second"] + 0.4 * width, t["iops"], "o-", color=COLORS["accent"],
                markersize=3, linewidth=1, label="requests issued")  # fmt: skip
        ax.set_xlabel("second of the run")
        per = f" (mean over {width} s)" if width > 1 else ""
        ax.set_ylabel(f"requests per second{per}")
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
