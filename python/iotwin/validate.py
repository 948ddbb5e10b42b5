"""Fidelity of a synthetic trace against its original (seed 000, section IV.D; Table IV).

Every metric has the original's value, the synthetic's, a deviation and a tolerance:
absolute deviation for fractions (read, sequential, locality shares, size shares, thread
weights, miss ratios), relative deviation for magnitudes (mean size, mean inter-arrival
time, IOPS, burstiness), as design.md defines. Beyond the paper: LRU miss ratios at cache
sizes relative to the original's footprint, block re-use by operation, the distance
between jump-distance distributions, burstiness (index of dispersion of request counts in
1 s and 10 s windows) and the correlation of per-window rates (the fluctuation shape, seed
000 Figure 5).
"""

from __future__ import annotations

import math
import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np
import polars as pl
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from . import _core
from .characterize import characterize
from .errors import IotwinError
from .formats.base import OP_READ, OP_WRITE
from .layout import on_virtual_device
from .trace import SEPARATE_SPACES, Trace

CACHE_FRACTIONS = (0.01, 0.02, 0.05, 0.10, 0.20, 0.50)
BLOCK = 4096
TOP_SIZES = 5
PER_STREAM_SHOWN = 10

# Default tolerances per metric family: the bars where it sets them.
TOLERANCES: dict[str, float] = {
    "read_fraction": 0.01,
    "sequential_fraction": 0.02,
    "long_runs": 0.02,
    "mean_size": 0.02,
    "size_share": 0.01,
    "mean_interarrival": 0.02,
    "iops": 0.02,
    "locality_l1": 0.01,
    "locality_l2": 0.02,
    "weight": 0.0005,
    "miss_ratio": 0.05,
    "reuse": 0.05,
    "jump_distance": 0.10,
    "op_jump_distance": 0.10,
    "op_switches": 0.05,
    "offset_phase": 0.05,
    "burstiness": 0.50,
    "fluctuation_correlation": 0.20,
}


@dataclass
class Metric:
    name: str
    family: str
    original: float | None
    synthetic: float | None
    kind: str  # "absolute", "relative" or "distance"
    tolerance: float

    @property
    def deviation(self) -> float | None:
        if self.original is None or self.synthetic is None:
            return None
        if self.kind == "relative":
            if self.original == 0:
                return 0.0 if self.synthetic == 0 else math.inf
            return abs(self.synthetic - self.original) / abs(self.original)
        if self.kind == "distance":
            return abs(self.synthetic)
        return abs(self.synthetic - self.original)

    @property
    def passed(self) -> bool | None:
        d = self.deviation
        return None if d is None else d <= self.tolerance + 1e-12

    def as_dict(self) -> dict[str, Any]:
        return {
            "original": self.original,
            "synthetic": self.synthetic,
            "deviation": self.deviation,
            "kind": self.kind,
            "tolerance": self.tolerance,
            "pass": self.passed,
        }


def validate(
    original: Trace,
    synthetic: Trace,
    tolerances: dict[str, float] | None = None,
    per_stream: bool = True,
) -> dict[str, Any]:
    """The fidelity report: {"metrics": {name: {...}}, "streams": {...}, "passed": bool}."""
    tol = {**TOLERANCES, **(tolerances or {})}
    unknown = set(tol) - set(TOLERANCES)
    if unknown:
        raise IotwinError(f"unknown tolerance name(s): {', '.join(sorted(unknown))}")
    if original.df.height == 0 or synthetic.df.height == 0:
        raise IotwinError("cannot validate an empty trace")
    # file-level traces compare on the virtual device their model uses
    original, _ = on_virtual_device(original)
    synthetic, _ = on_virtual_device(synthetic)
    metrics = trace_metrics(original, synthetic, tol)
    streams: dict[str, Any] = {}
    if per_stream:
        streams = stream_metrics(original, synthetic, tol)
    report = {
        "kind": "validation",  # how `iotwin report` recognises the JSON
        "metrics": {m.name: m.as_dict() for m in metrics},
        "streams": streams,
        "tolerances": tol,
    }
    failures = [m.name for m in metrics if m.passed is False]
    report["failed"] = failures
    report["passed"] = not failures
    report["score"] = fidelity_score(metrics)
    return report


# Thread weights are exact by construction; run lengths are no state of the model at any
# level (a walk's runs are geometric), nor is the 4 KiB phase (one per stream), so none can
# tell levels apart: in the score they would add only the noise of one twin's draws (MSR's
# 1,000 requests: the phase alone moved its level sweep's choice from 2 to 3 levels).
# The walk carries no operation either: its switches between reads and writes follow from how
# its leaves' transitions mix them, which no added level sets.
UNSCORED = ("weight", "long_runs", "offset_phase", "op_jump_distance", "op_switches")


def fidelity_score(metrics: list[Metric]) -> float:
    """1 minus the mean deviation-to-tolerance ratio (capped at 1) over the metrics: 1 is a
    perfect twin, 0 one that misses every bar. Used to choose the model's levels."""
    ratios = [
        min(1.0, m.deviation / m.tolerance)
        for m in metrics
        if m.deviation is not None and m.tolerance > 0 and m.family not in UNSCORED
    ]
    return 1.0 - (sum(ratios) / len(ratios) if ratios else 0.0)


def trace_metrics(a: Trace, b: Trace, tol: dict[str, float]) -> list[Metric]:
    ca, cb = characterize(a, levels=1), characterize(b, levels=1)
    la, lb = characterize(a, levels=2), characterize(b, levels=2)
    out = [
        Metric(
            "read_fraction",
            "read_fraction",
            ca["read_fraction"],
            cb["read_fraction"],
            "absolute",
            tol["read_fraction"],
        ),
        Metric(
            "sequential_fraction",
            "sequential_fraction",
            ca["sequential_fraction"],
            cb["sequential_fraction"],
            "absolute",
            tol["sequential_fraction"],
        ),
        Metric(
            "long_run_share",
            "long_runs",
            long_run_share(a),
            long_run_share(b),
            "absolute",
            tol["long_runs"],
        ),
        Metric(
            "mean_size_bytes",
            "mean_size",
            ca["mean_size_bytes"],
            cb["mean_size_bytes"],
            "relative",
            tol["mean_size"],
        ),
    ]
    out += size_shares(a, b, tol["size_share"])
    if a.meta.timed:
        out += [
            Metric(
                "mean_interarrival_s",
                "mean_interarrival",
                ca["mean_interarrival_s"],
                cb["mean_interarrival_s"],
                "relative",
                tol["mean_interarrival"],
            ),
            Metric("iops", "iops", ca["iops"], cb["iops"], "relative", tol["iops"]),
        ]
    for level, (x, y) in ((1, (ca, cb)), (2, (la, lb))):
        for i, (p, q) in enumerate(zip(x["spatial_locality"], y["spatial_locality"], strict=True)):
            family = f"locality_l{level}"
            out.append(Metric(f"locality_l{level}[{i}]", family, p, q, "absolute", tol[family]))
    out += weights(a, b, tol["weight"])
    out += cache_metrics(a, b, tol["miss_ratio"], tol["reuse"])
    out.append(
        Metric(
            "jump_distance_tvd",
            "jump_distance",
            0.0,
            jump_tvd(ca, cb),
            "distance",
            tol["jump_distance"],
        )
    )
    out += op_jump_metrics(a, b, tol["op_jump_distance"])
    out.append(
        Metric(
            "op_switch_share",
            "op_switches",
            op_switch_share(a),
            op_switch_share(b),
            "absolute",
            tol["op_switches"],
        )
    )
    out.append(
        Metric(
            "offset_phase_tvd",
            "offset_phase",
            0.0,
            phase_tvd(a, b),
            "distance",
            tol["offset_phase"],
        )
    )
    if a.meta.timed:
        for seconds in (1, 10):
            out.append(
                Metric(
                    f"burstiness_{seconds}s",
                    "burstiness",
                    dispersion(a, seconds),
                    dispersion(b, seconds),
                    "relative",
                    tol["burstiness"],
                )
            )
        out.append(
            Metric(
                "fluctuation_correlation",
                "fluctuation_correlation",
                1.0,
                window_correlation(a, b),
                "relative",
                tol["fluctuation_correlation"],
            )
        )
    return out


def stream_sorted(df: pl.DataFrame, *columns: str) -> tuple[np.ndarray, ...]:
    """The requests' streams and the named columns, stream after stream, each in time order."""
    stream = df["stream"].to_numpy().astype(np.int64)
    order = np.argsort(stream, kind="stable")
    return stream[order], *(df[c].to_numpy()[order] for c in columns)


def by_stream(df: pl.DataFrame) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The requests' streams, offsets and ends, stream after stream, each in time order."""
    stream, offset, size = stream_sorted(df, "offset", "size")
    offset = offset.astype(np.int64)
    return stream, offset, offset + size.astype(np.int64)


LONG_RUN = 8  # requests: seed 003 contrasts runs of 4 with runs of 256 for prefetching


def long_run_share(t: Trace) -> float:
    """Share of the requests that sit in a long sequential run: LONG_RUN or more requests of
    one stream, each starting where the previous one ended (seed 003). The sequential
    fraction alone cannot tell a few long runs, which read-ahead serves, from many short
    ones."""
    stream, offset, end = by_stream(t.df)
    continues = (stream[1:] == stream[:-1]) & (offset[1:] == end[:-1])
    starts = np.flatnonzero(np.r_[True, ~continues])
    lengths = np.diff(np.r_[starts, len(stream)])
    return float(lengths[lengths >= LONG_RUN].sum() / max(1, len(stream)))


def size_shares(a: Trace, b: Trace, tolerance: float) -> list[Metric]:
    """Shares of the original's most common request sizes, in both traces."""

    def shares(t: Trace) -> dict[int, float]:
        vc = t.df.get_column("size").value_counts(normalize=True, name="share")
        return dict(zip(vc["size"].to_list(), vc["share"].to_list(), strict=True))

    sa, sb = shares(a), shares(b)
    top = sorted(sa, key=lambda s: (-sa[s], s))[:TOP_SIZES]
    return [
        Metric(f"size_share[{s}]", "size_share", sa[s], sb.get(s, 0.0), "absolute", tolerance)
        for s in top
    ]


def weights(a: Trace, b: Trace, tolerance: float) -> list[Metric]:
    """Thread (stream) weights; streams missing from one side weigh 0 there."""

    def w(t: Trace) -> dict[int, float]:
        vc = t.df.get_column("stream").value_counts(normalize=True, name="w")
        return dict(zip(vc["stream"].to_list(), vc["w"].to_list(), strict=True))

    wa, wb = w(a), w(b)
    return [
        Metric(
            f"weight[{a.meta.stream_name(s)}]",
            "weight",
            wa.get(s, 0.0),
            wb.get(s, 0.0),
            "absolute",
            tolerance,
        )
        for s in sorted(set(wa) | set(wb))
    ]


def address_space(t: Trace) -> np.ndarray:
    """Which requests share a cache's address space: one per volume or device for block
    traces of several devices, one per file for file-level traces, else one."""
    df = t.df
    if t.meta.stream_by in SEPARATE_SPACES:
        key = df.get_column("stream").cast(pl.UInt64)
    else:
        key = pl.Series([0] * df.height, dtype=pl.UInt64)
    if "file" in df.columns:
        key = key * (1 << 32) + df.get_column("file").cast(pl.UInt64)
    return np.ascontiguousarray(key.to_numpy(), dtype=np.uint64)


class Curve(NamedTuple):
    """One pass over a trace's 4 KiB block accesses (`_core.lru_miss_ratios`)."""

    accesses: int
    distinct: int  # the footprint in blocks
    miss_ratios: list[float]  # LRU, at each asked size in blocks
    # (read block accesses, of them to blocks accessed before, write block accesses, of them
    # again)
    by_op: tuple[int, int, int, int]


def lru(t: Trace, cache_blocks: list[int]) -> Curve:
    """The trace's block accesses, footprint, LRU miss ratios and re-use by operation."""
    return Curve(
        *_core.lru_miss_ratios(
            address_space(t),
            t.numpy("offset", np.uint64),
            t.numpy("size", np.uint32),
            t.numpy("op", np.uint8),
            BLOCK,
            cache_blocks,
        )
    )


def lru_each(traces: list[Trace], cache_blocks: list[int]) -> list[Curve]:
    """`lru` of several traces at once: each pass is one core's work without the GIL (two
    10M-request traces: 6.9 s instead of 13.0 s on two cores)."""
    if len(traces) < 2:
        return [lru(t, cache_blocks) for t in traces]
    with ThreadPoolExecutor(max_workers=min(len(traces), os.cpu_count() or 1)) as pool:
        return list(pool.map(lambda t: lru(t, cache_blocks), traces))


def cache_sizes(original: Trace) -> list[int]:
    """Cache sizes in 4 KiB blocks: the listed fractions of the original's footprint."""
    footprint = lru(original, []).distinct  # the footprint alone: no stack distances
    return [max(1, math.ceil(f * footprint)) for f in CACHE_FRACTIONS]


def cache_metrics(
    a: Trace, b: Trace, miss_tolerance: float, reuse_tolerance: float
) -> list[Metric]:
    """LRU miss ratios at the listed shares of the original's footprint, and block re-use
    by operation (one pass per trace): the share of read block accesses, and of write block
    accesses, to a block accessed before. A write-back cache turns re-read data into speedup
    and absorbs rewrites, so two traces with one miss-ratio curve but another split answer
    a caching study differently (Tencent's twin: docs/model.md)."""
    sizes = cache_sizes(a)
    ca, cb = lru_each([a, b], sizes)
    out = [
        Metric(f"miss_ratio@{f:.0%}", "miss_ratio", x, y, "absolute", miss_tolerance)
        for f, x, y in zip(CACHE_FRACTIONS, ca.miss_ratios, cb.miss_ratios, strict=True)
    ]
    ua, ub = reuse_shares(ca), reuse_shares(cb)
    for op in ("read", "write"):
        out.append(Metric(f"{op}_reuse", "reuse", ua[op], ub[op], "absolute", reuse_tolerance))
    return out


def reuse_shares(curve: Curve) -> dict[str, float | None]:
    """Of a pass's read and of its write block accesses, the shares to a block accessed
    before (None where the trace has no such operation)."""
    reads, reread, writes, rewritten = curve.by_op
    return {
        "read": reread / reads if reads else None,
        "write": rewritten / writes if writes else None,
    }


def jump_tvd(ca: dict[str, Any], cb: dict[str, Any]) -> float:
    """Total variation distance between the signed-log2 jump-distance histograms."""

    def dist(c: dict[str, Any]) -> dict[int, float]:
        total = sum(h["count"] for h in c["jump_histogram"]) or 1
        return {h["bucket"]: h["count"] / total for h in c["jump_histogram"]}

    return tvd(dist(ca), dist(cb))


def tvd(da: dict[int, float], db: dict[int, float]) -> float:
    """Total variation distance between two distributions given as {bucket: share}."""
    return 0.5 * sum(abs(da.get(k, 0.0) - db.get(k, 0.0)) for k in set(da) | set(db))


def op_jump_shares(t: Trace, op: int) -> dict[int, float] | None:
    """Shares of the jumps between consecutive requests of one stream and operation (the
    offset minus the end of that stream's previous request of the operation) by signed log2
    bucket, as `jump_histogram` buckets them; None without two such requests."""
    stream, offset, end = by_stream(t.df.filter(pl.col("op") == op))
    jumps = (offset[1:] - end[:-1])[stream[1:] == stream[:-1]]
    if len(jumps) == 0:
        return None
    # bit length of |jump| (frexp's exponent: exact below 2^53), signed like the jump
    buckets = np.sign(jumps) * np.frexp(np.abs(jumps).astype(np.float64))[1]
    keys, counts = np.unique(buckets, return_counts=True)
    return dict(zip(keys.tolist(), (counts / counts.sum()).tolist(), strict=True))


def op_jump_metrics(a: Trace, b: Trace, tolerance: float) -> list[Metric]:
    """The jump-distance distance of each operation's requests among themselves: where a
    stream's reads go from its previous read, and its writes from its previous write. The
    whole trace's jumps can match while these do not: cloudPhysics interleaves a read run
    and a write run, and a write-back cache leaves the disk the reads alone."""
    out = []
    for op, name in ((OP_READ, "read"), (OP_WRITE, "write")):
        sa, sb = op_jump_shares(a, op), op_jump_shares(b, op)
        if sa is None or sb is None:
            continue
        distance = tvd(sa, sb)
        out.append(
            Metric(f"{name}_jump_tvd", "op_jump_distance", 0.0, distance, "distance", tolerance)
        )
    return out


def op_switch_share(t: Trace) -> float | None:
    """Of the pairs of consecutive requests of one stream, the share whose operations differ
    (a read after a write, a write after a read); None without such a pair. The read fraction
    can match while this does not: msr_hm0 reads and writes in bursts of one operation (1.7%
    of its pairs switch), so a write-back cache leaves its read bursts no writes to wait
    behind."""
    stream, op = stream_sorted(t.df, "op")
    pairs = stream[1:] == stream[:-1]
    if not pairs.any():
        return None
    return float(((op[1:] != op[:-1]) & pairs).sum() / pairs.sum())


PHASE_BYTES = 512  # the steps of a 4 KiB block at which a request may start


def phase_shares(t: Trace) -> np.ndarray:
    """Shares of the requests by where they start inside their 4 KiB block, in 512-byte steps
    (offsets between steps count with the step below)."""
    offsets = t.df["offset"].to_numpy()
    counts = np.bincount((offsets % BLOCK) // PHASE_BYTES, minlength=BLOCK // PHASE_BYTES)
    return counts / max(len(offsets), 1)


def phase_tvd(a: Trace, b: Trace) -> float:
    """Total variation distance between the 4 KiB phases of two traces' offsets: a request
    that starts off a block boundary covers one block more than an aligned one of its size,
    which changes what a cache holds and what an SSD reads and rewrites."""
    return float(0.5 * np.abs(phase_shares(a) - phase_shares(b)).sum())


def window_counts(t: Trace, window_ns: int) -> np.ndarray:
    ts = t.df.get_column("ts_ns").to_numpy()
    if len(ts) == 0:
        return np.zeros(0)
    return np.bincount((ts - ts[0]) // max(1, window_ns))


def dispersion(t: Trace, seconds: float) -> float | None:
    """Index of dispersion (variance / mean) of request counts per window."""
    counts = window_counts(t, int(seconds * 1e9))
    if len(counts) < 2 or counts.mean() == 0:
        return None
    return float(counts.var() / counts.mean())


def window_correlation(a: Trace, b: Trace, windows: int = 10) -> float | None:
    """Pearson correlation of per-window rates, each trace cut into the same number of
    windows over its own span (so a time-compressed twin compares by shape)."""

    def rates(t: Trace) -> np.ndarray:
        ts = t.df.get_column("ts_ns").to_numpy()
        span = int(ts[-1] - ts[0]) + 1
        return np.bincount(((ts - ts[0]) * windows) // span, minlength=windows)[:windows]

    x, y = rates(a).astype(float), rates(b).astype(float)
    if x.std() == 0 or y.std() == 0:
        return 1.0 if x.std() == y.std() else 0.0
    return float(np.corrcoef(x, y)[0, 1])


def stream_metrics(a: Trace, b: Trace, tol: dict[str, float]) -> dict[str, Any]:
    """Per-stream read fraction, sequential fraction and mean size (the paper's per-thread
    validation), for the heaviest streams."""
    ca, cb = characterize(a, levels=1), characterize(b, levels=1)
    by_id = {s["stream"]: s for s in cb["streams"]}
    heaviest = sorted(ca["streams"], key=lambda s: -s["weight"])[:PER_STREAM_SHOWN]
    out: dict[str, Any] = {}
    for s in heaviest:
        t = by_id.get(s["stream"])
        if t is None:
            continue
        ms = [
            Metric(
                "read_fraction",
                "read_fraction",
                s["read_fraction"],
                t["read_fraction"],
                "absolute",
                tol["read_fraction"],
            ),
            Metric(
                "sequential_fraction",
                "sequential_fraction",
                s["sequential_fraction"],
                t["sequential_fraction"],
                "absolute",
                tol["sequential_fraction"],
            ),
            Metric(
                "mean_size_bytes",
                "mean_size",
                s["mean_size_bytes"],
                t["mean_size_bytes"],
                "relative",
                tol["mean_size"],
            ),
        ]
        out[s["name"]] = {m.name: m.as_dict() for m in ms}
    return out


def parse_tolerances(items: list[str] | None) -> dict[str, float]:
    """--tolerance T (scales every default) or NAME=VALUE (one family)."""
    out: dict[str, float] = {}
    for item in items or []:
        name, sep, value = item.partition("=")
        try:
            if sep:
                out[name.strip()] = float(value)
            else:
                scale = float(name)
                out.update({k: v * scale for k, v in TOLERANCES.items() if k not in out})
        except ValueError:
            raise IotwinError(f"--tolerance '{item}': expected a number or NAME=NUMBER") from None
    return out


def _fmt(v: float | None) -> str:
    if v is None:
        return "n/a"
    if v == math.inf:
        return "inf"
    return f"{v:.4g}"


def render(report: dict[str, Any], console: Console, max_weights: int = 10) -> None:
    table = Table(title="Validation: original vs synthetic (seed 000 Table IV, extended)")
    for col in ("metric", "original", "synthetic", "deviation", "tolerance", ""):
        table.add_column(col, justify="left" if col == "metric" else "right")
    items = list(report["metrics"].items())
    weight_rows = [it for it in items if it[0].startswith("weight[")]
    worst = sorted(weight_rows, key=lambda it: -(it[1]["deviation"] or 0))[:max_weights]
    shown = [it for it in items if not it[0].startswith("weight[")] + worst
    for name, m in shown:
        mark = {True: "[green]pass[/green]", False: "[red]FAIL[/red]", None: "n/a"}[m["pass"]]
        dev = m["deviation"]
        dev_s = (
            "n/a" if dev is None else (f"{dev:.2%}" if m["kind"] == "relative" else f"{dev:.4g}")
        )
        tol_s = f"{m['tolerance']:.2%}" if m["kind"] == "relative" else f"{m['tolerance']:.4g}"
        table.add_row(escape(name), _fmt(m["original"]), _fmt(m["synthetic"]), dev_s, tol_s, mark)
    console.print(table)
    if len(weight_rows) > len(worst):
        console.print(f"({len(weight_rows) - len(worst)} more stream weights pass; see --json)")
    if report["streams"]:
        st = Table(title="Per stream (heaviest)")
        for col in ("stream", "read fraction", "sequential fraction", "mean size (B)"):
            st.add_column(col)
        for name, ms in report["streams"].items():
            cells = [
                f"{_fmt(ms[k]['original'])} / {_fmt(ms[k]['synthetic'])}"
                + ("" if ms[k]["pass"] is not False else " [red]FAIL[/red]")
                for k in ("read_fraction", "sequential_fraction", "mean_size_bytes")
            ]
            st.add_row(escape(name), *cells)
        console.print(st)
    verdict = (
        "[green]all metrics within tolerance[/green]"
        if report["passed"]
        else (
            f"[red]{len(report['failed'])} metrics out of tolerance[/red]: "
            + ", ".join(report["failed"][:8])
        )
    )
    console.print(f"fidelity score {report['score']:.3f}; {verdict}")
