"""blkparse text output: a hand-made excerpt with every kind of line, and real blkparse output
of a hand-made binary trace, which must read exactly like the binary itself."""

from __future__ import annotations

import gzip
import shutil
import subprocess
from pathlib import Path

import pytest
from test_blktrace import DISPATCHED_BY_PID, QUEUED, trace

import iotwin
from iotwin.formats import detect

SDA, SDB = 8 << 20, (8 << 20) | 16
EXCERPT = """\
  8,0    3        1     0.000000000   697  Q   W 223490 + 8 [kjournald]
  8,0    3        2     0.000001829   697  G   W 223490 + 8 [kjournald]
  8,0    3        3     0.000002197   697  P   N [kjournald]
  8,0    3        4     0.000005533   697  I   W 223490 + 8 [kjournald]
  8,0    3        0     0.000007158     0  m   N cfq697 insert_request
  8,0    3        5     0.000011379   697  U   N [kjournald] 1
  8,0    3        6     0.000013545   697  D   W 223490 + 8 [kjournald]
  8,16   1        1     0.000100000  2214  Q  RA 1024 + 256 [cat]
  8,16   1        2     0.000250000  2214  D  RA 1024 + 256 [cat]
  8,0    3        7     0.000264279     0  C   W 223490 + 8 [0]
  8,0    0        8     0.001000000   412  Q FWS [jbd2/sda1-8]
  8,0    0        9     0.002000000   988  Q  DS 4096 + 2048 [fstrim]
  8,0    0       10     0.003000000   988  Q WFS 8 + 8 [postgres]
  8,16   1        3     0.004000000     0  C  RA 1024 + 256 [0]

CPU0 (8,0):
 Reads Queued:           0,        0KiB\t Writes Queued:           3,        4KiB
 Read Dispatches:        0,        0KiB\t Write Dispatches:        1,        4KiB
Total (8,0):
 Reads Queued:           0,        0KiB\t Writes Queued:           3,        4KiB

Throughput (R/W): 0KiB/s / 1KiB/s
Events (8,0): 14 entries
Skips: 0 forward (0 -   0.0%)
"""
QUEUED_BY_DEVICE = [
    {"ts_ns": 0, "stream": SDA, "op": 1, "offset": 223490 * 512, "size": 4096},
    {"ts_ns": 100_000, "stream": SDB, "op": 0, "offset": 1024 * 512, "size": 256 * 512},
    {"ts_ns": 1_000_000, "stream": SDA, "op": 2, "offset": 0, "size": 0},  # flush, no data
    {"ts_ns": 2_000_000, "stream": SDA, "op": 3, "offset": 4096 * 512, "size": 1 << 20},
    {"ts_ns": 3_000_000, "stream": SDA, "op": 1, "offset": 8 * 512, "size": 4096},  # FUA write
]


def test_reads_queue_events(tmp_path: Path) -> None:
    src = tmp_path / "sda.txt"
    src.write_text(EXCERPT)
    assert detect(src).name == "blkparse"
    t = iotwin.load_trace(src)
    assert t.df.to_dicts() == QUEUED_BY_DEVICE
    assert t.meta.streams == {SDA: "8,0", SDB: "8,16"}


def test_dispatch_events_by_process_from_gzip(tmp_path: Path) -> None:
    src = tmp_path / "sda.txt.gz"
    src.write_bytes(gzip.compress(EXCERPT.encode()))
    assert detect(src).name == "blkparse"
    opts = iotwin.ReadOptions(stream_by="process", extra={"events": "D"})
    df = iotwin.load_trace(src, None, opts).df
    assert df.to_dicts() == [
        {"ts_ns": 0, "stream": 697, "op": 1, "offset": 223490 * 512, "size": 4096},
        {"ts_ns": 236_455, "stream": 2214, "op": 0, "offset": 1024 * 512, "size": 256 * 512},
    ]


def test_real_blkparse_output_matches_the_binary(tmp_path: Path) -> None:
    blkparse = shutil.which("blkparse")
    assert blkparse, "blkparse (Debian package blktrace) is needed: run `make sysdeps`"
    (tmp_path / "sdb.blktrace.0").write_bytes(trace("<"))
    text = tmp_path / "sdb.txt"
    with text.open("w") as out:
        subprocess.run([blkparse, "-i", "sdb"], cwd=tmp_path, stdout=out, check=True)
    assert "Q FWS [fstrim]" in text.read_text()
    assert detect(text).name == "blkparse"
    assert iotwin.load_trace(text).df.to_dicts() == QUEUED
    opts = iotwin.ReadOptions(stream_by="process", extra={"events": "D"})
    assert iotwin.load_trace(text, None, opts).df.to_dicts() == DISPATCHED_BY_PID


BAD = EXCERPT.replace("Q  DS 4096 + 2048", "Q  DS 40x6 + 2048").replace(
    "Q WFS 8 + 8", "Q WFS 8 + eight"
)


def test_malformed_event_names_line_and_field(tmp_path: Path) -> None:
    src = tmp_path / "bad.txt"
    src.write_text(BAD.replace("G   W 223490", "G   W 22349x"))  # not a Q line: not looked at
    out = tmp_path / "out.parquet"
    with pytest.raises(iotwin.TraceFormatError) as err:
        iotwin.ingest(src, out, "blkparse")
    assert (err.value.location, err.value.field) == ("line 12", "sector")
    assert str(src) in str(err.value)
    assert list(tmp_path.iterdir()) == [src]  # nothing half written


def test_skip_bad_counts_and_reports(tmp_path: Path) -> None:
    src = tmp_path / "bad.txt"
    src.write_text(BAD)
    out = tmp_path / "out.parquet"
    result = iotwin.ingest(src, out, "blkparse", iotwin.ReadOptions(skip_bad=True))
    assert (result.requests, result.skipped) == (3, 2)
    assert "line 12: field 'sector'" in result.skipped_examples[0]
    assert "line 13: field 'nsectors'" in result.skipped_examples[1]
    assert iotwin.load_trace(out).meta.skipped == 2
