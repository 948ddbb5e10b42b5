"""The simulator's devices against the datasheet figures they come from, and the what-if
studies that need no cache policy (intensity, defragmentation)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from statistics import fmean

import numpy as np
import polars as pl
import pytest
from typer.testing import CliRunner

from iotwin.cli import app
from iotwin.devices import PRESETS, resolve
from iotwin.errors import IotwinError
from iotwin.formats import ReadOptions
from iotwin.ingest import load_trace
from iotwin.model import fit
from iotwin.sim import placed, simulate, simulate_many, speedup
from iotwin.trace import Trace, TraceMeta
from iotwin.whatif import Workload, defrag, half_width, intensity

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


def test_auto_scales_bracket_the_knee(traces: Path) -> None:
    """--scales auto sweeps 1/8 to 4 times the busy-time estimate of saturation, so the
    sweep holds both sides of the knee: cloudPhysics keeps up at the lowest and saturates at
    the highest (a fixed 0.125x-4x misses it: cloudPhysics keeps up at all of those)."""
    trace = load_trace(traces / "cloudPhysicsIO.vscsi")
    r = intensity.study(Workload("cloudPhysics", trace), None, "hdd-7200")
    estimate = r["scales_around"]
    assert estimate == pytest.approx(r["estimated_saturation_scale"])
    assert 10 < estimate < 20  # 16.0x: its 1x run keeps the disk 6% busy
    scales = [p["scale"] for p in r["points"]]
    assert scales == [float(f"{estimate * f:.3g}") for f in (0.125, 0.25, 0.5, 1, 2, 4)]
    assert r["points"][0]["keeps_up"] and not r["points"][-1]["keeps_up"]
    assert scales[0] < r["saturation_scale"] <= scales[-1]
    assert intensity.auto_scales(1 / 3) == [0.0417, 0.0833, 0.167, 0.333, 0.667, 1.33]
    assert intensity.auto_scales(None) == [0.125, 0.25, 0.5, 1, 2, 4]  # never busy: around 1x
    fixed = intensity.study(Workload("cloudPhysics", trace), [0.125, 4], "hdd-7200")
    assert fixed["saturation_scale"] is None and fixed["scales_around"] is None


def test_intensity_of_a_model_is_the_mean_of_its_twins(traces: Path) -> None:
    """A model's sweep (msr_hm0's 1,000 requests: one twin's mean response moves ~20% with
    the seed) is the mean of its twins' sweeps, each figure with its 95% interval; recomputed
    here twin by twin, 1x (not asked for) included for the busy-time estimate."""
    model = fit(load_trace(traces / "msr_hm0_excerpt.csv"))
    r = intensity.study(Workload("msr", None, model), [2, 0.5], "hdd-7200", seed=4, twins=3)
    assert (r["of"], r["twins"], r["seeds"]) == ("twin", 3, [4, 5, 6])
    assert r["precision"] == {"target": 0.02, "reached": True, "fixed": True}
    twins = [placed(model.synth(seed=s)) for s in (4, 5, 6)]
    runs = {x: [simulate(t, "hdd-7200", x, 4) for t in twins] for x in (0.5, 1.0, 2.0)}
    assert [p["scale"] for p in r["points"]] == [0.5, 2]
    for p in r["points"]:
        at = runs[p["scale"]]
        for key in ("completed_iops", "mean_ms", "p95_ms"):
            values = [getattr(x, key) if key != "p95_ms" else x.percentile_ms(95) for x in at]
            assert p[key] == pytest.approx(fmean(values), rel=1e-12)
            assert p["ci95"][key] == pytest.approx(half_width(values), rel=1e-9)
        assert p["keeps_up"] and p["kept_up_share"] == 1.0  # 1,000 requests: 8 IOPS at 1x
        assert 0 < p["ci95"]["mean_ms"] < p["mean_ms"]  # the twins differ
    assert r["estimated_saturation_scale"] == pytest.approx(
        fmean(x.arrival_span_ns / x.busy_ns for x in runs[1.0])
    )
    assert r["saturation_scale"] is None


def test_intensity_of_a_model_adds_twins_until_precise(traces: Path) -> None:
    """--twins auto: TPC-C's 16-device model (7,000 requests) at the auto-chosen scale gets
    twins in rounds until every mean of a scale that keeps up is known within 2%."""
    trace = load_trace(traces / "tpcc_small.disksim", opts=ReadOptions(stream_by="device"))
    model = fit(trace)
    # 0.0016x: where the original keeps the disk at most 70% busy (`whatif cache`'s auto)
    r = intensity.study(Workload("tpcc", None, model), [0.0016], "hdd-7200")
    assert r["precision"]["reached"] and not r["precision"]["fixed"]
    assert r["twins"] in (3, 6, 12, 24, 48, 96, 192)
    (p,) = r["points"]
    assert p["keeps_up"]
    for key in ("completed_iops", "mean_ms", "p95_ms"):
        assert p["ci95"][key] <= 0.02 * p[key]


def test_intensity_cli_counts_twins(tmp_path: Path, traces: Path) -> None:
    model = tmp_path / "msr.json"
    fit(load_trace(traces / "msr_hm0_excerpt.csv")).save(model)
    res = runner.invoke(
        app, ["whatif", "intensity", str(model), "--scales", "1", "--twins", "2", "--json"]
    )
    assert res.exit_code == 0, res.output
    doc = json.loads(res.output)
    assert doc["twins"] == 2 and doc["precision"]["fixed"]
    bad = runner.invoke(app, ["whatif", "intensity", str(model), "--twins", "0"])
    assert isinstance(bad.exception, IotwinError)
    assert "--twins '0': expected 1 or more" in str(bad.exception)


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
