"""What the report was made from: one row per input file."""

from __future__ import annotations

from markupsafe import Markup

from ...trace import Trace
from ..inputs import Bundle, Input
from .base import Section, fmt, table

KIND_NAMES = {
    "trace": "original trace",
    "twin": "synthetic twin",
    "baseline": "uniform baseline trace",
    "record": "record of a run",
    "model": "model",
    "characterization": "characterization",
    "validation": "validation",
    "run": "run result",
    "levels": "level sweep",
    "sim": "simulation",
}


def describe(item: Input) -> str:
    if isinstance(item.data, Trace):
        t = item.data
        span = t.df["ts_ns"][-1] / 1e9 if t.df.height else 0.0
        return f"{t.df.height:,} requests over {span:,.2f} s, {t.meta.format or 'unknown'} format"
    doc = item.data
    if item.kind == "model":
        return (
            f"{doc['levels']} levels, fanout {doc['fanout']}, {len(doc['streams']):,} streams, "
            f"fitted on {doc['requests']:,} requests"
        )
    if item.kind == "validation":
        verdict = (
            "all within tolerance" if doc["passed"] else f"{len(doc['failed'])} out of tolerance"
        )
        return f"fidelity score {fmt(doc['score'], '.3f')}, {verdict}"
    if item.kind == "characterization":
        return f"{doc['requests']:,} requests, {doc['stream_count']:,} streams"
    if item.kind == "run":
        return f"{doc['total']['requests']:,} requests in {fmt(doc['elapsed_s'], '.2f')} s on {doc['target']}"
    if item.kind.startswith("whatif-") or item.kind == "sim":
        return f"device {doc.get('device', 'n/a')}"
    return ""


class Overview(Section):
    id = "inputs"
    title = "Inputs"
    caption = "The files this report was made from, recognised by their content."

    def applies(self, bundle: Bundle) -> bool:
        return True

    def render(self, bundle: Bundle) -> Markup:
        rows = [(str(i.path), KIND_NAMES.get(i.kind, i.kind), describe(i)) for i in bundle.inputs]
        return table(("file", "kind", "summary"), rows, numeric_from=3)
