"""Per-stream characterization of a trace (seed 000 Tables II-III, seed 003's metrics).

The Rust core counts everything in one pass over the columns' chunks (`_core.characterize_chunks`);
this module turns the counts into fractions and rates, classifies streams into the paper's
types, and renders the result as tables or JSON. Definitions: design.md, "Definitions used
everywhere".
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import polars as pl

from . import _core
from .errors import IotwinError
from .formats import ReadOptions
from .formats.base import NUMPY_DTYPES
from .source import prefetched
from .trace import Trace, is_canonical_parquet, read_meta

if TYPE_CHECKING:  # rich is imported when rendering: `import iotwin` stays ~25 ms lighter
    from rich.console import Console
    from rich.table import Table

DEFAULT_WINDOW_S = 1800.0
DEFAULT_RELAXED_THRESHOLD = 64 * 1024
MAX_LEAVES = 1 << 16
TOP_STREAMS_SHOWN = 20

# Stream classification (seed 000 Table II). A log stream appends: nearly all writes, and most
# of its jumps are sequential or small forward holes (0 <= jump <= the relaxed threshold).
LOG_MIN_WRITE_FRACTION = 0.9
LOG_MIN_APPEND_FRACTION = 0.5
# High fluctuation: the per-window request rate varies by at least half its mean.
HIGH_FLUCTUATION_CV = 0.5

_NS = 1e9


def characterize(
    trace: Trace | str | Path,
    *,
    levels: int = 1,
    fanout: int = 4,
    window_s: float = DEFAULT_WINDOW_S,
    relaxed_threshold: int = DEFAULT_RELAXED_THRESHOLD,
    format: str | None = None,
    opts: ReadOptions | None = None,
) -> dict[str, Any]:
    """Whole-trace and per-stream statistics of a trace (a Trace, a raw trace or Parquet)."""
    leaves = _leaves(levels, fanout)
    if not window_s > 0:
        raise IotwinError(f"--window must be positive, got {window_s} s")
    if relaxed_threshold < 0:
        raise IotwinError(f"--relaxed-threshold must be >= 0, got {relaxed_threshold}")
    if not isinstance(trace, Trace):
        streamed = _count_batches(trace, format, leaves, window_s, relaxed_threshold)
        if streamed is not None:
            return _finalise(*streamed, levels, fanout, relaxed_threshold)
        from .ingest import load_trace

        trace = load_trace(trace, format, opts)
    counts = _count(trace, leaves, window_s, relaxed_threshold)
    return _finalise(trace, counts, levels, fanout, relaxed_threshold)


def _leaves(levels: int, fanout: int) -> int:
    if levels < 1 or fanout < 2:
        raise IotwinError(f"need --levels >= 1 and --fanout >= 2, got {levels} and {fanout}")
    leaves = fanout**levels
    if leaves > MAX_LEAVES:
        raise IotwinError(
            f"fanout^levels = {leaves:,} locality ranges; at most {MAX_LEAVES:,} are supported"
        )
    return leaves


def _count(trace: Trace, leaves: int, window_s: float, relaxed_threshold: int) -> dict[str, Any]:
    names = [*_COUNTED, *(["latency_ns"] if "latency_ns" in trace.columns else [])]
    chunks = trace.column_chunks(names, [NUMPY_DTYPES[name] for name in names])
    try:
        return _core.characterize_chunks(
            *chunks[:5],
            chunks[5] if len(chunks) > 5 else None,
            leaves,
            int(trace.meta.capacity or 0),
            max(1, round(window_s * _NS)),
            int(relaxed_threshold),
        )
    except ValueError as exc:
        raise IotwinError(f"{trace.meta.source or 'trace'}: {exc}") from None


@dataclass(frozen=True)
class CharacterizeSettings:
    """What a characterize counter needs (`_core.TraceCharacterize`, and each
    `_core.PartitionCharacterize` task of a partitioned trace): the parameters and the whole
    trace's extent."""

    leaves: int
    capacity: int  # 0: max(offset + size) over the trace
    window_ns: int
    relaxed_threshold: int
    first_ts: int
    last_ts: int
    max_end: int
    max_stream: int


_COUNTED = ("ts_ns", "stream", "op", "offset", "size")

# Canonical files of fewer rows are read whole: batches would save little.
BATCHED_MIN_ROWS = 1 << 20


def _count_batches(
    src: str | Path, format_name: str | None, leaves: int, window_s: float, threshold: int
) -> tuple[Trace, dict[str, Any]] | None:
    """Counts a canonical Parquet trace a batch at a time, when its metadata records the
    extent of its rows (ingest and `write_trace` do): its columns are never all in memory
    (bench/ingest's 30M-record file: peak RSS 0.74 against 1.2 GiB, in the same time), only
    the footprint's pieces (4 bytes a request). Returns the trace's shape (no rows) and the
    counts, or None where this does not apply (a raw trace, no extent, few rows, a column
    with nulls, rows that do not have the extent recorded, a footprint that needs sorted
    ranges, an error): the caller then loads the trace whole, and reports any error."""
    src = Path(src)
    if format_name not in (None, "parquet") or not src.is_file():
        return None
    if not is_canonical_parquet(src):
        return None
    meta = read_meta(src, extent=True)
    e = meta.extent
    if not e or e["rows"] < BATCHED_MIN_ROWS:
        return None
    schema = pl.read_parquet_schema(src)
    names = [*_COUNTED, *(["latency_ns"] if "latency_ns" in schema else [])]
    try:
        settings = CharacterizeSettings(
            leaves=leaves,
            capacity=int(meta.capacity or 0),
            window_ns=max(1, round(window_s * _NS)),
            relaxed_threshold=int(threshold),
            **{k: e[k] for k in ("first_ts", "last_ts", "max_end", "max_stream")},
        )
        counter = _core.TraceCharacterize(asdict(settings), e["rows"], e["min_offset"])
        for batch in prefetched(pl.scan_parquet(src).select(names).collect_batches(), depth=2):
            columns = [batch.get_column(name) for name in names]
            if any(c.has_nulls() for c in columns):
                return None
            arrays = [
                np.ascontiguousarray(c.to_numpy(), dtype=NUMPY_DTYPES[c.name]) for c in columns
            ]
            counter.update(*arrays[:5], arrays[5] if len(arrays) > 5 else None)
        counts = counter.summary()
    except (ValueError, pl.exceptions.PolarsError):
        return None
    shape = Trace(pl.DataFrame(schema={name: schema[name] for name in names}), meta)
    return shape, counts


def _ratio(num: float, den: float) -> float | None:
    return num / den if den else None


def _metrics(s: dict[str, Any], timed: bool) -> dict[str, Any]:
    """Fractions, means and rates of one stream's (or the whole trace's) counters."""
    n, pairs = s["requests"], s["pairs"]
    span_s = (s["last_ts"] - s["first_ts"]) / _NS if timed and n >= 2 else None
    relaxed_breaks = s["relaxed_runs"] - 1 if n else 0
    return {
        "requests": n,
        "read_fraction": _ratio(s["reads"], n),
        "write_fraction": _ratio(s["writes"], n),
        "sequential_fraction": _ratio(s["sequential"], n),
        "mean_size_bytes": _ratio(s["size_sum"], n),
        "span_s": span_s,
        "mean_interarrival_s": span_s / (n - 1) if span_s is not None else None,
        "iops": n / span_s if span_s else None,
        "mean_latency_s": None,  # filled by the caller when the trace has latencies
        "spatial_locality": [c / n for c in s["locality"]] if n else None,
        "footprint_blocks_4k": s["footprint_blocks_4k"],
        "footprint_blocks_512": s["footprint_blocks_512"],
        "requested_blocks_512": s["requested_blocks_512"],
        "jumps": {
            "backward": _ratio(s["backward"], pairs),
            "sequential": _ratio(s["sequential"], pairs),
            "forward": _ratio(s["forward"], pairs),
        },
        # share of jumps that keep a relaxed run going: 0 <= jump <= threshold
        "append_fraction": _ratio(pairs - relaxed_breaks, pairs),
        "interference_frequency": _ratio(s["interference_sum"], pairs),
        "run_count": _ratio(n, s["global_runs"]),
        "detangled_run_count": _ratio(n, s["detangled_runs"]),
        "relaxed_detangled_run_count": _ratio(n, s["relaxed_runs"]),
        "fluctuation_cv": s["fluctuation_cv"],
    }


def _finalise(
    trace: Trace, c: dict[str, Any], levels: int, fanout: int, threshold: int
) -> dict[str, Any]:
    timed = bool(trace.meta.timed)
    has_latency = "latency_ns" in trace.columns
    total = c["total"]
    out = _metrics(total, timed)
    if has_latency and total["requests"]:
        out["mean_latency_s"] = total["latency_sum"] / total["requests"] / _NS
    n = total["requests"]
    streams = []
    for s in c["streams"]:
        m = {"stream": s["stream"], "name": trace.meta.stream_name(s["stream"])}
        m.update(_metrics(s, timed))
        if has_latency:
            m["mean_latency_s"] = s["latency_sum"] / s["requests"] / _NS
        m["weight"] = s["requests"] / n
        streams.append(m)
    thresholds = _thresholds(threshold, len(streams))
    for m in streams:
        m["type"] = classify(m, len(streams))
    streams.sort(key=lambda m: (-m["requests"], m["stream"]))
    out.update(
        {
            "kind": "characterization",  # how `iotwin report` recognises the JSON
            "timed": timed,
            "capacity_bytes": c["capacity"],
            "capacity_known": bool(trace.meta.capacity),
            "levels": levels,
            "fanout": fanout,
            "relaxed_threshold_bytes": threshold,
            "stream_by": trace.meta.stream_by,
            "stream_count": len(streams),
            "source": trace.meta.source,
            "format": trace.meta.format,
            "size_distribution": _size_distribution(c, n),
            "jump_histogram": _jump_histogram(c["jump_log2"]),
            "fluctuation": _fluctuation(c["fluctuation"], total["fluctuation_cv"], timed),
            "classification_thresholds": thresholds,
            "streams": streams,
        }
    )
    return out


def _thresholds(relaxed_threshold: int, stream_count: int) -> dict[str, Any]:
    return {
        "log_min_write_fraction": LOG_MIN_WRITE_FRACTION,
        "log_min_append_fraction": LOG_MIN_APPEND_FRACTION,
        "log_append_max_jump_bytes": relaxed_threshold,
        "high_intensity_min_weight": 1 / stream_count if stream_count else None,
        "high_intensity_rule": "request rate over the whole trace >= the mean over streams "
        "(weight >= 1/streams)",
        "high_fluctuation_min_cv": HIGH_FLUCTUATION_CV,
    }


def classify(m: dict[str, Any], stream_count: int) -> str:
    """The stream's type in the paper's terms, e.g. "data/high-intensity/low-fluctuation".

    Untimed traces have no fluctuation, so their types have two parts.
    """
    is_log = (m["write_fraction"] or 0) >= LOG_MIN_WRITE_FRACTION and (
        m["append_fraction"] or 0
    ) >= LOG_MIN_APPEND_FRACTION
    parts = [
        "log" if is_log else "data",
        "high-intensity" if m["weight"] * stream_count >= 1 - 1e-12 else "low-intensity",
    ]
    if m["fluctuation_cv"] is not None:
        high = m["fluctuation_cv"] >= HIGH_FLUCTUATION_CV
        parts.append("high-fluctuation" if high else "low-fluctuation")
    return "/".join(parts)


def _size_distribution(c: dict[str, Any], n: int) -> dict[str, Any]:
    log2 = [
        {"min_bytes": 0 if k == 0 else 1 << (k - 1), "max_bytes": 0 if k == 0 else (1 << k) - 1,
         "count": count}
        for k, count in enumerate(c["size_log2"])
        if count
    ]  # fmt: skip
    return {
        "top": [{"size_bytes": size, "share": count / n} for size, count in c["top_sizes"]],
        "distinct_sizes": c["distinct_sizes"],
        "log2_histogram": log2,
    }


def _jump_histogram(counts: list[int]) -> list[dict[str, int]]:
    """Signed log2 buckets: bucket k > 0 holds jumps in [2^(k-1), 2^k), -k the backward ones."""
    zero = len(counts) // 2
    rows = []
    for i, count in enumerate(counts):
        if not count:
            continue
        k = i - zero
        lo, hi = (0, 0) if k == 0 else (1 << (abs(k) - 1), (1 << abs(k)) - 1)
        rows.append(
            {"bucket": k, "min": -hi if k < 0 else lo, "max": -lo if k < 0 else hi, "count": count}
        )
    return rows


def _fluctuation(f: dict[str, Any] | None, cv: float | None, timed: bool) -> dict[str, Any]:
    if f is None or not timed:
        return {"window_s": None, "rates": None, "cv": None}
    rates = [c / (d / _NS) for c, d in zip(f["counts"], f["durations_ns"], strict=True)]
    return {"window_s": f["window_ns"] / _NS, "rates": rates, "cv": cv}


# ---------------------------------------------------------------------------- rendering


def _fmt(value: float | None, spec: str = ".4g", scale: float = 1.0) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "n/a"
    return format(value * scale, spec)


def _pct(value: float | None) -> str:
    return _fmt(value, ".1f", 100.0)


def _sparkline(rates: list[float] | None) -> str:
    if not rates:
        return ""
    bars = "▁▂▃▄▅▆▇█"
    top = max(rates) or 1.0
    step = max(1, math.ceil(len(rates) / 60))
    picked = [max(rates[i : i + step]) for i in range(0, len(rates), step)]
    return "".join(bars[min(7, int(r / top * 7.999))] for r in picked)


def render(result: dict[str, Any], console: Console) -> None:
    """The paper's Table III as terminal tables: the whole trace, then one row per stream."""
    console.print(_summary_table(result))
    streams = result["streams"]
    shown = streams[:TOP_STREAMS_SHOWN]
    if shown:
        console.print(_features_table(result, shown))
        console.print(_sequentiality_table(result, shown))
    if len(streams) > len(shown):
        console.print(
            f"{len(streams) - len(shown):,} more streams not shown (top {len(shown)} by weight)"
        )
    t = result["classification_thresholds"]
    console.print(
        f"types: log = write fraction >= {t['log_min_write_fraction']} and >= "
        f"{_pct(t['log_min_append_fraction'])}% of jumps in [0, {t['log_append_max_jump_bytes']:,} B]; "
        f"high intensity = {t['high_intensity_rule']}; "
        f"high fluctuation = CV of per-window rate >= {t['high_fluctuation_min_cv']}",
        highlight=False,
    )


def _summary_table(r: dict[str, Any]) -> Table:
    from rich.table import Table

    table = Table(title=f"Trace {r['source'] or ''}".strip(), show_header=False)
    table.add_column("metric", style="bold")
    table.add_column("value")
    cap = f"{r['capacity_bytes']:,} B" + ("" if r["capacity_known"] else " (max offset+size)")
    size = r["size_distribution"]
    top = ", ".join(f"{s['size_bytes'] / 1024:g}K ({_pct(s['share'])}%)" for s in size["top"][:5])
    fl = r["fluctuation"]
    j = r["jumps"]
    rows = [
        ("requests", f"{r['requests']:,}"),
        ("streams", f"{r['stream_count']:,} (by {r['stream_by']})"),
        ("read : write", f"{_pct(r['read_fraction'])}% : {_pct(r['write_fraction'])}%"),
        ("sequential", f"{_pct(r['sequential_fraction'])}%"),
        ("mean size", f"{_fmt(r['mean_size_bytes'], ',.1f')} B"),
        ("top sizes", top or "n/a"),
        ("span", f"{_fmt(r['span_s'], ',.3f')} s"),
        ("mean inter-arrival", f"{_fmt(r['mean_interarrival_s'], '.4g', 1e3)} ms"),
        ("IOPS", _fmt(r["iops"], ",.2f")),
        ("mean latency", f"{_fmt(r['mean_latency_s'], '.4g', 1e3)} ms"),
        ("capacity", cap),
        (
            f"spatial locality (L{r['levels']}, b={r['fanout']})",
            _locality(r["spatial_locality"]),
        ),
        (
            "footprint",
            f"{r['footprint_blocks_4k']:,} x 4 KiB ({r['footprint_blocks_512']:,} x 512 B; "
            f"{r['requested_blocks_512']:,} x 512 B requested)",
        ),
        (
            "jumps back/seq/fwd",
            f"{_fmt(j['backward'], '.3f')} / {_fmt(j['sequential'], '.3f')} / "
            f"{_fmt(j['forward'], '.3f')}",
        ),
        ("interference frequency", _fmt(r["interference_frequency"], ".3f")),
        (
            "run count / detangled / relaxed",
            f"{_fmt(r['run_count'], '.3f')} / {_fmt(r['detangled_run_count'], '.3f')} / "
            f"{_fmt(r['relaxed_detangled_run_count'], '.3f')} "
            f"(relaxed: jumps <= {r['relaxed_threshold_bytes']:,} B)",
        ),
        (
            "fluctuation",
            f"CV {_fmt(fl['cv'], '.3f')}, windows of {_fmt(fl['window_s'], ',.4g')} s "
            f"{_sparkline(fl['rates'])}",
        ),
    ]
    for key, value in rows:
        table.add_row(key, value)
    return table


def _locality(shares: list[float] | None) -> str:
    if shares is None:
        return "n/a"
    if len(shares) <= 16:
        return " ".join(f"{s:.3f}" for s in shares)
    busiest = sorted(range(len(shares)), key=lambda i: -shares[i])[:4]
    return f"{len(shares)} ranges; busiest: " + ", ".join(f"#{i} {shares[i]:.3f}" for i in busiest)


def _locality_pct(shares: list[float] | None) -> str:
    """Compact per-stream locality: percentages per range, e.g. 46/7/3/45."""
    if shares is None or len(shares) > 16:
        return _locality(shares)
    return "/".join(f"{s * 100:.0f}" for s in shares)


def _features_table(r: dict[str, Any], streams: list[dict[str, Any]]) -> Table:
    from rich.table import Table

    table = Table(title="Per-stream I/O features (seed 000, Table III)")
    for col in ("stream", "type", "weight", "requests", "rd %", "seq %", "size KB"):
        table.add_column(col, justify="right" if col not in ("stream", "type") else "left")
    for col in ("int. ms", "IOPS", "lat. ms", "CV", "locality %"):
        table.add_column(col, justify="right", no_wrap=col == "locality %")
    for m in streams:
        table.add_row(
            m["name"],
            m["type"],
            _fmt(m["weight"], ".4f"),
            f"{m['requests']:,}",
            _pct(m["read_fraction"]),
            _pct(m["sequential_fraction"]),
            _fmt(m["mean_size_bytes"], ".2f", 1 / 1024),
            _fmt(m["mean_interarrival_s"], ".4g", 1e3),
            _fmt(m["iops"], ".4g"),
            _fmt(m["mean_latency_s"], ".4g", 1e3),
            _fmt(m["fluctuation_cv"], ".2f"),
            _locality_pct(m["spatial_locality"]),
        )
    return table


def _sequentiality_table(r: dict[str, Any], streams: list[dict[str, Any]]) -> Table:
    from rich.table import Table

    table = Table(title="Per-stream sequentiality (Keeton et al., seed 003)")
    table.add_column("stream")
    for col in ("P(back)", "P(seq)", "P(fwd)", "interference", "run", "detangled", "relaxed"):
        table.add_column(col, justify="right")
    table.add_column("4K footprint", justify="right")
    for m in streams:
        j = m["jumps"]
        table.add_row(
            m["name"],
            _fmt(j["backward"], ".3f"),
            _fmt(j["sequential"], ".3f"),
            _fmt(j["forward"], ".3f"),
            _fmt(m["interference_frequency"], ".2f"),
            _fmt(m["run_count"], ".3f"),
            _fmt(m["detangled_run_count"], ".3f"),
            _fmt(m["relaxed_detangled_run_count"], ".3f"),
            f"{m['footprint_blocks_4k']:,}",
        )
    return table
