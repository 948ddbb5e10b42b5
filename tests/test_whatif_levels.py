"""`iotwin whatif levels` (seed 000 Figure 6): the twin's response time per model level
against the original's, on the simulator, and the level the sweep chooses."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from iotwin.cli import app
from iotwin.errors import IotwinError
from iotwin.formats import ReadOptions
from iotwin.ingest import load_trace
from iotwin.levels import sweep
from iotwin.model import fit
from iotwin.sim import placed, simulate
from iotwin.whatif import auto_intensity
from iotwin.whatif.levels import study

POINT_KEYS = {"levels", "mean_ms", "p95_ms", "mean_error", "p95_error", "transitions", "score"}


@pytest.fixture(scope="module")
def tpcc(traces: Path):
    return load_trace(traces / "tpcc_small.disksim")


@pytest.fixture(scope="module")
def tpcc_study(tpcc) -> dict:
    return study(tpcc, "hdd-7200", max_levels=3)


def test_chosen_level_matches_the_sweep_and_the_original(tpcc, tpcc_study) -> None:
    r = tpcc_study
    assert r["kind"] == "whatif-levels"
    assert r["chosen"] == sweep(tpcc)[0] == 2
    assert [p["levels"] for p in r["points"]] == [1, 2, 3]
    # the auto intensity of the original (its busiest second at most 70% busy)
    original = placed(tpcc)
    assert r["intensity"] == auto_intensity(original, "hdd-7200") == 0.0016
    base = simulate(original, "hdd-7200", r["intensity"])
    assert r["original"]["mean_ms"] == pytest.approx(base.mean_ms)
    # the chosen level's point, recomputed independently: 6,999 requests, so twins are added
    # (3, 6, 12, 24) until each mean's 95% interval is within 2% of it
    assert r["twins"] == 24 and r["seeds"] == list(range(24))
    assert r["precision"] == {"target": 0.02, "reached": True, "fixed": False}
    model = fit(tpcc, levels=2)
    twins = [
        simulate(placed(model.synth(requests=len(tpcc), seed=s)), "hdd-7200", r["intensity"])
        for s in range(24)
    ]
    means = np.array([t.mean_ms for t in twins])
    p95s = np.array([t.percentile_ms(95) for t in twins])
    chosen = r["points"][1]
    assert chosen["mean_ms"] == pytest.approx(means.mean())
    assert chosen["mean_error"] == pytest.approx(means.mean() / base.mean_ms - 1)
    assert chosen["p95_error"] == pytest.approx(p95s.mean() / base.percentile_ms(95) - 1)
    low, high = chosen["mean_error_range"]
    assert low == pytest.approx(means.min() / base.mean_ms - 1)
    assert high == pytest.approx(means.max() / base.mean_ms - 1)
    assert low < chosen["mean_error"] < high
    # Student's t at 23 degrees of freedom (2.0687, from tables) times the standard error
    for figures, key, original in (
        (means, "mean", base.mean_ms),
        (p95s, "p95", base.percentile_ms(95)),
    ):
        half = 2.0687 * figures.std(ddof=1) / np.sqrt(24)
        assert chosen[f"{key}_error_ci95"] == pytest.approx(half / original, rel=1e-4)
    assert chosen["transitions"] == model.transition_count
    # measured 0.944 (0.95 and over before re-use by operation was scored: TPC-C's twin
    # at levels 2, seed 7, rewrites .047 of its written blocks against the original's .015)
    assert chosen["score"] > 0.93


def test_one_twin_is_the_seed_s_twin(tpcc) -> None:
    r = study(tpcc, "hdd-7200", max_levels=2, twins=1)
    assert r["twins"] == 1 and r["seeds"] == [0]
    twin = simulate(
        placed(fit(tpcc, levels=2).synth(requests=len(tpcc), seed=0)), "hdd-7200", r["intensity"]
    )
    p = r["points"][1]
    assert p["mean_ms"] == pytest.approx(twin.mean_ms)
    assert p["mean_error_range"][0] == p["mean_error_range"][1] == pytest.approx(p["mean_error"])


def test_sweep_reports_each_level_as_it_is_scored(tpcc) -> None:
    seen: list = []
    chosen, points = sweep(tpcc, max_levels=3, full=True, on_level=seen.append)
    assert seen == points and [p.levels for p in seen] == [1, 2, 3] and chosen == 2


def test_twin_response_within_the_bar_at_the_chosen_level(tpcc_study) -> None:
    """Measured on TPC-C at 0.0016x, means of 24 twins: mean -0.5% +- 0.7%, p95 -2.6% +- 1.4%
    at the chosen 2 levels (single twins -3.6% to +1.9%); level 1 is within the mean bar too
    (+0.1% +- 0.6%) with a far lower fidelity score (0.69 against 0.98), level 3 is +0.3%.
    (Before reads and writes kept their own re-reference distances: +3.2% / +2.4%.) Since
    each window keeps its share of reads: -0.4% +- 0.7% / -3.0% +- 1.5%, level 1 +0.5%,
    level 3 -0.3%."""
    r = tpcc_study
    chosen = next(p for p in r["points"] if p["levels"] == r["chosen"])
    assert abs(chosen["mean_error"]) <= 0.05 and abs(chosen["p95_error"]) <= 0.10
    # within the bar by more than the mean's 95% interval: not a lucky draw of twins
    assert abs(chosen["mean_error"]) + chosen["mean_error_ci95"] <= 0.05
    within = [p["levels"] for p in r["points"] if abs(p["mean_error"]) <= 0.05]
    assert r["within_5pct"] == within[0] == 1
    scores = [p["score"] for p in r["points"]]
    assert scores[0] < 0.7 < scores[1]


def test_cloudphysics_twin_within_the_bar(traces: Path) -> None:
    """Measured at the auto intensity 0.00797x: 3 twins suffice (each mean's interval within
    2%), mean -1.0% +- 0.1% at the chosen 2 levels; p95 +9.5% +- 0.9%, just inside the
    issue's 10% (over 12 twins +9.9% +- 0.5%; +10.2% +- 0.3% before failed re-references
    and resumes landed by in-leaf jumps: docs/model.md), then +10.4% once re-references
    counted every block a request spans. With reads' and writes' distances apart: 6 twins,
    mean -0.1% +- 0.3%, p95 +10.9% +- 0.9% (level 1: +9.0%). Its service-time p95 was the
    original's (9.02 against 8.99 ms); the excess was waiting: 27% of the twin's requests
    waited against 20%, its reads' p95 was 12.3 against 10.0 ms. The original reads almost
    only in its two busy windows; once each window kept its share of reads (`window_reads`),
    3 twins: mean -2.0% +- 0.1%, p95 +7.9% +- 0.1% (level 1: -2.8% / +5.1%). With near cold
    requests a kind of their own, 6 twins: mean -2.3% +- 0.2%, p95 +7.0% +- 0.7% (level 1:
    -2.8% / +5.7%)."""
    r = study(load_trace(traces / "cloudPhysicsIO.vscsi"), "hdd-7200", max_levels=2)
    assert r["chosen"] == 2 and r["twins"] == 6 and r["precision"]["reached"]
    chosen = r["points"][1]
    assert abs(chosen["mean_error"]) + chosen["mean_error_ci95"] <= 0.05
    assert all(abs(e) <= 0.05 for e in chosen["mean_error_range"])
    assert abs(chosen["p95_error"]) <= 0.10  # its interval reaches past the bar


def test_tencent_twin_within_the_bar(traces: Path) -> None:
    """Volumes as streams, at the auto intensity 0.00207x, 6 twins: mean +3.5% +- 0.2%, p95
    -0.3% +- 0.4% at the chosen 2 levels (+3.4% / -0.3% at 3). Before stream extents the
    twins' seeks between volumes were 2.5x too long (a volume's random requests spread over
    the whole 104 GB leaf): +6.1% / +0.8% at 2 levels. Measured again once each window kept
    its share of reads (40 of the 2,038 volumes steered): 3 twins, the chosen 3 levels +3.6%
    +- 0.4% / -0.1% +- 0.7% (2 levels: +3.5% / -0.4%). With the volumes at one instant going
    on by their next request's place (session 44) and their run so far (session 45): +0.7%
    +- 0.3% / +0.3% +- 0.4% at 3 levels (2: +0.7% / +0.4%)."""
    trace = load_trace(traces / "tencent_cbs_excerpt.csv.bz2", opts=ReadOptions(stream_by="volume"))
    r = study(trace, "hdd-7200", max_levels=3)
    chosen = next(p for p in r["points"] if p["levels"] == r["chosen"])
    assert abs(chosen["mean_error"]) + chosen["mean_error_ci95"] <= 0.02  # a regression shows
    assert abs(chosen["mean_error"]) + chosen["mean_error_ci95"] <= 0.05
    assert abs(chosen["p95_error"]) + chosen["p95_error_ci95"] <= 0.10
    assert all(abs(e) <= 0.05 for e in chosen["mean_error_range"])


def test_msr_twin_mean_within_5pct(traces: Path) -> None:
    """At the auto intensity 0.41x over 384 twins (single ones -54% to +97%: 1,000 requests),
    the chosen 2 levels' twin is -2.1% +- 2.1% on the mean and +0.3% +- 3.5% on p95 (+0.7% and
    +5.1% before reads and writes kept their own re-reference distances, -0.1% and +3.5%
    before random requests kept their 4 KiB phase: docs/model.md). It was
    -13.3% (-12.1% with in-leaf jumps for failed placements alone; docs/model.md) until
    categories with fewer than 8 gaps could take a gamma where the evidence is strong: MSR's
    flushes put 5 us gaps next to seconds of idle time."""
    r = study(load_trace(traces / "msr_hm0_excerpt.csv"), "hdd-7200", max_levels=3)
    assert r["chosen"] == 2 and r["twins"] == 384
    chosen = next(p for p in r["points"] if p["levels"] == r["chosen"])
    assert abs(chosen["mean_error"]) + chosen["mean_error_ci95"] <= 0.05
    assert abs(chosen["p95_error"]) <= 0.10
    # where the mean comes from, by fluctuation window: the summed response of each window
    # adds up to the mean's, and it matches by errors that cancel (measured: window 0's
    # bursty writes take 13.5 s in the original and 3.7 s in the twins; window 9's 502 reads
    # 7.8 s, the twins' 298 reads there 22.8 s)
    split = r["by_window"]
    original, twin = split["original"], split["twin"]
    assert split["levels"] == 2 and len(original) == len(twin) == 11
    # 1,000 requests: their summed response in seconds is their mean in milliseconds
    assert sum(w["response_s"] for w in original) == pytest.approx(r["original"]["mean_ms"])
    assert sum(w["response_s"] for w in twin) == pytest.approx(chosen["mean_ms"])
    assert sum(w["requests"] for w in twin) == pytest.approx(1000)
    assert (original[9]["requests"], original[9]["reads"]) == (538, 502)
    assert original[0]["response_s"] > 3 * twin[0]["response_s"]
    assert twin[9]["read_response_s"] > 2.5 * original[9]["read_response_s"]


def test_msr_with_its_bursts_keeps_the_mean_and_misses_the_p95(traces: Path) -> None:
    """With its bursts (`--bursts`: docs/model.md, "bursts") msr_hm0's twin follows the
    original's cache curve at both ends (tests/test_whatif_cache.py) and on the bare disk
    its mean comes within +0.7% +- 1.4% of the original's (192 twins; session 48's bursts,
    the stream's lengths in every window: -9.6%), but its p95 is 17.0% under: the mean
    matches by errors that cancel, as without bursts. The twin's walk cannot steer its
    windows' operations (reads and writes sit on leaves apart), so its busy window 9 holds
    297 reads of the original's 502 and its reads queue behind the writes there (18.0 s
    against 9.0 s of response), while window 0's flushes queue less (9.1 against 13.5 s).
    So bursts stay off by default."""
    r = study(load_trace(traces / "msr_hm0_excerpt.csv"), "hdd-7200", max_levels=3, bursts=True)
    assert r["chosen"] == 2 and r["twins"] == 192
    chosen = next(p for p in r["points"] if p["levels"] == r["chosen"])
    assert chosen["mean_error"] == pytest.approx(0.0073, abs=5e-4)
    assert chosen["p95_error"] == pytest.approx(-0.1701, abs=5e-4)
    assert abs(chosen["mean_error"]) + chosen["mean_error_ci95"] < 0.05  # within the bar
    assert abs(chosen["p95_error"]) - chosen["p95_error_ci95"] > 0.10  # past it
    busy = r["by_window"]["twin"][9]
    assert (
        busy["reads"] < 320
        and busy["response_s"] > 1.5 * r["by_window"]["original"][9]["response_s"]
    )


def test_cli_json_and_table(traces: Path, tmp_path: Path) -> None:
    msr = traces / "msr_hm0_excerpt.csv"
    out = tmp_path / "levels.json"
    args = ["whatif", "levels", str(msr), "--max-levels", "2", "--intensity", "0.5"]
    result = CliRunner().invoke(app, [*args, "--json", "-o", str(out)])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc == json.loads(out.read_text())
    assert doc["intensity"] == 0.5 and doc["device"].startswith("7200 rpm HDD")
    assert set(doc["original"]) >= {"mean_ms", "p95_ms"}
    assert [p["levels"] for p in doc["points"]] == [1, 2]
    assert all(set(p) >= POINT_KEYS for p in doc["points"])
    assert doc["chosen"] in (1, 2)
    figure = tmp_path / "levels.png"
    table = CliRunner().invoke(app, [*args, "--plot", str(figure)], terminal_width=200)
    assert table.exit_code == 0, table.output
    text = " ".join(table.output.split())  # the table wraps at the runner's 80 columns
    assert "chosen by fidelity score" in text and "error" in text and "±" in text
    assert doc["twins"] == 384 and "means over 384 twins per level" in text
    assert "the most allowed" in text and not doc["precision"]["reached"]
    assert "Where the response time goes at" in text and "all windows:" in text
    assert set(doc["by_window"]["original"][0]) == {
        "requests",
        "reads",
        "response_s",
        "read_response_s",
    }
    assert figure.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_bad_input_gets_clear_errors(traces: Path, tmp_path: Path) -> None:
    model = tmp_path / "m.json"
    fit(load_trace(traces / "msr_hm0_excerpt.csv")).save(model)
    result = CliRunner().invoke(app, ["whatif", "levels", str(model)])
    assert isinstance(result.exception, IotwinError)
    assert "needs a trace" in str(result.exception)
    for args, msg in (
        (["--max-levels", "9"], "expected 1 to 8"),
        (["--intensity", "x"], "'x'"),
        (["--twins", "0"], "expected 1 or more"),
        (["--twins", "two"], "--twins 'two': expected a whole number or 'auto'"),
    ):
        result = CliRunner().invoke(
            app, ["whatif", "levels", str(traces / "msr_hm0_excerpt.csv"), *args]
        )
        assert isinstance(result.exception, IotwinError), result.output
        assert msg in str(result.exception)
