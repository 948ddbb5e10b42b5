"""`iotwin report`: inputs recognised by content, every section rendered from real inputs
(the embedded pgbench sample, its fitted model, twin, validation and a timed run), what-if
sections from hand-made JSON of the documented shapes, and the page in headless Chromium."""

from __future__ import annotations

import copy
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from browser import Browser
from conftest import TRACES
from typer.testing import CliRunner

from iotwin.characterize import characterize
from iotwin.cli import app
from iotwin.errors import IotwinError
from iotwin.model import fit
from iotwin.report import build_report
from iotwin.report.inputs import json_kind, load_inputs
from iotwin.report.sections import SECTIONS, WHATIF_SECTIONS
from iotwin.report.sections.distributions import cdf
from iotwin.report.sections.fluctuation import window_rates
from iotwin.report.sections.mrc import cache_blocks, curves
from iotwin.report.sections.runs import binned
from iotwin.trace import Trace, TraceMeta, read_parquet_trace, write_trace
from iotwin.validate import validate

runner = CliRunner()

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "samples" / "pgbench.parquet"
ARTIFACTS = Path(os.environ.get("IOTWIN_ARTIFACTS", ROOT / "out" / "test-artifacts"))
CORE_SECTIONS = [
    "inputs", "characterization", "validation", "locality", "fluctuation", "distributions",
    "mrc", "levels", "runs",
]  # fmt: skip
WHATIF = {
    "whatif-cache": {
        "kind": "whatif-cache",
        "device": "hdd-7200",
        "sizes": [0, 8 << 30, 16 << 30, 32 << 30],
        "curves": {
            "original": [1.0, 2.5, 3.125, 3.25],
            "twin": [1.0, 2.375, 3.0, 3.25],
            "uniform": [1.0, 1.25, 1.5, 1.75],
        },
        "twins": 3,
        "seeds": [0, 1, 2],
        "ranges": {"twin": {"low": [1.0, 2.25, 2.75, 3.0], "high": [1.0, 2.5, 3.25, 3.5]}},
        "ci95": {"twin": [0.0, 0.05, 0.07, 0.06]},
        "precision": {"target": 0.02, "reached": True, "fixed": False},
    },
    "whatif-intensity": {
        "kind": "whatif-intensity",
        "device": "hdd-7200",
        "points": [
            {
                "scale": s,
                "offered_iops": 100.0 * s,
                "completed_iops": min(100.0 * s, 420.0),
                "mean_ms": m,
                "p95_ms": 2.5 * m,
                "utilisation": min(s / 4.2, 1.0),
                "ci95": {"completed_iops": s, "mean_ms": m / 20, "p95_ms": m / 10},
            }
            for s, m in ((1, 4.0), (2, 5.5), (4, 11.0), (8, 240.0))
        ],
        "saturation_scale": 4.2,
        "twins": 6,
        "seeds": [0, 1, 2, 3, 4, 5],
        "precision": {"target": 0.02, "reached": False, "fixed": False},
    },
    "whatif-defrag": {
        "kind": "whatif-defrag",
        "device": "hdd-7200",
        "before": {"sequential_fraction": 0.125, "mean_ms": 8.5},
        "after": {"sequential_fraction": 0.75, "mean_ms": 3.4},
        "speedup": 2.5,
    },
}
SIM = {
    "kind": "sim", "workload": "pgbench.parquet", "of": "original", "device": "hdd-7200",
    "intensity": 2.0, "requests": 37083, "offered_iops": None, "completed_iops": 512.5,
    "mean_ms": 12.25, "p50_ms": 8.0, "p95_ms": 30.5, "p99_ms": 61.0, "max_ms": 140.0,
    "utilisation": 0.875, "cache_hit_ratio": None,
}  # fmt: skip


def section_ids(html: str) -> list[str]:
    return re.findall(r'<section id="([^"]+)"', html)


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory as `make demo` leaves it: characterization, model (with its level sweep),
    twin, validation and a short timed run of the embedded sample."""
    out = tmp_path_factory.mktemp("report-inputs")
    original = read_parquet_trace(SAMPLE)
    (out / "characterize.json").write_text(json.dumps(characterize(original)))
    model = fit(original, levels=2)
    model.doc["fit"]["level_sweep"] = [
        {"levels": 1, "score": 0.5, "transitions": 73},
        {"levels": 2, "score": 0.7, "transitions": 182},
        {"levels": 3, "score": 0.69, "transitions": 375},
    ]
    model.save(out / "model.json")
    twin = model.synth(seed=1)
    write_trace(twin, out / "twin.parquet")
    (out / "validation.json").write_text(json.dumps(validate(original, twin)))
    result = CliRunner().invoke(
        app,
        ["run", str(out / "model.json"), "--target", str(out / "target.img"), "--requests",
         "2000", "--intensity", "4", "--size", "64M", "--json", str(out / "run.json")],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    (out / "target.img").unlink()
    return out


@pytest.fixture(scope="module")
def whatif_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Hand-made what-if documents of the documented shapes, and `whatif levels` and
    `whatif stress` as the CLI writes them (TPC-C, simulated 7,200 rpm disk)."""
    out = tmp_path_factory.mktemp("whatif")
    for kind, doc in WHATIF.items():
        (out / f"{kind}.json").write_text(json.dumps(doc))
    (out / "sim.json").write_text(json.dumps(SIM))
    tpcc = str(TRACES / "tpcc_small.disksim")
    model = out / "tpcc-model.json"
    for args in (
        ["whatif", "levels", tpcc, "--max-levels", "2", "-o", str(out / "levels.json")],
        ["fit", tpcc, "-o", str(model)],
        ["whatif", "stress", str(model), "--device", "hdd-7200", "--ramp", "0.001,0.004",
         "-o", str(out / "stress.json")],
    ):  # fmt: skip
        run = runner.invoke(app, args)
        assert run.exit_code == 0, run.output
    model.unlink()  # only the what-ifs belong in this directory
    return out


def test_inputs_are_recognised_by_content(inputs: Path, tmp_path: Path) -> None:
    bundle = load_inputs([SAMPLE, inputs])
    kinds = {i.path.name: i.kind for i in bundle.inputs}
    assert kinds == {
        "pgbench.parquet": "trace",
        "characterize.json": "characterization",
        "model.json": "model",
        "twin.parquet": "twin",
        "validation.json": "validation",
        "run.json": "run",
    }
    # files written before the "kind" field are still recognised by their keys
    for name, kind in (("characterize.json", "characterization"), ("validation.json",
                       "validation"), ("run.json", "run")):  # fmt: skip
        doc = json.loads((inputs / name).read_text())
        assert doc.pop("kind") == kind
        assert json_kind(doc) == kind
    assert json_kind({"speedup": 2}) is None


def test_report_holds_every_section_with_real_values(inputs: Path, tmp_path: Path) -> None:
    out = tmp_path / "report.html"
    result = build_report([SAMPLE, inputs], out)
    html = out.read_text()
    assert section_ids(html) == CORE_SECTIONS == result.sections
    # self-contained: no external scripts, styles or images
    assert not re.search(r'(src|href)="(https?:)?//', html)
    assert html.count('<svg role="img"') == 6  # locality, fluctuation, sizes, mrc, levels, run
    char = json.loads((inputs / "characterize.json").read_text())
    assert f"{char['requests']:,}" in html and char["requests"] == 37083
    report = json.loads((inputs / "validation.json").read_text())
    assert f"<b>{report['score']:.3f}</b>" in html
    assert html.count('class="badge fail"') == len(report["failed"]) + (not report["passed"])
    run = json.loads((inputs / "run.json").read_text())
    assert run["total"]["requests"] == 2000 and "2,000 requests in" in html
    chosen = '<td class="">2</td><td class="num">0.700</td><td class="num">182</td><td class="num">chosen'
    assert chosen in html


def test_same_inputs_same_bytes(inputs: Path, tmp_path: Path) -> None:
    # the model's twin and baseline are synthesized with a fixed seed
    build_report([inputs / "model.json", inputs / "run.json"], tmp_path / "a.html")
    build_report([inputs / "model.json", inputs / "run.json"], tmp_path / "b.html")
    assert (tmp_path / "a.html").read_bytes() == (tmp_path / "b.html").read_bytes()


def test_model_alone_synthesizes_its_twin_and_baseline(inputs: Path, tmp_path: Path) -> None:
    result = build_report([inputs / "model.json"], tmp_path / "m.html")
    assert result.sections == [
        "inputs",
        "locality",
        "fluctuation",
        "distributions",
        "mrc",
        "levels",
    ]
    # with the original, the model's twin is validated against it
    both = build_report([SAMPLE, inputs / "model.json"], tmp_path / "t.html")
    assert both.sections == [s for s in CORE_SECTIONS if s != "runs"]
    assert "fidelity score <b>0." in (tmp_path / "t.html").read_text()


def test_mrc_of_a_hand_computed_trace() -> None:
    # blocks 0, 1, 0, 1: one LRU block misses all four; two blocks miss only the first two
    df = pl.DataFrame(
        {"ts_ns": [0, 1, 2, 3], "stream": [0] * 4, "op": [0] * 4,
         "offset": [0, 4096, 0, 4096], "size": [4096] * 4},
        schema={"ts_ns": pl.Int64, "stream": pl.UInt32, "op": pl.UInt8, "offset": pl.UInt64,
                "size": pl.UInt32},
    )  # fmt: skip
    trace = Trace(df, TraceMeta(capacity=8192))
    sizes, ratios = curves([("original", trace)])
    assert sizes == [1, 2]
    assert ratios == {"original": [1.0, 0.5]}
    assert cache_blocks(1000, points=4) == [1, 10, 100, 1000]


def test_window_rates_and_cdf_by_hand() -> None:
    # 4 requests at 0, 0.5, 1.0 and 2.0 s in 2 windows of (2 s + 1 ns) / 2 each: the first
    # window [0, 1.0000000005 s) holds three of them
    df = pl.DataFrame({"ts_ns": [0, 500_000_000, 1_000_000_000, 2_000_000_000]})
    trace = Trace(df, TraceMeta())
    starts, rates = window_rates(trace, windows=2)
    width = 2_000_000_001 / 2 / 1e9
    assert np.allclose(starts, [0.0, width])
    assert np.allclose(rates, [3 / width, 1 / width])
    xs, ys = cdf(np.array([4096, 512, 4096, 8192]))
    assert xs.tolist() == [512, 4096, 8192] and ys.tolist() == [0.25, 0.75, 1.0]


def test_whatif_sections_from_documented_shapes(whatif_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "w.html"
    result = build_report([whatif_dir], out)
    assert result.sections == [
        "inputs", "sim", "whatif-intensity", "whatif-cache", "whatif-defrag", "whatif-levels",
        "whatif-stress",
    ]  # fmt: skip
    html = out.read_text()
    assert html.count('<svg role="img"') == 5
    for cell in ("3.12x", "1.75x", "16 GiB", "4.2x the workload", "<b>2.50x</b>", "75.0 %", "420"):
        assert cell in html, cell
    assert "3.00x ± 0.07" in html and "1.75x</td>" in html  # the uniform curve has no interval
    assert ">200 ± 2</td>" in html and ">5.5 ± 0.275</td>" in html  # a model's twins' means
    assert "means over 6 twins of the model (seeds 0-5), the most allowed" in html
    assert (
        "means over 3 twins and uniform baselines (seeds 0-2): twins were added until each "
        "mean&#39;s 95% interval was within 2%; ± the 95% interval of the mean; the band their "
        "range" in html
    )
    sim_row = '<td>pgbench.parquet (original)</td><td>hdd-7200</td><td class="num">2x</td>'
    assert sim_row in html.replace(' class=""', "") and ">512</td>" in html and ">88 %</td>" in html
    assert set(WHATIF_SECTIONS) == {*WHATIF, "sim", "whatif-levels", "whatif-stress"}


# a levels study of 2 levels over 5 twins, for the bad-input cases (the rendered section comes
# from a real study in test_levels_and_stress_sections_from_real_runs)
LEVELS = {
    "kind": "whatif-levels",
    "device": "hdd-7200",
    "original": {"mean_ms": 10.0, "p95_ms": 30.0},
    "points": [
        {"levels": lv, "mean_ms": m, "p95_ms": 3 * m, "mean_error": m / 10 - 1,
         "p95_error": m / 10 - 1, "mean_error_range": [m / 10 - 1.05, m / 10 - 0.95],
         "mean_error_ci95": 0.02, "p95_error_ci95": 0.03}
        for lv, m in ((1, 9.0), (2, 10.2))
    ],
    "chosen": 2,
    "within_5pct": 2,
    "twins": 5,
}  # fmt: skip


@pytest.mark.parametrize(
    ("kind", "damage", "message"),
    [
        ("whatif-cache", lambda d: d["curves"]["twin"].pop(), "field 'curves.twin': 3 values, expected 4"),
        ("whatif-cache", lambda d: d.update(twins="3"), "field 'twins': expected a list of numbers"),
        ("whatif-cache", lambda d: d["ci95"]["twin"].pop(), "field 'ci95.twin': 3 values, expected 4"),
        ("whatif-cache", lambda d: d["ci95"]["twin"].__setitem__(1, "5%"), "field 'ci95.twin': expected a list of numbers"),
        ("whatif-cache", lambda d: d.update(ci95=[0.1]), "field 'ci95': expected an object"),
        ("whatif-levels", lambda d: d.update(twins=None), "field 'twins': expected a list of numbers"),
        ("whatif-levels", lambda d: d["points"][1].update(p95_error_ci95="2%"), "field 'points[1]': expected a list of numbers"),
        ("whatif-cache", lambda d: d.pop("sizes"), "field 'sizes': missing"),
        ("whatif-cache", lambda d: d.update(busy_curves={"twin": [1.0, 2.0]}), "field 'busy_curves.twin': 2 values, expected 4"),
        ("whatif-cache", lambda d: d.update(busy_curves=[1.0]), "field 'busy_curves': expected an object"),
        ("whatif-cache", lambda d: d.update(reads_alone_ms={"twin": "5 ms"}), "field 'reads_alone_ms.twin': expected a number or null"),
        ("whatif-cache", lambda d: d.update(reads_alone_service_ms=[2.0]), "field 'reads_alone_service_ms': expected an object"),
        ("whatif-cache", lambda d: d["ranges"]["twin"]["low"].pop(), "field 'ranges.twin.low': 3 values, expected 4"),
        ("whatif-cache", lambda d: d["ranges"]["twin"].pop("high"), "field 'ranges.twin.high': missing"),
        ("whatif-intensity", lambda d: d["points"][1].pop("p95_ms"), "field 'points[1].p95_ms': missing"),
        ("whatif-intensity", lambda d: d["points"][2].update(ci95=[1, 2]), "field 'points[2].ci95': expected an object"),
        ("whatif-intensity", lambda d: d.update(twins="six"), "field 'twins': expected a list of numbers"),
        ("whatif-intensity", lambda d: d["points"][0]["ci95"].update(mean_ms="wide"), "field 'points[0].ci95': expected a list of numbers"),
        ("whatif-defrag", lambda d: d["after"].update(mean_ms="fast"), "field 'after': expected a list of numbers"),
    ],
)  # fmt: skip
def test_bad_whatif_json_names_file_and_field(
    kind: str, damage, message: str, tmp_path: Path
) -> None:
    doc = copy.deepcopy({**WHATIF, "whatif-levels": LEVELS}[kind])
    damage(doc)
    path = tmp_path / f"{kind}.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(IotwinError, match=re.escape(f"{path}: {message}")):
        build_report([path], tmp_path / "r.html")
    assert not (tmp_path / "r.html").exists()


def test_a_one_twin_cache_study_has_no_intervals_and_renders(tmp_path: Path) -> None:
    doc = copy.deepcopy(WHATIF["whatif-cache"])
    doc.update(twins=1, seeds=[0], ci95={"twin": [None] * 4}, precision=None)
    path = tmp_path / "cache.json"
    path.write_text(json.dumps(doc))
    build_report([path], tmp_path / "r.html")
    assert "±" not in (tmp_path / "r.html").read_text()


def test_a_cache_study_renders_its_reads_alone_and_busy_time(tmp_path: Path) -> None:
    # TPC-C's measured figures (3 twins): the same disk work, more waiting
    doc = copy.deepcopy(WHATIF["whatif-cache"])
    doc.update(
        cache="ssd-sata lru write-back, cleaned to 50% dirty",
        write="back",
        reads_alone_ms={"original": 7.25, "twin": 8.5, "uniform": 8.29},
        reads_alone_service_ms={"original": 6.02, "twin": 6.02, "uniform": 6.31},
        footprints={"original": 80 << 20, "twin": 80 << 20, "uniform": 78 << 20},
        busy_curves={
            "original": [1.0, 0.96, 1.02, 1.6],
            "twin": [1.0, 0.97, 1.03, 1.6],
            "uniform": [1.0, 0.97, 1.03, 1.59],
        },
        twin_max_error=0.182,
        uniform_max_error=0.152,
        twin_max_busy_error=0.003,
        uniform_max_busy_error=0.011,
    )
    path = tmp_path / "cache.json"
    path.write_text(json.dumps(doc))
    build_report([path], tmp_path / "r.html")
    text = " ".join(re.sub("<[^>]+>", " ", (tmp_path / "r.html").read_text()).split())
    assert "mean response (of it service): original 7.25 ms (6.02), twin 8.5 ms (6.02)" in text
    assert "twin 0.97 1.03 1.60" in text  # busy-time speedups at the sizes past 0
    assert "in busy time: twin 0.003, uniform baseline 0.011" in text
    assert "+0.00 ms a read in service and +1.25 ms in waiting: they arrive more bunched" in text
    assert "the twin does carry the disk work this cache saves" in text
    # the figure has the busy-time speedups beside the speedups
    html = (tmp_path / "r.html").read_text()
    start = html.index('aria-label="cache speedup and busy-time speedup"')
    svg = html[start : html.index("</svg>", start)]
    assert ">device busy-time speedup<" in svg and ">speedup over no cache<" in svg


def test_the_undamaged_levels_document_renders(tmp_path: Path) -> None:
    path = tmp_path / "levels.json"
    path.write_text(json.dumps(LEVELS))
    build_report([path], tmp_path / "r.html")
    text = " ".join(re.sub("<[^>]+>", " ", (tmp_path / "r.html").read_text()).split())
    assert "means over 5 twins per level" in text
    assert "2 (chosen) 10.2 ms 2.0 % ± 2.0 % -3.0 % to 7.0 % 30.6 ms 2.0 % ± 3.0 %" in text


def test_cli_errors_are_one_clear_line(inputs: Path, tmp_path: Path) -> None:
    bad = tmp_path / "other.json"
    bad.write_text('{"hello": 1}')
    broken = tmp_path / "broken.json"
    broken.write_text('{"kind": "run",\n oops}')
    cases = [
        ([str(inputs), "-o", str(tmp_path / "r.pdf")], "the report is HTML"),
        ([str(tmp_path / "missing.json"), "-o", str(tmp_path / "r.html")], "no such file"),
        ([str(bad), "-o", str(tmp_path / "r.html")], "not an iotwin JSON output"),
        ([str(broken), "-o", str(tmp_path / "r.html")], "line 2: not valid JSON"),
    ]
    for args, message in cases:
        proc = subprocess.run(
            [sys.executable, "-m", "iotwin.cli", "report", *args], capture_output=True, text=True
        )
        assert proc.returncode == 2, proc.stderr
        assert proc.stderr.startswith("error:") and message in proc.stderr
        assert "Traceback" not in proc.stderr


def test_directory_skips_files_that_are_not_inputs(whatif_dir: Path, tmp_path: Path) -> None:
    (whatif_dir / "notes.json").write_text('{"hello": 1}')
    try:
        result = build_report([whatif_dir], tmp_path / "r.html")
    finally:
        (whatif_dir / "notes.json").unlink()
    assert len(result.skipped) == 1 and "notes.json" in result.skipped[0]
    assert "inputs" in result.sections


def test_page_in_headless_chromium(inputs: Path, whatif_dir: Path) -> None:
    """No console errors, every figure rendered at a real size, a screenshot kept."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page = ARTIFACTS / "report.html"
    build_report([SAMPLE, inputs, whatif_dir], page)
    with Browser() as browser:
        browser.load(page)
        found = browser.evaluate(
            "[...document.querySelectorAll('section')].map(s => ({id: s.id, figures: "
            "[...s.querySelectorAll('svg.figure')].map(e => {const r = e.getBoundingClientRect();"
            " return [r.width, r.height];})}))"
        )
        shot = ARTIFACTS / "report.png"
        width, height = browser.screenshot(shot)
    assert browser.errors == []
    ids = [s["id"] for s in found]
    whatifs = [
        "whatif-intensity",
        "whatif-cache",
        "whatif-defrag",
        "whatif-levels",
        "whatif-stress",
    ]
    assert ids == [*CORE_SECTIONS, "sim", *whatifs]
    assert len(ids) == len(SECTIONS)
    figures = {s["id"]: s["figures"] for s in found}
    for sid in set(ids) - {"inputs", "characterization", "validation", "sim"}:
        assert figures[sid], f"{sid}: no figure"
        for w, h in figures[sid]:
            assert w > 300 and h > 150, f"{sid}: figure {w}x{h}"
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and width >= 1000 and height > 5000
    print(f"report screenshot: {shot}")


def test_long_inputs_keep_figures_small() -> None:
    # a day-long run: 86,400 seconds become 240 bars of 360 s each, as means per second
    timeline = [{"second": s, "reads": 1, "writes": s % 2, "iops": 1 + s % 2} for s in range(86400)]
    width, t = binned(timeline)
    assert width == 360 and len(t["second"]) == 240
    assert t["second"][1] == 360 and t["writes"][0] == 0.5 and t["iops"][0] == 1.5
    # a CDF of a million distinct gaps keeps 400 exact points, the last at 1
    xs, ys = cdf(np.arange(1_000_000))
    assert len(xs) == 400 and xs[0] == 0 and xs[-1] == 999_999 and ys[-1] == 1.0
    assert ys[1] == (xs[1] + 1) / 1_000_000


def test_untimed_trace_has_no_rates(tmp_path: Path) -> None:
    # an untimed block trace (ARC-like): heatmap by request number, no fluctuation, no gaps
    n = 400
    df = pl.DataFrame(
        {"ts_ns": [0] * n, "stream": [0] * n, "op": [0] * n,
         "offset": [(i * 7919 % 64) * 4096 for i in range(n)], "size": [4096] * n},
        schema={"ts_ns": pl.Int64, "stream": pl.UInt32, "op": pl.UInt8, "offset": pl.UInt64,
                "size": pl.UInt32},
    )  # fmt: skip
    path = tmp_path / "untimed.parquet"
    write_trace(Trace(df, TraceMeta(format="arc", timed=False, capacity=64 * 4096)), path)
    result = build_report([path], tmp_path / "u.html")
    assert result.sections == ["inputs", "characterization", "locality", "distributions", "mrc"]
    html = (tmp_path / "u.html").read_text()
    assert "request number (untimed trace)" in html and "no inter-arrival times" in html
    assert '<td class="">requests</td><td class="num">400</td>' in html


def test_levels_and_stress_sections_from_real_runs(traces: Path, tmp_path: Path) -> None:
    """`whatif levels` and `whatif stress` written by the CLI itself, on the TPC-C trace:
    their sections show the measured values (the chosen level, the ramp's intensities)."""
    trace = str(traces / "tpcc_small.disksim")
    levels, stress, model = tmp_path / "levels.json", tmp_path / "stress.json", tmp_path / "m.json"
    run = runner.invoke(app, ["whatif", "levels", trace, "--max-levels", "2", "-o", str(levels)])
    assert run.exit_code == 0, run.output
    assert runner.invoke(app, ["fit", trace, "-o", str(model)]).exit_code == 0
    ramp = ["--ramp", "0.001,0.004", "--device", "hdd-7200"]
    run = runner.invoke(app, ["whatif", "stress", str(model), *ramp, "-o", str(stress)])
    assert run.exit_code == 0, run.output
    out = tmp_path / "r.html"
    build_report([levels, stress], out)
    html = out.read_text()
    lv = json.loads(levels.read_text())
    assert 'id="whatif-levels"' in html and f"{lv['chosen']} (chosen)" in html
    assert f"{lv['original']['mean_ms']:.3g} ms" in html
    # several twins per level: each level's range of single-twin errors, its mean error's 95%
    # interval, and the note saying how many twins and why
    point = lv["points"][1]
    low, high = point["mean_error_range"]
    text = html.replace("&nbsp;", " ")
    assert f"{100 * low:.1f} % to {100 * high:.1f} %" in text
    error, ci = 100 * point["mean_error"], 100 * point["mean_error_ci95"]
    assert f"{error:.1f} % ± {ci:.1f} %" in text and lv["twins"] > 3
    assert f"means over {lv['twins']} twins per level (seeds 0-{lv['twins'] - 1})" in html
    assert 'id="whatif-stress"' in html and "0.004x" in html
    assert html.count("<svg") >= 2
