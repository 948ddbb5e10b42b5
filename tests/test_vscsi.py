"""VMware vscsi binary traces: the shared CloudPhysics trace (v1) and hand-made v2 records."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

import iotwin
from iotwin.formats import detect


def test_reads_cloudphysics(traces: Path) -> None:
    trace = iotwin.load_trace(traces / "cloudPhysicsIO.vscsi")
    df = trace.df
    assert detect(traces / "cloudPhysicsIO.vscsi").name == "vscsi"
    assert df.height == 113_872
    assert round(float((df["op"] == 0).mean()), 5) == 0.41252
    assert round(float(df["size"].mean()), 2) == 36936.02
    assert round(df["ts_ns"][-1] / 1e9, 2) == 7200.09
    # first record: len 0x200, cmd 0x2a (write), lbn 0x028f1a09, ts 0x051fbe82cf22 us
    assert df.row(0) == (0, 0, 1, 0x028F1A09 * 512, 512)


def v2_record(cmd: int, length: int, lbn: int, ts_us: int, rt_us: int) -> bytes:
    return struct.pack("<HHIIIQQQ", cmd, 0x0200, 1, length, 1, lbn, ts_us, rt_us)


def test_reads_v2_with_latency(tmp_path: Path) -> None:
    src = tmp_path / "t.vscsi"
    src.write_bytes(v2_record(0x28, 4096, 8, 100, 250) + v2_record(0x2A, 8192, 16, 300, 90))
    df = iotwin.load_trace(src).df
    assert df.to_dicts() == [
        {"ts_ns": 0, "stream": 0, "op": 0, "offset": 4096, "size": 4096, "latency_ns": 250_000},
        {
            "ts_ns": 200_000,
            "stream": 0,
            "op": 1,
            "offset": 8192,
            "size": 8192,
            "latency_ns": 90_000,
        },
    ]


def test_truncated_record_names_byte_offset(tmp_path: Path, traces: Path) -> None:
    src = tmp_path / "cut.vscsi"
    src.write_bytes((traces / "cloudPhysicsIO.vscsi").read_bytes()[:100])
    with pytest.raises(iotwin.TraceFormatError) as err:
        iotwin.ingest(src, tmp_path / "out.parquet", "vscsi")
    assert (err.value.location, err.value.field) == ("byte offset 96", "record")
    assert not (tmp_path / "out.parquet").exists()
