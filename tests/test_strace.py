"""strace text: hand-made traces with hand-computed offsets, streams and files."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

import iotwin
from iotwin.formats import FORMATS, detect
from iotwin.source import logical_name, read_head

COLUMNS = ("ts_ns", "stream", "op", "offset", "size", "latency_ns", "file")

# `strace -f -ttt -T -y -o FILE`: every line starts with the pid.
POSITIONS = """\
100  1000.000000 openat(AT_FDCWD</w>, "/w/data", O_RDWR|O_CREAT, 0644) = 3</w/data> <0.000010>
100  1000.000100 write(3</w/data>, "\\0\\0"..., 8192) = 8192 <0.000020>
100  1000.000200 lseek(3</w/data>, 4096, SEEK_SET) = 4096 <0.000001>
100  1000.000300 read(3</w/data>, "\\0"..., 4096) = 4096 <0.000030>
100  1000.000400 read(3</w/data>, "", 4096) = 0 <0.000002>
100  1000.000500 lseek(3</w/data>, -1024, SEEK_CUR) = 7168 <0.000001>
100  1000.000600 readv(3</w/data>, [{iov_base="\\0"..., iov_len=512}, {iov_base="\\0"..., iov_len=512}], 2) = 1024 <0.000040>
100  1000.000700 pwrite64(3</w/data>, "x", 512, 65536) = 512 <0.000050>
100  1000.000800 writev(3</w/data>, [{iov_base="ab", iov_len=2}, {iov_base="cd", iov_len=2}], 2) = 4 <0.000060>
100  1000.000900 pread64(3</w/data>, 0x7ffd5a0, 4096, 1048576) = -1 EINVAL (Invalid argument) <0.000003>
100  1000.001000 lseek(3</w/data>, 0, SEEK_END) = 66048 <0.000001>
100  1000.001100 write(3</w/data>, "z", 1) = 1 <0.000004>
100  1000.001200 fdatasync(3</w/data>) = 0 <0.000500>
100  1000.001300 write(4<socket:[12345]>, "hello", 5) = 5 <0.000010>
100  1000.001400 read(5<pipe:[999]>, "x", 1) = 1 <0.000010>
100  1000.001450 read(6<anon_inode:[eventfd]>, "\\1\\0\\0\\0\\0\\0\\0\\0", 8) = 8 <0.000010>
100  1000.001500 openat(AT_FDCWD</w>, "/w/missing", O_RDONLY) = -1 ENOENT (No such file or directory) <0.000005>
100  1000.001600 preadv(3</w/data>, [{iov_base="\\0"..., iov_len=4096}], 1, 12288) = 4096 <0.000070>
100  1000.001700 close(3</w/data>) = 0 <0.000002>
100  1000.001800 openat(AT_FDCWD</w>, "/w/log", O_WRONLY|O_APPEND) = 3</w/log> <0.000010>
100  1000.001900 write(3</w/log>, "line\\n", 5) = 5 <0.000010>
100  1000.002000 --- SIGCHLD {si_signo=SIGCHLD, si_code=CLD_EXITED, si_pid=101, si_uid=0, si_status=0} ---
100  1000.002100 getpid() = 100 <0.000001>
100  1000.002200 +++ exited with 0 +++
"""


def write(tmp_path: Path, text: str, name: str = "app.strace") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def rows(trace: iotwin.Trace) -> list[tuple[int, ...]]:
    return [tuple(r) for r in trace.df.select(COLUMNS).rows()]


def test_positions_through_read_write_lseek_pread(tmp_path: Path) -> None:
    src = write(tmp_path, POSITIONS)
    assert detect(src).name == "strace"
    trace = iotwin.load_trace(src)
    # ts_ns is relative to the first request (1000.000100); 0-byte reads, failed calls,
    # lseek, open/close and sockets/pipes/eventfds are not requests.
    assert rows(trace) == [
        (0, 0, 1, 0, 8192, 20_000, 0),  # write at the start
        (200_000, 0, 0, 4096, 4096, 30_000, 0),  # after lseek SEEK_SET 4096
        (500_000, 0, 0, 7168, 1024, 40_000, 0),  # readv after lseek SEEK_CUR -1024
        (600_000, 0, 1, 65536, 512, 50_000, 0),  # pwrite64: its own offset
        (700_000, 0, 1, 8192, 4, 60_000, 0),  # writev: the position, untouched by pwrite
        (1_000_000, 0, 1, 66048, 1, 4_000, 0),  # after lseek SEEK_END = 66048
        (1_100_000, 0, 2, 0, 0, 500_000, 0),  # fdatasync: a flush
        (1_500_000, 0, 0, 12288, 4096, 70_000, 0),  # preadv: its own offset
        (1_800_000, 0, 1, 0, 5, 10_000, 1),  # another file
    ]
    assert trace.meta.streams == {0: "tid 100"}
    assert trace.meta.stream_by == "thread"
    assert trace.meta.files == [
        {"id": 0, "path": "/w/data", "size": None, "extents": None},
        {"id": 1, "path": "/w/log", "size": None, "extents": None},
    ]


# stderr output with -tt: no prefix while one process is traced, `[pid N]` once there are
# several. Thread 201 shares the fd table (CLONE_FILES); process 202 is forked (table copied,
# descriptions shared); its first line comes before the fork returns in its parent.
THREADS = """\
10:00:00.000000 openat(AT_FDCWD</w>, "/w/db", O_RDWR) = 3</w/db> <0.000010>
10:00:00.000100 clone3({flags=CLONE_VM|CLONE_FS|CLONE_FILES|CLONE_SIGHAND|CLONE_THREAD|CLONE_SYSVSEM, child_tid=0x7f, parent_tid=0x7f, exit_signal=0, stack=0x7f, stack_size=0x7fff80, tls=0x7f} => {parent_tid=[201]}, 88) = 201 <0.000050>
[pid   201] 10:00:00.000200 read(3</w/db>, "a"..., 100) = 100 <0.000010>
[pid   200] 10:00:00.000300 read(3</w/db>,  <unfinished ...>
[pid   201] 10:00:00.000400 pwrite64(3</w/db>, "b"..., 50, 4096) = 50 <0.000005>
[pid   200] 10:00:00.000500 <... read resumed>"c"..., 100) = 100 <0.000300>
[pid   200] 10:00:00.000600 clone(child_stack=NULL, flags=CLONE_CHILD_CLEARTID|CLONE_CHILD_SETTID|SIGCHLD, child_tidptr=0x7f <unfinished ...>
[pid   202] 10:00:00.000700 read(3</w/db>, "d"..., 100) = 100 <0.000010>
[pid   200] 10:00:00.000750 <... clone resumed>) = 202 <0.000100>
[pid   202] 10:00:00.000800 lseek(3</w/db>, 0, SEEK_SET) = 0 <0.000001>
[pid   200] 10:00:00.000900 read(3</w/db>, "e"..., 100) = 100 <0.000020>
[pid   202] 10:00:00.001000 fsync(3</w/db>) = 0 <0.002000>
[pid   202] 10:00:00.001100 +++ exited with 0 +++
[pid   201] 10:00:00.001150 close(3</w/db>) = 0 <0.000001>
[pid   200] 10:00:00.001200 --- SIGCHLD {si_signo=SIGCHLD, si_code=CLD_EXITED, si_pid=202} ---
"""


def test_threads_and_processes(tmp_path: Path) -> None:
    src = write(tmp_path, THREADS)
    by_thread = iotwin.load_trace(src, opts=iotwin.ReadOptions(stream_by="thread"))
    # Stream ids in order of first request: 201, then 200 (its unfinished read is emitted at
    # its resumed line), then 202. The resumed read keeps the unfinished line's time.
    assert rows(by_thread) == [
        (0, 0, 0, 0, 100, 10_000, 0),
        (100_000, 1, 0, 100, 100, 300_000, 0),  # shared table and position
        (200_000, 0, 1, 4096, 50, 5_000, 0),
        (500_000, 2, 0, 200, 100, 10_000, 0),  # the fork shares the description
        (700_000, 1, 0, 0, 100, 20_000, 0),  # after the child's lseek to 0
        (800_000, 2, 2, 0, 0, 2_000_000, 0),
    ]
    assert by_thread.meta.streams == {0: "tid 201", 1: "tid 200", 2: "tid 202"}
    by_process = iotwin.load_trace(src, opts=iotwin.ReadOptions(stream_by="process"))
    assert by_process.df["stream"].to_list() == [0, 0, 0, 1, 0, 1]
    assert by_process.meta.streams == {0: "pid 200", 1: "pid 202"}
    assert by_process.meta.stream_by == "process"
    by_file = iotwin.load_trace(src, opts=iotwin.ReadOptions(stream_by="file"))
    assert by_file.meta.streams == {0: "/w/db"}
    assert by_file.df["stream"].to_list() == [0] * 6


def test_ingest_reports_threads_and_processes(tmp_path: Path) -> None:
    out = tmp_path / "t.parquet"
    result = iotwin.ingest(write(tmp_path, THREADS), out, opts=iotwin.ReadOptions())
    assert (result.format, result.requests, result.streams) == ("strace", 6, 3)
    assert result.info == {"threads": 3, "processes": 2}
    again = iotwin.load_trace(out)
    assert again.meta.files == [{"id": 0, "path": "/w/db", "size": None, "extents": None}]
    assert again.df["offset"].to_list() == [0, 100, 4096, 200, 0, 0]


def test_time_of_day_wraps_at_midnight(tmp_path: Path) -> None:
    src = write(
        tmp_path,
        '23:59:59.999000 pwrite64(3</w/f>, "a", 4096, 0) = 4096 <0.000100>\n'
        '00:00:00.000500 pwrite64(3</w/f>, "a", 4096, 4096) = 4096 <0.000100>\n'
        '00:00:01.000000 read(3</w/f>, "a", 10) = 10 <0.000001>\n',
    )
    df = iotwin.load_trace(src).df
    assert df["ts_ns"].to_list() == [0, 1_500_000, 1_001_000_000]
    assert df["offset"].to_list() == [0, 4096, 0]  # an fd opened before tracing starts at 0


def test_epoch_timestamps_without_latency(tmp_path: Path) -> None:
    src = write(
        tmp_path,
        '1700000000.250000 read(3</w/f>, "a", 10) = 10\n'
        '1700000001.000001 write(3</w/f>, "b", 6) = 6\n',
    )
    trace = iotwin.load_trace(src)
    assert "latency_ns" not in trace.df.columns  # no -T: no service times
    assert trace.df.select("ts_ns", "op", "offset", "size").rows() == [
        (0, 0, 0, 10),
        (750_001_000, 1, 10, 6),
    ]


BAD = """\
100  1000.000000 pread64(3</w/f>, "a", 512, 0) = 512 <0.000010>
100  1000.000100 pread64(3</w/f>, "a", 512, 512) = 512 <0.000010>
100  1000.0x0200 pread64(3</w/f>, "a", 512, 1024) = 512 <0.000010>
100  1000.000300 pread64(3</w/f>, "a", 512, 1536) = 5l2 <0.000010>
100  1000.000400 pread64(3</w/f>, "a", 512, 2048) = 512 <0.000010>
"""


def test_malformed_line_names_line_and_field(tmp_path: Path) -> None:
    src = write(tmp_path, BAD)
    out = tmp_path / "out.parquet"
    with pytest.raises(iotwin.TraceFormatError) as err:
        iotwin.ingest(src, out, "strace")
    assert (err.value.location, err.value.field) == ("line 3", "time")
    assert str(src) in str(err.value)
    assert not out.exists()
    assert list(tmp_path.iterdir()) == [src]  # nothing half written
    fixed = write(tmp_path, BAD.replace("1000.0x0200", "1000.000200"), "fixed.strace")
    with pytest.raises(iotwin.TraceFormatError) as err:
        iotwin.load_trace(fixed)
    assert (err.value.location, err.value.field) == ("line 4", "return")


def test_skip_bad_counts_and_reports(tmp_path: Path) -> None:
    src = write(tmp_path, BAD)
    opts = iotwin.ReadOptions(skip_bad=True)
    result = iotwin.ingest(src, tmp_path / "out.parquet", "strace", opts)
    assert (result.requests, result.skipped) == (3, 2)
    assert "line 3: field 'time'" in result.skipped_examples[0]
    assert "line 4: field 'return'" in result.skipped_examples[1]
    df = pl.read_parquet(tmp_path / "out.parquet")
    assert df["offset"].to_list() == [0, 512, 2048]
    assert iotwin.load_trace(tmp_path / "out.parquet").meta.skipped == 2


def test_other_traces_are_not_taken_for_strace(traces: Path) -> None:
    sniff = FORMATS["strace"].sniff
    others = [p for p in sorted(traces.iterdir()) if p.name != "README.md"]
    assert len(others) >= 5
    for path in others:
        assert not sniff(read_head(path), logical_name(path)), path.name
