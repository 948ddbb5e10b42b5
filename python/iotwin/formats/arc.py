"""ARC `.lis` traces (Megiddo and Modha, FAST'03).

Whitespace separated, no header: `start_block n_blocks ignore request_no`, blocks of 512
bytes. Every request is a read and there are no timestamps, so the trace is untimed (all
ts_ns 0; time metrics do not apply). One stream.
"""

from __future__ import annotations

import re
from itertools import pairwise
from pathlib import Path

import polars as pl

from .base import OP_READ, ReadOptions, Scan
from .delimited import DelimitedFormat, Field, lines_match
from .units import SECTOR, scaled_offset, scaled_size

_LINE = re.compile(rb"^[ \t]*\d+[ \t]+\d+[ \t]+\d+[ \t]+(\d+)[ \t]*\r?$")


class ArcFormat(DelimitedFormat):
    name = "arc"
    title = "ARC .lis block traces (start_block n_blocks ignore request_no; no timestamps)"
    stream_keys = ("device",)
    timed = False
    separator = None
    fields = (
        Field("start_block", pl.Int64()),
        Field("n_blocks", pl.Int64()),
        # Not used; their values do not make a line bad.
        Field("ignore", pl.String(), optional=True),
        Field("request_no", pl.String(), optional=True),
    )
    blame = {"offset": "start_block", "size": "n_blocks"}

    def sniff(self, head: bytes, name: str) -> bool:
        # Four integers a line is a shape other formats could share: also ask for the
        # `.lis` name or the trace's own signature, request numbers counting up by one.
        return lines_match(head, _LINE) and (
            name.lower().endswith(".lis") or _numbered_consecutively(head)
        )

    def canonical(self, raw: pl.LazyFrame, path: Path, opts: ReadOptions) -> Scan:
        frame = raw.with_columns(
            ts_ns=pl.lit(0, pl.Int64()),
            stream=pl.lit(0, pl.UInt32()),
            op=pl.lit(OP_READ, pl.UInt8()),
            offset=scaled_offset(pl.col("start_block"), SECTOR),
            size=scaled_size(pl.col("n_blocks"), SECTOR),
        )
        return Scan(frame=frame, stream_by=self.stream_key(path, opts), timed=False)


def _numbered_consecutively(head: bytes) -> bool:
    lines = head.splitlines()[:-1][:20]
    numbers = [int(m.group(1)) for m in map(_LINE.match, lines) if m]
    return (
        len(numbers) >= 2
        and len(numbers) == len(lines)
        and all(b == a + 1 for a, b in pairwise(numbers))
    )
