"""DiskSim/MQSim ASCII: the shared TPC-C trace and hand-made files with mixed blanks."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

import iotwin
from iotwin.formats import detect

SHARED = "tpcc_small.disksim"


def test_reads_shared_trace(traces: Path) -> None:
    trace = iotwin.load_trace(traces / SHARED)
    df = trace.df
    assert detect(traces / SHARED).name == "disksim"
    assert (trace.meta.format, trace.meta.stream_by) == ("disksim", "device")
    # Reference figures (README of the shared traces).
    assert df.height == 6_999
    assert round(float((df["op"] == 0).mean()), 5) == 0.62595
    assert round(float(df["size"].mean()), 2) == 8532.46
    assert round(df["ts_ns"].max() / 1e9, 5) == 0.13649
    assert df["stream"].n_unique() == 16 == len(trace.meta.streams)
    # first lines: "938513000 4 264719034 16 0", "938828000 3 197570570 16 0"
    assert df.row(0) == (0, 4, 1, 264719034 * 512, 16 * 512)
    assert df.row(1) == (315_000, 3, 1, 197570570 * 512, 16 * 512)


# Runs of spaces, tabs, leading and trailing blanks and a CRLF: all one separator.
SAMPLE = "1000 2 8 8 1\n  1500\t0  16\t16 0\n2500  2   24 1 1 \r\n4000 1 0 256 0\n"


def test_hand_made_with_mixed_blanks(tmp_path: Path) -> None:
    src = tmp_path / "mixed.trace"
    src.write_text(SAMPLE)
    assert detect(src).name == "disksim"
    assert iotwin.load_trace(src).df.rows() == [
        (0, 2, 0, 4096, 4096),
        (500, 0, 1, 8192, 8192),
        (1500, 2, 0, 12288, 512),
        (3000, 1, 1, 0, 131072),
    ]


BAD = "100 1 8 8 1\n200 2 16 x 0\n300 1 24 8 7\n400 3 0 1 0\n"


def test_malformed_record_names_line_and_field(tmp_path: Path) -> None:
    src = tmp_path / "bad.disksim"
    src.write_text(BAD)
    out = tmp_path / "out.parquet"
    with pytest.raises(iotwin.TraceFormatError) as err:
        iotwin.ingest(src, out, "disksim")
    assert (err.value.location, err.value.field) == ("line 2", "size_sectors")
    assert "'x'" in err.value.message
    assert list(tmp_path.iterdir()) == [src]


def test_skip_bad_counts(tmp_path: Path) -> None:
    src = tmp_path / "bad.disksim"
    src.write_text(BAD)
    out = tmp_path / "out.parquet"
    result = iotwin.ingest(src, out, "disksim", iotwin.ReadOptions(skip_bad=True))
    assert (result.requests, result.skipped) == (2, 2)
    assert "line 2: field 'size_sectors'" in result.skipped_examples[0]
    assert "line 3: field 'type'" in result.skipped_examples[1]
    assert pl.read_parquet(out).rows() == [(0, 1, 0, 4096, 4096), (300, 3, 1, 0, 512)]


def test_missing_field_is_bad(tmp_path: Path) -> None:
    src = tmp_path / "short.disksim"
    src.write_text("100 1 8 8 1\n200 2 16\n")
    with pytest.raises(iotwin.TraceFormatError) as err:
        iotwin.load_trace(src, "disksim")
    assert (err.value.location, err.value.field, err.value.message) == (
        "line 2",
        "size_sectors",
        "missing",
    )
