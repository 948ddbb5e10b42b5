"""Re-reference distances by operation, and calibration by simulation (`iotwin fit
--calibrate`): the optional extension that brings cloudPhysics' twin inside the issue's
LRU miss-ratio bar (0.05 at 1..50% of the footprint), shown beside the plain fit."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from reference import SHARED_STREAMS, issue_bar_misses
from typer.testing import CliRunner

import iotwin
from iotwin.calibrate import calibrate
from iotwin.cli import app
from iotwin.errors import IotwinError
from iotwin.formats import ReadOptions
from iotwin.model import Model, fit
from iotwin.show import median_distance
from iotwin.validate import validate

SEED = 7
SHARED = SHARED_STREAMS
BAR = 0.05


def miss_ratio_deviations(report: dict) -> list[float]:
    return [v["deviation"] for k, v in report["metrics"].items() if k.startswith("miss_ratio")]


@pytest.fixture(scope="module")
def cloudphysics(traces: Path) -> tuple[iotwin.Trace, Model]:
    trace = iotwin.load_trace(traces / "cloudPhysicsIO.vscsi")
    return trace, fit(trace, levels=2)


def test_reads_and_writes_keep_their_own_distances(cloudphysics: tuple) -> None:
    """cloudPhysics' writes re-reference recent blocks and its reads old ones: measured, the
    writes' median stack distance is in [416, 448) blocks and the reads' in [65536, 73728).
    One histogram for both gave the twin's reads the writes' short distances."""
    _, model = cloudphysics
    s = model.doc["streams"][0]
    writes = {(lo, hi): c for lo, hi, c in s["reuse_write"]}
    reads = [[lo, hi, c - writes.get((lo, hi), 0)] for lo, hi, c in s["reuse"]]
    assert (sum(writes.values()), sum(c for *_, c in reads)) == (37_162, 30_596)
    assert (median_distance(s["reuse_write"]), median_distance(reads)) == (416, 65_536)
    assert sum(c for *_, c in s["resume_reuse_write"]) == 13_523


def test_calibrated_cloudphysics_twin_meets_the_miss_ratio_bar(cloudphysics: tuple) -> None:
    """The plain fit's twin misses the bar (.057 to .067 at 10..50%, seed 7); calibrated (3
    rounds) every size is within it (measured .018 to .042; over 10 twins and four sets of
    calibration seeds .037 to .038 on average, .042 at most; with the hit-density ratio to
    the power 1 in place of 2, .047 on average and .050 at most), and the twin keeps the
    issue's feature bars."""
    trace, model = cloudphysics
    tuned = calibrate(model, trace, rounds=3)
    plain = miss_ratio_deviations(validate(trace, model.synth(requests=len(trace), seed=SEED)))
    report = validate(trace, tuned.synth(requests=len(trace), seed=SEED))
    calibrated = miss_ratio_deviations(report)
    assert max(plain) > BAR
    assert max(calibrated) <= BAR, calibrated
    assert sum(calibrated) < sum(plain)
    m = report["metrics"]
    assert m["read_fraction"]["deviation"] <= 0.01
    assert m["sequential_fraction"]["deviation"] <= 0.02
    assert m["mean_size_bytes"]["deviation"] <= 0.02
    assert m["mean_interarrival_s"]["deviation"] <= 0.02
    # the document says what was done: every candidate's score (as fitted, followed picks,
    # 3 rounds), the best one chosen
    report = tuned.doc["fit"]["calibration"]
    scores = report["largest_miss_ratio_deviation"]
    assert len(scores) == 5 and scores[report["chosen"]] == min(scores) < scores[0]
    assert tuned.doc["reuse_pick"] == "followed" and "reuse_pick" not in model.doc


@pytest.mark.parametrize("name", list(SHARED))
def test_calibrated_twins_meet_every_bar_of_the_issue(traces: Path, name: str) -> None:
    """Issue #3's bars, all of them, on every shared trace with the calibrated extension
    (seed 7): the plain fit misses only cloudPhysics' miss ratios (test_model.py); calibrated,
    the largest miss-ratio deviations are cloudPhysics .042, MSR .015, Tencent .020, TPC-C
    .004."""
    trace = iotwin.load_trace(traces / name, opts=ReadOptions(stream_by=SHARED[name]))
    tuned = calibrate(fit(trace, levels=2), trace, rounds=3)
    report = validate(trace, tuned.synth(requests=len(trace), seed=SEED))
    uniform = validate(trace, tuned.synth(requests=len(trace), seed=SEED, baseline="uniform"))
    assert issue_bar_misses(trace, report, uniform) == []


def test_calibration_is_deterministic_and_refuses_what_it_cannot_tune(
    cloudphysics: tuple,
) -> None:
    trace, model = cloudphysics
    once = calibrate(model, trace, rounds=1).doc
    assert calibrate(model, trace, rounds=1).doc == once
    # the API's fit(calibrate=) is the same model
    assert iotwin.fit(trace, levels=2, calibrate=1).doc["streams"] == once["streams"]
    with pytest.raises(IotwinError, match="--no-reref"):
        calibrate(fit(trace, levels=1, reref=False), trace)
    with pytest.raises(IotwinError, match="rounds must be >= 0"):
        calibrate(model, trace, rounds=-1)


def test_a_model_with_an_unknown_pick_rule_is_refused(cloudphysics: tuple) -> None:
    _, model = cloudphysics
    doc = json.loads(json.dumps(model.doc))
    doc["reuse_pick"] = "farthest"
    with pytest.raises(IotwinError, match="reuse_pick"):
        Model.from_doc(doc)
    # writes' distances that the whole histogram does not hold
    doc = json.loads(json.dumps(model.doc))
    doc["streams"][0]["reuse_write"] = [[1, 2, 10**9]]
    with pytest.raises(IotwinError, match="reuse_write: bucket"):
        Model(doc).synth(requests=100, seed=1)


def test_fit_cli_calibrates_and_reports_each_round(traces: Path, tmp_path: Path) -> None:
    out = tmp_path / "m.json"
    args = ["fit", str(traces / "msr_hm0_excerpt.csv"), "-o", str(out), "--calibrate", "2"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "Calibration" in result.output and "chosen" in result.output
    doc = json.loads(out.read_text())
    assert len(doc["fit"]["calibration"]["largest_miss_ratio_deviation"]) == 4
    Model.load(out)  # the schema holds
    shown = CliRunner().invoke(app, ["show", str(out)])
    assert "calibrated over 2 rounds" in shown.output
    assert f"picks {doc.get('reuse_pick', 'nearest')}" in shown.output
    assert "median" in shown.output and "blocks for reads" in shown.output
    on_cluster = [*args, "--cluster", "tcp://127.0.0.1:9"]
    refused = CliRunner().invoke(app, on_cluster)
    assert isinstance(refused.exception, IotwinError)
    assert "needs the trace in memory" in str(refused.exception)


def test_whatif_cache_runs_a_calibrated_twin(traces: Path, tmp_path: Path) -> None:
    """`whatif cache TRACE --calibrate N` studies the calibrated twin and says so; a model
    file cannot be calibrated (no trace to tune it to)."""
    src = traces / "msr_hm0_excerpt.csv"
    args = ["whatif", "cache", str(src), "--twins", "1", "--calibrate", "2", "--sizes", "0,1M"]
    result = CliRunner().invoke(app, [*args, "--json"])
    assert result.exit_code == 0, result.output
    study = json.loads(result.output)
    assert study["calibration"]["rounds"] == 2
    assert len(study["calibration"]["largest_miss_ratio_deviation"]) == 4
    table = CliRunner().invoke(app, args)
    assert "twin calibrated to the trace (2 rounds" in table.output
    plain = json.loads(CliRunner().invoke(app, [*args[:-4], "--sizes", "0,1M", "--json"]).output)
    assert plain["calibration"] is None
    model = tmp_path / "m.json"
    fit(iotwin.load_trace(src)).save(model)
    refused = CliRunner().invoke(app, ["whatif", "cache", str(model), "--calibrate", "1"])
    assert isinstance(refused.exception, IotwinError)
    assert "give the trace" in str(refused.exception)
