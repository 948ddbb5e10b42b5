"""Characterization tables in the style of seed 000's Table III: the whole trace, then one
row per stream (the heaviest first)."""

from __future__ import annotations

from typing import Any

from markupsafe import Markup

from ..inputs import Bundle
from .base import Section, characterization, fmt, pct, table

STREAMS_SHOWN = 15


def summary_rows(r: dict[str, Any]) -> list[tuple[str, str]]:
    j = r["jumps"]
    top = ", ".join(
        f"{s['size_bytes'] / 1024:g} KiB ({pct(s['share'])})"
        for s in r["size_distribution"]["top"][:5]
    )
    cap = f"{r['capacity_bytes']:,} B" + ("" if r["capacity_known"] else " (max offset + size)")
    return [
        ("requests", f"{r['requests']:,}"),
        ("streams", f"{r['stream_count']:,} (by {r['stream_by']})"),
        ("read : write", f"{pct(r['read_fraction'])} : {pct(r['write_fraction'])}"),
        ("sequential", pct(r["sequential_fraction"])),
        ("mean request size", fmt(r["mean_size_bytes"], ",.0f", unit="B")),
        ("most common sizes", top or "n/a"),
        ("span", fmt(r["span_s"], ",.3f", unit="s")),
        ("mean inter-arrival", fmt(r["mean_interarrival_s"], ".4g", 1e3, "ms")),
        ("IOPS", fmt(r["iops"], ",.1f")),
        ("mean latency", fmt(r["mean_latency_s"], ".4g", 1e3, "ms")),
        ("capacity", cap),
        ("footprint", f"{r['footprint_blocks_4k']:,} blocks of 4 KiB"),
        (
            "jumps backward / sequential / forward",
            f"{fmt(j['backward'], '.3f')} / {fmt(j['sequential'], '.3f')} / {fmt(j['forward'], '.3f')}",
        ),
        ("interference frequency", fmt(r["interference_frequency"], ".3f")),
        (
            "run count / detangled / relaxed",
            f"{fmt(r['run_count'], '.3f')} / {fmt(r['detangled_run_count'], '.3f')} / "
            f"{fmt(r['relaxed_detangled_run_count'], '.3f')}",
        ),
        ("activity fluctuation (CV of window rates)", fmt(r["fluctuation"]["cv"], ".3f")),
    ]


def stream_rows(r: dict[str, Any]) -> list[tuple[str, ...]]:
    rows = []
    for m in r["streams"][:STREAMS_SHOWN]:
        loc = m["spatial_locality"]
        rows.append(
            (
                m["name"],
                m["type"],
                fmt(m["weight"], ".3f"),
                f"{m['requests']:,}",
                pct(m["read_fraction"], 0),
                pct(m["sequential_fraction"], 0),
                fmt(m["mean_size_bytes"], ".1f", 1 / 1024),
                fmt(m["mean_interarrival_s"], ".3g", 1e3),
                fmt(m["iops"], ",.0f"),
                fmt(m["fluctuation_cv"], ".2f"),
                "/".join(f"{s * 100:.0f}" for s in loc) if loc and len(loc) <= 16 else "n/a",
            )
        )
    return rows


class Characterization(Section):
    id = "characterization"
    title = "Characterization"
    caption = (
        "The trace as seed 000's Table III reads it: I/O features per stream (thread weight, "
        "read and sequential share, size, inter-arrival time, rate, fluctuation, share of "
        "requests in each quarter of the address space)."
    )

    def applies(self, bundle: Bundle) -> bool:
        return bool(bundle.all("characterization") or bundle.all("trace"))

    def render(self, bundle: Bundle) -> Markup:
        r = characterization(bundle)
        assert r is not None
        parts = [
            Markup('<div class="columns"><div>'),
            table(("whole trace", "value"), summary_rows(r), css="kv"),
            Markup("</div></div>"),
        ]
        headers = (
            "stream", "type", "weight", "requests", "read", "seq.", "size KiB", "inter-arr. ms",
            "IOPS", "CV", "locality %",
        )  # fmt: skip
        parts.append(Markup("<h3>Per stream</h3>"))
        parts.append(table(headers, stream_rows(r), numeric_from=2, css="wide"))
        hidden = len(r["streams"]) - STREAMS_SHOWN
        if hidden > 0:
            parts.append(Markup(f'<p class="note">{hidden:,} lighter streams not shown.</p>'))
        return Markup("").join(parts)
