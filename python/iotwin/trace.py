"""The canonical trace: a polars DataFrame plus what is known about it, stored as Parquet."""

from __future__ import annotations

import io
import json
import os
import struct
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from .errors import IotwinError
from .formats.base import CANONICAL_SCHEMA, OPTIONAL_SCHEMA

META_PREFIX = "iotwin."
TRACE_VERSION = 1

# Stream kinds whose streams do not share addresses: each volume's or device's equal offsets
# are different data (fit's re-references, validate's miss ratios, the simulator's cache).
SEPARATE_SPACES = ("device", "volume")


@dataclass
class TraceMeta:
    """What a canonical trace knows about itself; stored as `iotwin.*` Parquet metadata."""

    source: str = ""
    format: str = ""
    stream_by: str = "device"
    timed: bool = True
    capacity: int | None = None  # device or file-set size in bytes, when known
    streams: dict[int, str] = field(default_factory=dict)  # stream id -> name
    files: list[dict[str, Any]] = field(default_factory=list)  # {id, path, size, extents}
    skipped: int = 0  # malformed records skipped at ingest (--skip-bad)
    # a record of `iotwin run`: how the recorded (source) addresses map onto the target
    mapping: dict[str, Any] = field(default_factory=dict)
    # rows, first_ts, last_ts, max_stream, min_offset, max_end (offset + size) of the rows as
    # written, so that characterize can read the file in batches (`extent_of`)
    extent: dict[str, int] | None = None

    def to_kv(self) -> dict[str, str]:
        d = asdict(self)
        kv = {f"{META_PREFIX}version": str(TRACE_VERSION)}
        for key, value in d.items():
            if key == "streams":
                value = {str(k): v for k, v in value.items()}
            kv[META_PREFIX + key] = json.dumps(value)
        return kv

    @classmethod
    def from_kv(cls, kv: dict[str, str]) -> TraceMeta:
        meta = cls()
        for key in asdict(meta):
            raw = kv.get(META_PREFIX + key)
            if raw is not None:
                setattr(meta, key, json.loads(raw))
        meta.streams = {int(k): v for k, v in meta.streams.items()}
        return meta

    def stream_name(self, stream: int) -> str:
        return self.streams.get(stream, f"{self.stream_by} {stream}")


@dataclass
class Trace:
    """A canonical trace in memory: time-sorted requests and their metadata.

    A trace read from Parquet holds one chunk per row group until `df` is first used, then
    its columns are made contiguous (once, in parallel), so that every later to_numpy is
    free; `column_chunks` reads the chunks as they are, for a pass that needs no copy.
    """

    df: pl.DataFrame
    meta: TraceMeta
    _chunked = False  # `df` still holds Parquet row groups as chunks (not a field)

    def __len__(self) -> int:
        return self._df.height

    @property
    def columns(self) -> list[str]:
        return self._df.columns

    def numpy(self, name: str, dtype: type) -> np.ndarray:
        """A contiguous numpy array of a column for the Rust core (no copy when the column
        is one chunk of that dtype)."""
        return np.ascontiguousarray(self.df.get_column(name).to_numpy(), dtype=dtype)

    def column_chunks(self, names: list[str], dtypes: list[type]) -> list[list[np.ndarray]]:
        """Each named column as a list of numpy arrays, chunk i of every column holding the
        same rows; without a copy when the columns are chunked alike (row groups)."""
        columns = [self._df.get_column(name) for name in names]
        lengths = [[len(c) for c in col.get_chunks()] for col in columns]
        # nulls make to_numpy convert, which chunks must not change: those go contiguous
        if any(lens != lengths[0] for lens in lengths) or any(c.has_nulls() for c in columns):
            columns = [self.df.get_column(name).rechunk() for name in names]
        return [
            [np.ascontiguousarray(chunk.to_numpy(), dtype=dtype) for chunk in col.get_chunks()]
            for col, dtype in zip(columns, dtypes, strict=True)
        ]

    def first_ns(self) -> int:
        """The earliest request's time (0 in a canonical trace), without joining row groups."""
        return int(self._df.get_column("ts_ns").min() or 0) if self._df.height else 0

    @property
    def capacity(self) -> int:
        """The address-space size: the device size when known, else max(offset + size)."""
        if self.meta.capacity:
            return int(self.meta.capacity)
        if self._df.height == 0:
            return 0
        end = (pl.col("offset") + pl.col("size").cast(pl.UInt64)).max()
        return int(self._df.select(end).item())


# A clock this coarse (or coarser) that stamps many requests alike is a coarse clock.
COARSE_TICK_NS = 1_000_000


def coarse_clock_ns(ts: np.ndarray | list[np.ndarray]) -> int | None:
    """The tick of a coarse trace clock (Tencent stamps whole seconds): every time a multiple
    of a tick of at least 1 ms, and at least 1% of requests sharing a stamp; else None.
    `ts` is the times, or their chunks in order."""
    chunks = [c for c in ts if len(c)] if isinstance(ts, list) else [ts]
    if sum(len(c) for c in chunks) < 2:
        return None
    # the whole trace's tick divides its first stamps' tick: most clocks are fine, and a
    # prefix says so without a pass over every stamp
    head = chunks[0][:4096] if len(chunks[0]) >= 4096 else np.concatenate(chunks)[:4096]
    if int(np.gcd.reduce(head - head[0])) < COARSE_TICK_NS:
        return None
    whole = chunks[0] if len(chunks) == 1 else np.concatenate(chunks)
    tick = int(np.gcd.reduce(whole - whole[0]))
    if tick < COARSE_TICK_NS or np.count_nonzero(np.diff(whole) == 0) < len(whole) // 100:
        return None
    return tick


class TieCounter:
    """How streams interleave at one instant, counted over a trace's batches in time order
    (the model's `ties`; see src/model/ties.rs)."""

    def __init__(self) -> None:
        from . import _core

        self._core = _core.TieCounter()

    def update(self, df: pl.DataFrame) -> None:
        def column(name: str, dtype: type) -> np.ndarray:
            return np.ascontiguousarray(df.get_column(name).to_numpy(), dtype=dtype)

        file = column("file", np.uint32) if "file" in df.columns else None
        self._core.update(
            column("ts_ns", np.int64),
            column("stream", np.uint32),
            column("op", np.uint8),
            column("offset", np.uint64),
            column("size", np.uint32),
            file,
        )

    def counts(self) -> dict[str, Any]:
        return json.loads(self._core.counts())


def tie_counts(df: pl.DataFrame) -> dict[str, Any]:
    """The `ties` of a whole time-ordered trace."""
    counter = TieCounter()
    counter.update(df)
    return counter.counts()


def _get_df(trace: Trace) -> pl.DataFrame:
    if trace._chunked:
        trace._df, trace._chunked = trace._df.rechunk(), False
    return trace._df


def _set_df(trace: Trace, df: pl.DataFrame) -> None:
    trace._df, trace._chunked = df, False


# Set after @dataclass made the field (a property in the class body would be its default).
Trace.df = property(_get_df, _set_df)  # type: ignore[assignment]


def is_canonical_parquet(path: str | Path) -> bool:
    """True for a Parquet file written by iotwin (it has the iotwin.version key)."""
    try:
        with open(path, "rb") as f:
            if f.read(4) != b"PAR1":
                return False
        kv = pl.read_parquet_metadata(path)
    except (OSError, pl.exceptions.PolarsError):
        return False
    return f"{META_PREFIX}version" in kv


def read_meta(path: str | Path, extent: bool = False) -> TraceMeta:
    """A canonical file's metadata; its `extent` only when asked for: that describes the
    rows as the file holds them, not a trace in memory that may change."""
    meta = TraceMeta.from_kv(pl.read_parquet_metadata(path))
    return meta if extent else replace(meta, extent=None)


def read_parquet_trace(path: str | Path) -> Trace:
    """A canonical Parquet trace, checked for the canonical columns."""
    path = Path(path)
    df = pl.read_parquet(path)
    missing = [c for c in CANONICAL_SCHEMA if c not in df.columns]
    if missing:
        raise IotwinError(f"{path}: not a canonical iotwin trace (missing columns {missing})")
    trace = Trace(df, read_meta(path))
    # One chunk per row group would make every later to_numpy copy its column; a parallel
    # rechunk when `df` is first used costs a fraction of those copies, and passes that
    # read the chunks (characterize) skip it.
    trace._chunked = True
    return trace


def canonical_order(columns: list[str]) -> list[str]:
    return [c for c in (*CANONICAL_SCHEMA, *OPTIONAL_SCHEMA) if c in columns]


def write_trace(trace: Trace, path: str | Path) -> None:
    """Writes a trace as canonical Parquet, atomically (temporary name, then rename)."""
    from .source import atomic_output

    meta = replace(trace.meta, extent=extent_of(trace.df))
    with atomic_output(path) as tmp:
        # zstd level 1: a quarter less CPU than polars' default level for 4% more bytes
        # (10M synthetic requests: 82 against 79 MiB)
        trace.df.select(canonical_order(trace.df.columns)).write_parquet(
            tmp, metadata=meta.to_kv(), compression="zstd", compression_level=1
        )


def extent_of(df: pl.DataFrame) -> dict[str, int] | None:
    """The extent a canonical trace's metadata records (None for no rows)."""
    if df.height == 0:
        return None
    row = df.select(
        pl.col("ts_ns").min().alias("first_ts"),
        pl.col("ts_ns").max().alias("last_ts"),
        pl.col("stream").max().alias("max_stream"),
        pl.col("offset").min().alias("min_offset"),
        pl.col("offset").max().alias("top"),
        pl.col("size").max().alias("longest"),
    ).row(0, named=True)
    top, longest = row.pop("top"), row.pop("longest")
    # the largest end is among the requests that start within the longest size of the last
    # start: adding the columns for those alone halves the time (ingest does it per row group)
    near = df.filter(pl.col("offset") >= top - min(top, longest))
    end = near.select((pl.col("offset") + pl.col("size").cast(pl.UInt64)).max()).item()
    return {"rows": df.height, **{k: int(v) for k, v in row.items()}, "max_end": int(end)}


def merge_extents(a: dict[str, int] | None, b: dict[str, int] | None) -> dict[str, int] | None:
    """The extent of two sets of rows."""
    if a is None or b is None:
        return a or b
    low, high = ("first_ts", "min_offset"), ("last_ts", "max_stream", "max_end")
    return {
        "rows": a["rows"] + b["rows"],
        **{k: min(a[k], b[k]) for k in low},
        **{k: max(a[k], b[k]) for k in high},
    }


def set_parquet_metadata(path: str | Path, kv: dict[str, str]) -> None:
    """Adds key-value metadata to a Parquet file by rewriting only its footer.

    The data pages stay where they are (row-group offsets in the footer remain valid), so
    metadata learnt while streaming a trace costs milliseconds, not a second pass.
    """
    import pyarrow.parquet as pq  # only writers need pyarrow; readers skip its import

    md = pq.read_metadata(path)
    schema = md.schema.to_arrow_schema()
    merged = {k: v for k, v in (md.metadata or {}).items() if k != b"ARROW:schema"}
    merged.update({k.encode(): v.encode() for k, v in kv.items()})
    buf = io.BytesIO()
    pq.write_metadata(schema.with_metadata(merged), buf, metadata_collector=[md])
    footer = buf.getvalue()[4:]  # drop the leading PAR1 magic of a metadata-only file
    size = os.path.getsize(path)
    with open(path, "rb+") as f:
        f.seek(size - 8)
        footer_len, magic = struct.unpack("<I4s", f.read(8))
        if magic != b"PAR1":
            raise IotwinError(f"{path}: not a Parquet file")
        f.seek(size - 8 - footer_len)
        f.write(footer)
        f.truncate()
