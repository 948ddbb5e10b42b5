"""Partitioned trace datasets: one canonical trace split by stream and by time.

A dataset is a directory that a cluster's workers can read piece by piece:

    DATASET/_iotwin.json                     the manifest: trace metadata, partitions, totals
    DATASET/stream=K/part-NNNNNN.parquet     stream K's requests, NNNNNN-th cut in time order

Each partition holds the canonical columns of one stream's consecutive requests plus `seq`,
the request's row in the whole time-ordered trace (so the dataset reassembles into exactly the
trace it came from), and `run_start`, whether the request continues the one before it in the
trace (1: it does not), which characterize's global run count needs. The manifest lists every partition with its rows and time range, each
stream's request count and the trace's extent, so fitting needs no pass to learn them.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import tempfile
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import polars as pl

from .errors import IotwinError
from .trace import TieCounter, Trace, TraceMeta, canonical_order

if TYPE_CHECKING:
    import pyarrow as pa

MANIFEST = "_iotwin.json"
DATASET_FORMAT = "iotwin-dataset"
DATASET_VERSION = 1
SEQ = "seq"
RUN_START = "run_start"
DEFAULT_PARTITION_ROWS = 4 << 20
# Rows held in memory across all streams before every stream's pending rows are cut.
BUFFER_ROWS = 16 << 20
READ_BATCH = 1 << 20


@dataclass
class Partition:
    """One file of the dataset: consecutive requests of one stream."""

    path: str  # relative to the dataset's directory
    stream: int
    index: int  # the stream's index-th partition in time order
    rows: int
    first_ts: int
    last_ts: int


@dataclass
class Dataset:
    """A partitioned trace, as its manifest describes it."""

    root: Path
    meta: TraceMeta
    requests: int
    first_ts: int
    last_ts: int
    max_end: int  # max(offset + size) over the trace
    columns: list[str]
    partitions: list[Partition]  # by stream, then time
    file_ends: dict[int, int] = field(default_factory=dict)  # file-level traces: file -> end
    clock_ns: int | None = None  # the tick of a coarse trace clock (trace.coarse_clock_ns)
    ties: dict[str, Any] | None = None  # how streams interleave at one instant (trace.tie_counts)

    @property
    def span_ns(self) -> int:
        return self.last_ts - self.first_ts if self.requests else 0

    @property
    def capacity(self) -> int:
        """The address-space size, as `Trace.capacity` gives it for the whole trace."""
        return int(self.meta.capacity) if self.meta.capacity else self.max_end

    def stream_lengths(self) -> dict[int, int]:
        lengths: dict[int, int] = {}
        for p in self.partitions:
            lengths[p.stream] = lengths.get(p.stream, 0) + p.rows
        return lengths

    def file(self, p: Partition) -> Path:
        return self.root / p.path

    def read(self, p: Partition, columns: list[str] | None = None) -> pl.DataFrame:
        """One partition's columns; an unreadable or foreign file is named in the error."""
        return read_partition(self.file(p), p, columns)

    def to_trace(self) -> Trace:
        """The whole trace in memory, in its original row order."""
        frames = [self.read(p) for p in self.partitions]
        if not frames:
            schema = {c: t for c, t in _canonical_schema().items() if c in self.columns}
            return Trace(pl.DataFrame(schema=schema), self.meta)
        df = pl.concat(frames).sort(SEQ).drop(SEQ)
        return Trace(df.select(canonical_order(df.columns)).rechunk(), self.meta)

    def manifest(self) -> dict[str, Any]:
        return {
            "format": DATASET_FORMAT,
            "version": DATASET_VERSION,
            "meta": self.meta.to_kv(),
            "requests": self.requests,
            "first_ts": self.first_ts,
            "last_ts": self.last_ts,
            "max_end": self.max_end,
            "columns": self.columns,
            "file_ends": {str(k): v for k, v in self.file_ends.items()},
            "clock_ns": self.clock_ns,
            "ties": self.ties,
            "partitions": [asdict(p) for p in self.partitions],
        }


def _canonical_schema() -> dict[str, pl.DataType]:
    from .formats.base import CANONICAL_SCHEMA, OPTIONAL_SCHEMA

    return {**CANONICAL_SCHEMA, **OPTIONAL_SCHEMA}


def is_dataset(path: str | Path) -> bool:
    path = Path(path)
    return path.is_dir() and (path / MANIFEST).is_file()


def open_dataset(path: str | Path) -> Dataset:
    """Reads a dataset's manifest; errors name the manifest and the field."""
    root = Path(path)
    where = root / MANIFEST
    if not root.is_dir():
        raise IotwinError(f"{root}: no such dataset directory")
    try:
        doc = json.loads(where.read_text())
    except OSError as exc:
        raise IotwinError(f"{where}: cannot read the dataset manifest: {exc.strerror}") from None
    except json.JSONDecodeError as exc:
        raise IotwinError(f"{where}: line {exc.lineno}: not valid JSON: {exc.msg}") from None
    if not isinstance(doc, dict) or doc.get("format") != DATASET_FORMAT:
        raise IotwinError(
            f'{where}: not an iotwin dataset manifest (no "format": "{DATASET_FORMAT}")'
        )
    if doc.get("version") != DATASET_VERSION:
        raise IotwinError(f"{where}: dataset version {doc.get('version')!r} is not supported")
    try:
        parts = [Partition(**p) for p in doc["partitions"]]
        return Dataset(
            root=root,
            meta=TraceMeta.from_kv(doc["meta"]),
            requests=int(doc["requests"]),
            first_ts=int(doc["first_ts"]),
            last_ts=int(doc["last_ts"]),
            max_end=int(doc["max_end"]),
            columns=list(doc["columns"]),
            partitions=parts,
            file_ends={int(k): int(v) for k, v in doc.get("file_ends", {}).items()},
            clock_ns=None if doc.get("clock_ns") is None else int(doc["clock_ns"]),
            ties=_ties(doc.get("ties")),
        )
    except KeyError as exc:
        raise IotwinError(f"{where}: field {exc.args[0]!r} is missing") from None
    except (TypeError, ValueError) as exc:
        raise IotwinError(f"{where}: malformed field: {exc}") from None


def _ties(value: Any) -> dict[str, Any] | None:
    """The manifest's `ties` (None in datasets split before they were counted)."""
    from .model import valid_ties

    if value is not None and not valid_ties(value):
        raise ValueError(
            "ties: expected counts {pairs, same} of sequential, near and other (and by "
            "operations and by runs)"
        )
    return value


def read_partition(
    file: Path, p: Partition | None = None, columns: list[str] | None = None
) -> pl.DataFrame:
    """A partition file as a DataFrame, checked against what the manifest says of it."""
    try:
        df = pl.read_parquet(file, columns=columns)
    except (OSError, pl.exceptions.PolarsError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise IotwinError(f"{file}: cannot read the partition: {first}") from None
    if p is not None and df.height != p.rows:
        raise IotwinError(f"{file}: {df.height:,} rows, the manifest says {p.rows:,}")
    if p is not None and "stream" in df.columns and df.height:
        foreign = df.get_column("stream") != p.stream
        if foreign.any():
            row = int(foreign.arg_max() or 0)
            raise IotwinError(
                f"{file}: row {row}: field 'stream': {df['stream'][row]} in the partition "
                f"of stream {p.stream}"
            )
    return df


# -- writing -----------------------------------------------------------------------------------


def write_dataset(
    trace_file: Path,
    out: Path,
    partition_rows: int | None = None,
    partition_window_ns: int | None = None,
) -> Dataset:
    """Splits a canonical Parquet trace into a dataset at `out`, reading it a row group at a
    time (bounded memory); see `write_batches`."""
    import pyarrow.parquet as pq

    from .trace import read_meta

    source = pq.ParquetFile(trace_file)
    batches = (pl.from_arrow(b) for b in source.iter_batches(batch_size=READ_BATCH))
    meta, columns = read_meta(trace_file), source.schema_arrow.names
    return write_batches(batches, meta, out, partition_rows, partition_window_ns, columns)


def write_batches(
    batches: Iterable[pl.DataFrame],
    meta: TraceMeta,
    out: Path,
    partition_rows: int | None = None,
    partition_window_ns: int | None = None,
    columns: list[str] | None = None,
) -> Dataset:
    """Writes a canonical trace, given as time-ordered batches, as a dataset at `out`: by
    stream, then every `partition_rows` requests of a stream or at every
    `partition_window_ns` of trace time (both cut when both are given).

    The dataset is assembled in a temporary directory beside `out` and renamed onto it, so a
    failure leaves no half-written dataset.
    """
    if partition_rows is not None and partition_rows < 1:
        raise IotwinError(f"--partition-rows must be >= 1, got {partition_rows}")
    if partition_window_ns is not None and partition_window_ns < 1:
        raise IotwinError("--partition-window must be positive")
    rows_cap = partition_rows or DEFAULT_PARTITION_ROWS
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", suffix=".tmp", dir=out.parent))
    try:
        splitter = _Splitter(tmp, rows_cap, partition_window_ns)
        for batch in batches:
            columns = columns or batch.columns
            splitter.add(batch)
        splitter.close()
        ds = splitter.dataset(tmp, meta, columns or list(_canonical_schema())[:5])
        (tmp / MANIFEST).write_text(json.dumps(ds.manifest(), indent=1) + "\n")
        os.chmod(tmp, 0o777 & ~_umask())
        _replace_dir(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    ds.root = out
    return ds


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _replace_dir(new: Path, target: Path) -> None:
    """Moves `new` onto `target`; an existing dataset there is replaced, anything else kept."""
    if target.exists() and not is_dataset(target):
        raise IotwinError(f"{target}: exists and is not an iotwin dataset; not overwriting it")
    if target.exists():
        old = target.with_name(f".{target.name}.old-{os.getpid()}")
        os.replace(target, old)
        os.replace(new, target)
        shutil.rmtree(old, ignore_errors=True)
    else:
        os.replace(new, target)


@dataclass
class _Pending:
    frames: list[pl.DataFrame] = field(default_factory=list)
    rows: int = 0
    window: int | None = None
    written: int = 0  # partitions written so far


class _Splitter:
    """Gathers each stream's rows and cuts them into partition files."""

    def __init__(self, root: Path, rows_cap: int, window_ns: int | None) -> None:
        self.root = root
        self.rows_cap = rows_cap
        self.window_ns = window_ns
        self.pending: dict[int, _Pending] = {}
        self.buffered = 0
        self.seq = 0
        self.partitions: list[Partition] = []
        self.first_ts: int | None = None
        self.last_ts = 0
        self.max_end = 0
        self.file_ends: dict[int, int] = {}
        self.prev_end: int | None = None
        self.ts_gcd = 0  # gcd of every time since the first: the clock's tick
        self.same_ts = 0  # requests stamped with the time of the one before
        self.ties = TieCounter()

    def add(self, batch: pl.DataFrame) -> None:
        if batch.height == 0:
            return
        batch = batch.with_columns(
            pl.arange(self.seq, self.seq + batch.height, dtype=pl.UInt64).alias(SEQ)
        )
        self.seq += batch.height
        self.ties.update(batch)
        batch = self._run_starts(batch)
        self._extent(batch)
        if self.window_ns:
            batch = batch.with_columns((pl.col("ts_ns") // self.window_ns).alias("__window"))
        for (stream,), rows in batch.partition_by(
            "stream", maintain_order=True, as_dict=True
        ).items():
            self._add_stream(int(stream), rows)
        if self.buffered >= BUFFER_ROWS:
            for stream in list(self.pending):
                self._cut(stream)

    def _run_starts(self, batch: pl.DataFrame) -> pl.DataFrame:
        """Adds `run_start`: 1 where a request does not continue the one before it in the
        trace (any stream), which a stream's partition alone cannot tell."""
        end = pl.col("offset") + pl.col("size").cast(pl.UInt64)
        prev = end.shift(1, fill_value=self.prev_end)
        batch = batch.with_columns(
            (prev.is_null() | (prev != pl.col("offset"))).cast(pl.UInt8).alias(RUN_START)
        )
        self.prev_end = int(batch.select(end.last()).item())
        return batch

    def _extent(self, batch: pl.DataFrame) -> None:
        ts = batch.get_column("ts_ns")
        if self.first_ts is None:
            self.first_ts = int(ts[0])
        else:
            self.same_ts += int(ts[0]) == self.last_ts
        self._clock(ts.to_numpy())
        self.last_ts = int(ts[-1])
        end = pl.col("offset") + pl.col("size").cast(pl.UInt64)
        self.max_end = max(self.max_end, int(batch.select(end.max()).item()))
        if "file" in batch.columns:
            ends = batch.group_by("file").agg(end.max().alias("end"))
            for fid, e in ends.iter_rows():
                self.file_ends[int(fid)] = max(self.file_ends.get(int(fid), 0), int(e))

    def _clock(self, ts: np.ndarray) -> None:
        """What `trace.coarse_clock_ns` needs of the whole trace, gathered batch by batch."""
        first = self.first_ts or 0
        self.ts_gcd = math.gcd(self.ts_gcd, int(np.gcd.reduce(ts - first)))
        self.same_ts += int(np.count_nonzero(np.diff(ts) == 0))

    def clock_ns(self) -> int | None:
        """The coarse clock's tick, as `trace.coarse_clock_ns` gives it for the whole trace."""
        from .trace import COARSE_TICK_NS

        if self.seq < 2 or self.ts_gcd < COARSE_TICK_NS or self.same_ts < self.seq // 100:
            return None
        return self.ts_gcd

    def _add_stream(self, stream: int, rows: pl.DataFrame) -> None:
        pending = self.pending.setdefault(stream, _Pending())
        if self.window_ns:
            for (window,), piece in rows.partition_by(
                "__window", maintain_order=True, as_dict=True
            ).items():
                if pending.window is not None and window != pending.window:
                    self._cut(stream)
                pending.window = int(window)
                self._append(stream, piece.drop("__window"))
        else:
            self._append(stream, rows)

    def _append(self, stream: int, rows: pl.DataFrame) -> None:
        pending = self.pending[stream]
        while rows.height:
            room = self.rows_cap - pending.rows
            take = rows.head(room)
            pending.frames.append(take)
            pending.rows += take.height
            self.buffered += take.height
            rows = rows.slice(take.height)
            if pending.rows >= self.rows_cap:
                self._cut(stream)

    def _cut(self, stream: int) -> None:
        pending = self.pending[stream]
        if not pending.rows:
            return
        df = pl.concat(pending.frames)
        rel = f"stream={stream}/part-{pending.written:06d}.parquet"
        file = self.root / rel
        file.parent.mkdir(exist_ok=True)
        _write_partition(df.to_arrow(), file)
        ts = df.get_column("ts_ns")
        self.partitions.append(
            Partition(rel, stream, pending.written, df.height, int(ts[0]), int(ts[-1]))
        )
        self.buffered -= pending.rows
        pending.frames, pending.rows = [], 0
        pending.written += 1

    def close(self) -> None:
        for stream in list(self.pending):
            self._cut(stream)

    def dataset(self, root: Path, meta: TraceMeta, columns: list[str]) -> Dataset:
        parts = sorted(self.partitions, key=lambda p: (p.stream, p.index))
        return Dataset(
            root=root,
            meta=meta,
            requests=self.seq,
            first_ts=self.first_ts or 0,
            last_ts=self.last_ts,
            max_end=self.max_end,
            columns=[*columns, SEQ, RUN_START],
            partitions=parts,
            file_ends=dict(sorted(self.file_ends.items())),
            clock_ns=self.clock_ns(),
            ties=self.ties.counts(),
        )


def _write_partition(table: pa.Table, file: Path) -> None:
    """The encodings of canonical traces (see ingest); `seq` only grows, so it is
    delta-encoded to a few bits per row."""
    import pyarrow.parquet as pq

    names = table.schema.names
    small = ("stream", "op", "size", "file", RUN_START)
    compression = {c: ("lz4" if c in small else "none") for c in names}
    pq.write_table(
        table,
        file,
        compression=compression,
        use_dictionary=False,
        column_encoding={"ts_ns": "DELTA_BINARY_PACKED", SEQ: "DELTA_BINARY_PACKED"},
        row_group_size=1 << 20,
    )


def partition_columns(df: pl.DataFrame) -> Iterator[np.ndarray]:
    """The five columns the fitter reads, contiguous and of the core's dtypes."""
    for name, dtype in (
        ("ts_ns", np.int64),
        ("stream", np.uint32),
        ("op", np.uint8),
        ("offset", np.uint64),
        ("size", np.uint32),
    ):
        yield np.ascontiguousarray(df.get_column(name).to_numpy(), dtype=dtype)
