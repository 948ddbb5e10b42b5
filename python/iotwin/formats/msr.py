"""MSR Cambridge block traces (also the SNIA IOTTA MSR files).

No header; `Timestamp,Hostname,DiskNumber,Type,Offset,Size,ResponseTime`. Timestamp and
ResponseTime are Windows FILETIME ticks (100 ns); Offset and Size are bytes; Type is
Read or Write. Stream = volume (hostname and disk number).
"""

from __future__ import annotations

import re
from pathlib import Path

import polars as pl

from .base import OP_READ, OP_WRITE, ReadOptions, Scan
from .delimited import DelimitedFormat, Field, first_value, lines_match

_LINE = re.compile(rb"^\d+,[^,]*,\d+,(Read|Write),\d+,\d+,\d+\r?$", re.MULTILINE)
TICK_NS = 100


class MsrFormat(DelimitedFormat):
    name = "msr"
    title = "MSR Cambridge / SNIA IOTTA CSV (Timestamp,Hostname,DiskNumber,Type,Offset,Size,ResponseTime)"
    stream_keys = ("volume",)
    fields = (
        Field("Timestamp", pl.Int64()),
        Field("Hostname", pl.String()),
        Field("DiskNumber", pl.UInt32()),
        Field("Type", pl.String()),
        Field("Offset", pl.UInt64()),
        Field("Size", pl.UInt32()),
        Field("ResponseTime", pl.Int64()),
    )
    blame = {
        "ts_ns": "Timestamp",
        "stream": "DiskNumber",
        "op": "Type",
        "offset": "Offset",
        "size": "Size",
    }

    def sniff(self, head: bytes, name: str) -> bool:
        return lines_match(head, _LINE)

    def canonical(self, raw: pl.LazyFrame, path: Path, opts: ReadOptions) -> Scan:
        stream_by = self.stream_key(path, opts)
        # FILETIME ticks times 100 overflow int64: count from the first record instead.
        t0 = first_value(path, self, "Timestamp") or 0
        host = first_value(path, self, "Hostname") or "disk"
        op = (
            pl.when(pl.col("Type") == "Read")
            .then(pl.lit(OP_READ, pl.UInt8()))
            .when(pl.col("Type") == "Write")
            .then(pl.lit(OP_WRITE, pl.UInt8()))
            .otherwise(pl.lit(None, pl.UInt8()))
        )
        frame = raw.with_columns(
            ts_ns=(pl.col("Timestamp") - t0) * TICK_NS,
            stream=pl.col("DiskNumber"),
            op=op,
            offset=pl.col("Offset"),
            size=pl.col("Size"),
            latency_ns=pl.col("ResponseTime") * TICK_NS,
        )
        return Scan(
            frame=frame, stream_by=stream_by, relative=True, stream_name=lambda d: f"{host}_{d}"
        )
