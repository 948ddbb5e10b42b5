"""UMass Trace Repository / SPC ASCII traces (Financial1-2, WebSearch1-3).

No header; `ASU,LBA,Size,Opcode,Timestamp` and possibly more trailing fields, which are
ignored. LBA is in 512-byte blocks, Size in bytes, Opcode `r`/`R` or `w`/`W`, Timestamp
seconds with a fractional part since the start of the trace. Stream = volume (the ASU).
"""

from __future__ import annotations

import re
from pathlib import Path

import polars as pl

from .base import ReadOptions, Scan
from .delimited import DelimitedFormat, Field, lines_match
from .units import NS_PER_S, SECTOR, as_stream, decimal_ns, op_from, scaled_offset, scaled_size

_LINE = re.compile(rb"^\d+,\d+,\d+,[rRwW],\d+(\.\d+)?(,[^,\r\n]*)*\r?$")


class SpcFormat(DelimitedFormat):
    name = "spc"
    title = "UMass/SPC ASCII (ASU,LBA,Size,Opcode,Timestamp; Financial, WebSearch)"
    stream_keys = ("volume",)
    fields = (
        Field("ASU", pl.Int64()),
        Field("LBA", pl.Int64()),
        Field("Size", pl.Int64()),
        Field("Opcode", pl.String()),
        Field("Timestamp", pl.String()),
    )
    blame = {
        "ts_ns": "Timestamp",
        "stream": "ASU",
        "op": "Opcode",
        "offset": "LBA",
        "size": "Size",
    }

    def sniff(self, head: bytes, name: str) -> bool:
        return lines_match(head, _LINE)

    def canonical(self, raw: pl.LazyFrame, path: Path, opts: ReadOptions) -> Scan:
        opcode = pl.col("Opcode").str.strip_chars()
        frame = raw.with_columns(
            ts_ns=decimal_ns(pl.col("Timestamp"), NS_PER_S),
            stream=as_stream(pl.col("ASU")),
            op=op_from(opcode, ["r", "R"], ["w", "W"]),
            offset=scaled_offset(pl.col("LBA"), SECTOR),
            size=scaled_size(pl.col("Size"), 1),
        )
        return Scan(
            frame=frame, stream_by=self.stream_key(path, opts), stream_name=lambda d: f"ASU{d}"
        )
