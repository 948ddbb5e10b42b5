"""strace text: `strace -f -tt -T -y` (or `-ttt`; with or without `-o FILE`) as file-level requests.

Every line is `[PREFIX] TIME EVENT`: PREFIX `[pid N]` (several tracees writing to stderr), `N`
(`-o FILE` with `-f`) or nothing (the first tracee); TIME `HH:MM:SS.frac` (`-tt`, wrapping at
midnight) or `SECONDS.frac` (`-ttt`). The parser (Rust, `readers/strace.rs`) keeps each
process's descriptor table and file positions across chunks:

- read/write/readv/writev (and preadv2/pwritev2 with offset -1) get the descriptor's position,
  which advances by the return value; lseek sets it to its return value; pread64/pwrite64/
  preadv/pwritev use their offset. fsync/fdatasync are flushes (offset 0, size 0).
- size = the return value; failed calls and 0-byte transfers (end of file) are not requests.
- `<unfinished ...>` / `<... NAME resumed>`: issue time from the first line, the rest from the
  second.
- Files are descriptors whose `-y` annotation is an absolute path (outside /proc and /sys);
  sockets, pipes and anonymous inodes are ignored. File ids are numbered in order of first
  request; `Scan.files` lists them (size and extents unknown here; `iotwin capture` fills them).
- Streams: `thread` (tid), `process` (thread group, from clone/clone3/fork/vfork and
  CLONE_THREAD) or `file`. Lines without a pid prefix belong to the first tracee.
- Other system calls, signals and exit lines are skipped; a malformed line is an error naming
  its line and field (`--skip-bad` skips and counts it).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import polars as pl

from .. import _core
from ..source import read_head
from .base import (
    CANONICAL_SCHEMA,
    OPTIONAL_SCHEMA,
    ReadOptions,
    ReadReport,
    Scan,
    TraceFormat,
    lazy_from_batches,
)
from .chunked import line_batches


class StraceFormat(TraceFormat):
    name = "strace"
    title = "strace -f -tt|-ttt -T -y text: file-level requests with per-process fd positions"
    stream_keys = ("thread", "process", "file")
    needs_plain_file = False

    def sniff(self, head: bytes, name: str) -> bool:
        return _core.inspect_strace(head) is not None

    def scan(self, path: Path, opts: ReadOptions) -> Scan:
        stream_by = self.stream_key(path, opts)
        latency = bool(_core.inspect_strace(read_head(path)))
        schema = {**CANONICAL_SCHEMA, "file": OPTIONAL_SCHEMA["file"]}
        if latency:
            schema["latency_ns"] = OPTIONAL_SCHEMA["latency_ns"]
        scan = Scan(frame=None, stream_by=stream_by, ordered=False)  # type: ignore[arg-type]
        # polars may run the source more than once (the pipeline peeks at the first row):
        # each run starts from a fresh parser and report, and the last run is the one kept.
        runs: list[_core.StraceParser] = []

        def batches(_columns: list[str] | None) -> Iterator[pl.DataFrame]:
            runs.append(_core.StraceParser(stream_by, latency, opts.skip_bad))
            scan.report = ReadReport()
            return line_batches(path, runs[-1].parse, scan.report)

        def finish() -> None:
            parser = runs[-1]
            names = parser.stream_names()
            scan.stream_name = lambda s: names[s] if s < len(names) else f"{stream_by} {s}"
            scan.files = [
                {"id": i, "path": p, "size": None, "extents": None}
                for i, p in enumerate(parser.files())
            ]
            threads, processes = parser.counts()
            scan.info.update(threads=threads, processes=processes)

        scan.finish = finish
        scan.frame = lazy_from_batches(batches, schema)
        return scan
