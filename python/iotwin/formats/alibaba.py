"""Alibaba Cloud block traces 2020 (alibaba/block-traces, `io_traces.csv`).

No header; `device_id,opcode,offset,length,timestamp`. opcode is `R` or `W`, offset and
length are bytes, timestamp is Unix microseconds (as the repository's README defines).
Stream = device (the virtual disk).
"""

from __future__ import annotations

import re
from pathlib import Path

import polars as pl

from .base import ReadOptions, Scan
from .delimited import DelimitedFormat, Field, lines_match
from .units import TIME_UNITS, as_stream, op_from, scaled_offset, scaled_size

_LINE = re.compile(rb"^\d+,[RW],\d+,\d+,\d+\r?$")


class AlibabaFormat(DelimitedFormat):
    name = "alibaba"
    title = "Alibaba block traces 2020 CSV (device_id,opcode,offset,length,timestamp; us)"
    stream_keys = ("device",)
    fields = (
        Field("device_id", pl.Int64()),
        Field("opcode", pl.String()),
        Field("offset", pl.Int64()),
        Field("length", pl.Int64()),
        Field("timestamp", pl.Int64()),
    )
    blame = {
        "ts_ns": "timestamp",
        "stream": "device_id",
        "op": "opcode",
        "offset": "offset",
        "size": "length",
    }

    def sniff(self, head: bytes, name: str) -> bool:
        return lines_match(head, _LINE)

    def canonical(self, raw: pl.LazyFrame, path: Path, opts: ReadOptions) -> Scan:
        frame = raw.with_columns(
            ts_ns=pl.col("timestamp") * TIME_UNITS["us"],
            stream=as_stream(pl.col("device_id")),
            op=op_from(pl.col("opcode").str.strip_chars(), ["R"], ["W"]),
            offset=scaled_offset(pl.col("offset"), 1),
            size=scaled_size(pl.col("length"), 1),
        )
        return Scan(frame=frame, stream_by=self.stream_key(path, opts))
