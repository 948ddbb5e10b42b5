"""Alibaba block traces 2020: hand-made files (microsecond Unix times, bytes)."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

import iotwin
from iotwin.formats import detect

SAMPLE = (
    "0,R,126703661056,4096,1577808000000046\n"
    "1,W,19496058880,77824,1577808000000426\n"
    "0,R,126703644672,4096,1577808000000626\n"
)


def test_hand_made(tmp_path: Path) -> None:
    src = tmp_path / "io_traces.csv"
    src.write_text(SAMPLE)
    assert detect(src).name == "alibaba"
    trace = iotwin.load_trace(src)
    assert trace.df.rows() == [
        (0, 0, 0, 126703661056, 4096),
        (380_000, 1, 1, 19496058880, 77824),
        (580_000, 0, 0, 126703644672, 4096),
    ]
    assert (trace.meta.stream_by, trace.meta.streams) == ("device", {0: "device 0", 1: "device 1"})


BAD = "0,R,0,4096,1000\n0,X,0,4096,1001\n0,W,8,4.5,1002\n0,W,8,512,1003\n"


def test_malformed_record_names_line_and_field(tmp_path: Path) -> None:
    src = tmp_path / "bad.csv"
    src.write_text(BAD)
    with pytest.raises(iotwin.TraceFormatError) as err:
        iotwin.ingest(src, tmp_path / "out.parquet", "alibaba")
    assert (err.value.location, err.value.field) == ("line 2", "opcode")
    assert list(tmp_path.iterdir()) == [src]


def test_skip_bad_counts(tmp_path: Path) -> None:
    src = tmp_path / "bad.csv"
    src.write_text(BAD)
    out = tmp_path / "out.parquet"
    result = iotwin.ingest(src, out, "alibaba", iotwin.ReadOptions(skip_bad=True))
    assert (result.requests, result.skipped) == (2, 2)
    assert "line 3: field 'length': cannot use '4.5'" in result.skipped_examples[1]
    assert pl.read_parquet(out).rows() == [(0, 0, 0, 0, 4096), (3000, 0, 1, 8, 512)]
