"""SNIA SYSTOR'17 CSV: hand-made files (header, decimal seconds, optional latency)."""

from __future__ import annotations

import gzip
from pathlib import Path

import polars as pl
import pytest

import iotwin
from iotwin.formats import detect

HEADER = "Timestamp,Response,IOType,LUN,Offset,Size\n"
SAMPLE = (
    HEADER + "1456135200.013118000,0.000806000,R,4,899056122368,131072\n"
    "1456135200.013200000,0.000100000,W,4,4096,4096\n"
    "1456135201.5,0.002,R,6,0,512\n"
)
# Times exact to the nanosecond from the digits (a float64 would be off by ~100 ns).
EXPECTED = [
    {
        "ts_ns": 0,
        "stream": 4,
        "op": 0,
        "offset": 899056122368,
        "size": 131072,
        "latency_ns": 806_000,
    },
    {"ts_ns": 82_000, "stream": 4, "op": 1, "offset": 4096, "size": 4096, "latency_ns": 100_000},
    {
        "ts_ns": 1_486_882_000,
        "stream": 6,
        "op": 0,
        "offset": 0,
        "size": 512,
        "latency_ns": 2_000_000,
    },
]


def test_hand_made(tmp_path: Path) -> None:
    src = tmp_path / "2016022219-LUN4.csv"
    src.write_text(SAMPLE)
    assert detect(src).name == "systor"
    trace = iotwin.load_trace(src)
    assert trace.df.to_dicts() == EXPECTED
    assert (trace.meta.stream_by, trace.meta.streams) == ("volume", {4: "LUN4", 6: "LUN6"})


def test_gzip_copy_gives_same_rows(tmp_path: Path) -> None:
    src = tmp_path / "2016022219-LUN4.csv.gz"
    src.write_bytes(gzip.compress(SAMPLE.encode()))
    assert detect(src).name == "systor"
    out = tmp_path / "out.parquet"
    iotwin.ingest(src, out)
    assert pl.read_parquet(out).to_dicts() == EXPECTED


# Line 3: an empty Response on a write (valid: its latency is unknown, stored as null);
# line 4: a blank IOType, which the distribution's README uses for transactions never
# answered; line 6: a Response that is not a number.
BAD = HEADER + (
    "1456135200.013118000,0.000806000,R,4,8192,4096\n"
    "1456135200.5,,W,4,0,512\n"
    "1456135201.25,,,4,0,512\n"
    "1456135201.75,0.001,W,x,0,512\n"
    "1456135202,0.001,W,3,1024,512\n"
    "1456135202.5,abc,W,3,0,512\n"
)


def test_malformed_record_names_line_after_header(tmp_path: Path) -> None:
    src = tmp_path / "bad.csv"
    src.write_text(BAD)
    out = tmp_path / "out.parquet"
    with pytest.raises(iotwin.TraceFormatError) as err:
        iotwin.ingest(src, out, "systor")
    assert (err.value.location, err.value.field, err.value.message) == (
        "line 4",
        "IOType",
        "missing",
    )
    assert list(tmp_path.iterdir()) == [src]


def test_unparsable_response_is_an_error(tmp_path: Path) -> None:
    src = tmp_path / "bad.csv"
    src.write_text(HEADER + "1456135200.5,,W,4,0,512\n1456135202.5,abc,W,3,0,512\n")
    with pytest.raises(iotwin.TraceFormatError) as err:
        iotwin.ingest(src, tmp_path / "out.parquet", "systor")
    assert (err.value.location, err.value.field) == ("line 3", "Response")
    assert list(tmp_path.iterdir()) == [src]
    with pytest.raises(iotwin.TraceFormatError) as err:
        iotwin.load_trace(src, "systor")
    assert (err.value.location, err.value.field) == ("line 3", "Response")


def test_skip_bad_counts(tmp_path: Path) -> None:
    src = tmp_path / "bad.csv"
    src.write_text(BAD)
    out = tmp_path / "out.parquet"
    result = iotwin.ingest(src, out, "systor", iotwin.ReadOptions(skip_bad=True))
    assert (result.requests, result.skipped) == (3, 3)
    assert [e.removeprefix(f"{src}: ") for e in result.skipped_examples] == [
        "line 4: field 'IOType': missing",
        "line 5: field 'LUN': cannot use 'x'",
        "line 7: field 'Response': cannot use 'abc'",
    ]
    assert pl.read_parquet(out).rows() == [
        (0, 4, 0, 8192, 4096, 806_000),
        (486_882_000, 4, 1, 0, 512, None),
        (1_986_882_000, 3, 1, 1024, 512, 1_000_000),
    ]


def test_missing_header_is_an_error(tmp_path: Path) -> None:
    src = tmp_path / "noheader.csv"
    src.write_text(SAMPLE.removeprefix(HEADER))
    with pytest.raises(iotwin.TraceFormatError) as err:
        iotwin.load_trace(src, "systor")
    assert (err.value.location, err.value.field) == ("line 1", "header")
