"""The workload model: fit it from a trace, keep it as JSON, regenerate traces from it.

Counting and sampling happen in the Rust core (`_core.fit_model`, `_core.synth_model`); this
module chooses the settings, names things, checks documents against the published JSON
Schema (`schema/model.schema.json`) and turns samples into canonical traces.
"""

from __future__ import annotations

import gc
import json
import math
import time
import warnings
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import polars as pl

from . import _core
from .errors import IotwinError
from .formats.base import frame_from_columns
from .layout import on_virtual_device
from .source import atomic_output, prefetched
from .trace import SEPARATE_SPACES, Trace, TraceMeta, coarse_clock_ns, tie_counts

MODEL_VERSION = 1
DEFAULT_WINDOW_NS = 30 * 60 * 10**9
MIN_WINDOWS = 10
IAT_FAMILIES = (
    "auto",
    "fixed",
    "normal",
    "exponential",
    "poisson",
    "gamma",
    "hyperexp",
    "empirical",
)


# The columns the core fits, with their dtypes.
CORE_COLUMNS: list[tuple[str, type]] = [
    ("ts_ns", np.int64),
    ("stream", np.uint32),
    ("op", np.uint8),
    ("offset", np.uint64),
    ("size", np.uint32),
]


def default_window_ns(span_ns: int) -> int:
    """30-minute windows; traces shorter than 10 of them get span/10 (seed 000, III.C)."""
    if span_ns >= MIN_WINDOWS * DEFAULT_WINDOW_NS:
        return DEFAULT_WINDOW_NS
    return max(1, span_ns // MIN_WINDOWS)


@dataclass
class Model:
    """A fitted model document (JSON-ready dict) with helpers."""

    doc: dict[str, Any]

    # -- persistence -----------------------------------------------------------------------
    def save(self, path: str | Path) -> None:
        """Writes the model as JSON (`model_json`), atomically."""
        with atomic_output(path) as tmp:
            tmp.write_bytes(model_json(self.doc))

    @classmethod
    def load(cls, path: str | Path) -> Model:
        """Reads and checks a model file: JSON, version, schema, probabilities."""
        path = Path(path)
        try:
            text = path.read_text()
        except OSError as exc:
            raise IotwinError(f"{path}: cannot read model: {exc.strerror}") from None
        try:
            doc = parse_json(text)
        except json.JSONDecodeError as exc:
            raise IotwinError(f"{path}: line {exc.lineno}: not valid JSON: {exc.msg}") from None
        return cls.from_doc(doc, str(path))

    @classmethod
    def from_doc(cls, doc: Any, where: str = "model") -> Model:
        check_model(doc, where)
        return cls(doc)

    # -- views -----------------------------------------------------------------------------
    @property
    def streams(self) -> list[dict[str, Any]]:
        return self.doc["streams"]

    @property
    def transition_count(self) -> int:
        return sum(len(s["transitions"]) for s in self.streams)

    # -- generation ------------------------------------------------------------------------
    def synth(
        self,
        requests: int | None = None,
        duration_s: float | None = None,
        intensity: float = 1.0,
        compress: float = 1.0,
        seed: int = 0,
        baseline: str | None = None,
    ) -> Trace:
        """A synthetic trace: `requests` in all (each stream its exact share) or `duration_s`
        of activity; `intensity` multiplies the rate, `compress` shortens the fluctuation
        phases; `baseline="uniform"` gives the IOMeter-like trace without locality."""
        doc, args = self._synth_args(requests, duration_s, intensity, compress, seed, baseline)
        df = self._on_clock(frame_from_columns(_core_call(_core.synth_model, core_json(doc), args)))
        return Trace(df, self._synth_meta(doc, seed, baseline))

    def write_synth(
        self,
        path: str | Path,
        requests: int | None = None,
        duration_s: float | None = None,
        intensity: float = 1.0,
        compress: float = 1.0,
        seed: int = 0,
        baseline: str | None = None,
        progress: Callable[[int, int], None] | None = None,
    ) -> tuple[int, int]:
        """`synth(...)` written to canonical Parquet at `path` as it is sampled, one row group
        at a time (the same requests; memory holds a batch, not the trace), atomically.
        `progress(done, total)` follows each batch. Returns (requests, last time in ns)."""
        import pyarrow.parquet as pq

        from .ingest import parquet_writer

        doc, args = self._synth_args(requests, duration_s, intensity, compress, seed, baseline)
        stream = _core_call(_core.SynthStream, core_json(doc), args)
        total = stream.total  # read now: the sampling thread holds the stream from here on
        kv = self._synth_meta(doc, seed, baseline).to_kv()
        done, last_ns = 0, 0
        with atomic_output(path) as tmp:
            writer: pq.ParquetWriter | None = None
            try:
                for df in prefetched(_batches(stream, self._on_clock), depth=2):
                    table = df.to_arrow()
                    if writer is None:
                        writer = parquet_writer(tmp, table.schema.with_metadata(kv), compact=True)
                    writer.write_table(table.cast(writer.schema))
                    done += df.height
                    last_ns = int(df["ts_ns"][-1]) if df.height else last_ns
                    if progress is not None:
                        progress(done, total)
                if writer is None:  # no requests: still a canonical (empty) trace
                    empty = frame_from_columns(stream.take(0))
                    empty.write_parquet(tmp, metadata=kv)
            finally:
                if writer is not None:
                    writer.close()
        return done, last_ns

    def _synth_args(
        self,
        requests: int | None,
        duration_s: float | None,
        intensity: float,
        compress: float,
        seed: int,
        baseline: str | None,
    ) -> tuple[dict[str, Any], tuple[Any, ...]]:
        """The model with its types expanded, and the core's synthesis arguments."""
        if requests is None and duration_s is None:
            requests = int(self.doc["requests"])
        _check_positive(intensity=intensity, compress=compress)
        if requests is not None and requests < 0:
            raise IotwinError("--requests must be >= 0")
        if baseline not in (None, "uniform"):
            raise IotwinError(f"unknown baseline '{baseline}' (known: uniform)")
        duration_ns = None if duration_s is None else int(duration_s * 1e9)
        args = (
            requests,
            duration_ns,
            float(intensity),
            float(compress),
            int(seed) & (2**64 - 1),
            baseline == "uniform",
        )
        return expand_types(self.doc), args

    def _on_clock(self, df: pl.DataFrame) -> pl.DataFrame:
        """The twin keeps the original's coarse clock (see trace.coarse_clock_ns)."""
        tick = int(self.doc.get("source", {}).get("clock_ns") or 0)
        return df.with_columns((pl.col("ts_ns") // tick * tick).alias("ts_ns")) if tick else df

    def _synth_meta(self, doc: dict[str, Any], seed: int, baseline: str | None) -> TraceMeta:
        names = {s["id"]: s.get("name", f"stream {s['id']}") for s in doc["streams"]}
        source = self.doc.get("source", {})
        return TraceMeta(
            source=f"iotwin synth (seed {seed})",
            format="synth" if baseline is None else f"synth-{baseline}",
            stream_by=source.get("stream_by", "device"),
            timed=source.get("timed", True),
            capacity=int(self.doc["capacity"]),
            streams={int(k): v for k, v in names.items()},
        )


def core_json(doc: dict[str, Any]) -> bytes:
    """A model document as the JSON bytes the core reads: orjson writes 7 MiB in 12 ms and the
    core parses them faster than it reads the dict object by object (the same floats: both
    take the shortest repr that round-trips)."""
    return _dumps(doc)


def _dumps(value: Any) -> bytes:
    """`value` as compact JSON by orjson, numpy numbers and non-string keys included (a
    document edited in Python may hold them; json.dumps took numpy floats too)."""
    return orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS | orjson.OPT_SERIALIZE_NUMPY)


def _core_call(fn: Callable[..., Any], *args: Any) -> Any:
    """A core synthesis call; what the core refuses (a model it cannot read, a synthesis too
    large to hold) becomes a user error."""
    try:
        return fn(*args)
    except ValueError as exc:
        raise IotwinError(f"synthesis: {exc}") from None


# Requests per row group of a streamed synthetic trace.
SYNTH_BATCH = 1 << 20


def _batches(
    stream: Any, on_clock: Callable[[pl.DataFrame], pl.DataFrame]
) -> Iterator[pl.DataFrame]:
    """The stream's requests as canonical DataFrames of SYNTH_BATCH rows, until it is done."""
    while True:
        df = frame_from_columns(stream.take(SYNTH_BATCH))
        if df.height == 0:
            return
        yield on_clock(df)


def _check_positive(**values: float) -> None:
    for name, value in values.items():
        if not (value > 0 and math.isfinite(value)):
            raise IotwinError(f"--{name} must be a positive number, not {value}")


class ShortTraceWarning(UserWarning):
    """The trace has fewer requests than the model has states: it is fitted as it is."""


def fit(
    trace: Trace,
    levels: int = 2,
    fanout: int = 4,
    flat: bool = False,
    window_s: float | None = None,
    iat: str = "auto",
    reref: bool = True,
    types: bool = False,
    reuse_scope: str = "auto",
    window_reads: bool = True,
    bursts: bool = False,
) -> Model:
    """Fits the hierarchical (or flat) model to a canonical trace. With `types`, streams are
    classified (seed 000 Table II) and one sub-model per type is fitted, with its count.
    `reuse_scope` "auto" measures re-references against all streams' history where streams
    share one address space (not devices or volumes); "stream" keeps them per stream.
    `window_reads` keeps each fluctuation window's reads, toward which the twin steers its
    operations (an extension: without it, operations as the paper's walk draws them).
    `bursts` keeps each stream's burst lengths, which the twin's gaps then follow in each
    window (an extension, off by default: docs/model.md, "bursts")."""
    check_settings(iat, levels, fanout)
    if len(trace) == 0:
        raise IotwinError("cannot fit a model to an empty trace")
    started = time.perf_counter()
    warn_if_short(len(trace), levels, fanout)
    trace = from_first_request(trace)
    type_of = stream_types(trace) if types else None
    # streams that are devices or volumes have address spaces of their own; others (processes,
    # threads over files) share one, so a block one reads may be another's re-reference
    if reuse_scope not in ("auto", "stream"):
        raise IotwinError(f"reuse scope '{reuse_scope}': expected auto or stream")
    shared_space = reuse_scope == "auto" and trace.meta.stream_by not in SEPARATE_SPACES
    # ties on the trace's own files and offsets: file-level traces count them here, on a
    # thread of their own (without the GIL) beside the core's serial stretches; the core
    # counts the others itself, beside its finalisation
    files = "file" in trace.columns
    with ThreadPoolExecutor(max_workers=1) as pool:
        ties_done = pool.submit(tie_counts, trace.df) if files else None
        trace, layout = on_virtual_device(trace)
        # row groups are fitted where they lie (no copy) unless the whole sequence is needed
        if reref or type_of is not None:
            columns = [[trace.numpy(n, d)] for n, d in CORE_COLUMNS]
        else:
            columns = trace.column_chunks(*map(list, zip(*CORE_COLUMNS, strict=True)))
        ts = [c for c in columns[0] if len(c)]
        span_ns = int(ts[-1][-1] - ts[0][0]) if trace.meta.timed else 0
        window_ns = int(window_s * 1e9) if window_s else default_window_ns(span_ns)
        doc_text, core_ties = _core.fit_model(
            *columns,
            levels,
            fanout,
            max(1, trace.capacity),
            flat,
            max(1, window_ns),
            reref,
            iat,
            span_ns,
            _groups(trace, type_of),
            global_reuse=reref and shared_space,
            ties=not files,
        )
        ties = ties_done.result() if ties_done is not None else json.loads(core_ties)
    doc = parse_json(doc_text)
    doc["ties"] = ties
    if not window_reads:
        drop_window_reads(doc)
    if bursts and trace.meta.timed:
        add_bursts(doc, trace, type_members(type_of))
    if type_of is not None:
        labels = sorted(set(type_of.values()))
        for s in doc["streams"]:
            s["name"] = s["type"] = labels[s["id"]]
        doc["types"] = [
            {"type": s["type"], "count": s["count"], "weight": s["weight"]} for s in doc["streams"]
        ]
    tick = coarse_clock_ns(ts) if trace.meta.timed else None
    return describe(doc, trace.meta, layout, started, iat, tick, named=type_of is None)


def describe(
    doc: dict[str, Any],
    meta: TraceMeta,
    layout: list[dict[str, Any]] | None,
    started: float,
    iat: str,
    clock_ns: int | None = None,
    named: bool = True,
) -> Model:
    """Adds stream names, provenance and the file layout to a finalised model document and
    checks it. `meta` is the trace's metadata on the virtual device (see `on_virtual_device`),
    `clock_ns` the tick of its coarse clock (`trace.coarse_clock_ns`)."""
    if named:
        for s in doc["streams"]:
            s["name"] = meta.stream_name(s["id"])
    doc["source"] = {
        "path": meta.source,
        "format": meta.format,
        "stream_by": meta.stream_by,
        "timed": meta.timed,
        "capacity_known": meta.capacity is not None,
    }
    if clock_ns is not None:
        doc["source"]["clock_ns"] = clock_ns
    if layout is not None:
        doc["files"] = layout
    doc["fit"] = {"seconds": round(time.perf_counter() - started, 3), "iat": iat}
    # the core's own document: no schema check (a second or so on large models); saved
    # models are checked when loaded, and the tests load every fitted kind back
    return Model(doc)


def model_json(doc: dict[str, Any]) -> bytes:
    """A model document as JSON laid out to be read and diffed, yet compact: the document's
    and each stream's keys one a line, and each record of their lists (a stream's transitions,
    the trace's files) one a line, compact. Indenting every level instead made a 10M-request
    bench model 30 MiB and took json.dumps 2.5-3.2 s (the fit itself about 1 s); this is
    about 10 MiB, written by orjson in a few tens of milliseconds."""
    return _json_object(doc, 0, expand="streams") + b"\n"


def _json_object(obj: dict[str, Any], pad: int, expand: str | None = None) -> bytes:
    """`obj` with a key a line at `pad` + 1 spaces; the list under `expand` holds objects
    laid out the same way, one level deeper."""
    inner = b" " * (pad + 1)
    parts = []
    for key, value in obj.items():
        head = inner + _dumps(str(key)) + b": "
        if key == expand and _records(value):
            parts.append(head + _json_lines([_json_object(v, pad + 2) for v in value], pad + 1))
        elif _records(value):
            parts.append(head + _json_lines([_dumps(v) for v in value], pad + 1))
        else:
            parts.append(head + _dumps(value))
    return b"{\n" + b",\n".join(parts) + b"\n" + b" " * pad + b"}"


def _json_lines(items: list[bytes], pad: int) -> bytes:
    """A JSON list of already encoded items, one a line at `pad` + 1 spaces."""
    inner = b" " * (pad + 1)
    return b"[\n" + b",\n".join(inner + i for i in items) + b"\n" + b" " * pad + b"]"


def _records(value: Any) -> bool:
    """Whether `value` is a non-empty list of objects (laid out one a line)."""
    return isinstance(value, list) and bool(value) and all(isinstance(v, dict) for v in value)


def parse_json(text: str | bytes) -> Any:
    """A model's JSON, parsed by orjson (0.25 s -> 0.16 s on an 11 MiB model against
    json.loads) with the cyclic garbage collector off: a parse creating a million objects
    keeps waking it for nothing (JSON has no cycles). Errors are json.JSONDecodeErrors."""
    was_on = gc.isenabled()
    gc.disable()
    try:
        return orjson.loads(text)
    finally:
        if was_on:
            # Left young, the parse's containers made the next allocation walk them all (40
            # ms for a 7 MiB model): freezing and unfreezing splices them into the oldest
            # generation without a walk. Not where the program keeps objects frozen itself.
            if gc.get_freeze_count() == 0:
                gc.freeze()
                gc.unfreeze()
            gc.enable()


def check_settings(iat: str, levels: int, fanout: int) -> None:
    if iat not in IAT_FAMILIES:
        raise IotwinError(f"--iat '{iat}': expected one of {', '.join(IAT_FAMILIES)}")
    if levels < 1 or fanout < 2 or fanout**levels > 2**40:
        raise IotwinError("--levels must be >= 1 and --fanout >= 2 with fanout^levels <= 2^40")


def warn_if_short(requests: int, levels: int, fanout: int) -> None:
    if requests < fanout**levels:
        warnings.warn(
            f"the trace has {requests:,} requests for {fanout**levels:,} states "
            f"({levels} levels, fanout {fanout}): fitting what is there; many states stay empty",
            ShortTraceWarning,
            stacklevel=3,
        )


def stream_types(trace: Trace) -> dict[int, str]:
    """Each stream's type (data/log, intensity, fluctuation), as characterize classifies."""
    from .characterize import characterize

    return {s["stream"]: s["type"] for s in characterize(trace)["streams"]}


def from_first_request(trace: Trace) -> Trace:
    """The trace with its times counted from its first request, as canonical traces are (the
    readers' do); one built otherwise had every request counted in the last fluctuation
    window."""
    first = trace.first_ns() if trace.meta.timed else 0
    if not first:
        return trace
    return Trace(trace.df.with_columns(pl.col("ts_ns") - first), trace.meta)


def type_index(type_of: dict[int, str]) -> dict[int, int]:
    """Each stream's type as the index of its sub-model: its label's among the sorted labels."""
    labels = sorted(set(type_of.values()))
    return {sid: labels.index(t) for sid, t in type_of.items()}


def _groups(trace: Trace, type_of: dict[int, str] | None) -> np.ndarray | None:
    """Per request, the index of its stream's type (None without --types)."""
    if type_of is None:
        return None
    index = type_index(type_of)
    mapping = pl.DataFrame(
        {"stream": list(index), "group": list(index.values())},
        schema={"stream": pl.UInt32, "group": pl.UInt32},
    )
    joined = trace.df.select("stream").join(mapping, on="stream", how="left", maintain_order="left")
    return np.ascontiguousarray(joined.get_column("group").to_numpy(), dtype=np.uint32)


# A gap at or above this ends a stream's burst (written to the model as `burst_gap_ns`).
BURST_GAP_NS = 5_000_000
# Quantiles kept of each window's short and long gaps, evenly from the shortest to the longest.
GAP_QUANTILES = 16


def stream_times(trace: Trace) -> dict[int, np.ndarray]:
    """Per stream, its requests' times in order."""
    stream = trace.numpy("stream", np.uint32)
    order = np.argsort(stream, kind="stable")
    stream, ts = stream[order], trace.numpy("ts_ns", np.int64)[order]
    ids, first = np.unique(stream, return_index=True)
    return dict(zip(ids.tolist(), np.split(ts, first[1:]), strict=True))


def bursts_of(ts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A stream's bursts, runs of requests less than BURST_GAP_NS apart (`ts` in order): how
    many requests each held, and when each began."""
    ends = np.flatnonzero(np.r_[np.diff(ts) >= BURST_GAP_NS, True])
    return np.diff(np.r_[-1, ends]), ts[np.r_[0, ends[:-1] + 1]]


def burst_lengths(trace: Trace) -> dict[int, np.ndarray]:
    """Per stream, the requests of each of its bursts in time order."""
    return {k: bursts_of(ts)[0] for k, ts in stream_times(trace).items()}


def length_buckets(lengths: np.ndarray) -> list[list[int]]:
    """How many bursts held each number of requests, as [n, n + 1, count] buckets."""
    values, counts = np.unique(lengths, return_counts=True)
    return [[int(v), int(v) + 1, int(c)] for v, c in zip(values, counts, strict=True)]


def type_members(type_of: dict[int, str] | None) -> dict[int, list[int]] | None:
    """Per type's sub-model (`type_index`), the streams it stands for (None without
    --types)."""
    if type_of is None:
        return None
    members: dict[int, list[int]] = {}
    for sid, k in sorted(type_index(type_of).items()):
        members.setdefault(k, []).append(sid)
    return members


def add_bursts(
    doc: dict[str, Any], trace: Trace, members: dict[int, list[int]] | None = None
) -> None:
    """Each stream's `bursts`: how many of its bursts held each number of requests; per
    fluctuation window, `window_bursts`, the same for the bursts that began in it, and
    `window_gaps`, the shape of its gaps within and between bursts. The twin moves each
    window's long gaps so that its bursts take the window's lengths, and gives its gaps the
    window's shape (docs/model.md, "bursts"). A type's sub-model (`members`: the streams each
    stands for) pools its members' own bursts and gaps, as each of its twin's streams is one
    of them."""
    window_ns = max(1, int(doc["window_ns"]))
    doc["burst_gap_ns"] = BURST_GAP_NS
    times = stream_times(trace)
    for s in doc["streams"]:
        sid = int(s["id"])
        own = [times[m] for m in (members[sid] if members is not None else [sid]) if m in times]
        pieces = [bursts_of(ts) for ts in own]
        lengths = np.concatenate([p[0] for p in pieces]) if pieces else np.empty(0, np.int64)
        if len(lengths) < 2:
            continue
        starts = np.concatenate([p[1] for p in pieces])
        s["bursts"] = length_buckets(lengths)
        # windows as the core counts them: the last holds any request past it
        last = max(0, len(s["windows"]) - 1)
        window = np.minimum(starts // window_ns, last)
        order = np.argsort(window, kind="stable")
        windows, first = np.unique(window[order], return_index=True)
        by_window = np.split(lengths[order], first[1:])
        s["window_bursts"] = [
            [int(w), length_buckets(p)] for w, p in zip(windows, by_window, strict=True)
        ]
        s["window_gaps"] = window_gaps(own, window_ns, last)


def window_gaps(streams: list[np.ndarray], window_ns: int, last: int) -> list[list[Any]]:
    """Per window with gaps, [window, short, long]: GAP_QUANTILES quantiles (ns) of the gaps
    under BURST_GAP_NS that end in it, and of those at or above it (empty where it has none),
    over the requests' times of each of `streams` (windows past `last` count in it). The
    twin's gaps in the window take these shapes, rank for rank."""
    gaps = np.concatenate([np.diff(ts) for ts in streams])
    ends = np.minimum(np.concatenate([ts[1:] // window_ns for ts in streams]), last)
    order = np.argsort(ends, kind="stable")
    windows, first = np.unique(ends[order], return_index=True)
    q = np.linspace(0.0, 1.0, GAP_QUANTILES)
    out: list[list[Any]] = []
    for w, g in zip(windows, np.split(gaps[order], first[1:]), strict=True):
        short, long = g[g < BURST_GAP_NS], g[g >= BURST_GAP_NS]
        shapes = [
            np.quantile(x, q).round().astype(np.int64).tolist() if len(x) else []
            for x in (short, long)
        ]
        out.append([int(w), *shapes])
    return out


def drop_window_reads(doc: dict[str, Any]) -> None:
    """Removes each stream's `window_reads`: its twin draws operations as the paper's walk
    does, without steering them toward each window's share."""
    for s in doc["streams"]:
        s.pop("window_reads", None)


def _share(count: int, j: int, k: int) -> int:
    """Member j's part of `count` split among k members (the parts sum to it)."""
    return (count * (j + 1)) // k - (count * j) // k


def expand_types(doc: dict[str, Any]) -> dict[str, Any]:
    """A model whose sub-models stand for several streams (--types), reassembled into one
    stream per member (seed 001 Table 2): each member gets an equal share of the type's
    weight and of its per-window counts, and its own id and random stream."""
    if all(s.get("count", 1) == 1 for s in doc["streams"]):
        return doc
    streams, next_id = [], 0
    for s in doc["streams"]:
        k = int(s.get("count", 1))
        for j in range(k):
            member = dict(s)
            member["id"] = next_id
            member["name"] = (
                f"{s.get('name', s['id'])} #{j + 1}" if k > 1 else s.get("name", str(s["id"]))
            )
            member["windows"] = [_share(c, j, k) for c in s["windows"]]
            if "window_reads" in s:
                member["window_reads"] = [
                    min(_share(r, j, k), c)
                    for r, c in zip(s["window_reads"], member["windows"], strict=True)
                ]
            member["requests"] = sum(member["windows"])
            # the weight its windows hold, so a run of the original length ends with them
            member["weight"] = member["requests"] / max(1, doc["requests"])
            member["count"] = 1
            streams.append(member)
            next_id += 1
    return {**doc, "streams": streams}


# -- checking ------------------------------------------------------------------------------
_SCHEMA: dict[str, Any] | None = None
_VALIDATOR: Any = None


def schema() -> dict[str, Any]:
    """The published JSON Schema of model documents (draft-07)."""
    global _SCHEMA
    if _SCHEMA is None:
        text = resources.files("iotwin").joinpath("schema/model.schema.json").read_text()
        _SCHEMA = json.loads(text)
    return _SCHEMA


def _validator() -> Any:
    """The schema compiled once (jsonschema-rs, in Rust: a 10.8 MiB model in 0.02 s against
    0.36 s with fastjsonschema, whose if/then raised an exception for every family an
    inter-arrival distribution is not)."""
    global _VALIDATOR
    if _VALIDATOR is None:
        import jsonschema_rs

        _VALIDATOR = jsonschema_rs.validator_for(schema())
    return _VALIDATOR


def check_model(doc: Any, where: str) -> None:
    """Raises IotwinError naming what is wrong: version, schema, or probabilities."""
    import jsonschema_rs

    if not isinstance(doc, dict) or doc.get("format") != "iotwin-model":
        raise IotwinError(f'{where}: not an iotwin model (no "format": "iotwin-model")')
    if doc.get("version") != MODEL_VERSION:
        raise IotwinError(
            f"{where}: model version {doc.get('version')!r} is not supported "
            f"(this iotwin reads version {MODEL_VERSION})"
        )
    try:
        _validator().validate(doc)
    except jsonschema_rs.ValidationError as exc:
        at = "/".join(str(p) for p in exc.instance_path) or "(top level)"
        raise IotwinError(f"{where}: at {at}: {exc.message}") from None
    _check_probabilities(doc, where)
    _check_ties(doc, where)
    _check_ranges(doc, where)
    _check_window_reads(doc, where)


def _check_probabilities(doc: dict[str, Any], where: str) -> None:
    weights = sum(s["weight"] for s in doc["streams"])
    if doc["streams"] and abs(weights - 1.0) > 1e-6:
        raise IotwinError(f"{where}: stream weights sum to {weights:.6f}, not 1")
    for si, s in enumerate(doc["streams"]):
        for ti, t in enumerate(s["transitions"]):
            total = sum(c["p"] for c in t["categories"])
            if abs(total - 1.0) > 1e-6:
                raise IotwinError(
                    f"{where}: at streams/{si}/transitions/{ti}: category probabilities "
                    f"sum to {total:.6f}, not 1"
                )


def _check_ties(doc: dict[str, Any], where: str) -> None:
    """Odds from counts: a class cannot go on with the same stream more often than it ties."""
    for name, c in tie_classes(doc.get("ties", {})):
        if c["same"] > c["pairs"]:
            raise IotwinError(
                f"{where}: at ties/{name}: same ({c['same']}) exceeds pairs ({c['pairs']})"
            )


def tie_classes(ties: dict[str, Any]) -> list[tuple[str, dict[str, int]]]:
    """Every class of a model's `ties` by its path: 'sequential', 'near', 'other', and apart
    by the next request's operation 'operations/read/sequential', ... and by the run so far
    'runs/0/sequential', ... (schema-checked `ties`)."""
    found = [(name, c) for name, c in ties.items() if name not in ("operations", "recency", "runs")]
    for op, classes in ties.get("operations", {}).items():
        found += [(f"operations/{op}/{name}", c) for name, c in classes.items()]
    for run, classes in enumerate(ties.get("runs", [])):
        found += [(f"runs/{run}/{name}", c) for name, c in classes.items()]
    return found


def valid_ties(ties: Any) -> bool:
    """Whether `ties` (a dataset manifest's) are a model's: the schema's form, and no class
    going on with the same stream more often than it ties."""
    import jsonschema_rs

    global _TIES_VALIDATOR
    if _TIES_VALIDATOR is None:
        ties_schema = {**schema()["properties"]["ties"], "$defs": schema()["$defs"]}
        _TIES_VALIDATOR = jsonschema_rs.validator_for(ties_schema)
    if not _TIES_VALIDATOR.is_valid(ties):
        return False
    return all(c["same"] <= c["pairs"] for _, c in tie_classes(ties))


_TIES_VALIDATOR: Any = None


def _check_ranges(doc: dict[str, Any], where: str) -> None:
    """A stream's extent is [smallest offset, largest end] and each of its window spans
    [first, last]: neither can end before it starts."""
    for si, s in enumerate(doc["streams"]):
        ranges = [("extent", s["extent"])] if "extent" in s else []
        ranges += [(f"window_spans/{w}", x) for w, x in enumerate(s.get("window_spans", []))]
        for at, (lo, hi) in ranges:
            if lo > hi:
                raise IotwinError(
                    f"{where}: at streams/{si}/{at}: starts at {lo}, after its end {hi}"
                )


def _check_window_reads(doc: dict[str, Any], where: str) -> None:
    """A stream's reads per window are aligned with its windows and none above its window's
    requests."""
    for si, s in enumerate(doc["streams"]):
        reads, windows = s.get("window_reads"), s["windows"]
        if reads is None:
            continue
        if len(reads) != len(windows):
            raise IotwinError(
                f"{where}: at streams/{si}/window_reads: {len(reads)} windows, "
                f"'windows' has {len(windows)}"
            )
        for w, (r, n) in enumerate(zip(reads, windows, strict=True)):
            if r > n:
                raise IotwinError(
                    f"{where}: at streams/{si}/window_reads/{w}: {r} reads in a window of "
                    f"{n} requests"
                )


def transition_counts(levels: int, fanout: int) -> tuple[int, int]:
    """Possible transitions of the hierarchical and the flat model (seed 000, Table I)."""
    b = fanout
    hierarchical = b ** (levels - 1) * b * b + sum(
        b ** (i - 1) * (b * b - b) for i in range(1, levels)
    )
    return hierarchical, b ** (2 * levels)


def to_frame(trace: Trace) -> pl.DataFrame:
    return trace.df
