"""UMass/SPC ASCII (Financial, WebSearch): hand-made files."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

import iotwin
from iotwin.formats import detect

# Opcodes in both cases and a trailing extra field, as in the published files.
SAMPLE = (
    "0,303567,3584,w,0.000000\n"
    "1,55590,3072,r,0.001\n"
    "0,303574,3584,W,0.026214,extra\n"
    "2,8,512,R,0.5\n"
)


def test_hand_made(tmp_path: Path) -> None:
    src = tmp_path / "Financial1.spc"
    src.write_text(SAMPLE)
    assert detect(src).name == "spc"
    trace = iotwin.load_trace(src)
    assert trace.df.rows() == [
        (0, 0, 1, 303567 * 512, 3584),
        (1_000_000, 1, 0, 55590 * 512, 3072),
        (26_214_000, 0, 1, 303574 * 512, 3584),
        (500_000_000, 2, 0, 4096, 512),
    ]
    assert trace.meta.streams == {0: "ASU0", 1: "ASU1", 2: "ASU2"}
    assert trace.meta.stream_by == "volume"


BAD = "0,1,512,r,0.0\n0,2,512,x,0.1\n0,3,512,w,later\n0,4,512,w,0.3\n"


def test_malformed_record_names_line_and_field(tmp_path: Path) -> None:
    src = tmp_path / "bad.spc"
    src.write_text(BAD)
    with pytest.raises(iotwin.TraceFormatError) as err:
        iotwin.ingest(src, tmp_path / "out.parquet", "spc")
    assert (err.value.location, err.value.field) == ("line 2", "Opcode")
    assert list(tmp_path.iterdir()) == [src]


def test_skip_bad_counts(tmp_path: Path) -> None:
    src = tmp_path / "bad.spc"
    src.write_text(BAD)
    out = tmp_path / "out.parquet"
    result = iotwin.ingest(src, out, "spc", iotwin.ReadOptions(skip_bad=True))
    assert (result.requests, result.skipped) == (2, 2)
    assert "line 3: field 'Timestamp': cannot use 'later'" in result.skipped_examples[1]
    assert pl.read_parquet(out).rows() == [(0, 0, 0, 512, 512), (300_000_000, 0, 1, 2048, 512)]
