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


def metrics(report: dict, prefix: str) -> dict[str, dict]:
    return {k: v for k, v in report["metrics"].items() if k.startswith(prefix)}


def issue_bar_misses(trace: iotwin.Trace, report: dict, uniform: dict) -> list[str]:
    """Issue #3's fidelity bars for a twin of `trace` (`report`: validate(trace, twin);
    `uniform`: the uniform baseline's): the bars it misses, none when it meets them all."""
    m = report["metrics"]
    bars = {
        "read fraction": m["read_fraction"]["deviation"] <= 0.01,
        "sequential fraction": m["sequential_fraction"]["deviation"] <= 0.02,
        "mean size": m["mean_size_bytes"]["deviation"] <= 0.02,
        "mean inter-arrival": m["mean_interarrival_s"]["deviation"] <= 0.02,
        "level-1 locality": all(
            v["deviation"] <= 0.01 for v in metrics(report, "locality_l1").values()
        ),
        "thread weights": len(metrics(report, "weight[")) == trace.df["stream"].n_unique()
        and all(v["deviation"] <= 0.0005 for v in metrics(report, "weight[").values()),
        "miss ratios": all(v["deviation"] <= 0.05 for v in metrics(report, "miss_ratio").values()),
    }
    for kind in ("locality_l1", "miss_ratio"):
        twin = sum(v["deviation"] for v in metrics(report, kind).values())
        base = sum(v["deviation"] for v in metrics(uniform, kind).values())
        bars[f"{kind} closer than the uniform baseline"] = twin < base
    return [name for name, met in bars.items() if not met]


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
