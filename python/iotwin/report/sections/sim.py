"""`iotwin sim --json`: one workload on one simulated device (the storage simulator). Expected
JSON: {"kind": "sim", "workload": str, "of": "original"|"twin", "device": str, "intensity": x,
"requests": n, "offered_iops": x|null, "completed_iops": x, "mean_ms": x, "p95_ms": x,
"p99_ms": x, "utilisation": x, "cache_hit_ratio": x|null, ...}."""

from __future__ import annotations

from typing import Any

from markupsafe import Markup

from ..inputs import Bundle, Input
from .base import fmt, pct, table
from .whatif import WhatIfSection, need, numbers

REQUIRED = ("device", "intensity", "requests", "completed_iops", "mean_ms", "utilisation")
COLUMNS = (
    ("intensity", "intensity", lambda v: fmt(v, ".4g") + "x"),
    ("offered IOPS", "offered_iops", lambda v: fmt(v, ",.0f")),
    ("completed IOPS", "completed_iops", lambda v: fmt(v, ",.0f")),
    ("mean ms", "mean_ms", lambda v: fmt(v, ".3g")),
    ("p95 ms", "p95_ms", lambda v: fmt(v, ".3g")),
    ("p99 ms", "p99_ms", lambda v: fmt(v, ".3g")),
    ("busy", "utilisation", lambda v: pct(v, 0)),
    ("cache hits", "cache_hit_ratio", lambda v: pct(v, 1)),
)


def row(item: Input) -> tuple[str, ...]:
    doc: dict[str, Any] = item.data
    who = (
        f"{doc.get('workload') or item.path.name} ({doc['of']})"
        if doc.get("of")
        else item.path.name
    )
    return (who, str(doc["device"]), *(show(doc.get(key)) for _, key, show in COLUMNS))


class Simulation(WhatIfSection):
    kind = "sim"
    id = "sim"
    title = "Simulated devices"
    caption = (
        "`iotwin sim`: the workload's arrivals, open loop, on a simulated device; response "
        "time = completion - arrival (queueing included)."
    )

    def check(self, item: Input) -> None:
        doc, path = item.data, str(item.path)
        need(doc, path, "", REQUIRED)
        numbers([doc[k] for k in REQUIRED if k != "device"], path, "intensity..utilisation")

    def render(self, bundle: Bundle) -> Markup:
        rows = [row(item) for item in bundle.all(self.kind)]
        headers = ("workload", "device", *(name for name, _, _ in COLUMNS))
        return table(headers, rows, numeric_from=2, css="wide")
