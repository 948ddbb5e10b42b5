"""Capturing an application's file I/O: run it under strace, convert, record its files.

`capture(cmd, output)` runs `strace -f -ttt -T -y -qq -e trace=<I/O calls> -o LOG CMD` (every
thread and child process, I/O system calls only, as in seeds/004), converts LOG with the
`strace` format into a canonical file-level trace, and records for every file the trace
touches its size after the run (`os.stat`; null when the file is gone or is not a regular
file or block device) and its extents (`FS_IOC_FIEMAP`: a list of
`[logical, physical, length, flags]` in bytes, null where the file system does not answer).

The command's exit status is reported, not treated as an error: the trace of a command that
fails (or is interrupted with Ctrl-C) is still written, since the I/O it did is real. The
CLI exits with the command's status (128 + N when a signal N killed it), like `time` and
`strace` do, so scripts can still tell.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shlex
import shutil
import signal
import stat
import struct
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .errors import IotwinError
from .formats import FORMATS, ReadOptions
from .ingest import ingest
from .source import atomic_output
from .trace import read_meta, set_parquet_metadata

# The system calls traced: the I/O calls of seeds/004 and their vector and 64-bit variants,
# the descriptor calls that move positions between fds, and the calls that make threads and
# processes. `?` lets strace ignore names the architecture lacks (open, fork on arm64).
SYSCALLS = (
    "read,write,pread64,pwrite64,readv,writev,preadv,pwritev,preadv2,pwritev2,lseek,"
    "fsync,fdatasync,?open,openat,?creat,close,dup,dup2,dup3,fcntl,?fcntl64,"
    "clone,clone3,?fork,?vfork"
)

# FS_IOC_FIEMAP = _IOWR('f', 11, struct fiemap); struct fiemap is a 32-byte header followed
# by 56-byte struct fiemap_extent records.
FS_IOC_FIEMAP = 0xC020660B
FIEMAP_FLAG_SYNC = 0x1  # flush delayed allocation first, so extents are real
FIEMAP_EXTENT_LAST = 0x1
_FIEMAP = struct.Struct("=QQIIII")  # start, length, flags, mapped_extents, extent_count, reserved
_EXTENT = struct.Struct("=QQQ16xI12x")  # logical, physical, length, reserved, flags, reserved
_EXTENTS_PER_CALL = 256

Progress = Callable[[float, int], None]  # (seconds elapsed, bytes of strace text so far)


@dataclass
class CaptureResult:
    """What `capture` did."""

    output: Path
    command: list[str]
    exit_status: int  # the command's; 128 + N when signal N killed it
    requests: int
    files: int
    threads: int  # threads that did file I/O
    processes: int  # processes that did file I/O
    streams: int
    seconds: float
    interrupted: bool = False  # stopped with Ctrl-C (the trace holds the I/O until then)
    strace_log: Path | None = None  # the strace text, when kept


def capture(
    cmd: Sequence[str],
    output: str | Path,
    stream_by: str = "thread",
    keep_strace: str | Path | None = None,
    progress: Progress | None = None,
) -> CaptureResult:
    """Runs `cmd` under strace and writes its file-level I/O trace to `output` (Parquet)."""
    cmd = [str(c) for c in cmd]
    if not cmd:
        raise IotwinError("capture: no command given (iotwin capture -o OUT -- CMD [ARGS...])")
    strace = shutil.which("strace")
    if strace is None:
        raise IotwinError(
            "capture needs strace, which is not installed (Debian/Ubuntu: apt-get install strace)"
        )
    keys = FORMATS["strace"].stream_keys
    if stream_by not in keys:
        raise IotwinError(f"capture: --stream-by '{stream_by}' is not one of {', '.join(keys)}")
    if shutil.which(cmd[0]) is None:
        raise IotwinError(f"capture: {cmd[0]}: command not found")
    output = Path(output)
    started = time.perf_counter()
    with _strace_log(output, keep_strace) as log:
        argv = [strace, "-f", "-ttt", "-T", "-y", "-qq", "-e", f"trace={SYSCALLS}", "-o", str(log)]
        status, interrupted = _run([*argv, "--", *cmd], log, progress)
        if not log.is_file() or log.stat().st_size == 0:
            raise IotwinError(
                f"strace traced nothing (exit status {status}): see its message above; "
                "in a container, ptrace may need to be allowed (--cap-add SYS_PTRACE)"
            )
        with atomic_output(output) as tmp:
            result = ingest(log, tmp, "strace", ReadOptions(stream_by=stream_by))
            meta = read_meta(tmp, extent=True)  # the rows stay as ingest wrote them
            meta.source = "capture: " + shlex.join(cmd)
            meta.files = [{**f, **file_facts(f["path"])} for f in meta.files]
            set_parquet_metadata(tmp, meta.to_kv())
    return CaptureResult(
        output=output,
        command=cmd,
        exit_status=status,
        requests=result.requests,
        files=len(meta.files),
        threads=int(result.info.get("threads", 0)),
        processes=int(result.info.get("processes", 0)),
        streams=result.streams,
        seconds=time.perf_counter() - started,
        interrupted=interrupted,
        strace_log=Path(keep_strace) if keep_strace else None,
    )


@contextlib.contextmanager
def _strace_log(output: Path, keep: str | Path | None) -> Iterator[Path]:
    """The strace text's path: `keep` (kept), else a temporary file beside the output."""
    if keep is not None:
        Path(keep).parent.mkdir(parents=True, exist_ok=True)
        yield Path(keep)
        return
    output.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{output.name}.", suffix=".strace", dir=output.parent)
    os.close(fd)
    try:
        yield Path(tmp)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)


def _run(argv: list[str], log: Path, progress: Progress | None) -> tuple[int, bool]:
    """Runs strace to completion; returns (exit status, interrupted).

    Ctrl-C reaches the command too (same process group): we wait for it to end and keep its
    trace. A second Ctrl-C kills strace and gives up.
    """
    started = time.monotonic()
    proc = subprocess.Popen(argv)
    interrupted = False
    while True:
        try:
            proc.wait(timeout=0.25)
            break
        except subprocess.TimeoutExpired:
            if progress is not None:
                size = log.stat().st_size if log.exists() else 0
                progress(time.monotonic() - started, size)
        except KeyboardInterrupt:
            if interrupted:
                proc.kill()
                proc.wait()
                raise
            interrupted = True
        except SystemExit:  # SIGTERM to iotwin (cli.main): stop strace too, then leave
            proc.terminate()
            proc.wait()
            raise
    rc = proc.returncode
    return (128 - rc if rc < 0 else rc), interrupted


def file_facts(path: str) -> dict[str, Any]:
    """A file's size after the run and its extents (None when unknown)."""
    try:
        st = os.stat(path)
    except OSError:
        return {"size": None, "extents": None}
    if stat.S_ISREG(st.st_mode):
        return {"size": st.st_size, "extents": file_extents(path)}
    if stat.S_ISBLK(st.st_mode):
        return {"size": _device_size(path), "extents": None}
    return {"size": None, "extents": None}


def _device_size(path: str) -> int | None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return None
    try:
        return os.lseek(fd, 0, os.SEEK_END)
    except OSError:
        return None
    finally:
        os.close(fd)


def file_extents(path: str) -> list[list[int]] | None:
    """The file's extents as [logical, physical, length, flags] via FS_IOC_FIEMAP, or None
    where the file system does not support it (tmpfs, some network file systems)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return None
    try:
        return _fiemap(fd)
    except OSError:
        return None
    finally:
        os.close(fd)


def _fiemap(fd: int) -> list[list[int]]:
    extents: list[list[int]] = []
    start = 0
    while True:
        request = bytearray(_FIEMAP.size + _EXTENT.size * _EXTENTS_PER_CALL)
        _FIEMAP.pack_into(request, 0, start, 2**64 - 1, FIEMAP_FLAG_SYNC, 0, _EXTENTS_PER_CALL, 0)
        fcntl.ioctl(fd, FS_IOC_FIEMAP, request, True)
        mapped = _FIEMAP.unpack_from(request)[3]
        if mapped == 0:
            return extents
        for i in range(mapped):
            extent = _EXTENT.unpack_from(request, _FIEMAP.size + i * _EXTENT.size)
            extents.append(list(extent))
        logical, _, length, flags = extents[-1]
        if flags & FIEMAP_EXTENT_LAST:
            return extents
        start = logical + length


def describe_status(status: int) -> str:
    """The command's exit status in words."""
    with contextlib.suppress(ValueError):
        if status > 128:
            return f"killed by {signal.Signals(status - 128).name} (status {status})"
    return f"exit status {status}"
