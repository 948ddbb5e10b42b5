"""Reading any supported trace into the canonical form, streamed to Parquet or into memory.

Every format goes through the same steps here, once: detect the format, scan it, make times
relative to the first request, cast to the canonical dtypes, check for malformed records
and time order (sorting stably when a format's rows are not time-ordered), and record the
metadata.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import time
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import polars as pl

from .errors import IotwinError, SkippedRecordsWarning, TraceFormatError
from .formats import ReadOptions, Scan, TraceFormat, detect, get_format
from .formats.base import CANONICAL_SCHEMA, OPTIONAL_SCHEMA
from .formats.delimited import DelimitedFormat
from .source import WriteBehind, atomic_output, plain_file, prefetched
from .trace import (
    Trace,
    TraceMeta,
    canonical_order,
    extent_of,
    is_canonical_parquet,
    merge_extents,
    read_parquet_trace,
    set_parquet_metadata,
)

if TYPE_CHECKING:
    import pyarrow as pa
    import pyarrow.parquet as pq


@dataclass
class IngestResult:
    """What `ingest` did: where the trace went and what it holds."""

    output: Path
    format: str
    requests: int
    streams: int
    skipped: int
    skipped_examples: list[str] = field(default_factory=list)
    seconds: float = 0.0
    info: dict[str, Any] = field(default_factory=dict)  # format-specific facts (Scan.info)


def resolve_format(path: Path, format_name: str | None) -> TraceFormat:
    return get_format(format_name) if format_name else detect(path)


@contextlib.contextmanager
def open_scan(
    src: str | Path, format_name: str | None = None, opts: ReadOptions | None = None
) -> Iterator[tuple[TraceFormat, Path, Scan, pl.LazyFrame]]:
    """Scans a raw trace; yields the format, the readable path, the scan and the canonical frame."""
    src = Path(src)
    if not src.is_file():
        raise IotwinError(f"{src}: no such file")
    opts = opts or ReadOptions()
    fmt = resolve_format(src, format_name)
    staged = plain_file(src) if fmt.needs_plain_file else contextlib.nullcontext(src)
    with staged as path, reading_errors(fmt, src, path, opts):
        scan = fmt.scan(path, opts)
        yield fmt, path, scan, canonical_frame(scan)


def canonical_frame(scan: Scan) -> pl.LazyFrame:
    """The scan's columns in canonical order and dtypes, times relative to the first record."""
    frame = scan.frame
    names = frame.collect_schema().names()
    schema = {**CANONICAL_SCHEMA, **{k: v for k, v in OPTIONAL_SCHEMA.items() if k in names}}
    probe = scan.timed and not scan.relative
    first = frame.select(pl.col("ts_ns").first()).collect().item() if probe else 0
    shifted = pl.col("ts_ns") - (first or 0) if scan.timed else pl.lit(0, pl.Int64())
    return frame.with_columns(shifted.alias("ts_ns")).select(
        [pl.col(c).cast(t) for c, t in schema.items()]
    )


@contextlib.contextmanager
def reading_errors(fmt: TraceFormat, src: Path, path: Path, opts: ReadOptions) -> Iterator[None]:
    """Turns a parser failure into an error naming the original file, line and field."""
    try:
        yield
    except IotwinError as exc:
        if isinstance(exc, TraceFormatError) and exc.path == str(path) and path != src:
            raise TraceFormatError(src, exc.location, exc.field, exc.message) from None
        raise
    except (pl.exceptions.PolarsError, ValueError, OverflowError) as exc:
        cause = _traceformat_cause(exc)
        if cause is not None:
            raise TraceFormatError(src, cause.location, cause.field, cause.message) from None
        if isinstance(fmt, DelimitedFormat):
            located = fmt.locate_error(path, opts)
            if located is not None:
                raise TraceFormatError(
                    src, located.location, located.field, located.message
                ) from None
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise IotwinError(f"{src}: cannot read as {fmt.name}: {first}") from None


def _traceformat_cause(exc: BaseException) -> TraceFormatError | None:
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, TraceFormatError):
            return seen
        seen = seen.__cause__ or seen.__context__
    return None


def _check_and_normalize(
    df: pl.DataFrame, fmt: TraceFormat, path: Path, opts: ReadOptions, src: Path
) -> tuple[pl.DataFrame, bool]:
    """Raises on malformed records; sorts stably when out of time order. Returns (df, changed)."""
    nulls = _required_nulls(df)
    if nulls:
        _raise_malformed(nulls, fmt, path, opts, src)
    ts = df.get_column("ts_ns")
    if ts.is_sorted() and (ts.len() == 0 or ts[0] == 0):
        return df, False
    df = df.sort("ts_ns", maintain_order=True)
    return df.with_columns(pl.col("ts_ns") - pl.col("ts_ns").min()), True


def _raise_malformed(
    nulls: int, fmt: TraceFormat, path: Path, opts: ReadOptions, src: Path
) -> None:
    """Names the first malformed line when the format can, else counts the bad values."""
    located = fmt.locate_error(path, opts) if isinstance(fmt, DelimitedFormat) else None
    if located is not None:
        raise TraceFormatError(src, located.location, located.field, located.message)
    raise IotwinError(f"{src}: {nulls} malformed field values (re-run with --skip-bad)")


def _check_latency_fields(fmt: TraceFormat, path: Path, opts: ReadOptions, src: Path) -> None:
    """Unknown latencies are fine when their field is empty, not when it does not parse."""
    located = fmt.locate_error(path, opts) if isinstance(fmt, DelimitedFormat) else None
    if located is not None:
        raise TraceFormatError(src, located.location, located.field, located.message)


def _required_nulls(df: pl.DataFrame) -> int:
    """Nulls in the columns every request must have (latency may be unknown for some)."""
    return sum(df.select(pl.exclude("latency_ns").null_count()).row(0))


def _meta(
    src: Path,
    fmt: TraceFormat,
    scan: Scan,
    streams: list[int],
    extent: dict[str, int] | None = None,
) -> TraceMeta:
    namer = scan.stream_name or (lambda s: f"{scan.stream_by} {s}")
    return TraceMeta(
        source=str(src),
        format=fmt.name,
        stream_by=scan.stream_by,
        timed=scan.timed,
        capacity=scan.capacity,
        streams={int(s): namer(int(s)) for s in streams},
        files=scan.files,
        skipped=scan.report.skipped,
        extent=extent,
    )


def ingest(
    src: str | Path,
    out: str | Path,
    format_name: str | None = None,
    opts: ReadOptions | None = None,
) -> IngestResult:
    """Converts a raw trace to canonical Parquet, streaming in bounded memory.

    Batches are checked as they pass (malformed records, time order, stream ids) and written
    while the next batch is parsed. Traces whose rows turn out to be out of time order are
    then sorted, stably, in memory.
    """
    started = time.perf_counter()
    src, out = Path(src), Path(out)
    opts = opts or ReadOptions()
    with open_scan(src, format_name, opts) as (fmt, path, scan, frame), atomic_output(out) as tmp:
        with reading_errors(fmt, src, path, opts):
            check = _write_checked(frame, tmp)
            if scan.finish is not None:
                scan.finish()
        if check.unknown_latencies and not opts.skip_bad:
            _check_latency_fields(fmt, path, opts, src)
        if check.nulls:  # the writer stopped at the first malformed row group
            _raise_malformed(check.nulls, fmt, path, opts, src)
        if not check.ordered:
            df, _ = _check_and_normalize(pl.read_parquet(tmp), fmt, path, opts, src)
            streams = df.get_column("stream").unique().sort().to_list()
            meta = _meta(src, fmt, scan, streams, extent_of(df))
            _write_sorted(df, tmp)
            set_parquet_metadata(tmp, meta.to_kv())
        else:
            meta = _meta(src, fmt, scan, sorted(check.streams), check.extent)
            set_parquet_metadata(tmp, meta.to_kv())
    return IngestResult(
        output=out,
        format=fmt.name,
        requests=check.requests,
        streams=len(meta.streams),
        skipped=scan.report.skipped,
        skipped_examples=scan.report.examples,
        seconds=time.perf_counter() - started,
        info=scan.info,
    )


def ingest_dataset(
    src: str | Path,
    out: str | Path,
    format_name: str | None = None,
    opts: ReadOptions | None = None,
    partition_rows: int | None = None,
    partition_window_ns: int | None = None,
) -> IngestResult:
    """Converts a raw trace to a partitioned dataset (see `dataset.py`): the canonical trace is
    streamed to a temporary Parquet file beside `out` (with every check `ingest` makes), then
    split by stream and time a row group at a time, so memory stays bounded throughout. A
    canonical Parquet trace is split directly."""
    from .dataset import write_dataset

    started = time.perf_counter()
    src, out = Path(src), Path(out)
    if format_name in (None, "parquet") and src.is_file() and is_canonical_parquet(src):
        ds = write_dataset(src, out, partition_rows, partition_window_ns)  # already canonical
        return IngestResult(
            output=out,
            format=ds.meta.format,
            requests=ds.requests,
            streams=len(ds.stream_lengths()),
            skipped=0,
            seconds=time.perf_counter() - started,
            info={"partitions": len(ds.partitions)},
        )
    out.parent.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(prefix=f".{out.name}.", suffix=".canonical.parquet", dir=out.parent)
    os.close(fd)
    staged = Path(name)
    staged.unlink()  # ingest's rename over an existing file would make ext4 flush it first
    try:
        result = ingest(src, staged, format_name, opts)
        ds = write_dataset(staged, out, partition_rows, partition_window_ns)
    finally:
        staged.unlink(missing_ok=True)
    result.output = out
    result.info = {**result.info, "partitions": len(ds.partitions)}
    result.seconds = time.perf_counter() - started
    return result


# Row groups whose stream ids span fewer values than this list them by counting.
DENSE_STREAM_SPAN = 1 << 20


@dataclass
class _BatchChecks:
    """What the writer learns from the batches as they pass."""

    requests: int = 0
    nulls: int = 0
    unknown_latencies: int = 0
    ordered: bool = True
    last_ts: int = 0
    streams: set[int] = field(default_factory=set)
    extent: dict[str, int] | None = None

    def update(self, group: pl.DataFrame) -> None:
        """Checks one row group (about ROW_GROUP rows: per polars batch, the fixed cost of
        each check was most of its time)."""
        if group.height == 0:
            return
        self.requests += group.height
        columns = {c.name: c for c in group.get_columns()}
        self.nulls += sum(c.null_count() for name, c in columns.items() if name != "latency_ns")
        if "latency_ns" in columns:
            self.unknown_latencies += columns["latency_ns"].null_count()
        if not self.nulls:
            self.extent = merge_extents(self.extent, extent_of(group))
        ts = columns["ts_ns"]
        first, last = ts[0], ts[-1]
        if self.ordered and (first is None or first < self.last_ts or not ts.is_sorted()):
            self.ordered = False
        if last is not None:
            self.last_ts = last
        stream = columns["stream"]
        if stream.null_count() < group.height:
            low, high = stream.min(), stream.max()
            if low == high:  # most row groups of a single-stream trace
                self.streams.add(low)
            elif high - low < DENSE_STREAM_SPAN:  # counting, not polars' sort-based unique
                ids = stream.drop_nulls().to_numpy().astype(np.int64) - low
                present = np.flatnonzero(np.bincount(ids, minlength=high - low + 1)) + low
                self.streams.update(present.tolist())
            else:
                self.streams.update(stream.unique().drop_nulls().to_list())


def _write_checked(frame: pl.LazyFrame, path: Path) -> _BatchChecks:
    """Streams the frame's batches into Parquet at `path`, checking each batch on the way.

    A helper thread keeps polars producing batches while row groups are encoded; batches
    are gathered into row groups of about ROW_GROUP rows (polars' batches are small), and
    checked a row group at a time. At the first row group with a malformed value writing
    stops (ingest then fails), and the rest of the file is only checked.
    """

    checks = _BatchChecks()
    writer: pq.ParquetWriter | None = None
    behind: WriteBehind | None = None
    pending: list[pl.DataFrame] = []
    rows = 0

    def flush() -> None:
        nonlocal writer, behind, pending, rows
        group = pl.concat(pending, rechunk=False)
        pending, rows = [], 0
        checks.update(group)
        if checks.nulls:  # ingest fails naming the bad line; the rest is only counted
            return
        table = group.to_arrow()
        if writer is None:
            writer = parquet_writer(path, table.schema, compact=False)
            behind = WriteBehind(path)
        # one row group per flush, its columns marked required (no definition levels)
        writer.write_table(table.cast(writer.schema), row_group_size=table.num_rows)
        assert behind is not None
        behind()

    try:
        # at most two row groups' rows wait (polars' batches grew tenfold between versions)
        batches = prefetched(frame.collect_batches(), size=_height, budget=2 * ROW_GROUP)
        for batch in batches:
            pending.append(batch)
            rows += batch.height
            if rows >= ROW_GROUP:
                flush()
        if pending:
            flush()
        if writer is None and not checks.nulls:  # an empty trace is still a canonical file
            pl.DataFrame(schema=frame.collect_schema()).write_parquet(path)
    finally:
        if writer is not None:
            writer.close()
        if behind is not None:
            behind.close()
    return checks


ROW_GROUP = 1 << 20


def _height(frame: pl.DataFrame) -> int:
    return frame.height


def _write_sorted(df: pl.DataFrame, path: Path) -> None:
    """A trace sorted in memory, in the encodings of the streamed ones."""
    table = df.to_arrow()
    writer = parquet_writer(path, table.schema, compact=False)
    try:
        writer.write_table(table.cast(writer.schema), row_group_size=ROW_GROUP)
    finally:
        writer.close()


def parquet_writer(path: str | Path, schema: pa.Schema, compact: bool) -> pq.ParquetWriter:
    """A canonical trace's row-group writer, in the cheapest encodings to write and read that
    still shrink traces where it is nearly free: times delta-encoded (they only grow: 8 bytes
    to ~2), every other column plain and uncompressed. Compressing stream, op and size with
    LZ4 made the 10M-request bench trace 213 instead of 292 MiB but cost ingest ~0.1 s of CPU
    time (and readers LZ4 decoding); columns that every request has are marked required,
    which spares writing and reading definition levels (~0.08 s). Measured in bench/ingest;
    see docs/formats.md.

    `compact` adds zstd level 1 and dictionaries for the few-valued columns (stream, op,
    size), for traces kept as they are written (synthetic twins): on 10M synthetic requests
    72 MiB in 0.59 s of CPU, against 237 MiB in 0.19 s plain and 81 MiB in 0.89 s with
    pyarrow's default dictionaries on every column."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    required = pa.schema(
        [f.with_nullable(f.name in OPTIONAL_NULLABLE) for f in schema], metadata=schema.metadata
    )
    few_valued = [name for name in ("stream", "op", "size") if name in required.names]
    return pq.ParquetWriter(
        path,
        required,
        compression="zstd" if compact else "none",
        compression_level=1 if compact else None,
        use_dictionary=few_valued if compact else False,
        column_encoding={"ts_ns": "DELTA_BINARY_PACKED"},
        write_statistics=["ts_ns", "stream"],
    )


# Columns a request may lack (an unknown latency); every other canonical column is required.
OPTIONAL_NULLABLE = ("latency_ns",)


def load_trace(
    src: str | Path, format_name: str | None = None, opts: ReadOptions | None = None
) -> Trace:
    """Any supported trace (raw or canonical Parquet) as a canonical Trace in memory."""
    src = Path(src)
    if format_name in (None, "parquet") and src.is_file() and is_canonical_parquet(src):
        return read_parquet_trace(src)
    if format_name in (None, "dataset") and src.is_dir():
        from .dataset import open_dataset

        return open_dataset(src).to_trace()
    opts = opts or ReadOptions()
    with open_scan(src, format_name, opts) as (fmt, path, scan, frame):
        with reading_errors(fmt, src, path, opts):
            df = frame.collect()
            if scan.finish is not None:
                scan.finish()
        if "latency_ns" in df.columns and df["latency_ns"].null_count() and not opts.skip_bad:
            _check_latency_fields(fmt, path, opts, src)
        df, _ = _check_and_normalize(df, fmt, path, opts, src)
        streams = df.get_column("stream").unique().sort().to_list()
        df = df.select(canonical_order(df.columns))
        warn_skipped(src, scan.report.skipped, scan.report.examples)
        return Trace(df, _meta(src, fmt, scan, streams))


def warn_skipped(src: Path, skipped: int, examples: list[str]) -> None:
    """Says how many malformed records --skip-bad left out, and the first of them."""
    if skipped:
        # an example names the file, the line and the field already
        where = f"; the first: {examples[0]}" if examples else f" in {src}"
        noun = "record" if skipped == 1 else "records"
        message = f"skipped {skipped:,} malformed {noun}{where}"
        warnings.warn(SkippedRecordsWarning(message), stacklevel=3)
