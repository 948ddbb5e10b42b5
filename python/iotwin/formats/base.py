"""The one small interface every trace format implements.

A format is one file in this package: a subclass of `TraceFormat` that can recognise its
files (`sniff`) and turn one into a lazy frame of canonical columns (`scan`). The registry in
`formats/__init__.py` lists them. Readers never make times relative, sort, or write: the
ingest pipeline (`iotwin.ingest`) does that once for every format.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import polars as pl

from ..errors import TraceFormatError

# Canonical column dtypes (design.md). latency_ns and file are optional.
CANONICAL_SCHEMA: dict[str, pl.DataType] = {
    "ts_ns": pl.Int64(),
    "stream": pl.UInt32(),
    "op": pl.UInt8(),
    "offset": pl.UInt64(),
    "size": pl.UInt32(),
}
OPTIONAL_SCHEMA: dict[str, pl.DataType] = {"latency_ns": pl.Int64(), "file": pl.UInt32()}
NUMPY_DTYPES = {
    "ts_ns": np.int64,
    "stream": np.uint32,
    "op": np.uint8,
    "offset": np.uint64,
    "size": np.uint32,
    "latency_ns": np.int64,
    "file": np.uint32,
}

OP_READ, OP_WRITE, OP_FLUSH, OP_TRIM = 0, 1, 2, 3
OP_NAMES = {OP_READ: "read", OP_WRITE: "write", OP_FLUSH: "flush", OP_TRIM: "trim"}


@dataclass
class ReadOptions:
    """What the user asked of a reader."""

    stream_by: str | None = None  # None: the format's default (its first stream key)
    skip_bad: bool = False
    # Format-specific settings, e.g. {"events": "D"} for blkparse or a column map for generic CSV.
    extra: dict[str, str] = field(default_factory=dict)


@dataclass
class ReadReport:
    """Malformed records skipped with --skip-bad, known once the scan has run."""

    skipped: int = 0
    examples: list[str] = field(default_factory=list)

    def add(self, skipped: int, examples: list[str]) -> None:
        self.skipped += skipped
        room = 5 - len(self.examples)
        if room > 0:
            self.examples.extend(examples[:room])


@dataclass
class Scan:
    """A reader's result: canonical columns, lazily, plus what the format knows about them.

    `frame` has the canonical columns; `ts_ns` is absolute nanoseconds in the format's own
    epoch (the pipeline makes it relative). `ordered` is False for formats whose rows are not
    time-ordered (the pipeline sorts them, stably). `timed` is False for formats without
    timestamps (ts_ns is then 0). `files` and `report` may be filled while the frame is
    consumed (readers that discover them as they go): read them after `finish`.
    """

    frame: pl.LazyFrame
    stream_by: str
    timed: bool = True
    # True when the reader already counts time from the first record (saves a probe).
    relative: bool = False
    ordered: bool = True
    capacity: int | None = None
    # Names streams by id once the pipeline knows which ids occur (default: "device 3").
    stream_name: Callable[[int], str] | None = None
    files: list[dict[str, Any]] = field(default_factory=list)
    report: ReadReport = field(default_factory=ReadReport)
    # Format-specific facts learnt while reading (strace: threads and processes seen).
    info: dict[str, Any] = field(default_factory=dict)
    # Called after the frame has been consumed, to fill files/report lazily.
    finish: Callable[[], None] | None = None


class TraceFormat(ABC):
    """One trace format. Subclasses set the class attributes and implement sniff and scan."""

    name: ClassVar[str]  # registry key, used with --format
    title: ClassVar[str]  # one line for `iotwin formats`
    stream_keys: ClassVar[tuple[str, ...]] = ("device",)  # --stream-by choices, default first
    timed: ClassVar[bool] = True
    # Does `scan` need an uncompressed, seekable file (polars' scanner)? Streaming readers
    # that decompress as they go set this False.
    needs_plain_file: ClassVar[bool] = True

    @abstractmethod
    def sniff(self, head: bytes, name: str) -> bool:
        """True when `head` (the first decompressed bytes) is unambiguously this format.

        `name` is the file name without its compression suffix.
        """

    @abstractmethod
    def scan(self, path: Path, opts: ReadOptions) -> Scan:
        """Canonical columns of the trace at `path` (uncompressed if needs_plain_file)."""

    def stream_key(self, path: Path, opts: ReadOptions) -> str:
        """The validated --stream-by choice."""
        key = opts.stream_by or self.stream_keys[0]
        if key not in self.stream_keys:
            choices = ", ".join(self.stream_keys)
            raise TraceFormatError(
                path, "options", "stream-by", f"'{key}' is not one of {choices} for {self.name}"
            )
        return key


def frame_from_columns(cols: dict[str, bytes]) -> pl.DataFrame:
    """A canonical DataFrame from the Rust core's column bytes (name -> native-endian bytes)."""
    data = {name: np.frombuffer(buf, dtype=NUMPY_DTYPES[name]) for name, buf in cols.items()}
    return pl.DataFrame(data)


def lazy_from_batches(
    batches: Callable[[list[str] | None], Iterator[pl.DataFrame]],
    schema: dict[str, pl.DataType],
) -> pl.LazyFrame:
    """A LazyFrame that streams DataFrames produced by a generator.

    The generator is only run when the frame is collected or sunk, one batch at a time, so
    memory stays bounded by the batch size. It is given the columns polars needs (None for
    all), so readers that can skip columns (polars' CSV parser) do.
    """
    from polars.io.plugins import register_io_source

    def source(
        with_columns: list[str] | None,
        predicate: pl.Expr | None,
        n_rows: int | None,
        batch_size: int | None,
    ) -> Iterator[pl.DataFrame]:
        seen = 0
        for df in batches(with_columns):
            if with_columns is not None:
                df = df.select(with_columns)
            if predicate is not None:
                df = df.filter(predicate)
            if n_rows is not None:
                df = df.head(n_rows - seen)
                seen += df.height
            yield df
            if n_rows is not None and seen >= n_rows:
                return

    return register_io_source(source, schema=schema)
