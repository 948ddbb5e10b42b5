"""The I/O engine's face: target checks and preparation, runs, results, records, fio export.

The timing loop lives in the Rust core (`_core.EngineRun`, `src/engine/`); it runs on its own
thread without the GIL while this module polls its progress every 200 ms, turns SIGINT and
SIGTERM into "stop issuing, drain, report partial", and renders what came back.
"""

from __future__ import annotations

import errno
import os
import signal
import stat
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from . import _core
from .errors import IotwinError
from .layout import on_virtual_device
from .model import Model, expand_types
from .source import atomic_output
from .trace import Trace, TraceMeta

BLOCK = 4096
POLL_S = 0.2
FILL_CHUNK = 1 << 20
DEFAULT_MAX_INFLIGHT = 1024
CLOSED_SCHEDULE_FACTOR = 100  # closed mode: synthesize this much longer than the wall limit


# -- device safety ---------------------------------------------------------------------------

# (offset, magic, name): enough of blkid's table to recognise what people keep on disks
SIGNATURES: list[tuple[int, bytes, str]] = [
    (0x438, b"\x53\xef", "ext2/3/4"),
    (0, b"XFSB", "xfs"),
    (0x10040, b"_BHRfS_M", "btrfs"),
    (4086, b"SWAPSPACE2", "swap"),
    (4086, b"SWAP-SPACE", "swap"),
    (0, b"LUKS\xba\xbe", "LUKS"),
    (512, b"LABELONE", "LVM2"),
    (512, b"EFI PART", "GPT partition table"),
    (3, b"NTFS    ", "ntfs"),
    (0x52, b"FAT32   ", "vfat"),
    (0x36, b"FAT16   ", "vfat"),
    (0x36, b"FAT12   ", "vfat"),
    (0x8001, b"CD001", "iso9660"),
    (0x10000 + 0x34, b"ReIsEr", "reiserfs"),
    (0x400, b"\x10\x20\xf5\xf2", "f2fs"),
    (0, b"hsqs", "squashfs"),
    (0x1FE, b"\x55\xaa", "MBR partition table"),
]


def filesystem_signature(head: bytes) -> str | None:
    """The name of a filesystem / partition table / volume signature in a device's first
    bytes (at least 68 KiB), or None."""
    for off, magic, name in SIGNATURES:
        if head[off : off + len(magic)] == magic:
            return name
    return None


def _unescape_mount(field: str) -> str:
    # /proc/self/mounts escapes space, tab, newline and backslash as octal
    for code, ch in (("\\040", " "), ("\\011", "\t"), ("\\012", "\n"), ("\\134", "\\")):
        field = field.replace(code, ch)
    return field


def _same_device(source: str, path: Path) -> bool:
    """Whether a mount source is the device at `path` or one of its partitions."""
    if not source.startswith("/"):
        return False
    try:
        if os.path.realpath(source) == os.path.realpath(path):
            return True
        a, b = os.stat(source), os.stat(path)
    except OSError:
        return False
    if stat.S_ISBLK(a.st_mode) and stat.S_ISBLK(b.st_mode):
        if a.st_rdev == b.st_rdev:
            return True
        # a partition's sysfs entry sits inside its disk's
        sys_part = Path(f"/sys/dev/block/{os.major(a.st_rdev)}:{os.minor(a.st_rdev)}")
        sys_disk = Path(f"/sys/dev/block/{os.major(b.st_rdev)}:{os.minor(b.st_rdev)}")
        try:
            return sys_part.resolve().parent == sys_disk.resolve()
        except OSError:
            return False
    return False


def mounted_at(path: Path, mounts: str | Path = "/proc/self/mounts") -> str | None:
    """Where the device at `path` (or a partition of it) is mounted, or None."""
    try:
        lines = Path(mounts).read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        parts = line.split()
        if len(parts) >= 2 and _same_device(_unescape_mount(parts[0]), path):
            return _unescape_mount(parts[1])
    return None


def _is_device(path: Path) -> bool:
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return False
    return not stat.S_ISREG(mode) and not stat.S_ISDIR(mode)


@dataclass
class DeviceChecks:
    """How a target is recognised as a device; tests inject their own."""

    is_device: Callable[[Path], bool] = _is_device
    mounts: str | Path = "/proc/self/mounts"


def check_target(
    path: Path,
    *,
    writes: bool,
    allow_device: bool = False,
    destructive: bool = False,
    force: bool = False,
    checks: DeviceChecks | None = None,
) -> bool:
    """Refuses unsafe device targets with a clear message; returns whether it is a device."""
    checks = checks or DeviceChecks()
    path = Path(path)
    if path.is_dir():
        raise IotwinError(f"{path}: is a directory; give a file or a block device")
    if not checks.is_device(path):
        return False
    if not allow_device:
        raise IotwinError(
            f"{path} is a device: pass --allow-device to run on it "
            "(and --destructive if the workload writes)"
        )
    if writes and not destructive:
        raise IotwinError(
            f"the workload writes and {path} is a device: pass --destructive to let iotwin "
            "overwrite its data in the target range"
        )
    where = mounted_at(path, checks.mounts)
    if where is not None and not force:
        raise IotwinError(
            f"{path} is mounted (at {where}): refusing to run on it; unmount it or pass --force"
        )
    try:
        with open(path, "rb") as f:
            head = f.read(0x11000)
    except OSError as exc:
        raise IotwinError(f"{path}: cannot read: {exc.strerror}") from None
    sig = filesystem_signature(head)
    if sig is not None and not force:
        raise IotwinError(
            f"{path} carries a {sig} signature: refusing to run on it; wipe it or pass --force"
        )
    return True


def device_size(path: Path) -> int:
    """A device's size in bytes (0 when it cannot tell, e.g. a character device)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError as exc:
        raise IotwinError(f"{path}: cannot open: {exc.strerror}") from None
    try:
        return os.lseek(fd, 0, os.SEEK_END)
    except OSError:
        return 0
    finally:
        os.close(fd)


# -- target files ----------------------------------------------------------------------------


def _pattern(n: int) -> bytes:
    i = np.arange(n, dtype=np.uint32)
    return ((i * 31 + 0x5A) | 1).astype(np.uint8).tobytes()


def prepare_file(
    path: Path, size: int | None, want: int, progress: Callable[[int, int], None] | None = None
) -> int:
    """The target file, created and fully written (not sparse) when missing; an existing
    file is reused. Returns its size."""
    path = Path(path)
    if path.exists():
        have = path.stat().st_size
        if size is not None and have != size:
            raise IotwinError(
                f"{path} exists with {have:,} bytes, not the {size:,} asked for: "
                f"remove it or pass --size {have}"
            )
        if have < BLOCK:
            raise IotwinError(f"{path} exists and is smaller than one block ({have} bytes)")
        return have
    size = size if size is not None else want
    size = -(-size // BLOCK) * BLOCK
    if size <= 0:
        raise IotwinError("the target size must be positive")
    try:
        free = os.statvfs(path.parent).f_bavail * os.statvfs(path.parent).f_frsize
    except OSError as exc:
        raise IotwinError(f"{path.parent}: {exc.strerror}") from None
    if size > free:
        raise IotwinError(
            f"{path}: needs {size:,} bytes but its filesystem has {free:,} free; "
            "pass a smaller --size"
        )
    done = [0]

    def step(n: int) -> None:
        done[0] += n
        if progress:
            progress(done[0], size)

    _fill(path, size, step)
    return size


def _fill(path: Path, size: int, progress: Callable[[int], None] | None = None) -> None:
    """Writes `size` bytes of the pattern to a new file, atomically; `progress(bytes)` after
    each chunk."""
    chunk = _pattern(FILL_CHUNK)
    with atomic_output(path) as tmp, open(tmp, "wb") as f:
        done = 0
        while done < size:
            n = min(FILL_CHUNK, size - done)
            f.write(chunk[:n])
            done += n
            if progress:
                progress(n)
        f.flush()
        os.fsync(f.fileno())


def replica_names(paths: list[str]) -> list[str]:
    """Relative names for replicas of traced files: each path without the directories all
    paths share, with nothing that could leave the replica directory (no absolute path, no
    `..`); names that collide, come out empty or are another's directory (a traced
    directory fsynced, say) get the file's position appended."""
    parts = [[p for p in Path(x).parts if p not in ("/", "", ".", "..")] for x in paths]
    dirs = [q[:-1] for q in parts]
    common = 0
    while dirs and all(len(d) > common and d[common] == dirs[0][common] for d in dirs):
        common += 1
    dirs_used = {"/".join(q[common:j]) for q in parts for j in range(common + 1, len(q))}
    names, seen = [], set()
    for i, q in enumerate(parts):
        name = "/".join(q[common:]) or f"file{i}"
        if name in seen or name in dirs_used:
            name = f"{name}.{i}"
        seen.add(name)
        names.append(name)
    return names


def prepare_replicas(
    directory: Path,
    files: list[dict[str, Any]],
    progress: Callable[[int, int], None] | None = None,
) -> list[dict[str, Any]]:
    """One replica per traced file under `directory` (same size, fully written, not sparse;
    one already there with the right size is reused). Returns the layout with each file's
    replica path."""
    out = []
    for f, name in zip(files, replica_names([str(f["path"]) for f in files]), strict=True):
        out.append({**f, "path": str(directory / name), "size": int(f["size"])})
    missing = []
    for f in out:
        path = Path(f["path"])
        if not path.exists():
            missing.append(f)
        elif path.stat().st_size != f["size"]:
            raise IotwinError(
                f"{path} exists with {path.stat().st_size:,} bytes, not the traced "
                f"{f['size']:,}: remove it"
            )
    total, done = sum(f["size"] for f in missing), [0]

    def step(n: int) -> None:
        done[0] += n
        if progress:
            progress(done[0], total)

    for f in missing:
        Path(f["path"]).parent.mkdir(parents=True, exist_ok=True)
        _fill(Path(f["path"]), f["size"], step)
    return out


def supports_direct(path: Path) -> bool:
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECT", 0))
    except OSError as exc:
        if exc.errno == errno.EINVAL:
            return False
        raise IotwinError(f"{path}: cannot open: {exc.strerror}") from None
    os.close(fd)
    return True


# -- runs ------------------------------------------------------------------------------------


def model_writes(doc: dict[str, Any]) -> bool:
    """Whether any stream of the model can issue a write (or flush)."""
    for s in doc.get("streams", []):
        first = s.get("first") or {}
        if first.get("op", 0) in (1, 2):
            return True
        for t in s.get("transitions", []):
            if any(c.get("op", 0) in (1, 2) for c in t.get("categories", [])):
                return True
    return False


@dataclass
class RunOptions:
    requests: int | None = None
    duration_s: float | None = None
    intensity: float = 1.0
    compress: float = 1.0
    seed: int = 0
    direct: bool | None = None  # None: direct where the filesystem supports it
    engine: str | None = None  # None: io_uring where available, else threads
    mode: str = "open"
    iodepth: int | None = None
    max_inflight: int = DEFAULT_MAX_INFLIGHT
    size: int | None = None
    allow_device: bool = False
    destructive: bool = False
    force: bool = False
    record: bool = False


def _choose_engine(name: str | None) -> str:
    if name not in (None, "io_uring", "threads"):
        raise IotwinError(f"--engine '{name}': expected io_uring or threads")
    if name is not None:
        return name
    return "io_uring" if _core.io_uring_available() else "threads"


def run(
    source: Model | Trace,
    target: str | Path,
    opts: RunOptions,
    *,
    on_progress: Callable[[dict[str, Any]], None] | None = None,
    on_fill: Callable[[int, int], None] | None = None,
    checks: DeviceChecks | None = None,
    warn: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Runs a model (synthesized on the fly) or replays a trace against `target`."""
    target = Path(target)
    if opts.mode not in ("open", "closed"):
        raise IotwinError(f"--mode '{opts.mode}': expected open or closed")
    if opts.mode == "closed" and not (opts.iodepth and opts.iodepth > 0):
        raise IotwinError("--mode closed needs --iodepth N (N >= 1)")
    if opts.mode == "open" and opts.iodepth is not None:
        raise IotwinError("--iodepth belongs to --mode closed (open loop follows the schedule)")
    if opts.max_inflight < 1:
        raise IotwinError("--max-inflight must be >= 1")
    engine = _choose_engine(opts.engine)
    if opts.requests is not None and opts.duration_s is not None:
        raise IotwinError("give --requests or --duration, not both")
    kwargs: dict[str, Any] = {}
    if isinstance(source, Model):
        doc = expand_types(source.doc)
        capacity = int(doc["capacity"])
        writes = model_writes(doc)
        requests, duration_s = opts.requests, opts.duration_s
        if requests is None and duration_s is None:
            duration_s = 60.0
        synth_ns = None if duration_s is None else int(duration_s * 1e9)
        if opts.mode == "closed" and synth_ns is not None:
            synth_ns *= CLOSED_SCHEDULE_FACTOR
        for name, v in (("intensity", opts.intensity), ("compress", opts.compress)):
            if not v > 0:
                raise IotwinError(f"--{name} must be positive")
        kwargs = dict(
            model_json=doc,  # the core reads the dict itself
            requests=requests,
            synth_duration_ns=synth_ns,
            intensity=float(opts.intensity),
            compress=float(opts.compress),
            seed=int(opts.seed) & (2**64 - 1),
        )
        what = "model"
        stream_names = {int(s["id"]): s.get("name", f"stream {s['id']}") for s in doc["streams"]}
        layout = doc.get("files")
    else:
        trace, layout = on_virtual_device(source)
        df = trace.df
        if opts.requests is not None:
            df = df.head(opts.requests)
        if opts.duration_s is not None and df.height:
            df = df.filter(pl.col("ts_ns") - df["ts_ns"][0] < int(opts.duration_s * 1e9))
        capacity = max(1, trace.capacity)
        writes = bool(df.height) and bool(df["op"].is_in([1, 2]).any())
        duration_s = opts.duration_s

        def col(name: str, dtype: type) -> np.ndarray:
            return np.ascontiguousarray(df.get_column(name).to_numpy(), dtype=dtype)

        kwargs = dict(
            trace=(
                col("ts_ns", np.int64),
                col("stream", np.uint32),
                col("op", np.uint8),
                col("offset", np.uint64),
                col("size", np.uint32),
            )
        )
        what = "trace"
        stream_names = dict(trace.meta.streams)
    if target.is_dir():
        paths, size, direct, replicas = _replica_target(target, layout, opts, on_fill)
    else:
        paths, size, direct = _file_target(target, opts, writes, capacity, on_fill, checks, warn)
        replicas = None
    closed = opts.mode == "closed"
    handle = _engine_run(
        paths,
        bool(direct),
        writes,
        engine,
        opts.iodepth if closed else None,
        opts.max_inflight,
        int(duration_s * 1e9) if (closed and duration_s is not None) else None,
        capacity,
        size,
        BLOCK if direct else 1,
        opts.record,
        files=None if replicas is None else [(f["base"], f["size"]) for f in replicas],
        **kwargs,
    )
    result = _wait(handle, on_progress)
    result.update(
        target=str(target),
        target_size=size,
        capacity=capacity,
        source=what,
        engine=engine,
        direct=bool(direct),
        mode=opts.mode,
        iodepth=opts.iodepth if closed else None,
        max_inflight=opts.max_inflight,
        intensity=opts.intensity,
        seed=opts.seed,
        files=replicas,
    )
    _summarize(result, stream_names)
    return result


def _file_target(
    target: Path,
    opts: RunOptions,
    writes: bool,
    capacity: int,
    on_fill: Callable[[int, int], None] | None,
    checks: DeviceChecks | None,
    warn: Callable[[str], None] | None,
) -> tuple[list[str], int, bool]:
    """A file (created when missing) or a checked device: its path, size and whether it runs
    with O_DIRECT."""
    is_device = check_target(
        target,
        writes=writes,
        allow_device=opts.allow_device,
        destructive=opts.destructive,
        force=opts.force,
        checks=checks,
    )
    want = -(-capacity // BLOCK) * BLOCK
    if is_device:
        size = device_size(target)
        if opts.size is not None:
            if size and opts.size > size:
                raise IotwinError(f"--size {opts.size:,} exceeds {target}'s {size:,} bytes")
            size = opts.size
        if not size:
            raise IotwinError(f"{target}: cannot tell its size; pass --size BYTES")
    else:
        size = prepare_file(target, opts.size, want, on_fill)
    direct = opts.direct
    if direct is None:
        direct = supports_direct(target)
        if not direct and warn:
            warn(f"{target}: the filesystem does not support O_DIRECT; running buffered")
    return [str(target)], size, bool(direct)


def _replica_target(
    target: Path,
    layout: list[dict[str, Any]] | None,
    opts: RunOptions,
    on_fill: Callable[[int, int], None] | None,
) -> tuple[list[str], int, bool, list[dict[str, Any]]]:
    """A directory of replica files for a file-level source: their paths, total size, the
    direct flag (always buffered) and the layout with the replicas' paths."""
    if not layout:
        raise IotwinError(
            f"{target} is a directory: replica files need a file-level model or trace "
            "(one with files); give a file or a block device"
        )
    if opts.direct:
        raise IotwinError(
            "replica files keep the traced sizes, which O_DIRECT cannot read to the end: "
            "run them --buffered"
        )
    if opts.size is not None:
        raise IotwinError("--size does not apply to replica files (they keep the traced sizes)")
    replicas = prepare_replicas(target, layout, on_fill)
    paths = [f["path"] for f in replicas]
    return paths, sum(f["size"] for f in replicas), False, replicas


def _wait(handle: Any, on_progress: Callable[[dict[str, Any]], None] | None) -> dict[str, Any]:
    """Polls the running engine; SIGINT / SIGTERM stop it (drained, marked partial)."""
    old: dict[int, Any] = {}
    if threading.current_thread() is threading.main_thread():

        def stop(signum: int, frame: Any) -> None:
            handle.stop()

        for sig in (signal.SIGINT, signal.SIGTERM):
            old[sig] = signal.signal(sig, stop)
    try:
        while not handle.finished():
            time.sleep(POLL_S)
            if on_progress:
                on_progress(handle.progress())
        try:
            return handle.result()
        except ValueError as exc:
            raise IotwinError(str(exc)) from None
    finally:
        for sig, h in old.items():
            signal.signal(sig, h)


def _engine_run(*args: Any, **kwargs: Any) -> Any:
    """Starts the core's engine; what it refuses (e.g. a synthesis too large to hold)
    becomes a user error."""
    try:
        return _core.EngineRun(*args, **kwargs)
    except ValueError as exc:
        raise IotwinError(str(exc)) from None


def _summarize(r: dict[str, Any], names: dict[int, str]) -> None:
    total = r["total"]
    secs = max(r["elapsed_ns"], 1) / 1e9
    r["elapsed_s"] = secs
    r["iops"] = total["requests"] / secs
    r["bandwidth_bps"] = total["bytes"] / secs
    n = max(total["requests"], 1)
    streams = {}
    for sid, s in sorted(r["streams"].items()):
        s["name"] = names.get(int(sid), f"stream {sid}")
        s["weight"] = s["requests"] / n
        streams[str(sid)] = s
    r["streams"] = streams
    r["timeline"] = [
        {"second": i, "iops": t[0], "reads": t[1], "writes": t[2], "bandwidth_bps": t[3]}
        for i, t in enumerate(r["timeline"])
    ]


RECORD_COLUMNS = (
    ("sched_ns", np.int64),
    ("issue_ns", np.int64),
    ("done_ns", np.int64),
    ("stream", np.uint32),
    ("op", np.uint8),
    ("offset", np.uint64),
    ("size", np.uint32),
    ("file", np.uint32),
    ("target_offset", np.uint64),
    ("target_size", np.uint32),
)


def record_trace(result: dict[str, Any], space: str = "source") -> Trace:
    """What was issued, as a canonical trace: ts_ns is the actual issue time, latency_ns the
    service latency (completion - issue).

    `space="source"` (what `--record` writes) keeps the source's own addresses and sizes, so
    a record validates against the model's synthetic trace; `meta.mapping` says how they map
    onto the target (proportionally, aligned: `engine::Mapper`). `space="target"` gives the
    bytes actually touched on the target instead. A run on replica files gives a file-level
    trace of what each replica received (file ids and sizes are the model's, so its virtual
    device is the model's) in either space.
    """
    if space not in ("source", "target"):
        raise IotwinError(f"record space '{space}': expected source or target")
    rec = result["record"]
    arr = {k: np.frombuffer(rec[k], dtype=d) for k, d in RECORD_COLUMNS}
    order = np.argsort(arr["issue_ns"], kind="stable")
    issue = arr["issue_ns"][order]
    t0 = int(issue[0]) if issue.size else 0
    replicas = result.get("files")
    pre = "target_" if space == "target" or replicas else ""
    cols = {
        "ts_ns": issue - t0,
        "stream": arr["stream"][order],
        "op": arr["op"][order],
        "offset": arr[pre + "offset"][order],
        "size": arr[pre + "size"][order],
        "latency_ns": (arr["done_ns"] - arr["issue_ns"])[order],
    }
    names = {int(k): v["name"] for k, v in result["streams"].items()}
    meta = TraceMeta(
        source=f"iotwin run on {result['target']}",
        format="iotwin-run",
        stream_by="stream",
        capacity=int(result["target_size" if space == "target" else "capacity"]),
        streams=names,
    )
    if replicas:
        ids = np.array([f["id"] for f in replicas], dtype=np.uint32)
        cols["file"] = ids[arr["file"][order]]
        meta.capacity = None
        meta.files = [{"id": f["id"], "path": f["path"], "size": f["size"]} for f in replicas]
        meta.mapping = {"kind": "replica files", "target": result["target"]}
    else:
        meta.mapping = {
            "kind": "proportional",
            "target": result["target"],
            "target_size": int(result["target_size"]),
            "capacity": int(result["capacity"]),
            "align": BLOCK if result["direct"] else 1,
        }
    return Trace(pl.DataFrame(cols), meta)


def result_json(result: dict[str, Any]) -> dict[str, Any]:
    """The result without the raw record buffers; "kind" lets `iotwin report` recognise it."""
    return {"kind": "run", **{k: v for k, v in result.items() if k != "record"}}


# -- fio export ------------------------------------------------------------------------------

FIO_FILE = "iotwin.target"
FIO_ACTIONS = {0: "read", 1: "write", 2: "sync", 3: "trim"}


def schedule_for_export(
    source: Model | Trace,
    requests: int | None,
    *,
    size: int | None = None,
    direct: bool = True,
    seed: int = 0,
    intensity: float = 1.0,
    compress: float = 1.0,
) -> tuple[pl.DataFrame, int]:
    """The requests `iotwin run` issues (same synthesis, same mapping onto the target), and
    the target size."""
    if isinstance(source, Model):
        trace = source.synth(requests=requests, seed=seed, intensity=intensity, compress=compress)
    else:
        trace, _ = on_virtual_device(source)
        if requests is not None:
            trace = replace(trace, df=trace.df.head(requests))
    capacity = max(1, trace.capacity)
    target = size if size is not None else -(-capacity // BLOCK) * BLOCK
    df = trace.df
    off = np.ascontiguousarray(df["offset"].to_numpy(), dtype=np.uint64)
    sz = np.ascontiguousarray(df["size"].to_numpy(), dtype=np.uint32)
    o2, s2 = _core.map_offsets(off, sz, capacity, target, BLOCK if direct else 1)
    ts = df["ts_ns"].to_numpy()
    ts = ts - (ts[0] if len(ts) else 0)
    out = pl.DataFrame(
        {
            "ts_ns": ts,
            "stream": df["stream"],
            "op": df["op"],
            "offset": np.frombuffer(o2, dtype=np.uint64),
            "size": np.frombuffer(s2, dtype=np.uint32),
        }
    )
    return out, target


def write_fio_iolog(df: pl.DataFrame, path: str | Path, filename: str = FIO_FILE) -> None:
    """A fio iolog v3 (timestamps in microseconds) of the schedule, written atomically."""
    ts_us = (df["ts_ns"].to_numpy() // 1000).astype(np.int64)
    ops = df["op"].to_numpy()
    offs = df["offset"].to_numpy()
    sizes = df["size"].to_numpy()
    last = int(ts_us[-1]) if len(ts_us) else 0
    with atomic_output(path) as tmp, open(tmp, "w") as f:
        f.write("fio version 3 iolog\n")
        f.write(f"0 {filename} add\n0 {filename} open\n")
        lines = [
            f"{t} {filename} {FIO_ACTIONS.get(int(o), 'read')} {off} {s}\n"
            if o != 2
            else f"{t} {filename} sync\n"
            for t, o, off, s in zip(
                ts_us.tolist(), ops.tolist(), offs.tolist(), sizes.tolist(), strict=True
            )
        ]
        f.writelines(lines)
        f.write(f"{last} {filename} close\n")


# -- rendering -------------------------------------------------------------------------------


def _us(ns: float) -> str:
    return f"{ns / 1000:,.1f}"


def progress_line(p: dict[str, Any], last: dict[str, Any] | None) -> str:
    """One live line: counts, recent rate and bandwidth, worst recent lateness."""
    secs = p["elapsed_ns"] / 1e9
    rate = bw = 0.0
    if last is not None and p["elapsed_ns"] > last["elapsed_ns"]:
        dt = (p["elapsed_ns"] - last["elapsed_ns"]) / 1e9
        rate = (p["completed"] - last["completed"]) / dt
        bw = (p["bytes"] - last["bytes"]) / dt
    inflight = p["issued"] - p["completed"]
    err = f", [red]{p['errors']:,} errors[/red]" if p["errors"] else ""
    return (
        f"{secs:,.1f} s: {p['issued']:,} issued, {inflight:,} in flight, "
        f"{rate:,.0f} IOPS, {bw / 1e6:,.1f} MB/s, max lateness {_us(p['max_late_ns'])} µs{err}"
    )


def render(r: dict[str, Any], console: Any) -> None:
    from rich.table import Table

    state = "[yellow]partial (stopped)[/yellow]" if r["partial"] else "[green]complete[/green]"
    console.print(
        f"{r['source']} on {r['target']} ({r['target_size']:,} bytes), {r['engine']}, "
        f"{'direct' if r['direct'] else 'buffered'}, "
        + (f"closed loop iodepth {r['iodepth']}" if r["mode"] == "closed" else "open loop")
        + f": {state}"
    )
    t = r["total"]
    console.print(
        f"{t['requests']:,} requests in {r['elapsed_s']:,.3f} s: {r['iops']:,.1f} IOPS, "
        f"{r['bandwidth_bps'] / 1e6:,.2f} MB/s, {t['errors']:,} errors"
        + (f" (first: {r['first_error']})" if r["first_error"] else "")
    )
    table = Table(title="latency (µs): lateness = issue - scheduled, service = completion - issue, "
                  "response = completion - scheduled", title_justify="left")  # fmt: skip
    for c in ("stream", "requests", "weight", "metric", "p50", "p90", "p99", "p99.9", "max"):
        table.add_column(c, justify="left" if c in ("stream", "metric") else "right")
    rows = [("all", t, 1.0)] + [(s["name"], s, s["weight"]) for s in r["streams"].values()]
    for name, s, w in rows:
        for i, (label, key) in enumerate(
            (("lateness", "lateness_ns"), ("service", "service_ns"), ("response", "response_ns"))
        ):
            h = s[key]
            table.add_row(
                name if i == 0 else "",
                f"{s['requests']:,}" if i == 0 else "",
                f"{w:.3f}" if i == 0 else "",
                label,
                *(_us(h[q]) for q in ("p50", "p90", "p99", "p99.9", "max")),
            )
    console.print(table)
    notes = [
        f"{r[k]:,} {what}"
        for k, what in (
            ("skipped", "not issued (trim, or an empty replica file)"),
            ("folded", "folded from a replica's padding into it"),
            ("clamped", "cut at a replica's end"),
        )
        if r.get(k)
    ]
    if notes:
        console.print("requests: " + "; ".join(notes))
