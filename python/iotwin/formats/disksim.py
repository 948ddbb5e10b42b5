"""DiskSim / MQSim ASCII traces.

Whitespace separated, no header: `arrival_ns device start_sector size_sectors type`, with
the arrival time in nanoseconds, sector and size in 512-byte sectors, and type 1 for a read
and 0 for a write (MQSim's convention). Stream = device.
"""

from __future__ import annotations

import re
from pathlib import Path

import polars as pl

from .base import ReadOptions, Scan
from .delimited import DelimitedFormat, Field, lines_match
from .units import SECTOR, as_stream, op_from, scaled_offset, scaled_size

_LINE = re.compile(rb"^[ \t]*\d+[ \t]+\d+[ \t]+\d+[ \t]+\d+[ \t]+[01][ \t]*\r?$")
_READ, _WRITE = 1, 0


class DiskSimFormat(DelimitedFormat):
    name = "disksim"
    title = "DiskSim/MQSim ASCII (arrival_ns device start_sector size_sectors type)"
    stream_keys = ("device",)
    separator = None
    fields = (
        Field("arrival_ns", pl.Int64()),
        Field("device", pl.Int64()),
        Field("start_sector", pl.Int64()),
        Field("size_sectors", pl.Int64()),
        Field("type", pl.Int64()),
    )
    blame = {
        "ts_ns": "arrival_ns",
        "stream": "device",
        "op": "type",
        "offset": "start_sector",
        "size": "size_sectors",
    }

    def sniff(self, head: bytes, name: str) -> bool:
        return lines_match(head, _LINE)

    def canonical(self, raw: pl.LazyFrame, path: Path, opts: ReadOptions) -> Scan:
        frame = raw.with_columns(
            ts_ns=pl.col("arrival_ns"),
            stream=as_stream(pl.col("device")),
            op=op_from(pl.col("type"), [_READ], [_WRITE]),
            offset=scaled_offset(pl.col("start_sector"), SECTOR),
            size=scaled_size(pl.col("size_sectors"), SECTOR),
        )
        return Scan(frame=frame, stream_by=self.stream_key(path, opts))
