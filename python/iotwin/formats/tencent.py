"""Tencent CBS block traces (2018, SNIA IOTTA / OSCA).

No header; `Timestamp,Offset,Size,IOType,VolumeID`. Timestamp is whole Unix seconds, Offset
and Size are 512-byte sectors, IOType is 0 for read and 1 for write. Rows are not strictly
time-ordered (the pipeline sorts them stably). Stream = volume, named by its id.
"""

from __future__ import annotations

import re
from pathlib import Path

import polars as pl

from .base import OP_READ, OP_WRITE, ReadOptions, Scan
from .delimited import DelimitedFormat, Field, lines_match
from .units import NS_PER_S, SECTOR, as_stream, op_from, scaled_offset, scaled_size

_LINE = re.compile(rb"^\d{9,10},\d+,\d+,[01],\d+\r?$")


class TencentFormat(DelimitedFormat):
    name = "tencent"
    title = "Tencent CBS CSV (Timestamp,Offset,Size,IOType,VolumeID; seconds, sectors)"
    stream_keys = ("volume",)
    fields = (
        Field("Timestamp", pl.Int64()),
        Field("Offset", pl.Int64()),
        Field("Size", pl.Int64()),
        Field("IOType", pl.Int64()),
        Field("VolumeID", pl.Int64()),
    )
    blame = {
        "ts_ns": "Timestamp",
        "stream": "VolumeID",
        "op": "IOType",
        "offset": "Offset",
        "size": "Size",
    }

    def sniff(self, head: bytes, name: str) -> bool:
        return lines_match(head, _LINE)

    def canonical(self, raw: pl.LazyFrame, path: Path, opts: ReadOptions) -> Scan:
        frame = raw.with_columns(
            ts_ns=pl.col("Timestamp") * NS_PER_S,
            stream=as_stream(pl.col("VolumeID")),
            op=op_from(pl.col("IOType"), [OP_READ], [OP_WRITE]),
            offset=scaled_offset(pl.col("Offset"), SECTOR),
            size=scaled_size(pl.col("Size"), SECTOR),
        )
        return Scan(
            frame=frame,
            stream_by=self.stream_key(path, opts),
            ordered=False,
            stream_name=str,
        )
