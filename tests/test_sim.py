"""The simulator's devices against the datasheet figures they come from, and the what-if
studies that need no cache policy (intensity, defragmentation)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from typer.testing import CliRunner

from iotwin.cli import app
from iotwin.devices import PRESETS, resolve
from iotwin.errors import IotwinError
from iotwin.ingest import load_trace
from iotwin.sim import simulate, simulate_many, speedup
from iotwin.trace import Trace, TraceMeta
from iotwin.whatif import Workload, defrag, intensity

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "samples" / "pgbench.parquet"
runner = CliRunner()


def make_trace(offset, size, ts=None, op=0, stream=None) -> Trace:
    n = len(offset)
    df = pl.DataFrame(
        {
            "ts_ns": np.zeros(n, np.int64) if ts is None else np.asarray(ts, np.int64),
            "stream": np.zeros(n, np.uint32) if stream is None else np.asarray(stream, np.uint32),
            "op": np.full(n, op, np.uint8),
            "offset": np.asarray(offset, np.uint64),
            "size": np.full(n, size, np.uint32),
        }
    )
    meta = TraceMeta(
        source="hand-made", format="test", stream_by="device", timed=True, capacity=0, streams={}
    )
    return Trace(df, meta)


@pytest.mark.parametrize("name", ["hdd-7200", "hdd-15k"])
def test_hdd_presets_match_their_datasheets(name: str) -> None:
    """4 KiB random reads all queued at once: IOPS = 1 / (average seek + half a revolution +
    transfer); 1 MiB sequential reads: the sustained media rate. Both within 10%."""
    p = PRESETS[name]
    rng = np.random.default_rng(7)
    blocks = rng.integers(0, p["capacity_bytes"] // 4096, 20_000) * 4096
    rand = simulate(make_trace(blocks, 4096), name)
    service_ms = p["average_seek_ms"] + 30_000 / p["rpm"] + 4096 / (p["media_mb_per_s"] * 1e3)
    implied_iops = 1000 / service_ms
    assert rand.completed_iops == pytest.approx(implied_iops, rel=0.10)
    assert rand.utilisation == pytest.approx(1.0, abs=1e-6)  # saturated: always busy
    seq = simulate(make_trace(np.arange(2000) << 20, 1 << 20), name)
    mb_per_s = 2000 * (1 << 20) / (seq.completion_span_ns / 1e9) / 1e6
    assert mb_per_s == pytest.approx(p["media_mb_per_s"], rel=0.10)


def test_short_forward_jumps_are_cheap_on_the_hdd() -> None:
    """Reads skipping 16 KiB between 4 KiB requests stay near media speed (read-ahead), while
    the same requests in random order pay a seek and rotation each (seed 003)."""
    offsets = np.arange(5000) * 20480
    near = simulate(make_trace(offsets, 4096), "hdd-7200")
    shuffled = simulate(make_trace(np.random.default_rng(1).permutation(offsets), 4096), "hdd-7200")
    assert near.busy_ns < shuffled.busy_ns / 20


def test_ssd_presets_match_their_random_iops() -> None:
    for name, iops in (("ssd-sata", 98_000), ("ssd-nvme", 600_000)):
        rng = np.random.default_rng(3)
        blocks = rng.integers(0, 1 << 26, 100_000) * 4096
        r = simulate(make_trace(blocks, 4096), name)
        assert r.completed_iops == pytest.approx(iops, rel=0.01)


def test_open_loop_queueing_by_hand() -> None:
    """Three 1 MiB sequential reads arriving together on a 100 MB/s disk with no positioning
    after the first: responses are 1, 2 and 3 transfer times after the first's positioning."""
    spec = {**resolve("hdd-7200"), "media_mb_per_s": 100, "read_ahead_kib": 0}
    r = simulate(make_trace(np.arange(3) << 20, 1 << 20), spec)
    t = (1 << 20) / 100e6 * 1e9
    first = int(r.response_ns[0])
    assert np.diff(r.response_ns.astype(np.int64)).tolist() == pytest.approx([t, t], abs=2)
    assert first > t  # seek and rotation before the first transfer
    assert speedup(r, r) == {"speedup": 1.0, "busy_ratio": 1.0}


def test_same_seed_same_result_and_bad_specs(traces: Path) -> None:
    trace = load_trace(traces / "msr_hm0_excerpt.csv")
    a, b = simulate(trace, "hdd-7200", seed=5), simulate(trace, "hdd-7200", seed=5)
    assert np.array_equal(a.response_ns, b.response_ns)
    assert not np.array_equal(a.response_ns, simulate(trace, "hdd-7200", seed=6).response_ns)
    with pytest.raises(IotwinError, match="unknown device 'hdd-5400'"):
        simulate(trace, "hdd-5400")
    with pytest.raises(IotwinError, match="field 'rmp' is not one of"):
        resolve("hdd-7200:rmp=5400")
    with pytest.raises(IotwinError, match="past the device's capacity"):
        simulate(trace, "hdd-7200:capacity=1M")


def test_runs_at_once_give_each_runs_own_result_in_order(traces: Path) -> None:
    """simulate_many runs on threads; each run's figures are the ones simulate gives, in run
    order."""
    trace = load_trace(traces / "msr_hm0_excerpt.csv")
    runs = [
        ("hdd-7200", 1.0),
        ("tiered:size=4M,over=hdd-7200,ssd=ssd-sata", 2.0),
        ("ssd-sata", 0.5),
        ("hdd-7200", 4.0),
    ]
    finished: list[int] = []
    many = simulate_many(trace, runs, seed=3, done=lambda: finished.append(1))
    assert len(finished) == len(runs)
    for (device, x), got in zip(runs, many, strict=True):
        assert got == simulate(trace, device, x, seed=3).figures(), (device, x)
    assert many[1].cache_hit_ratio > 0 and many[0].mean_ms != many[3].mean_ms


def test_intensity_sweep_finds_saturation(traces: Path) -> None:
    """cloudPhysics on a 7,200 rpm disk (16 IOPS on average, in bursts): throughput follows
    the offered load until the disk is saturated, then stays flat at the disk's capacity; the first saturated intensity is
    the lowest where completed IOPS fall below 95% of offered."""
    trace = load_trace(traces / "cloudPhysicsIO.vscsi")
    w = Workload("cloudPhysics", trace)  # the sweep simulates the original: no model
    r = intensity.study(w, [1, 2, 4, 8, 16, 32, 64], "hdd-7200")
    pts = r["points"]
    sat = r["saturation_scale"]
    assert sat is not None
    for p in pts:
        if p["scale"] < sat:
            assert p["completed_iops"] >= 0.95 * p["offered_iops"]
        else:
            assert p["completed_iops"] < 0.95 * p["offered_iops"]
            assert p["utilisation"] > 0.8
    assert pts[-1]["utilisation"] > 0.99  # far past saturation the disk never idles
    # the busy-time estimate brackets the measured point within one step of the sweep
    scales = [p["scale"] for p in pts]
    below = scales[scales.index(sat) - 1]
    assert below / 2 <= r["estimated_saturation_scale"] <= sat * 2
    # response time grows with load
    means = [p["mean_ms"] for p in pts]
    assert means == sorted(means)


def test_defrag_on_captured_pgbench() -> None:
    """The embedded sample is a real pgbench run captured by iotwin with FIEMAP extents:
    laid out contiguously its files span far less of the disk, and the simulated disk is
    faster; sequential fractions are reported before and after."""
    trace = load_trace(SAMPLE)
    r = defrag.study(trace, "hdd-7200")
    assert r["files"] == len(trace.meta.files)
    with_extents = sum(1 for f in trace.meta.files if f.get("extents"))
    assert r["files_without_extents"] == r["files"] - with_extents
    assert r["after"]["span_bytes"] < r["before"]["span_bytes"] / 10
    assert r["speedup"] > 1.05  # 1.16 measured at the auto intensity
    assert r["busy_ratio"] > 1.05
    for side in ("before", "after"):
        assert 0 < r[side]["sequential_fraction"] < 1
    # contiguous files keep every within-file sequential run: never fewer sequential requests
    assert r["after"]["sequential_per_stream"] >= r["before"]["sequential_per_stream"]


def test_defrag_needs_files(traces: Path, tmp_path: Path) -> None:
    cli = [sys.executable, "-m", "iotwin.cli", "whatif", "defrag"]
    res = subprocess.run(
        [*cli, str(traces / "msr_hm0_excerpt.csv")], capture_output=True, text=True
    )
    assert res.returncode == 2
    assert "msr_hm0_excerpt.csv: not a file-level trace" in res.stderr
    assert "Traceback" not in res.stderr
    out = tmp_path / "defrag.json"
    res = runner.invoke(app, ["whatif", "defrag", str(SAMPLE), "--json", "-o", str(out)])
    assert res.exit_code == 0, res.output
    doc = json.loads(out.read_text())
    assert doc["kind"] == "whatif-defrag" and json.loads(res.output) == doc
