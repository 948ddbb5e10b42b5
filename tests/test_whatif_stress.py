"""`iotwin whatif stress`: outlier regions and break-away intensity, on the simulator (with a
slow zone injected into the device) and with the real engine on a file."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from typer.testing import CliRunner

from iotwin import engine as eng
from iotwin.cli import app
from iotwin.devices import resolve
from iotwin.errors import IotwinError
from iotwin.ingest import load_trace
from iotwin.model import Model, fit
from iotwin.sim import placed, simulate
from iotwin.whatif.stress import (
    mark_outliers,
    on_engine,
    on_simulator,
    parse_ramp,
    parse_slow,
    region_bounds,
)

RAMP = [1.0, 2.0, 4.0, 8.0, 16.0]
REGION_KEYS = {"region", "start", "end", "requests", "median_ms", "p95_ms", "outlier"}
STEP_KEYS = {"intensity", "offered_iops", "completed_iops", "mean_ms", "p95_ms", "regions"}


@pytest.fixture(scope="module")
def cloud_model(traces: Path, tmp_path_factory) -> tuple[Model, Path]:
    model = fit(load_trace(traces / "cloudPhysicsIO.vscsi"))
    path = tmp_path_factory.mktemp("stress") / "cloud.model.json"
    model.save(path)
    return model, path


@pytest.fixture(scope="module")
def clean(cloud_model) -> dict:
    return on_simulator(cloud_model[0], "hdd-7200", RAMP)


def region_one(model: Model) -> list[float]:
    start, end = region_bounds(int(model.doc["capacity"]), int(model.doc["fanout"]))[1]
    return [start, end, 10.0]


def test_injected_slow_region_is_the_only_outlier(cloud_model, clean) -> None:
    model = cloud_model[0]
    slow = on_simulator(model, "hdd-7200", RAMP, slow=[region_one(model)])
    assert slow["outliers"] == [1]
    assert slow["region_latency"] == "service"
    for step, base in zip(slow["ramp"], clean["ramp"], strict=True):
        assert [r["outlier"] for r in step["regions"]] == [False, True, False, False]
        # the region's own service time is 10x, the others' unchanged
        ratio = step["regions"][1]["median_ms"] / base["regions"][1]["median_ms"]
        assert 9.5 < ratio < 10.5
        for i in (0, 2, 3):
            assert step["regions"][i]["median_ms"] == pytest.approx(
                base["regions"][i]["median_ms"], rel=0.02
            )
    # the slow zone costs busy time: the break-away comes one step earlier
    assert slow["breakaway_intensity"] == 2.0


def test_without_injection_no_region_stands_out(clean) -> None:
    assert clean["outliers"] == []
    for step in clean["ramp"]:
        medians = [r["median_ms"] for r in step["regions"]]
        assert max(medians) / min(medians) < 1.5  # 4.7, 3.9, 3.6, 4.5 ms on this model
        counts = [r["requests"] for r in step["regions"]]
        assert sum(counts) == step["requests"] == 113_872
        # the twin's top-level counts; the original's are 25,040 26,813 61,211 808 (the
        # twin's were 25,050 26,804 61,210 808 before each window kept its share of reads,
        # 25,042 26,812 61,211 807 before cold requests near the previous end came apart)
        assert counts == [25_039, 26_813, 61_212, 808]


def test_breakaway_is_where_the_peak_window_saturates(cloud_model, clean) -> None:
    """The twin's two busiest fluctuation windows hold 79% of its requests, so the disk
    saturates there long before it does on average: 4x is the first step whose busiest
    window keeps the disk (nearly) fully busy, and the first whose mean response breaks away
    (measured 50% and 98.5% busy at 2x and 4x)."""
    model = cloud_model[0]
    assert clean["breakaway_intensity"] == 4.0
    twin = placed(model.synth(seed=0))
    window = twin.numpy("ts_ns", np.int64) // int(model.doc["window_ns"])
    peak = replace(twin, df=twin.df.filter(pl.Series(window == np.bincount(window).argmax())))
    busy = {x: simulate(peak, "hdd-7200", x).utilisation for x in (2.0, 4.0)}
    assert busy[2.0] < 0.6 and busy[4.0] > 0.98
    flagged = [s["intensity"] for s in clean["ramp"] if s["breakaway"]]
    assert flagged == [4.0, 8.0, 16.0]
    for s in clean["ramp"]:
        # the whole run's utilisation agrees with the simulator's own
        assert s["utilisation"] == pytest.approx(
            simulate(twin, "hdd-7200", s["intensity"]).utilisation
        )
        if s["completed_iops"] < 0.95 * s["offered_iops"]:
            assert s["utilisation"] > 0.85  # throughput falls behind only near saturation


def test_cli_json_on_the_simulator(cloud_model, tmp_path: Path) -> None:
    model, path = cloud_model
    start, end, _ = region_one(model)
    out = tmp_path / "stress.json"
    result = CliRunner().invoke(
        app,
        ["whatif", "stress", str(path), "--device", "hdd-7200", "--ramp", "2,1",
         "--slow", f"{start}:{end}:10", "--json", "-o", str(out)],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc == json.loads(out.read_text())
    assert doc["kind"] == "whatif-stress" and doc["device"].startswith("7200 rpm HDD")
    assert doc["slow_regions"] == [[start, end, 10.0]]
    assert [s["intensity"] for s in doc["ramp"]] == [1.0, 2.0]  # sorted
    assert doc["outliers"] == [1] and doc["breakaway_intensity"] == 2.0
    for step in doc["ramp"]:
        assert set(step) >= STEP_KEYS
        assert all(set(r) >= REGION_KEYS for r in step["regions"])
    figure = tmp_path / "stress.svg"
    table = CliRunner().invoke(
        app, ["whatif", "stress", str(path), "-d", "hdd-7200", "--ramp", "1,2",
              "--slow", f"{start}:{end}:10", "--plot", str(figure)], terminal_width=200,
    )  # fmt: skip
    assert table.exit_code == 0, table.output
    assert "outlier regions (! above): 1" in table.output
    assert "region 1 median service" in figure.read_text()


def test_engine_stress_on_a_file(traces: Path, tmp_path: Path) -> None:
    """A short real run: the TPC-C model (about 51,000 IOPS at 1x) at 0.05x and 0.1x for 1 s
    each on a 16 MiB file; every recorded request lands in a region."""
    model = fit(load_trace(traces / "tpcc_small.disksim"))
    target = tmp_path / "target.bin"
    opts = eng.RunOptions(duration_s=1.0, size=16 << 20)
    r = on_engine(model, target, [0.05, 0.1], opts)
    assert r["kind"] == "whatif-stress" and r["target"] == str(target)
    assert r["target_size"] == 16 << 20 and r["region_latency"] == "service"
    assert [s["intensity"] for s in r["ramp"]] == [0.05, 0.1]
    for step in r["ramp"]:
        assert set(step) >= STEP_KEYS | {"lateness_ms", "errors"}
        assert step["errors"] == 0
        # 1 s of schedule at 0.05x / 0.1x of the model's rate
        expected = step["intensity"] * model.doc["requests"] / (model.doc["span_ns"] / 1e9)
        assert step["requests"] == pytest.approx(expected, rel=0.15)
        assert sum(g["requests"] for g in step["regions"]) == step["requests"]
        assert all(g["median_ms"] > 0 for g in step["regions"] if g["requests"])
        assert step["regions"][-1]["end"] == model.doc["capacity"]
    assert r["ramp"][1]["requests"] > 1.6 * r["ramp"][0]["requests"]


def test_engine_stress_refuses_devices_and_directories(cloud_model, tmp_path: Path) -> None:
    model = cloud_model[0]
    device = eng.DeviceChecks(is_device=lambda p: True, mounts=tmp_path / "none")
    opts = eng.RunOptions(duration_s=1.0)
    with pytest.raises(IotwinError, match="is a device: pass --allow-device"):
        on_engine(model, tmp_path / "sdz", [1.0], opts, checks=device)
    with pytest.raises(IotwinError, match="needs a file target"):
        on_engine(model, tmp_path, [1.0], opts)


def test_bad_options_get_clear_errors(cloud_model, tmp_path: Path) -> None:
    model, path = cloud_model
    assert parse_slow("8G:16G:10") == [8 << 30, 16 << 30, 10.0]
    assert parse_ramp("4, 1,2,1") == [1.0, 2.0, 4.0]
    for text, msg in (
        ("8G:16G", "expected START:STOP:FACTOR"),
        ("16G:8G:2", "START must be below STOP"),
        ("0:1G:x", "FACTOR 'x' is not a number"),
        ("0:1G:0", "FACTOR must be positive"),
        ("a:1G:2", "START"),
    ):
        with pytest.raises(IotwinError, match=msg):
            parse_slow(text)
    for text, msg in (("1,x", "'x' is not a number"), ("0,1", "must be positive"), (",", "give")):
        with pytest.raises(IotwinError, match=msg):
            parse_ramp(text)
    beyond = 2 * resolve("hdd-7200")["capacity_bytes"]
    with pytest.raises(IotwinError, match="past the device's capacity"):
        on_simulator(model, "hdd-7200", [1.0], slow=[[0, beyond, 2.0]])
    with pytest.raises(IotwinError, match="--depth 3: the model has levels 1 to 2"):
        on_simulator(model, "hdd-7200", [1.0], depth=3)
    for args, msg in (
        (["--ramp", "1"], "give --target PATH"),
        (["-d", "hdd-7200", "--target", str(tmp_path / "f")], "give --target PATH"),
        (["--target", str(tmp_path / "f"), "--slow", "0:1G:2"], "use it with --device"),
    ):
        result = CliRunner().invoke(app, ["whatif", "stress", str(path), *args])
        assert isinstance(result.exception, IotwinError), result.output
        assert msg in str(result.exception)


def test_device_slow_regions_are_validated(traces: Path) -> None:
    trace = placed(load_trace(traces / "msr_hm0_excerpt.csv"))
    for kind in ("hdd-7200", "ssd-sata"):
        spec = resolve(kind)
        base = simulate(trace, spec)
        doubled = simulate(trace, {**spec, "slow_regions": [[0, spec["capacity_bytes"], 2]]})
        assert doubled.busy_ns == pytest.approx(2 * base.busy_ns, rel=1e-6)
        for bad, msg in (
            ([[5, 1, 2]], "entry 0: start_byte 5 must be below end_byte 1"),
            ([[0, 1, -1]], "entry 0: factor must be a positive number"),
            ([[0, 1]], r"entry 0: expected \[start_byte, end_byte, factor\]"),
            ("x", '"slow_regions" must be a list'),
        ):
            with pytest.raises(IotwinError, match=msg):
                simulate(trace, {**spec, "slow_regions": bad})


def test_outlier_rule_by_hand() -> None:
    def regions(medians: list[float], requests: int = 100) -> list[dict]:
        return [{"median_ms": m, "requests": requests, "outlier": False} for m in medians]

    r = regions([10, 11, 12, 100])  # centre 11.5, MAD 1: 100 > 34.5 and 88.5 > 3
    mark_outliers(r)
    assert [g["outlier"] for g in r] == [False, False, False, True]
    r = regions([10, 11, 12, 30])  # 30 < 3 x 11.5
    mark_outliers(r)
    assert not any(g["outlier"] for g in r)
    r = regions([10, 100], requests=100)  # fewer than 3 regions to judge
    mark_outliers(r)
    assert not any(g["outlier"] for g in r)
    r = regions([10, 11, 12, 100])
    r[3]["requests"] = 19  # too few requests to judge
    mark_outliers(r)
    assert not any(g["outlier"] for g in r)


def test_duration_steps_hold_that_much_of_the_twin_at_each_intensity(cloud_model) -> None:
    """30 minutes of the twin per step: twice the requests at twice the rate, each step's
    offered rate that of the model (15.8 IOPS over its two hours) times the intensity, within
    the fluctuation of the windows the 30 minutes cover."""
    r = on_simulator(cloud_model[0], "hdd-7200", [1.0, 2.0], duration_s=1800.0)
    one, two = r["ramp"]
    assert two["requests"] == pytest.approx(2 * one["requests"], rel=0.02)
    model_iops = cloud_model[0].doc["requests"] / (cloud_model[0].doc["span_ns"] / 1e9)
    assert one["offered_iops"] == pytest.approx(model_iops, rel=0.05)
    assert two["offered_iops"] == pytest.approx(2 * model_iops, rel=0.05)
    assert all(sum(g["requests"] for g in s["regions"]) == s["requests"] for s in r["ramp"])
