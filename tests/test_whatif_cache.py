"""`whatif cache` on a real captured application (the embedded pgbench sample: 20 PostgreSQL
processes under strace): the twin's speedup curve must follow the original's, and the uniform
baseline's (same mix, sizes and rate, no locality) must visibly not (issue: what-if studies)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from reference import reuse_by_op
from typer.testing import CliRunner

import iotwin
from iotwin.cli import app

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "samples" / "pgbench.parquet"
runner = CliRunner()


def test_twin_follows_the_original_and_the_uniform_baseline_does_not() -> None:
    res = runner.invoke(app, ["whatif", "cache", str(SAMPLE), "--json"])
    assert res.exit_code == 0, res.output
    d = json.loads(res.output)
    # sizes: none, then 1/8, 1/4, 1/2 and all of the original's 4 KiB-block footprint
    fp = d["footprint_bytes"]
    assert d["sizes"] == [0, *(int(fp * f) // 4096 * 4096 for f in (0.125, 0.25, 0.5, 1.0))]
    orig, twin, uni = (d["curves"][k] for k in ("original", "twin", "uniform"))
    assert orig[0] == twin[0] == uni[0] == 1.0
    # the application re-reads its data: even 1/8 of the footprint is many times faster, and
    # the whole footprint twice that again (measured 12.5x and 28.2x; before the cache cleaned
    # dirty blocks while the disk idled, 6.5x and 28x: docs/simulator.md)
    assert orig[-1] > 2 * orig[1] > 20
    # the twin's curve rises with the original's, within a factor 1.3 of it at every size
    # (twin over original measured 1.00, 1.16, 0.91 and 0.95 over 53 twins; 1.04, 1.22, 0.94
    # and 0.97 before each window kept its share of reads, 0.95, 1.17, 0.81 and 0.81 before
    # each stream kept its active stretch of each window: docs/model.md), each size's mean
    # inside the range of the twins; twins were added (3, 6, ...) until the twins' and the
    # uniform baseline's 95% intervals came within 2% of their means, or to the request
    # budget's cap (53): the twins' are within 1.3%, the baseline's within 3.1% (2.4% before
    # near cold requests drew the walk's random numbers in another order; it reached 2% at 48
    # twins before each window kept its share of reads), and the study says so
    assert d["twins"] == 53 and d["seeds"] == list(range(53))
    assert d["precision"] == {"target": 0.02, "reached": False, "fixed": False}
    for name, bound in (("twin", 0.02), ("uniform", 0.035)):
        assert d["ci95"][name][0] == 0.0  # no cache: every realization's speedup is 1
        halves, means = d["ci95"][name][1:], d["curves"][name][1:]
        assert all(0 < h <= bound * m for h, m in zip(halves, means, strict=True))
    for name in ("twin", "uniform"):
        span = d["ranges"][name]
        assert all(
            lo <= m <= hi
            for lo, m, hi in zip(span["low"], d["curves"][name], span["high"], strict=True)
        )
        assert span["low"][-1] < span["high"][-1]  # the realizations differ
    assert "original" not in d["ranges"]
    assert twin == sorted(twin)
    assert all(1 / 1.3 < t / o < 1.3 for t, o in zip(twin[1:], orig[1:], strict=True))
    # the baseline without locality sees a flat curve far below: a wrong answer
    assert max(uni[1:]) < 1.3 * min(uni[1:])
    assert uni[-1] < orig[-1] / 3
    errors = [abs(t - o) for t, o in zip(twin, orig, strict=True)]
    assert d["twin_max_error"] == max(errors)
    assert d["uniform_max_error"] > 3 * d["twin_max_error"]


def test_footprints_and_the_caution_when_the_twin_touches_more_data() -> None:
    from iotwin.whatif.cache import footprint_caution

    def doc(original: int, twin: int) -> dict:
        return {"footprints": {"original": original, "twin": twin, "uniform": 9 * original}}

    # cloudPhysics' twin touches 2.67x the original's 4 KiB blocks (measured)
    caution = footprint_caution(doc(269_210 * 4096, 718_631 * 4096))
    assert caution is not None and "2.67x" in caution and "underestimated" in caution
    assert "overestimated" in (footprint_caution(doc(100, 70)) or "")
    assert footprint_caution(doc(100, 80)) is None  # 0.80x: within 1.25x
    assert footprint_caution({"footprints": {"twin": 5}}) is None  # a model: no original


def test_pgbench_report_lists_every_footprint() -> None:
    res = runner.invoke(app, ["whatif", "cache", str(SAMPLE), "--json"])
    d = json.loads(res.output)
    fp = d["footprints"]
    assert fp["original"] == d["footprint_bytes"]
    # the twin near the original's data (53 twins: 1.009x since each window kept its share of
    # reads, 0.795x before, 0.808x before new data stayed inside files); the uniform baseline
    # spreads over twice it
    assert 0.75 <= fp["twin"] / fp["original"] <= 1.25
    assert fp["uniform"] > 2 * fp["original"]
    # what a cache of the whole footprint serves, by operation: the original re-reads .921
    # of its read blocks and rewrites .561; the twins re-read less (.838) and rewrite more
    # (.585; .676 before each window kept its share of reads), hence their curve below the
    # original's at half and all of the footprint
    reuse = d["reuse"]
    expected = reuse_by_op(iotwin.load_trace(SAMPLE))
    assert reuse["original"]["read"] == pytest.approx(expected["read_reuse"], abs=1e-12)
    assert reuse["original"]["write"] == pytest.approx(expected["write_reuse"], abs=1e-12)
    assert reuse["original"]["read"] > reuse["twin"]["read"] > 2 * reuse["uniform"]["read"]
    assert reuse["twin"]["write"] > reuse["original"]["write"] > reuse["uniform"]["write"]
    text = render_text(d)
    assert "reads / writes: original 92.1% / 56.1%" in text
    assert "re-reads 83.8% of its read blocks against the original's 92.1%" in text
    assert "underestimated" in text
    # the twins' disk does about three times the original's work with half the footprint or
    # more cached (busy-time speedups 15.5 and 24.6 against 44.0 and 68.3), though their
    # response-time speedups are close: the SSD's latency is most of the response there
    busy = d["busy_curves"]
    assert busy["original"][-1] > 2 * busy["twin"][-1] > 2 * 10
    assert "the cache saves the twin's disk less work than the original's" in text


def test_reuse_caution_only_past_the_tolerance() -> None:
    from iotwin.whatif.cache import reuse_caution

    def doc(original: float | None, twin: float | None) -> dict:
        return {"reuse": {"original": {"read": original}, "twin": {"read": twin}}}

    assert reuse_caution(doc(0.142, 0.115)) is None  # Tencent: .027 apart
    assert "underestimated" in (reuse_caution(doc(0.921, 0.815)) or "")
    assert "overestimated" in (reuse_caution(doc(0.30, 0.40)) or "")
    assert reuse_caution(doc(None, 0.5)) is None  # a write-only original
    assert reuse_caution({"reuse": {"twin": {"read": 0.5}}}) is None  # a model: no original


def test_caution_when_the_twin_is_no_closer_than_the_uniform_baseline(traces: Path) -> None:
    from iotwin.whatif.cache import baseline_caution

    def doc(twin: float, uniform: float) -> dict:
        return {"twin_max_error": twin, "uniform_max_error": uniform}

    assert baseline_caution(doc(5.19, 22.3)) is None  # pgbench: the twin is far closer
    assert "0.110 against 0.087" in (baseline_caution(doc(0.110, 0.087)) or "")
    msr = {**doc(1.785, 0.980), "twin_max_busy_error": 0.23, "uniform_max_busy_error": 0.979}
    assert "busy-time curve is closer (0.230 against 0.979)" in (baseline_caution(msr) or "")
    farther = {**msr, "twin_max_busy_error": 1.2}
    assert "busy-time" not in (baseline_caution(farther) or "busy-time")
    assert baseline_caution({"curves": {}}) is None  # a model: no original to compare with
    # TPC-C, a real run: the caution is printed exactly when the twin is no closer
    args = ["whatif", "cache", str(traces / "tpcc_small.disksim"), "--twins", "3"]
    res = runner.invoke(app, [*args, "--json"])
    assert res.exit_code == 0, res.output
    d = json.loads(res.output)
    table = runner.invoke(app, args, terminal_width=200)
    printed = "no closer to the original's than the uniform baseline's" in table.output
    assert printed == (d["twin_max_error"] >= d["uniform_max_error"])
    assert printed  # measured: .186 against .141 over 12 twins (.185 and .139 before near requests)
    # ... in response time only: the cache saves the twin the original's disk work (busy-time
    # curves .011 apart, the baseline's .015) while the response-time curves are .20 apart.
    # TPC-C's twin serves its reads alone in the original's time (6.02 ms each), but they
    # arrive more bunched and wait longer (7.80 against 7.25 ms; docs/model.md)
    assert d["twin_max_busy_error"] < 0.0125 < d["uniform_max_busy_error"] < 0.05
    assert d["twin_max_error"] > 0.1
    assert d["busy_curves"]["original"][0] == 1.0 and d["busy_curves"]["original"][-1] > 1.5
    service, alone = d["reads_alone_service_ms"], d["reads_alone_ms"]
    assert service["twin"] == pytest.approx(service["original"], rel=0.005)
    assert alone["twin"] > 1.05 * alone["original"] > service["original"]
    flat = " ".join(table.output.split())  # the console wraps its lines
    assert "in busy time: twin 0.011, uniform baseline 0.015" in flat
    assert "the twin does carry the disk work this cache saves" in flat
    assert "original 7.25 ms (6.02), twin 7.78 ms (6.02)" in flat


def test_auto_twins_come_in_rounds_within_the_request_budget() -> None:
    from iotwin.errors import IotwinError
    from iotwin.whatif import twin_rounds

    # MSR's 1,000 requests up to the cap of 384; cloudPhysics' 113,872 up to 17 (2M requests)
    assert twin_rounds(None, 1_000) == [3, 6, 12, 24, 48, 96, 192, 384]
    assert twin_rounds(None, 113_872) == [3, 6, 12, 17]
    # long traces: the budget's few twins (a 10M-request trace one long twin)
    assert [twin_rounds(None, n) for n in (500_000, 1_000_000, 10**7)] == [[3, 4], [2], [1]]
    assert twin_rounds(3, 10**7) == [3]  # a count given is the count
    with pytest.raises(IotwinError, match="expected 1 or more"):
        twin_rounds(0, 10)


def test_confidence_half_widths_and_precision_by_hand() -> None:
    from iotwin.whatif import half_width, precise

    # sd 1, 3 values: Student's t at 2 degrees of freedom, 4.3027 (tables), over sqrt(3)
    assert half_width([1.0, 2.0, 3.0]) == pytest.approx(4.3027 / 3**0.5, rel=1e-4)
    assert half_width([5.0]) is None and half_width([2.0, 2.0]) == 0.0
    assert precise([[10.0, 10.0, 10.0]])  # no spread
    assert not precise([[1.0]])  # one value says nothing of the spread
    assert not precise([[99.0, 100.0, 101.0]])  # +- 2.48 around 100: wider than 2%
    assert precise([[999.0, 1000.0, 1001.0]])  # +- 2.48 around 1000
    assert not precise([[999.0, 1000.0, 1001.0], [99.0, 100.0, 101.0]])  # every one must be


def test_replicate_adds_rounds_until_precise() -> None:
    from iotwin.whatif import replicate

    def study(spread_until: int, swing: float = 10.0, twins: int | None = None) -> tuple:
        """A figure of 100, +-`swing` for seeds below `spread_until`, then exactly 100."""
        values: list[float] = []

        def run(seeds: list[int]) -> None:
            values.extend(100.0 + (swing * (-1) ** s if s < spread_until else 0.0) for s in seeds)

        seeds, reached = replicate(twins, 1_000, 7, run, lambda: [values])
        return seeds, reached, values

    # no spread: the first round (seeds 7-9) is precise
    seeds, reached, _ = study(0)
    assert seeds == [7, 8, 9] and reached
    # +-10 on seeds 7..10 (4 values): 6 twins have sd 8.94 (t 2.5706: +-9.4), 12 twins sd 6.03
    # (t 2.2010: +-3.8), 24 twins sd 4.17 (t 2.0687: +-1.76, within 2% of 100)
    seeds, reached, values = study(11)
    assert seeds == list(range(7, 31)) and reached and len(values) == 24
    # never precise (+-50 to the end: +-5.0 at 384 twins): the cap, said so
    seeds, reached, _ = study(10**6, swing=50.0)
    assert len(seeds) == 384 and not reached
    # a count given runs once and counts as what was asked
    seeds, reached, _ = study(10**6, swing=50.0, twins=5)
    assert seeds == [7, 8, 9, 10, 11] and reached


def test_one_twin_cli_and_bad_counts() -> None:
    res = runner.invoke(app, ["whatif", "cache", str(SAMPLE), "--json", "--twins", "1"])
    assert res.exit_code == 0, res.output
    d = json.loads(res.output)
    assert d["twins"] == 1 and d["seeds"] == [0]
    assert d["ranges"]["twin"]["low"] == d["curves"]["twin"] == d["ranges"]["twin"]["high"]
    bad = runner.invoke(app, ["whatif", "cache", str(SAMPLE), "--twins", "-2"])
    assert bad.exit_code != 0 and "--twins '-2': expected 1 or more" in str(bad.exception)


def test_dirty_share_is_the_caches_and_checked() -> None:
    # dirty=1 never cleans: the cache before session 18 (measured 7.50x at 13 MiB against
    # 15.89x with the default 0.5; 28.0x and 28.1x at 104 MiB, the whole footprint)
    args = ["whatif", "cache", str(SAMPLE), "--json", "--twins", "1", "--sizes", "13M,104M"]
    kept, cleaned = (runner.invoke(app, [*args, "--dirty", d]) for d in ("1", "0.5"))
    assert kept.exit_code == cleaned.exit_code == 0, kept.output + cleaned.output
    k, c = (json.loads(r.output) for r in (kept, cleaned))
    assert k["cache"].endswith("cleaned to 100% dirty") and "50%" in c["cache"]
    assert k["sizes"] == [13 << 20, 104 << 20]  # no bare disk asked for: none computed
    assert c["curves"]["original"][0] > 1.5 * k["curves"]["original"][0]
    assert c["curves"]["original"][1] == pytest.approx(k["curves"]["original"][1], rel=0.05)
    bad = runner.invoke(app, ["whatif", "cache", str(SAMPLE), "--dirty", "1.5"])
    assert bad.exit_code != 0 and "must be from 0 to 1, got '1.5'" in str(bad.exception)


def render_text(d: dict) -> str:
    from rich.console import Console

    from iotwin.whatif.cache import render

    console = Console(record=True, width=200)
    render(d, console)
    return console.export_text()


def test_reads_alone_show_the_twins_broken_read_runs(traces: Path) -> None:
    import polars as pl

    from iotwin.sim import simulate
    from iotwin.trace import Trace

    trace = traces / "cloudPhysicsIO.vscsi"
    args = ["whatif", "cache", str(trace), "--twins", "1", "--sizes", "0,128M"]
    res = runner.invoke(app, [*args, "--json"])
    assert res.exit_code == 0, res.output
    d = json.loads(res.output)
    alone = d["reads_alone_ms"]
    original = iotwin.load_trace(trace)
    reads = Trace(original.df.filter(pl.col("op") == 0), original.meta)
    assert reads.df.height == 46_974  # 46,974 / 113,872 = .412516: the reference .41252
    expected = simulate(reads, "hdd-7200", d["intensity"], 0).mean_ms
    assert alone["original"] == pytest.approx(expected, rel=1e-12)
    # the original's reads resume their run after each write and ride the disk's read-ahead
    # (2.8 ms); the twin's, placed after the writes, do not (measured 1.83x), while the whole
    # mix of both takes the same time (5.5 against 5.4 ms): the cache curve's gap
    assert alone["twin"] > 1.5 * alone["original"]
    assert alone["uniform"] > alone["original"]
    # of it, the disk's busy time per read: the twin's reads cost it most in service (4.62
    # against 2.49 ms), not in waiting (0.58 against 0.34 ms)
    service = d["reads_alone_service_ms"]
    busy = simulate(reads, "hdd-7200", d["intensity"], 0).busy_ns / 1e6 / reads.df.height
    assert service["original"] == pytest.approx(busy, rel=1e-12)
    assert service["original"] < alone["original"]
    assert service["twin"] - service["original"] > 1.5
    table = runner.invoke(app, args, terminal_width=200)
    assert "reads alone on the bare disk, mean response (of it service): original" in table.output
    assert "the twin's reads alone take" in table.output and "underestimated" in table.output
    flat = " ".join(table.output.split())  # the console wraps its lines
    assert "in service and" in flat and "they are less local" in flat


def test_reads_alone_caution_by_hand() -> None:
    from iotwin.whatif.cache import reads_alone_caution

    def doc(original: float | None, twin: float | None, write: str = "back") -> dict:
        return {
            "cache": f"ssd-sata lru write-{write}",
            "write": write,
            "reads_alone_ms": {"original": original, "twin": twin},
        }

    assert reads_alone_caution(doc(7.25, 7.86)) is None  # TPC-C: 1.08x, inside 10%
    assert "1.13x" in (reads_alone_caution(doc(4.61, 5.22)) or "")  # Tencent
    assert "overestimated" in (reads_alone_caution(doc(4.0, 3.0)) or "")
    assert reads_alone_caution(doc(4.61, 9.0, write="through")) is None  # writes reach the disk
    assert reads_alone_caution(doc(None, 5.0)) is None  # a write-only original
    assert reads_alone_caution({"reads_alone_ms": {"twin": 5.0}}) is None  # a model
    # a study from before the `write` field says write-back in its cache's text only
    older = {"cache": "ssd-sata lru write-back", "reads_alone_ms": {"original": 4.0, "twin": 6.0}}
    assert "they are less local" in (reads_alone_caution(older) or "")
    # which part differs: MSR's twin serves a read in 4.36 against 4.00 ms but waits 37.6
    # against 21.3 ms (+0.36 and +16.3 ms); Tencent's never waits, its service is +0.61 ms
    msr = {**doc(25.28, 41.97), "reads_alone_service_ms": {"original": 4.00, "twin": 4.36}}
    assert "+0.36 ms a read in service and +16.33 ms in waiting: they arrive more bunched" in (
        reads_alone_caution(msr) or ""
    )
    tencent = {**doc(4.61, 5.22), "reads_alone_service_ms": {"original": 4.61, "twin": 5.22}}
    assert "+0.61 ms a read in service and +0.00 ms in waiting: they are less local" in (
        reads_alone_caution(tencent) or ""
    )
    calmer = {**doc(8.0, 6.0), "reads_alone_service_ms": {"original": 5.0, "twin": 5.0}}
    assert "they arrive less bunched" in (reads_alone_caution(calmer) or "")


def test_plot_puts_the_busy_time_speedups_beside(tmp_path: Path) -> None:
    import struct

    png = tmp_path / "cache.png"
    args = ["whatif", "cache", str(SAMPLE), "--twins", "1", "--sizes", "0,13M", "--plot", str(png)]
    res = runner.invoke(app, args)
    assert res.exit_code == 0, res.output
    # two panels of 6.4 x 4 inches at 120 dpi: the PNG header's width and height
    width, height = struct.unpack(">II", png.read_bytes()[16:24])
    assert (width, height) == (2 * 768, 480)


def test_busy_line_shows_every_cached_size() -> None:
    from iotwin.whatif.cache import busy_line

    # a study asked for 13M and 104M only has no bare disk among its sizes: both show
    doc = {"sizes": [13 << 20, 104 << 20], "busy_curves": {"original": [1.5, 2.0]}}
    assert busy_line(doc).endswith("original 1.50 2.00")
    doc = {"sizes": [0, 13 << 20], "busy_curves": {"original": [1.0, 1.5]}}
    assert busy_line(doc).endswith("original 1.50")


def test_busy_caution_by_hand() -> None:
    from iotwin.whatif.cache import busy_caution

    def doc(original: list[float], twin: list[float]) -> dict:
        sizes = [0, 16 << 20, 32 << 20][: len(original)]
        return {"sizes": sizes, "busy_curves": {"original": original, "twin": twin}}

    assert busy_caution(doc([1.0, 0.96, 1.6], [1.0, 0.97, 1.6])) is None  # TPC-C
    assert busy_caution(doc([1.0, 1.11, 2.3], [1.0, 1.03, 2.26])) is None  # Tencent, within 1.25x
    less = busy_caution(doc([1.0, 9.49, 68.3], [1.0, 6.2, 22.5])) or ""
    assert "less work" in less and "22.50 against 68.30 at 32 MiB" in less
    assert "more work" in (busy_caution(doc([1.0, 1.2], [1.0, 2.0])) or "")
    assert busy_caution({"sizes": [0], "busy_curves": {"twin": [1.0]}}) is None  # a model
    # a disk left idle under the cache: no ratio there, the other sizes still compared
    idle = doc([1.0, 1.1, float("inf")], [1.0, 3.0, float("inf")])
    assert "3.00 against 1.10 at 16 MiB" in (busy_caution(idle) or "")


def test_tencent_twin_curve_and_what_its_runs_at_one_instant_give(traces: Path) -> None:
    """Tencent stamps whole seconds, so the merge of its 2,038 volumes at one instant is its
    twin's order on the disk. With odds by each volume's run so far the twin's curve comes
    to .028 of the original's at most (12 twins); odds blind to the run leave it .077 off, its
    reads from one volume in runs too short to keep the disk's head near (docs/model.md). The
    device's cache keeps each volume's blocks apart (before, equal offsets of different
    volumes were one block to it: the original's curve .050 from the twin's, .100 blind)."""
    from iotwin.formats import ReadOptions
    from iotwin.model import Model, fit
    from iotwin.whatif import Workload
    from iotwin.whatif.cache import study

    trace = iotwin.load_trace(
        traces / "tencent_cbs_excerpt.csv.bz2", opts=ReadOptions(stream_by="volume")
    )
    model = fit(trace)
    ties = {k: v for k, v in model.doc["ties"].items() if k != "runs"}
    blind = Model.from_doc({**model.doc, "ties": ties})
    runs, before = (study(Workload("tencent", trace, m), None, twins=12) for m in (model, blind))
    # measured: .0279 and .0768; the uniform baseline .974, its speedups far above
    assert runs["twin_max_error"] < 0.04 < 0.06 < before["twin_max_error"]
    assert runs["uniform_max_error"] > 0.9
    orig = runs["curves"]["original"]
    # (with volumes aliased in the cache: 1.790, 1.930, 2.179, 2.568)
    assert orig[1:] == pytest.approx([1.732, 1.836, 2.115, 2.446], abs=0.001)
    # the twin's reads alone cost the disk 4.69 ms (before: 4.75; the original's 4.61)
    alone = runs["reads_alone_ms"]
    assert alone["twin"] < before["reads_alone_ms"]["twin"]
    assert alone["twin"] == pytest.approx(alone["original"], rel=0.03)
    # its volumes share a file-system layout: 8.0% of the original's requests start on a
    # block another volume's start on, its twin's 0.5%
    shared = runs["shared_offsets"]
    assert shared["original"] == pytest.approx(0.0800, abs=0.0005)
    assert shared["twin"] < 0.01 and shared["uniform"] < 0.01


def test_shared_offsets_between_volumes_and_the_cache_keeping_them_apart() -> None:
    import polars as pl

    from iotwin.devices import resolve
    from iotwin.sim import simulate, volume_spaces
    from iotwin.trace import CANONICAL_SCHEMA
    from iotwin.whatif.cache import shared_offsets

    def trace(rows: list[tuple[int, int]], stream_by: str = "volume", op: int = 0) -> iotwin.Trace:
        df = pl.DataFrame(
            {
                "ts_ns": [i * 10_000_000 for i in range(len(rows))],
                "stream": [r[0] for r in rows],
                "op": [op] * len(rows),
                "offset": [r[1] for r in rows],
                "size": [4096] * len(rows),
            },
            schema=CANONICAL_SCHEMA,
        )
        return iotwin.Trace(df, iotwin.TraceMeta(stream_by=stream_by))

    # volume 1 starts on blocks 0, 1, 2 (twice); volume 2 on blocks 2 (at 512 bytes in) and 5
    rows = [(1, 0), (1, 4096), (1, 8192), (1, 8192), (2, 8704), (2, 20480)]
    assert shared_offsets(trace(rows)) == pytest.approx(3 / 6)
    # threads of one process share one address space: nothing shared between spaces
    assert shared_offsets(trace(rows, stream_by="thread")) is None
    assert shared_offsets(trace([(1, 0), (1, 0)])) is None

    # the tiered device's cache keys each volume's blocks apart: three volumes reading block
    # 7 miss three times, then hit three times; threads of one space miss once and hit five
    tiered = resolve("tiered:size=1M,over=hdd-7200,ssd=ssd-sata")
    reads = [(v, 7 * 4096) for v in (4, 9, 2, 4, 9, 2)]
    volumes = simulate(trace(reads), tiered)
    threads = simulate(trace(reads, stream_by="thread"), tiered)
    assert (volumes.cache_hits, volumes.cache_misses) == (3, 3)
    assert (threads.cache_hits, threads.cache_misses) == (5, 1)
    assert list(volume_spaces(trace(reads))) == [1, 2, 0, 1, 2, 0]
    assert volume_spaces(trace(reads, stream_by="thread")) is None
    # writes of two volumes to one offset are two blocks, of one volume one (a one-block cache)
    one_block = resolve("tiered:size=4K,over=hdd-7200")
    writes = [(1, 0), (2, 0)]
    assert simulate(trace(writes, op=1), one_block).cache_misses == 2
    assert simulate(trace(writes, "thread", 1), one_block).cache_misses == 1


def test_msr_twin_with_its_bursts_follows_the_original(traces: Path, tmp_path: Path) -> None:
    """msr_hm0's original bursts (runs of requests under 5 ms apart) hold 3 requests at the
    median and 35 at most; its twin's reach 40-134, whose reads wait behind each other. Fitted
    with its bursts (`--bursts`), each fluctuation window of the twin takes the lengths of the
    bursts that began in that window of the original (its flushes of 23-35 writes in window
    0, its reads' bursts of at most 19 in window 9) and the shape of its gaps: over 24 twins
    the curve comes within .722 of the original's (3.27 3.24 3.20 3.36 against 3.35 2.94
    2.48 3.36; without bursts 1.562), nearer than the uniform baseline timed alike (1.235),
    its reads alone 19.7 ms against the original's 25.3 (without: 37.7). Session 48's
    bursts, the stream's lengths in every window, came .455 off with a flat curve (2.91-2.93)
    and put the bare disk's mean 9.6% under the original's (docs/model.md, "bursts")."""
    path = traces / "msr_hm0_excerpt.csv"
    runs = {}
    for flag in ("--no-bursts", "--bursts"):
        args = ["whatif", "cache", str(path), "--twins", "24", flag, "--json"]
        res = runner.invoke(app, args)
        assert res.exit_code == 0, res.output
        runs[flag] = json.loads(res.output)
    plain, bursts = runs["--no-bursts"], runs["--bursts"]
    assert plain["curves"]["original"] == bursts["curves"]["original"]
    assert plain["twin_max_error"] == pytest.approx(1.562, abs=5e-4)
    assert bursts["twin_max_error"] == pytest.approx(0.722, abs=5e-4)
    assert bursts["twin_max_error"] < bursts["uniform_max_error"]
    assert bursts["twin_max_error"] < plain["twin_max_error"]
    # both ends of the curve within .09 of the original's (without bursts: 1.45 and 1.56 off)
    ends = [abs(bursts["curves"]["twin"][i] - bursts["curves"]["original"][i]) for i in (1, -1)]
    assert max(ends) < 0.09
    alone = {k: r["reads_alone_ms"]["twin"] for k, r in runs.items()}
    assert alone["--bursts"] < bursts["reads_alone_ms"]["original"] < alone["--no-bursts"]
    # the model keeps the bursts: 181 of them, 62 of a single request, none above 35; window
    # 0 holds the flushes (23, 26, 33 and 35 writes), window 9's reads none above 19
    model = tmp_path / "msr.json"
    res = runner.invoke(app, ["fit", str(path), "-o", str(model), "--bursts"])
    assert res.exit_code == 0, res.output
    doc = json.loads(model.read_text())
    stream = doc["streams"][0]
    buckets = stream["bursts"]
    assert sum(c for _, _, c in buckets) == 181 and buckets[0] == [1, 2, 62]
    assert max(hi for _, hi, _ in buckets) == 36
    by_window = dict((w, b) for w, b in stream["window_bursts"])
    assert sum(c for b in by_window.values() for _, _, c in b) == 181
    assert [lo for lo, _, _ in by_window[0] if lo > 4] == [23, 26, 33, 35]
    assert max(lo for lo, _, _ in by_window[9]) == 19
    assert doc["burst_gap_ns"] == 5_000_000
    # `show` says what the model keeps
    shown = runner.invoke(app, ["show", str(model)])
    text = " ".join(shown.output.split())  # the console wraps long lines
    assert shown.exit_code == 0
    assert "bursts (runs under 5 ms apart): 181, median 3, largest 35" in text
    assert "largest per window: 35, 34, 3, 29, 19, 30, 3, 32, 4, 19, -" in text
    # bursts are fitted from a trace: a model file or a dataset cannot take them
    res = runner.invoke(app, ["whatif", "cache", str(model), "--bursts"])
    assert res.exit_code != 0 and "--bursts are fitted from its trace" in str(res.exception)


MS = 1_000_000


def two_bursty_streams() -> iotwin.Trace:
    """Stream 0 at 0, 1, 2 ms, then 10, 11 ms (an 8 ms gap ends the first burst); stream 1 at
    0 and 5 ms (5 ms is already long)."""
    import polars as pl

    from iotwin.trace import TraceMeta

    rows = [(0, 0), (0, 1), (0, 2), (0, 10), (0, 11), (1, 0), (1, 5)]
    df = pl.DataFrame(
        {
            "ts_ns": [t * MS for _, t in rows],
            "stream": pl.Series([s for s, _ in rows], dtype=pl.UInt32),
            "op": pl.Series([0] * len(rows), dtype=pl.UInt8),
            "offset": pl.Series([0] * len(rows), dtype=pl.UInt64),
            "size": pl.Series([4096] * len(rows), dtype=pl.UInt32),
        }
    ).sort("ts_ns", maintain_order=True)
    return iotwin.Trace(df, TraceMeta())


def test_burst_lengths_by_hand() -> None:
    from iotwin.model import burst_lengths

    # stream 0: bursts of 3 and 2; stream 1: two bursts of 1
    got = burst_lengths(two_bursty_streams())
    assert {k: v.tolist() for k, v in got.items()} == {0: [3, 2], 1: [1, 1]}


def test_window_bursts_and_gaps_by_hand() -> None:
    from iotwin.model import GAP_QUANTILES, add_bursts

    # windows of 10 ms: stream 0's burst of 3 in window 0, its burst of 2 in window 1
    ms = MS
    doc = {
        "window_ns": 10 * ms,
        "streams": [{"id": 0, "windows": [3, 2]}, {"id": 1, "windows": [2]}],
    }
    add_bursts(doc, two_bursty_streams())
    first, second = doc["streams"]
    assert first["window_bursts"] == [[0, [[3, 4, 1]]], [1, [[2, 3, 1]]]]
    # each gap counts in the window its later request falls in: 1 and 1 ms in window 0, 8
    # and 1 ms in window 1
    q = GAP_QUANTILES
    assert first["window_gaps"] == [[0, [ms] * q, []], [1, [ms] * q, [8 * ms] * q]]
    assert second["bursts"] == [[1, 2, 2]] and second["window_gaps"] == [[0, [], [5 * ms] * q]]
    assert doc["burst_gap_ns"] == 5 * ms


def test_types_pool_their_members_bursts(traces: Path) -> None:
    """With --types each type's sub-model stands for several streams, and each of its twin's
    streams is one of them: it keeps its members' own bursts pooled (Tencent's 2,206 bursts
    over 2,038 volumes, in 4 types), per window too, and the same seed gives the same twin."""
    from iotwin.formats import ReadOptions
    from iotwin.model import burst_lengths, fit

    trace = iotwin.load_trace(
        traces / "tencent_cbs_excerpt.csv.bz2", opts=ReadOptions(stream_by="volume")
    )
    model = fit(trace, types=True, bursts=True)
    per_volume = burst_lengths(trace)
    held = {s["type"]: sum(c for *_, c in s["bursts"]) for s in model.doc["streams"]}
    assert sum(held.values()) == sum(len(v) for v in per_volume.values()) == 2206
    assert len(held) == 4 and all(s.get("window_gaps") for s in model.doc["streams"])
    for s in model.doc["streams"]:
        windows = sum(c for _, b in s["window_bursts"] for *_, c in b)
        assert windows == held[s["type"]]
    twin = model.synth(requests=len(trace), seed=1)
    again = model.synth(requests=len(trace), seed=1)
    assert len(twin) == len(trace) and twin.df.equals(again.df)


def test_a_broken_bursts_model_is_refused_clearly(traces: Path, tmp_path: Path) -> None:
    """A model whose windows' gaps are not numbers fails its schema, naming the file and the
    place; one naming a window the stream does not have is refused naming the field; neither
    leaves an output behind."""
    model, out = tmp_path / "msr.json", tmp_path / "twin.parquet"
    path = traces / "msr_hm0_excerpt.csv"
    assert runner.invoke(app, ["fit", str(path), "-o", str(model), "--bursts"]).exit_code == 0
    good = json.loads(model.read_text())
    bad = json.loads(model.read_text())
    bad["streams"][0]["window_gaps"][0] = [0, "x", []]
    model.write_text(json.dumps(bad))
    res = runner.invoke(app, ["synth", str(model), "-o", str(out)])
    assert res.exit_code != 0
    assert f"{model}: at streams/0/window_gaps/0/1" in str(res.exception)
    bad = good
    bad["streams"][0]["window_bursts"][0][0] = 99
    model.write_text(json.dumps(bad))
    res = runner.invoke(app, ["synth", str(model), "-o", str(out)])
    assert res.exit_code != 0
    assert "window_bursts: window 99 is past the stream's 11 windows" in str(res.exception)
    assert not out.exists() and list(tmp_path.iterdir()) == [model]
