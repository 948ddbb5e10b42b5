"""blkparse's default text output, e.g.
`  8,0    3        1     0.000000000   697  Q   W 223490 + 8 [kjournald]`:
device "major,minor", cpu, sequence, seconds (9 decimals), pid, action, RWBS, then
`sector + nsectors [process]`.

One request per queue (Q, default) or issue (D, `--opt events=D`) line; every other line
(other actions, messages, the per-CPU summary at the end) is skipped. RWBS: D discard (trim),
W write, R read; an event with F and no sectors is a flush. Streams are devices (default) or
processes (pid). Latency is not filled (completions are not matched to requests).
"""

from __future__ import annotations

import re
from pathlib import Path

from .. import _core
from .base import CANONICAL_SCHEMA, ReadOptions, Scan, TraceFormat, lazy_from_batches
from .blktrace import event_kind, stream_namer
from .chunked import line_batches

_EVENT = re.compile(rb"^\s*\d+,\d+\s+\d+\s+\d+\s+\d+\.\d{9}\s+\d+\s+\S{1,2}\s+\S+")
_DEVICE_FIRST = re.compile(rb"^\s*\d+,\d+\s")


def _looks_like_blkparse(head: bytes) -> bool:
    """The first line is an event and so are most lines that start with a device (the summary
    block of a short trace is not held against it)."""
    lines = [line for line in head.splitlines() if line.strip()]
    if len(lines) > 1:
        lines = lines[:-1]  # may be cut
    if not lines or not _EVENT.match(lines[0]):
        return False
    events = [line for line in lines[:50] if _DEVICE_FIRST.match(line)]
    return sum(1 for line in events if _EVENT.match(line)) >= 0.8 * len(events)


class BlkparseFormat(TraceFormat):
    name = "blkparse"
    title = "blkparse default text output (maj,min cpu seq time pid action RWBS sector + n); --opt events=Q|D"
    stream_keys = ("device", "process")
    needs_plain_file = False

    def sniff(self, head: bytes, name: str) -> bool:
        return _looks_like_blkparse(head)

    def scan(self, path: Path, opts: ReadOptions) -> Scan:
        stream_by = self.stream_key(path, opts)
        events = event_kind(path, opts)
        scan = Scan(frame=None, stream_by=stream_by, stream_name=stream_namer(stream_by))  # type: ignore[arg-type]

        def parse(buf: bytes, line: int, _byte: int) -> dict:
            return _core.parse_blkparse(buf, line, events, stream_by, opts.skip_bad)

        scan.frame = lazy_from_batches(
            lambda _columns: line_batches(path, parse, scan.report), dict(CANONICAL_SCHEMA)
        )
        return scan
