"""SNIA SYSTOR '17 traces (Lee et al., enterprise VDI, Fujitsu).

With a header: `Timestamp,Response,IOType,LUN,Offset,Size`. Timestamp is Unix seconds with
a fractional part, Response the service time in seconds, IOType `R` or `W`, Offset and
Size bytes. The distribution's README says a blank IOType marks a transaction whose
response was never seen: such a line is not a usable request, so it is a bad record (skip
it with --skip-bad). Stream = volume (the LUN).
"""

from __future__ import annotations

import re
from pathlib import Path

import polars as pl

from ..errors import TraceFormatError
from ..source import read_head
from .base import ReadOptions, Scan
from .delimited import DelimitedFormat, Field, lines_match
from .units import NS_PER_S, as_stream, decimal_ns, op_from, scaled_offset, scaled_size

HEADER = b"Timestamp,Response,IOType,LUN,Offset,Size"
_LINE = re.compile(rb"^\d+(\.\d+)?,[0-9.]*,[RW]?,\d+,\d+,\d+\r?$")


class SystorFormat(DelimitedFormat):
    name = "systor"
    title = "SNIA SYSTOR'17 CSV (Timestamp,Response,IOType,LUN,Offset,Size; header)"
    stream_keys = ("volume",)
    has_header = True
    fields = (
        Field("Timestamp", pl.String()),
        Field("Response", pl.String(), optional=True),
        Field("IOType", pl.String()),
        Field("LUN", pl.Int64()),
        Field("Offset", pl.Int64()),
        Field("Size", pl.Int64()),
    )
    blame = {
        "ts_ns": "Timestamp",
        "stream": "LUN",
        "op": "IOType",
        "offset": "Offset",
        "size": "Size",
        "latency_ns": "Response",
    }

    def sniff(self, head: bytes, name: str) -> bool:
        first, _, rest = head.partition(b"\n")
        return first.rstrip(b"\r") == HEADER and lines_match(rest, _LINE)

    def canonical(self, raw: pl.LazyFrame, path: Path, opts: ReadOptions) -> Scan:
        _check_header(path)
        frame = raw.with_columns(
            ts_ns=decimal_ns(pl.col("Timestamp"), NS_PER_S),
            stream=as_stream(pl.col("LUN")),
            op=op_from(pl.col("IOType").str.strip_chars(), ["R"], ["W"]),
            offset=scaled_offset(pl.col("Offset"), 1),
            size=scaled_size(pl.col("Size"), 1),
            latency_ns=decimal_ns(pl.col("Response"), NS_PER_S),
        )
        return Scan(
            frame=frame, stream_by=self.stream_key(path, opts), stream_name=lambda d: f"LUN{d}"
        )


def _check_header(path: Path) -> None:
    """The header is read as names only; a file without it would lose its first request."""
    first = read_head(path, len(HEADER) + 2).splitlines()[:1]
    if not first or first[0].rstrip(b"\r") != HEADER:
        raise TraceFormatError(
            path, "line 1", "header", f"expected '{HEADER.decode()}' (a SYSTOR'17 trace)"
        )
