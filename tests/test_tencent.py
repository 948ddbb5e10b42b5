"""Tencent CBS CSV: the shared 50,000-request excerpt and hand-made files."""

from __future__ import annotations

import bz2
import gzip
from pathlib import Path

import polars as pl
import pytest

import iotwin
from iotwin.formats import detect

SHARED = "tencent_cbs_excerpt.csv.bz2"


def test_reads_shared_excerpt(traces: Path) -> None:
    trace = iotwin.load_trace(traces / SHARED)
    df = trace.df
    assert detect(traces / SHARED).name == "tencent"
    assert (trace.meta.format, trace.meta.stream_by) == ("tencent", "volume")
    # Reference figures (README of the shared traces).
    assert df.height == 50_000
    assert round(float((df["op"] == 0).mean()), 5) == 0.49042
    assert round(float(df["size"].mean()), 2) == 30367.85
    assert df["ts_ns"].max() == 1_000_000_000
    assert df["stream"].n_unique() == 2038 == len(trace.meta.streams)
    assert trace.meta.streams[1063] == "1063"
    # Stable sort: the first row is the file's first line at the earlier second,
    # line 2: 1538323199,13896880,128,0,1063
    assert df.row(0) == (0, 1063, 0, 13896880 * 512, 128 * 512)
    assert df["ts_ns"].is_sorted()


SAMPLE = (
    "1538323201,100,8,1,7\n"
    "1538323200,0,16,0,3\n"
    "1538323202,2048,1,0,7\n"
    "1538323200,64,128,1,3\n"
    "1538323201,10,8,0,5\n"
)
# Sorted by time, stably: lines 2, 4, 1, 5, 3. Sectors become bytes.
EXPECTED = [
    (0, 3, 0, 0, 8192),
    (0, 3, 1, 32768, 65536),
    (1_000_000_000, 7, 1, 51200, 4096),
    (1_000_000_000, 5, 0, 5120, 4096),
    (2_000_000_000, 7, 0, 1_048_576, 512),
]


def test_hand_made_sorted_stably(tmp_path: Path) -> None:
    src = tmp_path / "cbs.csv"
    src.write_text(SAMPLE)
    assert detect(src).name == "tencent"
    trace = iotwin.load_trace(src)
    assert trace.df.rows() == EXPECTED
    assert trace.meta.streams == {3: "3", 5: "5", 7: "7"}
    out = tmp_path / "cbs.parquet"
    result = iotwin.ingest(src, out)
    assert (result.requests, result.streams) == (5, 3)
    assert pl.read_parquet(out).rows() == EXPECTED


@pytest.mark.parametrize(("suffix", "compress"), [(".gz", gzip.compress), (".bz2", bz2.compress)])
def test_compressed_copy_gives_same_rows(tmp_path: Path, suffix: str, compress) -> None:
    plain = tmp_path / "cbs.csv"
    plain.write_text(SAMPLE)
    packed = tmp_path / f"cbs.csv{suffix}"
    packed.write_bytes(compress(SAMPLE.encode()))
    assert detect(packed).name == "tencent"
    out = tmp_path / "packed.parquet"
    iotwin.ingest(packed, out)
    assert pl.read_parquet(out).rows() == EXPECTED
    assert iotwin.load_trace(packed).df.equals(iotwin.load_trace(plain).df)


BAD = "1538323200,0,16,0,3\n1538323200,64,1x8,1,3\n1538323201,10,8,2,5\n1538323201,20,8,1,5\n"


def test_malformed_record_names_line_and_field(tmp_path: Path) -> None:
    src = tmp_path / "bad.csv"
    src.write_text(BAD)
    out = tmp_path / "out.parquet"
    with pytest.raises(iotwin.TraceFormatError) as err:
        iotwin.ingest(src, out, "tencent")
    assert (err.value.location, err.value.field) == ("line 2", "Size")
    assert str(src) in str(err.value)
    assert list(tmp_path.iterdir()) == [src]


def test_skip_bad_counts(tmp_path: Path) -> None:
    src = tmp_path / "bad.csv"
    src.write_text(BAD)
    out = tmp_path / "out.parquet"
    result = iotwin.ingest(src, out, "tencent", iotwin.ReadOptions(skip_bad=True))
    assert (result.requests, result.skipped) == (2, 2)
    assert "line 2: field 'Size'" in result.skipped_examples[0]
    assert "line 3: field 'IOType'" in result.skipped_examples[1]
    assert pl.read_parquet(out).rows() == [(0, 3, 0, 0, 8192), (1_000_000_000, 5, 1, 10240, 4096)]
