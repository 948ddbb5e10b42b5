"""VMware vscsiStats binary traces (as published by CloudPhysics), versions 1 and 2.

v1: 32-byte little-endian records `u32 sn, u32 len, u32 nSG, u16 cmd, u16 ver, u64 lbn, u64 ts`;
v2: 40 bytes `u16 cmd, u16 ver, u32 sn, u32 len, u32 nSG, u64 lbn, u64 ts, u64 rt`. `ts` and `rt`
in microseconds, `lbn` in 512-byte sectors, `len` in bytes, `cmd` a SCSI opcode. Commands that
move no data (INQUIRY, TEST UNIT READY, ...) are not requests and are left out. One stream.
"""

from __future__ import annotations

from pathlib import Path

from .. import _core
from ..errors import TraceFormatError
from ..source import read_head
from .base import (
    CANONICAL_SCHEMA,
    OPTIONAL_SCHEMA,
    ReadOptions,
    Scan,
    TraceFormat,
    lazy_from_batches,
)
from .chunked import record_batches


class VscsiFormat(TraceFormat):
    name = "vscsi"
    title = "VMware vscsiStats binary trace, v1 (32-byte) and v2 (40-byte) records"
    stream_keys = ("device",)
    needs_plain_file = False

    def sniff(self, head: bytes, name: str) -> bool:
        return _core.detect_vscsi(head) != 0

    def scan(self, path: Path, opts: ReadOptions) -> Scan:
        stream_by = self.stream_key(path, opts)
        version = _core.detect_vscsi(read_head(path, 64))
        if version == 0:
            raise TraceFormatError(path, "record 1", "ver", "not a vscsi v1 or v2 record")
        size = 32 if version == 1 else 40
        schema = dict(CANONICAL_SCHEMA)
        if version == 2:
            schema["latency_ns"] = OPTIONAL_SCHEMA["latency_ns"]
        scan = Scan(frame=None, stream_by=stream_by, stream_name=lambda _s: "disk")  # type: ignore[arg-type]

        def parse(buf: bytes, record: int, byte: int) -> dict:
            return _core.parse_vscsi(buf, version, record, byte, opts.skip_bad)

        scan.frame = lazy_from_batches(
            lambda _columns: record_batches(path, size, parse, scan.report), schema
        )
        return scan
