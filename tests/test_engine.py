"""The I/O engine on temporary files: open-loop rate and count, replay timing, closed-loop
depth, records, target files, device refusals, signals, and the fio iolog export.

No test asserts speed beyond counts (exact) and achieved rates (within 1%): lateness is
reported, never bounded, so a loaded machine does not make them flaky.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from typer.testing import CliRunner

from iotwin import _core
from iotwin import engine as eng
from iotwin.cli import app
from iotwin.errors import IotwinError
from iotwin.ingest import load_trace
from iotwin.model import Model, fit
from iotwin.trace import Trace, TraceMeta, read_parquet_trace, write_trace
from iotwin.validate import validate

CAPACITY = 16 << 20
SHARED = Path(os.environ.get("IOTWIN_SHARED", "/work/shared"))
ENGINES = ["threads"] + (["io_uring"] if _core.io_uring_available() else [])


def fixed_rate_model(rate: float, n: int = 20_000, writes: float = 0.3, streams: int = 2) -> Model:
    """A model fitted to a trace of exactly `rate` requests/s with fixed inter-arrival times."""
    gap = round(1e9 / rate)
    rng = np.random.default_rng(1)
    df = pl.DataFrame(
        {
            "ts_ns": np.arange(n, dtype=np.int64) * gap,
            "stream": (np.arange(n) % streams).astype(np.uint32),
            "op": (rng.random(n) < writes).astype(np.uint8),
            "offset": (rng.integers(0, CAPACITY // 4096, n) * 4096).astype(np.uint64),
            "size": np.full(n, 4096, dtype=np.uint32),
        }
    )
    return fit(Trace(df, TraceMeta(capacity=CAPACITY)), levels=2, iat="fixed")


@pytest.fixture(scope="module")
def model_1k() -> Model:
    return fixed_rate_model(1000.0)


@pytest.mark.parametrize("engine", ENGINES)
def test_open_loop_fixed_rate_count_and_rate(tmp_path: Path, model_1k: Model, engine: str) -> None:
    target = tmp_path / "target.bin"
    r = eng.run(
        model_1k, target, eng.RunOptions(duration_s=5, engine=engine, direct=False, record=True)
    )
    total = r["total"]
    assert abs(total["requests"] - 5000) <= 50, total["requests"]
    assert total["errors"] == 0 and not r["partial"]
    assert total["reads"] + total["writes"] == total["requests"]
    rec = eng.record_trace(r)
    assert rec.df.height == total["requests"]
    issue = rec.df["ts_ns"].to_numpy()
    rate = (len(issue) - 1) / (issue[-1] / 1e9)
    assert abs(rate / 1000.0 - 1) < 0.01, rate
    # per-stream counts and weights: the two streams share the requests evenly
    weights = sorted(s["weight"] for s in r["streams"].values())
    assert len(weights) == 2 and abs(weights[0] - 0.5) < 0.01
    assert sum(s["requests"] for s in r["streams"].values()) == total["requests"]
    # lateness, service and response are reported (values depend on the machine's load)
    for key in ("lateness_ns", "service_ns", "response_ns"):
        h = total[key]
        assert h["count"] == total["requests"]
        assert 0 <= h["p50"] <= h["p90"] <= h["p99"] <= h["p99.9"] <= h["max"]
    assert total["response_ns"]["max"] >= total["service_ns"]["p50"]
    print(f"{engine} lateness µs:", {q: total["lateness_ns"][q] / 1e3 for q in ("p50", "p99")})
    # the timeline holds every request, about 1,000 per second
    assert sum(t["iops"] for t in r["timeline"]) == total["requests"]
    assert all(abs(t["iops"] - 1000) <= 100 for t in r["timeline"][1:4])
    # nothing outside the target
    assert (rec.df["offset"] + rec.df["size"].cast(pl.UInt64)).max() <= r["target_size"]


def test_target_file_created_full_then_reused(tmp_path: Path) -> None:
    target = tmp_path / "t.bin"
    size = eng.prepare_file(target, None, 3 * 4096 + 5)
    assert size == 4 * 4096 == target.stat().st_size
    assert target.stat().st_blocks * 512 >= size  # written, not sparse
    data = target.read_bytes()
    assert b"\0" not in data
    mtime = target.stat().st_mtime_ns
    assert eng.prepare_file(target, None, 1 << 30) == size  # reused as it is
    assert target.stat().st_mtime_ns == mtime
    with pytest.raises(IotwinError, match="exists with 16,384 bytes"):
        eng.prepare_file(target, 8192, 8192)
    assert not [p for p in tmp_path.iterdir() if p.name != "t.bin"]  # no temporary left


def _irregular_trace(n: int = 400) -> Trace:
    rng = np.random.default_rng(5)
    ts = np.cumsum(rng.exponential(2e6, n)).astype(np.int64)  # mean gap 2 ms
    ts -= ts[0]
    df = pl.DataFrame(
        {
            "ts_ns": ts,
            "stream": (np.arange(n) % 3).astype(np.uint32),
            "op": (rng.random(n) < 0.5).astype(np.uint8),
            "offset": (rng.integers(0, 1000, n) * 1000).astype(np.uint64),
            "size": rng.integers(1, 9, n).astype(np.uint32) * 512,
        }
    )
    return Trace(df, TraceMeta(capacity=1 << 20))


@pytest.mark.parametrize("engine", ENGINES)
def test_replay_follows_the_trace_schedule(tmp_path: Path, engine: str) -> None:
    src = tmp_path / "trace.parquet"
    orig = _irregular_trace()
    write_trace(orig, src)
    out, rec_path = tmp_path / "r.json", tmp_path / "rec.parquet"
    args = ["replay", str(src), "--target", str(tmp_path / "t.bin"), "--buffered"]
    args += ["--engine", engine, "--json", str(out), "--record", str(rec_path)]
    run = CliRunner().invoke(app, args)
    assert run.exit_code == 0, run.output
    r = json.loads(out.read_text())
    assert r["total"]["requests"] == orig.df.height and r["total"]["errors"] == 0
    rec = read_parquet_trace(rec_path)
    assert rec.meta.format == "iotwin-run" and "latency_ns" in rec.df.columns
    assert (rec.df["latency_ns"] >= 0).all()
    # the trace's own addresses, sizes and operations (buffered: no alignment)
    key = ["offset", "size", "op"]
    assert rec.df.select(key).sort(key).equals(orig.df.select(key).sort(key))
    # issue times follow the schedule: the same spacing, up to lateness (a stall of the
    # machine shifts what follows it by the same amount, so compare gaps, not times)
    got = np.sort(rec.df["ts_ns"].to_numpy())
    want = orig.df["ts_ns"].to_numpy()
    gap_err = np.abs(np.diff(got) - np.diff(want))
    print(f"{engine} replay gap error: median {np.median(gap_err) / 1e3:.1f} µs")
    assert np.median(gap_err) < 1e5
    assert abs((got[-1] - got[0]) / (want[-1] - want[0]) - 1) < 0.01


def test_closed_loop_keeps_iodepth(tmp_path: Path, model_1k: Model) -> None:
    for engine in ENGINES:
        r = eng.run(
            model_1k,
            tmp_path / "t.bin",
            eng.RunOptions(requests=3000, mode="closed", iodepth=4, engine=engine, direct=False),
        )
        assert r["total"]["requests"] == 3000
        assert r["max_inflight_seen"] == 4
        # closed loop ignores the schedule: 3,000 requests take far less than the 3 s the
        # 1,000/s schedule would
        assert r["elapsed_s"] < 3.0
    with pytest.raises(IotwinError, match="--iodepth"):
        eng.run(model_1k, tmp_path / "t.bin", eng.RunOptions(requests=10, mode="closed"))


def test_direct_io_aligns_everything(tmp_path: Path) -> None:
    target = tmp_path / "t.bin"
    eng.prepare_file(target, None, 1 << 20)
    if not eng.supports_direct(target):
        pytest.skip("no O_DIRECT on this filesystem")
    r = eng.run(
        Trace(_irregular_trace().df.head(100), TraceMeta(capacity=1 << 20)),
        target,
        eng.RunOptions(direct=True, record=True),
    )
    assert r["direct"] and r["total"]["errors"] == 0
    rec = eng.record_trace(r, space="target").df
    assert (rec["offset"] % 4096 == 0).all() and (rec["size"] % 4096 == 0).all()
    assert (rec["offset"] + rec["size"].cast(pl.UInt64)).max() <= 1 << 20


def _pattern(size: int) -> bytes:
    """What the engine's buffers hold before any read lands in them (io_uring.rs)."""
    return bytes(((i * 31 + 0x5A) & 0xFF) | 1 for i in range(size))


@pytest.mark.parametrize("mode", ["open", "closed"])
def test_direct_writes_land_from_registered_buffers(tmp_path: Path, mode: str) -> None:
    """With O_DIRECT the ring reads and writes through registered buffers, re-registered when
    a slot's buffer grows: every write lands whole, with the buffer's bytes, in its place."""
    target = tmp_path / "t.bin"
    target.write_bytes(bytes(1 << 20))
    if not eng.supports_direct(target):
        pytest.skip("no O_DIRECT on this filesystem")
    sizes = [4096, 65536, 8192, 131072, 4096, 16384]  # buffers grow twice
    offsets = np.cumsum([0, *sizes[:-1]]) * 2  # a gap after each write
    df = pl.DataFrame(
        {
            "ts_ns": np.arange(len(sizes), dtype=np.int64) * 1000,
            "stream": np.zeros(len(sizes), dtype=np.uint32),
            "op": np.ones(len(sizes), dtype=np.uint8),
            "offset": offsets.astype(np.uint64),
            "size": np.array(sizes, dtype=np.uint32),
        }
    )
    iodepth = 2 if mode == "closed" else None
    opts = eng.RunOptions(direct=True, record=True, mode=mode, iodepth=iodepth)
    r = eng.run(Trace(df, TraceMeta(capacity=1 << 20)), target, opts)
    assert r["total"]["errors"] == 0 and r["total"]["requests"] == len(sizes)
    rec = eng.record_trace(r, space="target").df.sort("offset")
    assert rec["offset"].to_list() == offsets.tolist()
    data = target.read_bytes()
    for off, size in zip(offsets.tolist(), sizes, strict=True):
        assert data[off : off + size] == _pattern(size)
        assert data[off + size : off + 2 * size] == bytes(size)  # the gap: untouched


# -- device refusals ---------------------------------------------------------------------


def _fake_device(tmp_path: Path, head: bytes = b"") -> Path:
    dev = tmp_path / "loop7"
    dev.write_bytes(head.ljust(1 << 20, b"\0"))
    return dev


def test_device_refusals(tmp_path: Path) -> None:
    dev = _fake_device(tmp_path)
    mounts = tmp_path / "mounts"
    mounts.write_text("proc /proc proc rw 0 0\n")
    checks = eng.DeviceChecks(is_device=lambda p: True, mounts=mounts)

    def check(**kw):
        base = dict(writes=False, allow_device=True, destructive=False, force=False)
        return eng.check_target(dev, checks=checks, **{**base, **kw})

    with pytest.raises(IotwinError, match="is a device: pass --allow-device"):
        check(allow_device=False)
    with pytest.raises(IotwinError, match=r"the workload writes .* pass --destructive"):
        check(writes=True)
    assert check() is True
    assert check(writes=True, destructive=True) is True
    # mounted: the device itself, listed in a mounts table (escapes decoded)
    mounts.write_text(f"{dev} /mnt/my\\040data ext4 rw 0 0\n")
    with pytest.raises(IotwinError, match=r"is mounted \(at /mnt/my data\).*--force"):
        check()
    assert check(force=True) is True
    mounts.write_text("proc /proc proc rw 0 0\n")
    # a filesystem signature
    ext4 = bytearray(0x500)
    ext4[0x438:0x43A] = b"\x53\xef"
    dev = _fake_device(tmp_path, bytes(ext4))
    with pytest.raises(IotwinError, match=r"carries a ext2/3/4 signature.*--force"):
        check()
    assert check(force=True) is True
    for magic_at, magic, name in [(0, b"XFSB", "xfs"), (512, b"EFI PART", "GPT")]:
        head = bytearray(0x1000)
        head[magic_at : magic_at + len(magic)] = magic
        assert name in (eng.filesystem_signature(bytes(head) + bytes(0x11000)) or "")
    assert eng.filesystem_signature(bytes(0x11000)) is None


def test_real_mount_table_and_char_device(tmp_path: Path) -> None:
    # whatever is mounted at / in /proc/self/mounts is found as mounted (when it is a path)
    for line in Path("/proc/self/mounts").read_text().splitlines():
        src = line.split()[0]
        if src.startswith("/") and Path(src).exists():
            assert eng.mounted_at(Path(src)) is not None
            break
    assert eng.mounted_at(tmp_path / "nothing") is None
    # /dev/null is not a regular file: a device, refused without --allow-device
    with pytest.raises(IotwinError, match="--allow-device"):
        eng.check_target(Path("/dev/null"), writes=False)


def test_cli_refuses_devices_with_one_clear_line(tmp_path: Path, model_1k: Model) -> None:
    model = tmp_path / "m.json"
    model_1k.save(model)
    exe = Path(sys.executable).parent / "iotwin"
    run = subprocess.run(
        [exe, "run", model, "--target", "/dev/null", "--requests", "10"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert run.returncode == 2
    assert "error:" in run.stderr and "--allow-device" in run.stderr
    assert "Traceback" not in run.stderr
    run = subprocess.run(
        [exe, "run", model, "--target", "/dev/null", "--requests", "10", "--allow-device"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert run.returncode == 2 and "--destructive" in run.stderr


# -- signals -----------------------------------------------------------------------------


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_signal_stops_drains_and_marks_partial(tmp_path: Path, model_1k: Model, sig) -> None:
    model = tmp_path / "m.json"
    model_1k.save(model)
    out = tmp_path / "r.json"
    exe = Path(sys.executable).parent / "iotwin"
    args = [exe, "run", model, "--target", tmp_path / "t.bin", "--duration", "60"]
    p = subprocess.Popen(
        [*map(str, args), "--buffered", "--json", str(out)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    deadline = time.time() + 60
    while not (tmp_path / "t.bin").exists() and time.time() < deadline:
        time.sleep(0.1)
    time.sleep(1.5)
    p.send_signal(sig)
    stdout, stderr = p.communicate(timeout=60)
    assert p.returncode == 130, stderr
    r = json.loads(out.read_text())
    assert r["partial"] is True
    assert 0 < r["total"]["requests"] < 60_000
    assert "partial" in stdout


# -- fio export --------------------------------------------------------------------------


def test_export_fio_iolog_round_trip_and_fio_replay(tmp_path: Path, model_1k: Model) -> None:
    model = tmp_path / "m.json"
    model_1k.save(model)
    log = tmp_path / "run.iolog"
    run = CliRunner().invoke(
        app, ["export", "fio-iolog", str(model), "-o", str(log), "--requests", "500"]
    )
    assert run.exit_code == 0, run.output
    sched, target = eng.schedule_for_export(model_1k, 500)
    assert target == CAPACITY
    # iotwin's own reader gives back the exact schedule (microseconds)
    back = load_trace(log, "fio-iolog").df
    assert back.height == 500
    assert np.array_equal(back["ts_ns"].to_numpy(), sched["ts_ns"].to_numpy() // 1000 * 1000)
    for c in ("op", "offset", "size"):
        assert np.array_equal(back[c].to_numpy(), sched[c].to_numpy()), c
    # the same seed gives the same schedule as the engine's on-the-fly synthesis
    again, _ = eng.schedule_for_export(model_1k, 500)
    assert again.equals(sched)
    fio = shutil.which("fio")
    if fio is None:
        pytest.skip("fio is not installed")
    data = tmp_path / "data.bin"
    eng.prepare_file(data, CAPACITY, CAPACITY)
    res = subprocess.run(
        [fio, "--name=replay", f"--read_iolog={log}", f"--replay_redirect={data}",
         "--ioengine=psync", "--replay_no_stall=1", "--output-format=json"],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    job = json.loads(res.stdout[res.stdout.index("{") :])["jobs"][0]
    ios = job["read"]["total_ios"] + job["write"]["total_ios"]
    assert ios == 500
    assert job["write"]["total_ios"] == int((sched["op"] == 1).sum())


def test_run_matches_export_schedule(tmp_path: Path, model_1k: Model) -> None:
    """What `run` issues (recorded) is the exported schedule: same requests, same order."""
    r = eng.run(
        model_1k,
        tmp_path / "t.bin",
        eng.RunOptions(requests=300, direct=False, record=True, mode="closed", iodepth=1),
    )
    rec = eng.record_trace(r, space="target").df
    sched, _ = eng.schedule_for_export(model_1k, 300, direct=False)
    for c in ("op", "offset", "size", "stream"):
        assert np.array_equal(rec[c].to_numpy(), sched[c].to_numpy()), c


# -- replica files -----------------------------------------------------------------------

TRACED = [("/srv/db/base/1", 40_000), ("/srv/db/base/2", 12_345), ("/srv/db/pg_wal/000001", 70_000)]


def file_level_model(n: int = 3000) -> Model:
    """A model fitted on a hand-made file-level trace of three files (sizes not multiples of
    a block, so requests reach their ends)."""
    rng = np.random.default_rng(3)
    file = rng.integers(0, len(TRACED), n).astype(np.uint32)
    sizes = np.array([s for _, s in TRACED])[file]
    size = rng.choice([512, 4096, 8192], n).astype(np.uint32)
    offset = (rng.random(n) * (sizes - size)).astype(np.uint64)
    df = pl.DataFrame(
        {
            "ts_ns": np.arange(n, dtype=np.int64) * 100_000,
            "stream": (file == 2).astype(np.uint32),
            "op": (file == 2).astype(np.uint8),
            "offset": offset,
            "size": size,
            "file": file,
        }
    )
    files = [{"id": i, "path": p, "size": s} for i, (p, s) in enumerate(TRACED)]
    return fit(Trace(df, TraceMeta(files=files, stream_by="process")), levels=2)


def test_replica_names_stay_inside() -> None:
    names = eng.replica_names(["/a/b/c.db", "/a/b/d/e", "/a/../../etc/x"])
    assert names == ["b/c.db", "b/d/e", "etc/x"]
    assert eng.replica_names(["/a/b", "../rel/y", "/"]) == ["a/b", "rel/y", "file2"]
    assert eng.replica_names(["/x/1", "/y/1"]) == ["x/1", "y/1"]
    assert eng.replica_names(["/d/f", "/d/f"]) == ["f", "f.1"]
    assert eng.replica_names(["/d/wal", "/d/wal/1", "/d/x"]) == ["wal.0", "wal/1", "x"]


def test_run_on_replica_files(tmp_path: Path) -> None:
    model = file_level_model()
    assert [f["size"] for f in model.doc["files"]] == [s for _, s in TRACED]
    path, rec_path, out = tmp_path / "m.json", tmp_path / "rec.parquet", tmp_path / "r.json"
    model.save(path)
    target = tmp_path / "replicas"
    target.mkdir()
    args = ["run", str(path), "--target", str(target), "--requests", "2000", "--buffered"]
    args += ["--mode", "closed", "--iodepth", "8", "--record", str(rec_path), "--json", str(out)]
    run = CliRunner().invoke(app, args)
    assert run.exit_code == 0, run.output
    # one replica per traced file: the path below the common prefix, the traced size, written
    replicas = {str(p.relative_to(target)): p for p in target.rglob("*") if p.is_file()}
    assert {k: p.stat().st_size for k, p in replicas.items()} == {
        "base/1": 40_000, "base/2": 12_345, "pg_wal/000001": 70_000
    }  # fmt: skip
    assert all(b"\0" not in p.read_bytes() for p in replicas.values())
    r = json.loads(out.read_text())
    assert r["total"]["requests"] == 2000 and r["total"]["errors"] == 0
    print(f"replicas: {r['folded']} folded, {r['clamped']} clamped of 2000")
    # the record is a file-level trace whose every request lies inside its replica
    rec = read_parquet_trace(rec_path)
    assert rec.df.height == 2000 and rec.meta.mapping["kind"] == "replica files"
    ends = pl.DataFrame({"file": [0, 1, 2], "fsize": [s for _, s in TRACED]})
    df = rec.df.join(ends.cast({"file": pl.UInt32}), on="file")
    assert (df["offset"] + df["size"].cast(pl.UInt64) <= df["fsize"]).all()
    # a second run reuses the replicas (the same inodes: not written anew; the workload's
    # writes change their mtimes)
    inodes = {k: p.stat().st_ino for k, p in replicas.items()}
    run = CliRunner().invoke(app, args)
    assert run.exit_code == 0, run.output
    assert inodes == {k: p.stat().st_ino for k, p in replicas.items()}
    with pytest.raises(IotwinError, match="file-level"):
        eng.run(fixed_rate_model(1000.0, n=100), target, eng.RunOptions(requests=10))


# the I/O features validate compares; timing (inter-arrival, lateness) is reported only
IO_FEATURES = ("read_fraction", "sequential_fraction", "mean_size_bytes", "size_share",
               "locality_l1", "weight")  # fmt: skip


def test_recorded_run_validates_against_synthetic(tmp_path: Path) -> None:
    """A time-compressed run of a model fitted on a real trace, recorded, passes validate
    against the model's synthetic trace (same seed) on the I/O features."""
    vscsi = SHARED / "traces" / "cloudPhysicsIO.vscsi"
    if not vscsi.exists():
        pytest.skip(f"{vscsi} is not here")
    model = fit(load_trace(vscsi), levels=2)
    path, rec_path = tmp_path / "m.json", tmp_path / "rec.parquet"
    model.save(path)
    # 113,872 requests over 7,200 s: intensity 400 runs 20,000 of them in about 4 s
    n, intensity = 20_000, 400.0
    args = ["run", str(path), "--target", str(tmp_path / "t.bin"), "--size", "64M"]
    args += ["--requests", str(n), "--intensity", str(intensity), "--buffered"]
    out = tmp_path / "r.json"
    run = CliRunner().invoke(app, [*args, "--record", str(rec_path), "--json", str(out)])
    assert run.exit_code == 0, run.output
    rec = read_parquet_trace(rec_path)
    assert rec.df.height == n
    # the record holds the model's addresses; the mapping onto the 64 MiB target is kept
    assert rec.meta.capacity == model.doc["capacity"]
    assert rec.meta.mapping == {
        "kind": "proportional", "target": str(tmp_path / "t.bin"), "target_size": 64 << 20,
        "capacity": model.doc["capacity"], "align": 1,
    }  # fmt: skip
    synth = model.synth(requests=n, seed=0, intensity=intensity)
    metrics = validate(rec, synth)["metrics"]
    io = {k: m for k, m in metrics.items() if k.split("[")[0] in IO_FEATURES}
    assert {k.split("[")[0] for k in io} == set(IO_FEATURES)
    failed = {k: m for k, m in io.items() if not m["pass"]}
    assert not failed, failed
    iat = metrics["mean_interarrival_s"]
    late = json.loads(out.read_text())["total"]["lateness_ns"]
    print(
        f"mean inter-arrival: run {iat['original'] * 1e6:.1f} µs, synthetic "
        f"{iat['synthetic'] * 1e6:.1f} µs ({iat['deviation']:.2%}); lateness p50 "
        f"{late['p50'] / 1e3:.1f} µs, p99 {late['p99'] / 1e3:.1f} µs"
    )


def test_bad_options(tmp_path: Path, model_1k: Model) -> None:
    t = tmp_path / "t.bin"
    with pytest.raises(IotwinError, match="not both"):
        eng.run(model_1k, t, eng.RunOptions(requests=1, duration_s=1))
    with pytest.raises(IotwinError, match="--engine"):
        eng.run(model_1k, t, eng.RunOptions(requests=1, engine="aio"))
    with pytest.raises(IotwinError, match="directory"):
        eng.run(model_1k, tmp_path, eng.RunOptions(requests=1))
    assert os.path.exists(t) is False or t.stat().st_size > 0


def test_long_run_keeps_weights_phases_and_intensity(tmp_path: Path) -> None:
    """100,000 requests of a 16-device model (the shared TPC-C trace by device): every
    stream's share within 0.05% of the model's weight, the per-window counts of what was
    issued follow the schedule's fluctuation phases, and doubling the intensity halves the
    run."""
    disksim = SHARED / "traces" / "tpcc_small.disksim"
    if not disksim.exists():
        pytest.skip(f"{disksim} is not here")
    from iotwin.formats import ReadOptions

    model = fit(load_trace(disksim, opts=ReadOptions(stream_by="device")), levels=2)
    path = tmp_path / "m.json"
    model.save(path)
    spans = {}
    # the trace runs ~51k requests/s; at a quarter and half of it (100,000 in ~8 s, then ~4 s)
    # the engine keeps its schedule on a busy 2-core machine too (at full rate it fell behind)
    for intensity in (0.25, 0.5):
        rec_path = tmp_path / f"rec{intensity}.parquet"
        args = ["run", str(path), "--target", str(tmp_path / "t.bin"), "--size", "64M"]
        args += ["--requests", "100000", "--intensity", str(intensity), "--buffered"]
        run = CliRunner().invoke(app, [*args, "--record", str(rec_path)])
        assert run.exit_code == 0, run.output
        rec = read_parquet_trace(rec_path).df
        assert rec.height == 100_000
        spans[intensity] = rec["ts_ns"].max() - rec["ts_ns"].min()
        shares = dict(rec.group_by("stream").len().iter_rows())
        for s in model.streams:
            assert abs(shares.get(s["id"], 0) / 1e5 - s["weight"]) <= 0.0005, s["id"]
        # issue times, windowed like the model's phases, follow the schedule's
        schedule = model.synth(requests=100_000, seed=0, intensity=intensity).df
        # four of the model's windows a bin: the phases show, while lateness under load
        # (a few ms) moves few requests across bins
        window = 4 * model.doc["window_ns"] / intensity
        bins = int(spans[intensity] // window) + 1
        issued = np.bincount((rec["ts_ns"].to_numpy() // window).astype(int), minlength=bins)
        planned = np.bincount((schedule["ts_ns"].to_numpy() // window).astype(int), minlength=bins)
        n = min(len(issued), len(planned))
        assert np.corrcoef(issued[:n], planned[:n])[0, 1] > 0.9
    assert spans[0.5] == pytest.approx(spans[0.25] / 2, rel=0.02)
