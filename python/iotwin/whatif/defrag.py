"""`whatif defrag`: what relaying a file-level workload's files contiguously buys (seed 000
section V.B, Table VIII, Figure 9).

Before: every request is placed where its file's data lay on the captured disk (the FIEMAP
extents `iotwin capture` records). A file without recorded extents gets a stated fragmented
allocation: it is cut into 1 MiB fragments scattered at random (seeded) over free space four
times the size of such files, as on an aged file system. After: the files laid end to end,
each on a 1 MiB boundary, from where the lowest recorded extent began.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np
import polars as pl
from rich.console import Console
from rich.table import Table

from ..devices import describe, resolve
from ..errors import IotwinError
from ..layout import ALIGN, file_layout
from ..sim import simulate, speedup
from ..trace import Trace
from . import auto_intensity

FRAGMENT = 1 << 20
SPREAD = 4
RELAXED = 64 << 10


def extents_table(trace: Trace, seed: int) -> tuple[dict[int, np.ndarray], int]:
    """Per file id an array of (logical, physical) extent starts, sorted; and how many files
    got the fragmented allocation."""
    layout = file_layout(trace)
    known = {int(f["id"]): f.get("extents") for f in trace.meta.files}
    table: dict[int, np.ndarray] = {}
    top = 0
    for f in layout:
        ext = known.get(f["id"])
        if ext:
            arr = np.array([[e[0], e[1]] for e in ext], dtype=np.uint64)
            table[f["id"]] = arr[np.argsort(arr[:, 0])]
            top = max(top, max(e[1] + e[2] for e in ext))
    unknown = [f for f in layout if f["id"] not in table]
    chunks = [(f["id"], i) for f in unknown for i in range(-(-max(f["size"], 1) // FRAGMENT))]
    if chunks:
        rng = np.random.default_rng(seed)
        base = -(-top // ALIGN) * ALIGN
        slots = rng.choice(len(chunks) * SPREAD, size=len(chunks), replace=False)
        per_file: dict[int, list[list[int]]] = {}
        for (fid, i), slot in zip(chunks, slots, strict=True):
            per_file.setdefault(fid, []).append([i * FRAGMENT, base + int(slot) * FRAGMENT])
        for fid, rows in per_file.items():
            table[fid] = np.array(rows, dtype=np.uint64)
    return table, len(unknown)


def as_captured(trace: Trace, seed: int) -> tuple[Trace, int]:
    """The trace with each request at its file's on-disk address (request start mapped; the
    request is taken to continue contiguously from there)."""
    table, fragmented = extents_table(trace, seed)
    files = trace.numpy("file", np.uint32)
    offset = trace.numpy("offset", np.uint64).copy()
    for fid, ext in table.items():
        sel = files == fid
        if not sel.any():
            continue
        off = offset[sel]
        idx = np.clip(np.searchsorted(ext[:, 0], off, side="right") - 1, 0, None)
        logical, physical = ext[idx, 0], ext[idx, 1]
        # bytes before the first extent (a hole) are placed just before it
        offset[sel] = np.where(off >= logical, physical + (off - logical), physical)
    return _device_trace(trace, offset), fragmented


def contiguous(trace: Trace, start: int) -> Trace:
    layout = file_layout(trace)
    bases = {f["id"]: start + f["base"] for f in layout}
    files = trace.numpy("file", np.uint32)
    base = np.zeros(int(files.max()) + 1 if len(files) else 1, dtype=np.uint64)
    for fid, b in bases.items():
        if fid < len(base):
            base[fid] = b
    return _device_trace(trace, trace.numpy("offset", np.uint64) + base[files])


def _device_trace(trace: Trace, offset: np.ndarray) -> Trace:
    df = trace.df.with_columns(pl.Series("offset", offset, dtype=pl.UInt64)).drop("file")
    end = int((offset + trace.numpy("size", np.uint32)).max()) if len(offset) else 0
    return Trace(df, replace(trace.meta, capacity=end, files=[]))


def sequential_fractions(trace: Trace) -> dict[str, float]:
    """Per stream (design.md's definition), in the order the disk sees them (all streams
    merged), and relaxed (forward jumps up to 64 KiB, which a read-ahead buffer absorbs)."""
    off = trace.numpy("offset", np.int64)
    end = off + trace.numpy("size", np.uint32).astype(np.int64)
    stream = trace.numpy("stream", np.uint32)
    n = len(off)
    if n == 0:
        return {"per_stream": 0.0, "device_order": 0.0, "relaxed_device_order": 0.0}
    order = np.argsort(stream, kind="stable")
    s_off, s_end, s_stream = off[order], end[order], stream[order]
    same = s_stream[1:] == s_stream[:-1]
    per_stream = np.count_nonzero(same & (s_off[1:] == s_end[:-1])) / n
    jump = off[1:] - end[:-1]
    return {
        "per_stream": per_stream,
        "device_order": np.count_nonzero(jump == 0) / n,
        "relaxed_device_order": np.count_nonzero((jump >= 0) & (jump <= RELAXED)) / n,
    }


def study(
    trace: Trace, device: str = "hdd-7200", intensity: float | None = None, seed: int = 0
) -> dict[str, Any]:
    if "file" not in trace.df.columns:
        raise IotwinError(
            f"{trace.meta.source}: not a file-level trace (no file column); defragmentation "
            "relays files, so it needs a trace captured with `iotwin capture` (or strace)"
        )
    spec = resolve(device)
    before, fragmented = as_captured(trace, seed)
    start = int(before.df["offset"].min()) // ALIGN * ALIGN
    after = contiguous(trace, start)
    if intensity is None:
        intensity = auto_intensity(before, spec, seed)
    rb = simulate(before, spec, intensity, seed)
    ra = simulate(after, spec, intensity, seed)
    side = {}
    for name, t, r in (("before", before, rb), ("after", after, ra)):
        seq = sequential_fractions(t)
        side[name] = {
            **{f"sequential_{k}": v for k, v in seq.items()},
            "sequential_fraction": seq["per_stream"],
            "mean_ms": r.mean_ms,
            "p95_ms": r.percentile_ms(95),
            "busy_s": r.busy_ns / 1e9,
            "span_bytes": int(t.df["offset"].max()) - int(t.df["offset"].min()),
        }
    return {
        "kind": "whatif-defrag",
        "workload": trace.meta.source,
        "device": describe(spec),
        "intensity": intensity,
        "requests": len(trace),
        "files": len(file_layout(trace)),
        "files_without_extents": fragmented,
        "before": side["before"],
        "after": side["after"],
        **speedup(rb, ra),
    }


def render(r: dict[str, Any], console: Console) -> None:
    t = Table(title=f"Defragmentation on {r['device']} (intensity {r['intensity']:.3g}x)")
    t.add_column("")
    t.add_column("as captured", justify="right")
    t.add_column("contiguous", justify="right")
    rows = [
        ("sequential fraction (per stream)", "sequential_per_stream", "{:.1%}"),
        ("sequential (device order)", "sequential_device_order", "{:.1%}"),
        ("near-sequential (jumps <= 64 KiB)", "sequential_relaxed_device_order", "{:.1%}"),
        ("address span", "span_bytes", "{:,} B"),
        ("mean response", "mean_ms", "{:.3f} ms"),
        ("p95 response", "p95_ms", "{:.3f} ms"),
        ("disk busy", "busy_s", "{:.2f} s"),
    ]
    for label, key, fmt in rows:
        t.add_row(label, fmt.format(r["before"][key]), fmt.format(r["after"][key]))
    console.print(t)
    console.print(f"storage speedup {r['speedup']:.3f} (busy-time ratio {r['busy_ratio']:.3f})")
    if r["files_without_extents"]:
        console.print(
            f"{r['files_without_extents']} of {r['files']} files had no recorded extents: "
            "given a fragmented allocation (1 MiB fragments scattered over 4x their size)"
        )
