"""Streaming readers backed by the Rust core: the file is read in chunks (decompressing as it
goes), each chunk parsed in Rust into canonical columns, and yielded as a polars DataFrame.
Memory is bounded by the chunk size whatever the trace's size."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import polars as pl

from ..errors import TraceFormatError
from ..source import open_bytes
from .base import ReadReport, frame_from_columns

CHUNK_BYTES = 32 << 20

# parse(buf, first_unit, byte_base) -> {"columns", "skipped", "skipped_examples"}
ChunkParser = Callable[[bytes, int, int], dict[str, Any]]
# parse(buf, at_end) -> the same, for stateful parsers that keep cut records themselves
StreamParser = Callable[[bytes, bool], dict[str, Any]]


def _restart(report: ReadReport) -> None:
    """A lazy frame may run its source more than once (the pipeline reads the first timestamp
    before streaming it all): each run counts skipped records afresh."""
    report.skipped = 0
    report.examples.clear()


def _collect(path: Path, parsed: dict[str, Any], report: ReadReport) -> pl.DataFrame:
    examples = [str(TraceFormatError(path, *ex)) for ex in parsed["skipped_examples"]]
    report.add(parsed["skipped"], examples)
    return frame_from_columns(parsed["columns"])


def _raise_located(path: Path, exc: ValueError) -> None:
    """Rust parse errors arrive as ValueError((location, field, message))."""
    args = exc.args[0] if len(exc.args) == 1 and isinstance(exc.args[0], tuple) else exc.args
    if len(args) == 3 and all(isinstance(a, str) for a in args):
        raise TraceFormatError(path, *args) from None
    raise exc


def record_batches(
    path: Path, record_size: int, parse: ChunkParser, report: ReadReport
) -> Iterator[pl.DataFrame]:
    """Fixed-size binary records, in chunks of whole records. parse gets the 1-based number
    of the chunk's first record and its byte offset."""
    per_chunk = max(1, CHUNK_BYTES // record_size) * record_size
    record, byte = 1, 0
    _restart(report)
    with open_bytes(path) as f:
        while True:
            buf = _read_full(f, per_chunk)
            if not buf:
                return
            try:
                parsed = parse(buf, record, byte)
            except ValueError as exc:
                _raise_located(path, exc)
            yield _collect(path, parsed, report)
            record += len(buf) // record_size
            byte += len(buf)


def line_batches(path: Path, parse: ChunkParser, report: ReadReport) -> Iterator[pl.DataFrame]:
    """Text in chunks of whole lines. parse gets the 1-based number of the chunk's first line
    and its byte offset; a stateful parser (strace) keeps its state between calls."""
    line, byte, carry = 1, 0, b""
    _restart(report)
    with open_bytes(path) as f:
        while True:
            block = _read_full(f, CHUNK_BYTES)
            buf = carry + block
            if not block:
                if not buf:
                    return
                cut = len(buf)  # the last line may lack its newline
            else:
                cut = buf.rfind(b"\n") + 1
                if cut == 0:
                    carry = buf
                    continue
            chunk, carry = buf[:cut], buf[cut:]
            try:
                parsed = parse(chunk, line, byte)
            except ValueError as exc:
                _raise_located(path, exc)
            yield _collect(path, parsed, report)
            line += chunk.count(b"\n")
            byte += len(chunk)
            if not block:
                return


def byte_batches(path: Path, parse: StreamParser, report: ReadReport) -> Iterator[pl.DataFrame]:
    """Raw chunks for a stateful parser of variable-length binary records (blktrace), which
    keeps a record cut by the chunk boundary until the next chunk and knows its own offsets."""
    _restart(report)
    with open_bytes(path) as f:
        while True:
            block = _read_full(f, CHUNK_BYTES)
            at_end = len(block) < CHUNK_BYTES
            try:
                parsed = parse(block, at_end)
            except ValueError as exc:
                _raise_located(path, exc)
            yield _collect(path, parsed, report)
            if at_end:
                return


def _read_full(f: Any, n: int) -> bytes:
    """Reads n bytes unless the stream ends (decompressors may return short reads)."""
    parts, got = [], 0
    while got < n:
        part = f.read(n - got)
        if not part:
            break
        parts.append(part)
        got += len(part)
    return b"".join(parts)
