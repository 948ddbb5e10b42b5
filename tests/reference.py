"""Straightforward reference computations the tests check the core's passes against."""

from __future__ import annotations

import polars as pl

import iotwin
from iotwin.formats.base import CANONICAL_SCHEMA
from iotwin.validate import address_space

# The shared real traces and how each is split into streams (the issues' fidelity bars).
SHARED_STREAMS = {
    "cloudPhysicsIO.vscsi": None,
    "msr_hm0_excerpt.csv": None,
    "tencent_cbs_excerpt.csv.bz2": "volume",
    "tpcc_small.disksim": "device",
}


def canonical(rows: list[tuple[int, int, int, int]], ts: list[int]) -> pl.DataFrame:
    """A canonical frame from (stream, op, offset, size) rows and their times."""
    data = {
        "ts_ns": ts,
        "stream": [r[0] for r in rows],
        "op": [r[1] for r in rows],
        "offset": [r[2] for r in rows],
        "size": [r[3] for r in rows],
    }
    return pl.DataFrame(data, schema=CANONICAL_SCHEMA)


def reuse_by_op(trace: iotwin.Trace) -> dict[str, float]:
    """Shares of read and of write 4 KiB block accesses to a block accessed before in the
    same address space, one access at a time (the reference for validate's pass)."""
    seen: set[tuple[int, int]] = set()
    counts = {0: [0, 0], 1: [0, 0]}
    df = trace.df
    columns = (df[c].to_list() for c in ("op", "offset", "size"))
    rows = zip(address_space(trace).tolist(), *columns, strict=True)
    for space, op, offset, size in rows:
        for block in range(offset // 4096, (offset + max(size, 1) - 1) // 4096 + 1):
            if op in counts:
                counts[op][0] += 1
                counts[op][1] += (space, block) in seen
            seen.add((space, block))
    return {
        name: c[1] / c[0] for name, c in (("read_reuse", counts[0]), ("write_reuse", counts[1]))
    }
