"""Linux blktrace binary traces: one per-CPU file (`sda.blktrace.0`) or a `blkparse -d` dump.

Records are `struct blk_io_trace` (48 bytes, the tracing machine's byte order, told by the
magic `0x65617407`) plus `pdu_len` bytes of payload. One request per queue (Q, default) or
issue (D, `--opt events=D`) event; passthrough (SCSI) commands and notify records are left out.
Streams are devices ("major,minor") or processes (pid).

blktrace writes one file per CPU and a request's events may land on different CPUs: ingest
each file on its own, or concatenate them (`cat sda.blktrace.* > sda.bin`; the pipeline sorts
by time) or merge them with `blkparse -i sda -d sda.bin`. Latency is not filled: a request's
completion is often in another CPU's file.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import polars as pl

from .. import _core
from ..errors import TraceFormatError
from ..source import read_head
from .base import CANONICAL_SCHEMA, ReadOptions, Scan, TraceFormat, lazy_from_batches
from .chunked import byte_batches

EVENTS = ("Q", "D")


def event_kind(path: Path, opts: ReadOptions) -> str:
    """The validated `--opt events=` choice: Q (queued, default) or D (issued to the driver)."""
    events = opts.extra.get("events", "Q").upper()
    if events not in EVENTS:
        raise TraceFormatError(path, "options", "events", f"'{events}' is not Q or D")
    return events


def stream_namer(stream_by: str) -> Callable[[int], str]:
    """Device ids are dev_t (major << 20 | minor), named as blkparse prints them."""
    if stream_by == "device":
        return lambda d: f"{d >> 20},{d & 0xFFFFF}"
    return lambda pid: f"pid {pid}"


class BlktraceFormat(TraceFormat):
    name = "blktrace"
    title = "Linux blktrace binary (one per-CPU file or a blkparse -d dump); --opt events=Q|D"
    stream_keys = ("device", "process")
    needs_plain_file = False

    def sniff(self, head: bytes, name: str) -> bool:
        return _core.detect_blktrace(head) != 0

    def scan(self, path: Path, opts: ReadOptions) -> Scan:
        stream_by = self.stream_key(path, opts)
        events = event_kind(path, opts)
        endian = _core.detect_blktrace(read_head(path, 48))
        if endian == 0:
            raise TraceFormatError(
                path, "byte offset 0", "magic", "not a blktrace (blk_io_trace version 7) record"
            )
        scan = Scan(frame=None, stream_by=stream_by, stream_name=stream_namer(stream_by))  # type: ignore[arg-type]

        def batches(_columns: list[str] | None) -> Iterator[pl.DataFrame]:
            reader = _core.BlktraceReader(endian == 2, events, stream_by, opts.skip_bad)
            return byte_batches(path, reader.feed, scan.report)

        scan.frame = lazy_from_batches(batches, dict(CANONICAL_SCHEMA))
        return scan
