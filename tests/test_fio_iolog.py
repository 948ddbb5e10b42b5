"""fio iologs: hand-made v2 (timed by wait lines) and v3 (microsecond timestamps) logs, and a
log written by fio itself."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import zstandard

import iotwin
from iotwin.formats import detect

MS = 1_000_000

# v2 waits are absolute milliseconds since fio started (fio's read_iolog_get sleeps until
# mtime_since_genesis() reaches the value): the wait 3 after wait 5 does not move the clock.
V2 = """\
fio version 2 iolog
/dev/sdb add
/data/log add
/dev/sdb open
/data/log open
/dev/sdb read 0 4096
/dev/sdb read 4096 4096
/dev/sdb wait 5 0
/data/log write 8192 512
/dev/sdb wait 3 0
/data/log datasync 0 0
/dev/sdb wait 12 0
/dev/sdb trim 1048576 65536
/data/log sync 0 0
/dev/sdb close
"""
V2_ROWS = [
    {"ts_ns": 0, "stream": 0, "op": 0, "offset": 0, "size": 4096, "file": 0},
    {"ts_ns": 0, "stream": 0, "op": 0, "offset": 4096, "size": 4096, "file": 0},
    {"ts_ns": 5 * MS, "stream": 1, "op": 1, "offset": 8192, "size": 512, "file": 1},
    {"ts_ns": 5 * MS, "stream": 1, "op": 2, "offset": 0, "size": 0, "file": 1},
    {"ts_ns": 12 * MS, "stream": 0, "op": 3, "offset": 1048576, "size": 65536, "file": 0},
    {"ts_ns": 12 * MS, "stream": 1, "op": 2, "offset": 0, "size": 0, "file": 1},
]
FILES = [
    {"id": 0, "path": "/dev/sdb", "size": None},
    {"id": 1, "path": "/data/log", "size": None},
]

# v3 lines wait their distance from the previous line (file actions included); a timestamp
# earlier than the previous one waits nothing; fio ignores wait lines in v3 but not their time.
V3 = """\
fio version 3 iolog
3 /dev/sdb add
150 /dev/sdb open
153 /dev/sdb write 0 4096
168 /dev/sdb write 4096 4096
160 /dev/sdb read 0 4096
200 /dev/sdb wait 999 0
230 /dev/sdb trim 0 4096
231 /dev/sdb close
"""
V3_ROWS = [
    {"ts_ns": 0, "stream": 0, "op": 1, "offset": 0, "size": 4096, "file": 0},
    {"ts_ns": 15_000, "stream": 0, "op": 1, "offset": 4096, "size": 4096, "file": 0},
    {"ts_ns": 15_000, "stream": 0, "op": 0, "offset": 0, "size": 4096, "file": 0},
    {"ts_ns": 85_000, "stream": 0, "op": 3, "offset": 0, "size": 4096, "file": 0},
]


def test_v2_timed_by_waits(tmp_path: Path) -> None:
    src = tmp_path / "replay.log"
    src.write_text(V2)
    assert detect(src).name == "fio-iolog"
    t = iotwin.load_trace(src)
    assert t.df.to_dicts() == V2_ROWS
    assert t.meta.files == FILES
    assert (t.meta.stream_by, t.meta.streams) == ("file", {0: "/dev/sdb", 1: "/data/log"})


def test_v3_microsecond_timestamps_from_zstd(tmp_path: Path) -> None:
    src = tmp_path / "replay.log.zst"
    src.write_bytes(zstandard.ZstdCompressor().compress(V3.encode()))
    assert detect(src).name == "fio-iolog"
    out = tmp_path / "v3.parquet"
    result = iotwin.ingest(src, out)
    assert (result.format, result.requests, result.streams) == ("fio-iolog", 4, 1)
    t = iotwin.load_trace(out)
    assert t.df.to_dicts() == V3_ROWS
    assert t.meta.files == [{"id": 0, "path": "/dev/sdb", "size": None}]


def test_log_written_by_fio(tmp_path: Path) -> None:
    fio = shutil.which("fio")
    assert fio, "fio (Debian package fio) is needed: run `make sysdeps`"
    data, log = tmp_path / "data", tmp_path / "fio.log"
    args = ["--name=j", f"--filename={data}", "--size=64k", "--bs=4k", "--rw=randwrite"]
    args += ["--ioengine=sync", "--randseed=7", f"--write_iolog={log}", "--output=/dev/null"]
    subprocess.run([fio, *args], check=True)
    lines = log.read_text().splitlines()
    assert lines[0] == "fio version 3 iolog"
    writes = [line.split() for line in lines if " write " in line]
    df = iotwin.load_trace(log).df
    assert df.height == len(writes) == 16
    assert sorted(df["offset"].to_list()) == list(range(0, 65536, 4096))
    first = int(writes[0][0])
    assert df["ts_ns"].to_list() == [(int(w[0]) - first) * 1000 for w in writes]
    assert df["offset"].to_list() == [int(w[3]) for w in writes]


BAD = V2.replace("/dev/sdb read 4096 4096", "/dev/sdb read 4O96 4096").replace(
    "/data/log write 8192 512", "/data/log append 8192 512"
)


def test_malformed_line_names_line_and_field(tmp_path: Path) -> None:
    src = tmp_path / "bad.log"
    src.write_text(BAD)
    out = tmp_path / "out.parquet"
    with pytest.raises(iotwin.TraceFormatError) as err:
        iotwin.ingest(src, out)
    assert (err.value.location, err.value.field) == ("line 7", "offset")
    assert str(src) in str(err.value)
    assert list(tmp_path.iterdir()) == [src]  # nothing half written


def test_skip_bad_counts_and_reports(tmp_path: Path) -> None:
    src = tmp_path / "bad.log"
    src.write_text(BAD)
    result = iotwin.ingest(src, tmp_path / "out.parquet", None, iotwin.ReadOptions(skip_bad=True))
    assert (result.requests, result.skipped) == (4, 2)
    assert "line 7: field 'offset'" in result.skipped_examples[0]
    assert "line 9: field 'action'" in result.skipped_examples[1]


def test_unknown_version_is_an_error(tmp_path: Path) -> None:
    src = tmp_path / "old.log"
    src.write_text("fio version 1 iolog\n/dev/sdb read 0 4096\n")
    with pytest.raises(iotwin.TraceFormatError) as err:
        iotwin.load_trace(src, "fio-iolog")
    assert (err.value.location, err.value.field) == ("line 1", "version")
