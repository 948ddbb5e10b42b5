"""What the benchmark tools can express of a model, measured on the model's own output.

Seed 004 clones an application into one read job and one write job per file descriptor,
each with its request rate, request-size split, randomness and think time. Those features
are measured here on a synthetic trace of the model at its original length (`Model.synth`
reproduces operations, sizes, kinds and locality exactly at that length), split by unit (a
file for file-level models, a stream for block-level ones) and by direction. Streams or
files beyond the busiest `max_units` are pooled into one unit, so a model of thousands of
volumes still gives a job file a tool can run.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import polars as pl

from ..model import Model

READ, WRITE, SYNC = 0, 1, 2
OP_NAMES = {READ: "read", WRITE: "write"}
MAX_SIZES = 16  # request sizes kept per job; rarer sizes join the nearest kept one
MAX_SYNTH = 2_000_000  # requests synthesized to measure the features
MAX_ZONES = 64  # spatial zones per job (fio accepts up to 256 split entries)
FILE_ZONES = 16  # zones inside a file of a file-level model


@dataclass
class Job:
    """One direction of one unit: what seed 004 turns into one benchmark job."""

    op: int
    requests: int
    iops: float | None  # None when the model is untimed
    sizes: dict[int, int]  # request size -> count (at most MAX_SIZES sizes)
    random: float  # share of requests that do not continue the job's previous request
    think_ns: float | None  # mean gap between the job's consecutive requests
    zones: list[tuple[float, float, float]]  # (start, end) as fractions of the unit, share
    fsyncs: int = 0  # syncs on the unit (write jobs)

    @property
    def mean_size(self) -> float:
        total = sum(self.sizes.values())
        return sum(s * c for s, c in self.sizes.items()) / total if total else 0.0

    @property
    def writes_per_fsync(self) -> int:
        return max(1, round(self.requests / self.fsyncs)) if self.fsyncs else 0


@dataclass
class Unit:
    """A file (file-level models) or a stream (block-level models) and its jobs."""

    name: str  # the traced path or the stream's name
    target: str  # the target file's name, relative to the export directory
    size: int  # bytes the unit spans (the file's size, or the target's for streams)
    requests: int
    jobs: list[Job] = field(default_factory=list)


@dataclass
class Workload:
    """The model as jobs, with what the jobs cannot carry."""

    units: list[Unit]
    file_level: bool
    timed: bool
    span_s: float
    requests: int
    capacity: int
    pooled: int  # streams or files pooled into the last unit (0: none)


def workload(model: Model, seed: int = 0, max_units: int = 64, size: int | None = None) -> Workload:
    """The model's jobs, measured on its synthetic trace of the original length."""
    doc = model.doc
    # the original length reproduces the fit exactly; past MAX_SYNTH, a sample keeps every
    # stream's share and rates are scaled back up. The sample shortens every fluctuation
    # window alike at the same rate, not a prefix of the run: a prefix holds the first
    # windows' mix only (cloudPhysics' first 20,000 requests are 35% reads, its whole run 41%)
    total = int(doc["requests"])
    sample = min(total, MAX_SYNTH)
    trace = model.synth(requests=sample, compress=total / sample, seed=seed)
    per_request = total / max(1, trace.df.height)
    df = trace.df.select("ts_ns", "stream", "op", "offset", "size")
    files = doc.get("files")
    span_ns = int(doc.get("span_ns", 0))
    timed = bool(doc.get("source", {}).get("timed", True)) and span_ns > 0
    capacity = int(doc["capacity"])
    if files:
        df, names, starts, extents = _by_file(df, files)
    else:
        df, names, starts, extents = _by_stream(df, model)
    df, names, pooled = _pool(df, names, max_units)
    zones = FILE_ZONES if files else _leaf_zones(int(doc["levels"]), int(doc["fanout"]))
    units = []
    targets = _target_names(names, bool(files))
    for uid, name in enumerate(names):
        rows = df.filter(pl.col("unit") == uid)
        base, extent = starts.get(name, 0), extents.get(name, capacity)
        if name == POOLED:
            base, extent = 0, max(extents.values(), default=capacity)
        if files:  # requests drawn inside a leaf may run past the file's recorded end
            ends = rows.select((pl.col("offset") + pl.col("size")).max()).item() or 0
            unit_size = max(int(extent), int(ends) - base)
        else:
            unit_size = int(size or capacity)
        unit = Unit(name=name, target=targets[uid], size=unit_size, requests=rows.height)
        syncs = rows.filter(pl.col("op") == SYNC).height
        for op in (READ, WRITE):
            part = rows.filter(pl.col("op") == op).sort("ts_ns", maintain_order=True)
            if part.height:
                job = _job(part, op, span_ns if timed else 0, base, extent, zones)
                if job.iops is not None:
                    job.iops *= per_request
                    job.think_ns = (job.think_ns or 0.0) / per_request
                job.fsyncs = syncs if op == WRITE else 0
                if name == POOLED:  # pooled units have no common address space
                    job.zones = []
                unit.jobs.append(job)
        if unit.jobs:
            units.append(unit)
    return Workload(
        units=units,
        file_level=bool(files),
        timed=timed,
        span_s=span_ns / 1e9,
        requests=total,
        capacity=capacity,
        pooled=pooled,
    )


POOLED = "(other units)"


def _by_file(
    df: pl.DataFrame, files: list[dict[str, Any]]
) -> tuple[pl.DataFrame, list[str], dict[str, int], dict[str, int]]:
    """Requests mapped back to their files through the model's layout."""
    layout = sorted(files, key=lambda f: int(f["base"]))
    bases = np.array([int(f["base"]) for f in layout], dtype=np.uint64)
    idx = np.searchsorted(bases, df["offset"].to_numpy(), side="right") - 1
    idx = np.clip(idx, 0, len(layout) - 1)
    names = [str(f["path"]) for f in layout]
    df = df.with_columns(pl.Series("unit", idx.astype(np.int64)))
    starts = {str(f["path"]): int(f["base"]) for f in layout}
    extents = {str(f["path"]): max(1, int(f["size"])) for f in layout}
    return df, names, starts, extents


def _by_stream(
    df: pl.DataFrame, model: Model
) -> tuple[pl.DataFrame, list[str], dict[str, int], dict[str, int]]:
    """Requests by stream; every stream spans the whole target."""
    ids = sorted({int(s["id"]) for s in model.streams})
    pos = {sid: i for i, sid in enumerate(ids)}
    by_id = {int(s["id"]): str(s.get("name", f"stream {s['id']}")) for s in model.streams}
    names = [by_id[sid] for sid in ids]
    unit = np.array([pos.get(int(s), 0) for s in df["stream"].to_list()], dtype=np.int64)
    df = df.with_columns(pl.Series("unit", unit))
    capacity = int(model.doc["capacity"])
    return df, names, dict.fromkeys(names, 0), dict.fromkeys(names, capacity)


def _pool(
    df: pl.DataFrame, names: list[str], max_units: int
) -> tuple[pl.DataFrame, list[str], int]:
    """Keeps the busiest units (by requests) and pools the rest into one."""
    counts = df.group_by("unit").len().sort(["len", "unit"], descending=[True, False])
    busy = counts["unit"].to_list()
    if len(busy) <= max_units:
        keep = sorted(busy)
        pooled: list[int] = []
    else:
        keep = sorted(busy[: max_units - 1])
        pooled = busy[max_units - 1 :]
    remap = {old: new for new, old in enumerate(keep)}
    new_names = [names[u] for u in keep]
    if pooled:
        remap.update(dict.fromkeys(pooled, len(keep)))
        new_names.append(POOLED)
    mapping = pl.DataFrame(
        {"unit": list(remap), "new": list(remap.values())},
        schema={"unit": pl.Int64, "new": pl.Int64},
    )
    df = df.join(mapping, on="unit", how="inner", maintain_order="left")
    return df.drop("unit").rename({"new": "unit"}), new_names, len(pooled)


def _target_names(names: list[str], file_level: bool) -> list[str]:
    """Files in the export directory: the replica names `iotwin run` uses for traced files,
    one shared target for a block-level model's streams."""
    if not file_level:
        return ["iotwin.target"] * len(names)
    from ..engine import replica_names

    return replica_names(names)


def _leaf_zones(levels: int, fanout: int) -> int:
    """Zones on the model's leaves (offsets are uniform inside a leaf, so finer zones say
    nothing more), or on the deepest tree level with at most MAX_ZONES nodes."""
    k = levels
    while k > 1 and fanout**k > MAX_ZONES:
        k -= 1
    return min(fanout**k, MAX_ZONES)


def _job(part: pl.DataFrame, op: int, span_ns: int, base: int, extent: int, zones: int) -> Job:
    off = part["offset"].to_numpy().astype(np.int64) - base
    size = part["size"].to_numpy().astype(np.int64)
    seq = np.zeros(len(off), dtype=bool)
    seq[1:] = off[1:] == off[:-1] + size[:-1]
    ts = part["ts_ns"].to_numpy()
    n = len(off)
    think = float(ts[-1] - ts[0]) / (n - 1) if span_ns and n > 1 else None
    return Job(
        op=op,
        requests=n,
        iops=n / (span_ns / 1e9) if span_ns else None,
        sizes=_fold_sizes(size),
        random=float(1.0 - seq.mean()),
        think_ns=think,
        zones=_zones(off, extent, zones),
    )


def _fold_sizes(size: np.ndarray) -> dict[int, int]:
    """The MAX_SIZES most frequent sizes; each rarer size counts for the nearest kept one
    (by ratio), so the split still sums to every request."""
    values, counts = np.unique(size, return_counts=True)
    order = np.lexsort((values, -counts))
    kept = np.sort(values[order[:MAX_SIZES]])
    out = {int(v): 0 for v in kept}
    logs = np.log(np.maximum(kept, 1))
    for v, c in zip(values.tolist(), counts.tolist(), strict=True):
        nearest = int(kept[np.argmin(np.abs(logs - np.log(max(v, 1))))])
        out[nearest] += int(c)
    return {k: v for k, v in out.items() if v}


def _zones(off: np.ndarray, extent: int, n: int) -> list[tuple[float, float, float]]:
    """Shares of requests over n equal ranges of the unit, neighbours with the same share
    merged; empty when the accesses are uniform."""
    bins = np.clip((off.astype(np.float64) * n) // max(1, extent), 0, n - 1).astype(np.int64)
    counts = np.bincount(bins, minlength=n)
    shares = counts / max(1, counts.sum())
    zones: list[tuple[float, float, float]] = []
    for i, share in enumerate(shares.tolist()):
        lo, hi = i / n, (i + 1) / n
        if zones and abs(zones[-1][2] / (zones[-1][1] - zones[-1][0]) - share * n) < 1e-12:
            zones[-1] = (zones[-1][0], hi, zones[-1][2] + share)
        else:
            zones.append((lo, hi, share))
    return [] if len(zones) == 1 else zones


def one_line(text: str) -> str:
    """Text safe inside a one-line comment of any of the tools (a captured command's source
    can hold newlines; XML comments cannot hold '--')."""
    flat = " ".join(str(text).split())
    while "--" in flat:
        flat = flat.replace("--", "-")
    return flat


def percentages(weights: list[float], total: int = 100) -> list[int]:
    """Whole percentages summing to exactly `total` (largest remainder)."""
    s = sum(weights)
    if s <= 0:
        return [0] * len(weights)
    raw = [w * total / s for w in weights]
    out = [int(r) for r in raw]
    order = sorted(range(len(raw)), key=lambda i: (out[i] - raw[i], i))
    for i in order[: total - sum(out)]:
        out[i] += 1
    return out
