"""blktrace binary traces: hand-made per-CPU files in both byte orders (struct blk_io_trace)."""

from __future__ import annotations

import gzip
import struct
from pathlib import Path

import pytest
import zstandard

import iotwin
from iotwin.formats import FORMATS, chunked, detect
from iotwin.source import logical_name, read_head

MAGIC = 0x65617407  # BLK_IO_TRACE_MAGIC | version 7
# enum blktrace_cat bits (include/uapi/linux/blktrace_api.h)
READ, WRITE, FLUSH, SYNC, QUEUE, ISSUE, COMPLETE, NOTIFY, DISCARD = 0, 1, 2, 3, 4, 6, 7, 10, 13
# enum blktrace_act
TA_QUEUE, TA_GETRQ, TA_ISSUE, TA_COMPLETE, TA_INSERT = 1, 4, 7, 8, 12
DEV = (8 << 20) | 16  # dev_t 8,16


def tc(*bits: int) -> int:
    return sum(1 << b for b in bits) << 16


def record(
    endian: str,
    seq: int,
    ts: int,
    sector: int,
    nbytes: int,
    action: int,
    pid: int,
    pdu: bytes = b"",
) -> bytes:
    """struct blk_io_trace on CPU 0 of device 8,16, then its payload."""
    fields = (MAGIC, seq, ts, sector, nbytes, action, pid, DEV, 0, 0, len(pdu))
    return struct.pack(endian + "IIQQIIIIIHH", *fields) + pdu


def trace(endian: str = "<") -> bytes:
    """A write that goes Q G I D C, a sync read, a flush and a discard, with process names."""
    r = [
        record(endian, 0, 0, 0, 0, tc(NOTIFY), 697, b"kjournald\0"),  # __BLK_TN_PROCESS
        record(endian, 0, 0, 0, 0, tc(NOTIFY), 1021, b"fstrim\0"),
        record(endian, 1, 1000, 223490, 4096, TA_QUEUE | tc(QUEUE, WRITE), 697),
        record(endian, 2, 1800, 223490, 4096, TA_GETRQ | tc(QUEUE, WRITE), 697),
        record(endian, 3, 2500, 223490, 4096, TA_INSERT | tc(QUEUE, WRITE), 697),
        record(endian, 4, 9000, 223490, 4096, TA_ISSUE | tc(ISSUE, WRITE), 697),
        record(endian, 5, 20000, 100, 8192, TA_QUEUE | tc(QUEUE, READ, SYNC), 1021),
        record(endian, 6, 30000, 0, 0, TA_QUEUE | tc(QUEUE, WRITE, FLUSH, SYNC), 1021),
        record(endian, 7, 40000, 2048, 1 << 20, TA_QUEUE | tc(QUEUE, WRITE, DISCARD), 1021),
        record(endian, 8, 250000, 223490, 4096, TA_COMPLETE | tc(COMPLETE, WRITE), 0),
        record(endian, 9, 260000, 100, 8192, TA_ISSUE | tc(ISSUE, READ, SYNC), 1021),
    ]
    return b"".join(r)


# Queue events, relative to the first one: write, read, flush (no data), discard (trim).
QUEUED = [
    {"ts_ns": 0, "stream": DEV, "op": 1, "offset": 223490 * 512, "size": 4096},
    {"ts_ns": 19000, "stream": DEV, "op": 0, "offset": 51200, "size": 8192},
    {"ts_ns": 29000, "stream": DEV, "op": 2, "offset": 0, "size": 0},
    {"ts_ns": 39000, "stream": DEV, "op": 3, "offset": 2048 * 512, "size": 1 << 20},
]
DISPATCHED_BY_PID = [
    {"ts_ns": 0, "stream": 697, "op": 1, "offset": 223490 * 512, "size": 4096},
    {"ts_ns": 251000, "stream": 1021, "op": 0, "offset": 51200, "size": 8192},
]


@pytest.mark.parametrize("endian", ["<", ">"])
def test_reads_both_byte_orders(tmp_path: Path, endian: str) -> None:
    src = tmp_path / "sdb.blktrace.0"
    src.write_bytes(trace(endian))
    assert detect(src).name == "blktrace"
    t = iotwin.load_trace(src)
    assert t.df.to_dicts() == QUEUED
    assert (t.meta.format, t.meta.stream_by, t.meta.streams) == (
        "blktrace",
        "device",
        {DEV: "8,16"},
    )


def test_dispatch_events_by_process(tmp_path: Path) -> None:
    src = tmp_path / "sdb.blktrace.0"
    src.write_bytes(trace(">"))
    opts = iotwin.ReadOptions(stream_by="process", extra={"events": "D"})
    t = iotwin.load_trace(src, None, opts)
    assert t.df.to_dicts() == DISPATCHED_BY_PID
    assert t.meta.streams == {697: "pid 697", 1021: "pid 1021"}


def test_compressed_and_chunked_reading(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    data = trace("<")
    gz, zst = tmp_path / "a.blktrace.1.gz", tmp_path / "a.blktrace.1.zst"
    gz.write_bytes(gzip.compress(data))
    zst.write_bytes(zstandard.ZstdCompressor().compress(data))
    for src in (gz, zst):
        assert detect(src).name == "blktrace"
        assert iotwin.load_trace(src).df.to_dicts() == QUEUED
    # records cut by chunk boundaries (10-byte chunks) are joined across chunks
    monkeypatch.setattr(chunked, "CHUNK_BYTES", 10)
    out = tmp_path / "a.parquet"
    assert iotwin.ingest(zst, out).requests == 4
    assert iotwin.load_trace(out).df.to_dicts() == QUEUED


def test_truncated_record_names_byte_offset(tmp_path: Path) -> None:
    src = tmp_path / "cut.blktrace.0"
    data = trace("<")
    src.write_bytes(data[:-20])  # the last record (48 bytes, no payload) loses 20
    out = tmp_path / "out.parquet"
    with pytest.raises(iotwin.TraceFormatError) as err:
        iotwin.ingest(src, out)
    assert (err.value.location, err.value.field) == (f"byte offset {len(data) - 48}", "record")
    assert str(src) in str(err.value)
    assert list(tmp_path.iterdir()) == [src]  # nothing half written


def test_bad_magic_names_byte_offset_and_skip_bad_resyncs(tmp_path: Path) -> None:
    data = bytearray(trace("<"))
    at = 58 + 55 + 48  # after the two process records (10- and 7-byte names) and the first Q
    struct.pack_into("<I", data, at, 0xDEADBEEF)
    src = tmp_path / "bad.blktrace.0"
    src.write_bytes(bytes(data))
    out = tmp_path / "out.parquet"
    with pytest.raises(iotwin.TraceFormatError) as err:
        iotwin.ingest(src, out)
    assert (err.value.location, err.value.field) == (f"byte offset {at}", "magic")
    assert not out.exists()
    result = iotwin.ingest(src, out, None, iotwin.ReadOptions(skip_bad=True))
    assert (result.requests, result.skipped) == (4, 1)
    assert "byte offset 161: field 'magic'" in result.skipped_examples[0]


def test_unknown_events_option_is_an_error(tmp_path: Path) -> None:
    src = tmp_path / "sdb.blktrace.0"
    src.write_bytes(trace("<"))
    with pytest.raises(iotwin.TraceFormatError) as err:
        iotwin.load_trace(src, None, iotwin.ReadOptions(extra={"events": "C"}))
    assert (err.value.location, err.value.field) == ("options", "events")


def test_shared_traces_keep_their_format(traces: Path) -> None:
    """The new sniffers accept none of the shared traces, so detection stays as it was."""
    new = [FORMATS[n] for n in ("blktrace", "blkparse", "fio-iolog")]
    files = sorted(p for p in traces.iterdir() if p.name != "README.md")
    assert len(files) >= 5
    for path in files:
        head, name = read_head(path), logical_name(path)
        assert [f.name for f in new if f.sniff(head, name)] == [], path.name
    assert detect(traces / "msr_hm0_excerpt.csv").name == "msr"
    assert detect(traces / "cloudPhysicsIO.vscsi").name == "vscsi"
