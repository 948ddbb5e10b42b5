"""File-level traces on one virtual device.

A file-level trace (strace capture, fio iolog) addresses bytes inside files. Models,
locality and caches need one address space, so files are laid end to end on a virtual device
in file-id order, each starting on a 1 MiB boundary; a file's extent is its recorded size or,
when unknown or smaller, the furthest byte the trace touched. The layout is kept with the
model, so a replay can map requests back to files.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import polars as pl

from .trace import Trace

ALIGN = 1 << 20


def file_layout(trace: Trace) -> list[dict[str, Any]]:
    """[{id, path, size, base}] for every file the trace touches or lists."""
    df = trace.df
    touched = (
        df.group_by("file")
        .agg((pl.col("offset") + pl.col("size").cast(pl.UInt64)).max().alias("end"))
        .sort("file")
    )
    ends = dict(zip(touched["file"].to_list(), touched["end"].to_list(), strict=True))
    return layout_from_ends(ends, trace.meta.files)


def layout_from_ends(ends: dict[int, int], files: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The layout given the furthest byte touched in each file and the file table."""
    known = {int(f["id"]): f for f in files}
    layout, base = [], 0
    for fid in sorted(set(ends) | set(known)):
        info = known.get(fid, {})
        size = max(int(info.get("size") or 0), int(ends.get(fid) or 0))
        layout.append(
            {"id": fid, "path": info.get("path", f"file {fid}"), "size": size, "base": base}
        )
        base += -(-max(size, 1) // ALIGN) * ALIGN
    return layout


def on_virtual_device(trace: Trace) -> tuple[Trace, list[dict[str, Any]] | None]:
    """The trace with file offsets moved onto the virtual device (unchanged when it is not
    file-level), and the layout used."""
    if "file" not in trace.columns:
        return trace, None
    layout = file_layout(trace)
    bases = pl.DataFrame(
        {"file": [f["id"] for f in layout], "__base": [f["base"] for f in layout]},
        schema={"file": pl.UInt32, "__base": pl.UInt64},
    )
    df = (
        trace.df.join(bases, on="file", how="left", maintain_order="left")
        .with_columns((pl.col("offset") + pl.col("__base")).alias("offset"))
        .drop("__base", "file")
    )
    last = layout[-1] if layout else {"base": 0, "size": 0}
    capacity = max(1, int(last["base"]) + int(last["size"]))
    return Trace(df, replace(trace.meta, capacity=capacity, files=[])), layout
