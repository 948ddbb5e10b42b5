"""ARC .lis traces: the shared P3 trace (zstd) and hand-made files."""

from __future__ import annotations

from pathlib import Path

import pytest

import iotwin
from iotwin.formats import FORMATS, detect

SHARED = "arc_P3.lis.zst"


def test_reads_shared_p3(traces: Path) -> None:
    trace = iotwin.load_trace(traces / SHARED)
    df = trace.df
    assert detect(traces / SHARED).name == "arc"
    assert trace.meta.timed is False
    assert df.height == 238_578
    # ARC paper, Table III: P3 requests 3,912,296 pages of 512 bytes.
    assert df["size"].sum() // 512 == 3_912_296 and df["size"].sum() % 512 == 0
    assert (df["op"] == 0).all() and (df["ts_ns"] == 0).all() and (df["stream"] == 0).all()
    # first line: "230027 8 0 0"; last: "4201916 8 50 238577"
    assert df.row(0) == (0, 0, 0, 230027 * 512, 8 * 512)
    assert df.row(-1) == (0, 0, 0, 4201916 * 512, 8 * 512)


SAMPLE = "100 8 0 0\n0 1 0 1\n  7   16 0 2\n"
EXPECTED = [(0, 0, 0, 51200, 4096), (0, 0, 0, 0, 512), (0, 0, 0, 3584, 8192)]


def test_hand_made(tmp_path: Path) -> None:
    src = tmp_path / "tiny.lis"
    src.write_text(SAMPLE)
    assert detect(src).name == "arc"
    trace = iotwin.load_trace(src)
    assert trace.df.rows() == EXPECTED
    out = tmp_path / "tiny.parquet"
    assert iotwin.ingest(src, out).requests == 3
    assert iotwin.load_trace(out).meta.timed is False


def test_sniffing_needs_lis_name_or_request_numbers() -> None:
    arc = FORMATS["arc"]
    numbered = b"100 8 0 0\n0 1 0 1\n7 16 0 2\n5 5 0 3\n"
    unnumbered = b"100 8 0 9\n0 1 0 1\n7 16 0 7\n5 5 0 3\n"
    assert arc.sniff(numbered, "trace.txt")
    assert not arc.sniff(unnumbered, "trace.txt")
    assert arc.sniff(unnumbered, "trace.lis")
    assert not arc.sniff(b"100 8 0 0 1\n0 1 0 1 0\n", "five.lis")  # five fields: DiskSim


def test_bad_block_names_line_and_field(tmp_path: Path) -> None:
    src = tmp_path / "bad.lis"
    src.write_text("100 8 0 0\n-5 8 0 1\n7 x 0 2\n9 1 0 3\n")
    with pytest.raises(iotwin.TraceFormatError) as err:
        iotwin.ingest(src, tmp_path / "out.parquet", "arc")
    assert (err.value.location, err.value.field) == ("line 2", "start_block")
    assert "'-5'" in err.value.message
    result = iotwin.ingest(src, tmp_path / "out.parquet", "arc", iotwin.ReadOptions(skip_bad=True))
    assert (result.requests, result.skipped) == (2, 2)
    assert "line 3: field 'n_blocks'" in result.skipped_examples[1]
