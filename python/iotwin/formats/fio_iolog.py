"""fio I/O logs (`write_iolog=` / `read_iolog=`), versions 2 and 3.

v2: `fio version 2 iolog`, then `filename action [offset length]`; v3: `fio version 3 iolog`,
then the same prefixed with a timestamp in microseconds. Actions add/open/close are file
actions, read/write/sync/datasync/trim requests (sync and datasync are flushes), and v2's
`wait` is the clock: as fio replays it, an absolute time in milliseconds since the start (see
src/readers/fio_iolog.rs for fio's code). Streams are files, ids in order of first mention,
with their names in the file table.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import polars as pl

from .. import _core
from .base import (
    CANONICAL_SCHEMA,
    OPTIONAL_SCHEMA,
    ReadOptions,
    Scan,
    TraceFormat,
    lazy_from_batches,
)
from .chunked import line_batches


class FioIologFormat(TraceFormat):
    name = "fio-iolog"
    title = "fio iolog, versions 2 (timed by wait lines) and 3 (microsecond timestamps)"
    stream_keys = ("file",)
    needs_plain_file = False

    def sniff(self, head: bytes, name: str) -> bool:
        return _core.detect_fio_iolog(head) != 0

    def scan(self, path: Path, opts: ReadOptions) -> Scan:
        stream_by = self.stream_key(path, opts)
        names: list[str] = []
        scan = Scan(
            frame=None,  # type: ignore[arg-type]
            stream_by=stream_by,
            stream_name=lambda f: names[f] if f < len(names) else f"file {f}",
        )

        def batches(_columns: list[str] | None) -> Iterator[pl.DataFrame]:
            reader = _core.FioIologReader(opts.skip_bad)
            yield from line_batches(path, lambda buf, line, _b: reader.feed(buf, line), scan.report)
            names[:] = reader.files()
            scan.files = [{"id": i, "path": p, "size": None} for i, p in enumerate(names)]

        schema = {**CANONICAL_SCHEMA, "file": OPTIONAL_SCHEMA["file"]}
        scan.frame = lazy_from_batches(batches, schema)
        return scan
