"""The model: fit, synthesize, validate (issue: hierarchical Markov model and fidelity).

Real shared traces, a fixed seed, and the bars of seed 000's validation (Table IV) plus
iotwin's own (miss ratios, uniform baseline comparison)."""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import warnings
from collections import Counter
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from reference import SHARED_STREAMS, canonical, issue_bar_misses, metrics, reuse_by_op
from rich.console import Console
from typer.testing import CliRunner

import iotwin
from iotwin.cli import app
from iotwin.errors import IotwinError
from iotwin.formats import ReadOptions
from iotwin.formats.base import OP_READ
from iotwin.model import Model, ShortTraceWarning, check_model, fit, transition_counts
from iotwin.show import human_size, render
from iotwin.trace import write_trace
from iotwin.validate import long_run_share, validate

SEED = 7
SHARED = SHARED_STREAMS
# The LRU miss-ratio bar (0.05 at 1..50% of the footprint) holds on MSR, Tencent and DiskSim;
# bounds are what the twin achieves, so a regression shows. Resumed runs (a stream picking up
# one of its recent runs where it ended) brought MSR from 0.06 to 0.03. Known gap on
# cloudPhysics: the twin's footprint is 2.3x the original's (the trace re-reads old runs on
# their old request boundaries, the twin's re-reads drift onto fresh blocks), so at 50% of the
# footprint the twin misses more. In-leaf jumps (random requests jump from the previous end by
# the original's distances) took MSR's deviations from .022 to .039 at most, Tencent's from
# .023 to .007. Stream extents (random requests stay inside the range their stream used) moved
# cloudPhysics' largest small-cache deviation from .030 to .032, TPC-C's from .009 to .011,
# Tencent's from .007 to .013. Resumed re-scans apart from resumed runs of new data (each
# resumes a run of its own data, and a re-scan with none open re-reads old data at its
# distance) moved cloudPhysics from .031-.034 / .276 at 50% to .032-.039 / .229, MSR's largest
# from .025 to .026 (its sum from .099 to .092). Random requests at the original's 4 KiB
# phase (93% of MSR's start on a block; the twin's had started at any 512-byte step, so
# most 4 KiB requests covered two blocks and neighbours shared one) took MSR's largest
# from .025 to .058, past the issue's .05: a twin of 4 KiB requests no longer re-uses the
# blocks its misaligned neighbours half-touched, and MSR's re-references, two in three of
# which re-issue an old request whole, find fewer old blocks (docs/model.md). TPC-C's largest
# went from .014 to .016. Re-references that count every block a request spans (they had
# known only each request's first block, so a request starting inside an old, larger one was
# new data and its twin put it on fresh blocks) took cloudPhysics from -.035 to -.042 at small
# caches and +.224 at 50% to -.053 to -.074 and +.068 (its twin's footprint from 2.3x the
# original's to 1.8x), MSR's largest from .058 to .042 (within the issue's .05 again),
# Tencent's from .016 to .022 and TPC-C's from .016 to .004. Reads' and writes' distances
# apart (cloudPhysics' writes re-reference at a median of 416 blocks, its reads at 65,536)
# took cloudPhysics to .031-.055 at small caches and .067 at 50%; calibrated, its twin is
# within the .05 bar (tests/test_calibrate.py).
MISS_RATIO_BOUND = {
    "cloudPhysicsIO.vscsi": [0.07] * 6,
    "msr_hm0_excerpt.csv": [0.05] * 6,
    "tencent_cbs_excerpt.csv.bz2": [0.05] * 6,
    "tpcc_small.disksim": [0.01] * 6,
}


@pytest.fixture(scope="module")
def twins(traces: Path) -> dict[str, tuple[iotwin.Trace, Model, dict, dict]]:
    out = {}
    for name, stream_by in SHARED.items():
        trace = iotwin.load_trace(traces / name, opts=ReadOptions(stream_by=stream_by))
        model = fit(trace, levels=2)
        twin = model.synth(requests=trace.df.height, seed=SEED)
        uniform = model.synth(requests=trace.df.height, seed=SEED, baseline="uniform")
        out[name] = (trace, model, validate(trace, twin), validate(trace, uniform))
    return out


@pytest.mark.parametrize("name", list(SHARED))
def test_twin_meets_the_feature_bars(twins: dict, name: str) -> None:
    """The plain fit meets every bar of the issue but cloudPhysics' miss ratios, which its
    calibrated extension meets (tests/test_calibrate.py)."""
    trace, _, report, uniform = twins[name]
    missed = ["miss ratios"] if name == "cloudPhysicsIO.vscsi" else []
    assert issue_bar_misses(trace, report, uniform) == missed


REUSE = {"msr_hm0_excerpt.csv": (0.0573, 0.5000), "tencent_cbs_excerpt.csv.bz2": (0.1420, 0.0330)}


@pytest.mark.parametrize("name", list(REUSE))
def test_reuse_by_operation_is_counted_per_block(twins: dict, name: str) -> None:
    trace, _, report, uniform = twins[name]
    expected = reuse_by_op(trace)
    for metric, value in expected.items():
        assert report["metrics"][metric]["original"] == pytest.approx(value, abs=1e-12)
    # measured: MSR re-reads .057 of its read blocks and rewrites .500; Tencent (each
    # volume its own space) .142 and .033. The uniform baseline re-uses almost nothing.
    measured = REUSE[name]
    assert (expected["read_reuse"], expected["write_reuse"]) == pytest.approx(measured, abs=5e-4)
    assert max(uniform["metrics"][m]["synthetic"] or 0.0 for m in expected) < 0.01


def test_long_run_share_counts_runs_per_stream() -> None:
    """Stream 0 writes a run of 8 requests, interleaved with stream 1's run of 7 and then a
    request that continues stream 0's run but is stream 1's: only stream 0's 8 count."""
    rows = []
    for i in range(8):
        rows.append((0, 1, 4096 * i, 4096))
        if i < 7:
            rows.append((1, 0, 1 << 30 | 512 * i, 512))
    rows.append((1, 0, 4096 * 8, 4096))  # where stream 0 ended: not stream 1's run
    trace = iotwin.Trace(canonical(rows, list(range(len(rows)))), iotwin.TraceMeta())
    assert long_run_share(trace) == 8 / 16


# measured: 15.5% of cloudPhysics' requests sit in sequential runs of 8 or more, which the
# Markov walk (runs of geometric length) cuts into short ones: its twin has 0.5% (0.7% since
# each window keeps its share of reads: a steered walk's categories come in another order,
# and TPC-C's few long runs, 0.3% of its twin's requests, went to none; since cold requests
# near the previous end are a kind of their own, 0.17% again, and Tencent's 0.71% -> 0.78%).
LONG_RUNS = {
    "cloudPhysicsIO.vscsi": (0.1553, 0.0072),
    "msr_hm0_excerpt.csv": (0.0, 0.0),
    "tencent_cbs_excerpt.csv.bz2": (0.0196, 0.0078),
    "tpcc_small.disksim": (0.0081, 0.0017),
}


@pytest.mark.parametrize("name", list(SHARED))
def test_long_sequential_runs_are_reported(twins: dict, name: str) -> None:
    _, _, report, _ = twins[name]
    m = report["metrics"]["long_run_share"]
    assert (m["original"], m["synthetic"]) == pytest.approx(LONG_RUNS[name], abs=5e-4)
    assert m["pass"] is (name != "cloudPhysicsIO.vscsi")


# Where requests start inside their 4 KiB block (validate's offset_phase_tvd). Before random
# requests kept their stream's phase, the twins (levels 2, seed 7) were .704 (cloudPhysics),
# .781 (MSR), .217 (Tencent) and .639 (TPC-C) from the originals, as far as the uniform
# baseline. cloudPhysics keeps .137: 15.6% of its requests start 2,048 bytes into a block, 2%
# of its twin's (its sequential and re-referencing requests inherit their phase). Since
# re-references count every block a request spans, fewer requests are random (cold), so the
# phase counts rest on fewer of them: cloudPhysics .140, MSR .020, Tencent .012. With reads'
# and writes' distances apart, MSR's twin is .030.
PHASE_BOUND = {
    "cloudPhysicsIO.vscsi": 0.15,
    "msr_hm0_excerpt.csv": 0.035,
    "tencent_cbs_excerpt.csv.bz2": 0.015,
    "tpcc_small.disksim": 0.01,
}


@pytest.mark.parametrize("name", list(SHARED))
def test_random_requests_start_at_the_originals_4k_phase(twins: dict, name: str) -> None:
    _, _, report, uniform = twins[name]
    twin = report["metrics"]["offset_phase_tvd"]
    assert twin["deviation"] <= PHASE_BOUND[name]
    assert twin["pass"] is (name != "cloudPhysicsIO.vscsi")
    # the uniform baseline keeps only the alignment (Tencent: most volumes are 4 KiB-aligned)
    assert uniform["metrics"]["offset_phase_tvd"]["deviation"] > 0.2


# Jumps of each operation among themselves (validate's read_jump_tvd and write_jump_tvd),
# measured on these twins (levels 2, seed 7): (whole trace, reads, writes); MSR's were .118,
# .217 and .169, Tencent's .078, .062 and .089 before near cold requests (docs/model.md,
# "Measured: near requests", for seeds 0 and 1 as well). cloudPhysics'
# whole-trace jumps are .21 off but its reads' .71: it interleaves a read run and a write
# run (70% of its reads after a write start where the previous read ended; docs/model.md,
# "Reads between writes"), which its twin, one walk over both, does not.
OP_JUMP_BOUND = {
    "cloudPhysicsIO.vscsi": (0.22, 0.72, 0.48),
    "msr_hm0_excerpt.csv": (0.14, 0.18, 0.19),
    "tencent_cbs_excerpt.csv.bz2": (0.08, 0.07, 0.10),
    "tpcc_small.disksim": (0.05, 0.04, 0.06),
}


@pytest.mark.parametrize("name", list(SHARED))
def test_each_operations_jumps_against_the_uniform_baseline(twins: dict, name: str) -> None:
    _, _, report, uniform = twins[name]
    keys = ("jump_distance_tvd", "read_jump_tvd", "write_jump_tvd")
    twin = [report["metrics"][k] for k in keys]
    assert all(m["deviation"] <= b for m, b in zip(twin, OP_JUMP_BOUND[name], strict=True))
    assert all(m["pass"] is (m["deviation"] <= 0.10) for m in twin)
    # the baseline's uniform offsets jump anywhere: further off for every operation
    assert all(
        uniform["metrics"][k]["deviation"] > m["deviation"] for k, m in zip(keys, twin, strict=True)
    )
    if name == "cloudPhysicsIO.vscsi":
        assert twin[1]["deviation"] > 3 * twin[0]["deviation"]


def test_op_jump_shares_by_hand() -> None:
    import polars as pl

    from iotwin.trace import TraceMeta
    from iotwin.validate import op_jump_shares, op_switch_share

    # stream 0: reads at 0 (4 KiB), 4096 (sequential: 0), 1 MiB (+1,040,384: 2^19 <= d <
    # 2^20, bucket 20); a write between them does not break the reads' run. Stream 1: reads
    # at 8192 and 0 (-12,288: bucket -14). Stream 2: one read (no jump).
    rows = [
        (0, 0, 0, 0, 4096),
        (1, 0, 1, 999_424, 4096),
        (2, 1, 0, 8192, 4096),
        (3, 0, 0, 4096, 4096),
        (4, 1, 0, 0, 4096),
        (5, 0, 0, 1 << 20, 4096),
        (6, 2, 0, 0, 512),
    ]
    df = pl.DataFrame(
        rows,
        schema={"ts_ns": pl.Int64, "stream": pl.UInt32, "op": pl.UInt8, "offset": pl.UInt64,
                "size": pl.UInt32},
        orient="row",
    )  # fmt: skip
    trace = iotwin.Trace(df, TraceMeta())
    assert op_jump_shares(trace, 0) == {0: 1 / 3, 20: 1 / 3, -14: 1 / 3}
    assert op_jump_shares(trace, 1) is None  # one write: no jump

    # stream 0 goes read, write, read, read (2 of its 3 pairs switch), stream 1 read, read (0
    # of 1), stream 2 has no pair: 2 of 4
    assert op_switch_share(trace) == 2 / 4
    assert op_switch_share(iotwin.Trace(df.filter(pl.col("stream") == 2), TraceMeta())) is None


# Switches between reads and writes (validate's op_switch_share) on these twins: (original,
# twin). The walk carries no operation, so its switches follow from how its leaves'
# transitions mix reads and writes: every twin switches more often than its original, and
# misses the 0.05 bar (msr_hm0 by .11: its original reads and writes in bursts of one
# operation, 180 of its 181 bursts of requests under 5 ms apart; its twins' 44-51 of 183-190
# mix them; default fits, seeds 0-2), though each is closer than the uniform baseline. docs/model.md, "near requests".
OP_SWITCHES = {
    "cloudPhysicsIO.vscsi": (0.3020, 0.3812),
    "msr_hm0_excerpt.csv": (17 / 999, 0.1281),
    "tencent_cbs_excerpt.csv.bz2": (0.0722, 0.1286),
    "tpcc_small.disksim": (0.3940, 0.4501),
}


@pytest.mark.parametrize("name", list(SHARED))
def test_switches_between_reads_and_writes_against_the_uniform_baseline(
    twins: dict, name: str
) -> None:
    _, _, report, uniform = twins[name]
    m, u = report["metrics"]["op_switch_share"], uniform["metrics"]["op_switch_share"]
    assert (m["original"], m["synthetic"]) == pytest.approx(OP_SWITCHES[name], abs=5e-5)
    assert m["pass"] is False and m["synthetic"] > m["original"]
    assert u["deviation"] > m["deviation"]


def test_new_data_of_a_shared_history_keeps_the_streams_4k_phase(traces: Path) -> None:
    import dataclasses

    # cloudPhysics fitted as one thread: its history is the shared one, whose new data is
    # packed from each leaf's frontier. Packed at the alignment (512 bytes), the twin's
    # phases were .785 from the original's, 80% of whose requests start 3,584 bytes into a
    # block; at a phase drawn from the stream's, .133 (seed 7), as with its own history
    original = iotwin.load_trace(traces / "cloudPhysicsIO.vscsi")
    as_thread = iotwin.Trace(original.df, dataclasses.replace(original.meta, stream_by="thread"))
    model = fit(as_thread)
    assert model.doc["reuse_scope"] == "global"
    twin = model.synth(requests=len(original), seed=SEED)
    phase = validate(as_thread, twin)["metrics"]["offset_phase_tvd"]["deviation"]
    assert phase <= 0.15


@pytest.mark.parametrize("name", list(SHARED))
def test_twin_miss_ratios_and_uniform_baseline(twins: dict, name: str) -> None:
    _, _, report, uniform = twins[name]
    twin_mr = [v["deviation"] for v in metrics(report, "miss_ratio").values()]
    assert len(twin_mr) == 6
    assert all(d <= b for d, b in zip(twin_mr, MISS_RATIO_BOUND[name], strict=True)), twin_mr
    # closer to the original than the IOMeter-like baseline on locality (on caching:
    # test_twin_caches_closer_than_the_uniform_baseline)
    twin_loc = sum(v["deviation"] for v in metrics(report, "locality_l1").values())
    base_loc = sum(v["deviation"] for v in metrics(uniform, "locality_l1").values())
    assert twin_loc < base_loc


@pytest.mark.parametrize("name", list(SHARED))
def test_twin_caches_closer_than_the_uniform_baseline(twins: dict, name: str) -> None:
    """TPC-C barely re-uses data (its log device aside): the uniform baseline's miss ratios
    are .038 from the original's in all. Its twins' were .047 on average over seeds 0-11, until
    re-references counted every block a request spans: now .009 to .019."""
    _, _, report, uniform = twins[name]
    twin_mr = sum(v["deviation"] for v in metrics(report, "miss_ratio").values())
    base_mr = sum(v["deviation"] for v in metrics(uniform, "miss_ratio").values())
    assert twin_mr < base_mr


def test_streams_at_one_instant_go_on_by_their_runs(twins: dict) -> None:
    """A Tencent volume that has gone on at an instant goes on more: after one request 26% of
    the time, after 4-7 in a row 74%. Odds blind to the run gave its twin about 40% after
    any run, so its runs of reads from one volume were short (3.1 requests, request-weighted,
    against the original's 5.9) and its next read sat near the read before less often."""
    trace, model, _, _ = twins["tencent_cbs_excerpt.csv.bz2"]
    runs = model.doc["ties"]["runs"]
    pooled = [{k: sum(c[k] for c in run.values()) for k in ("pairs", "same")} for run in runs]
    assert pooled == _runs_counted(trace.df)
    # measured
    assert pooled[0] == {"pairs": 27_569, "same": 7_129}
    assert pooled[3] == {"pairs": 6_260, "same": 4_655}
    original = _goes_on_by_run(trace.df)
    twin = model.synth(requests=trace.df.height, seed=SEED).df
    ties = {k: v for k, v in model.doc["ties"].items() if k != "runs"}
    before = (
        Model.from_doc({**model.doc, "ties": ties}).synth(requests=trace.df.height, seed=SEED).df
    )
    assert max(abs(a - b) for a, b in zip(_goes_on_by_run(twin), original, strict=True)) < 0.03
    flat = _goes_on_by_run(before)
    assert flat[0] > original[0] + 0.1 and flat[3] < original[3] - 0.2
    # so the twin's next read sits near the read before more often (seeds 0-3: 23.3% ->
    # 24.3%, the original's 26.9%; whatif cache's largest error .105 -> .052)
    assert _near_reads(twin) > _near_reads(before) + 0.005


def test_thread_weights_are_exact_per_stream(twins: dict) -> None:
    trace, model, _, _ = twins["tencent_cbs_excerpt.csv.bz2"]
    twin = model.synth(requests=trace.df.height, seed=SEED)
    counts = lambda t: dict(t.df.group_by("stream").len().iter_rows())  # noqa: E731
    assert counts(twin) == counts(trace)  # 2,038 volumes, each its exact share


def _same_stream_share(df: pl.DataFrame) -> float:
    """Of consecutive requests stamped alike, the share from one stream."""
    s, ts = df["stream"].to_numpy(), df["ts_ns"].to_numpy()
    tied = ts[1:] == ts[:-1]
    return float((s[1:] == s[:-1])[tied].mean())


def _switch_ranks(df: pl.DataFrame) -> list[int]:
    """`ties.recency` counted by hand: at each switch between requests stamped alike, the
    next stream's rank among the streams seen at the instant, the latest first, without the
    one left (1..16; 0: not among them)."""
    counts = [0] * 17
    seen: list[int] = []
    streams, stamps = df["stream"].to_list(), df["ts_ns"].to_list()
    for i, (s, t) in enumerate(zip(streams, stamps, strict=True)):
        if i and stamps[i - 1] != t:
            seen = []
        if i and stamps[i - 1] == t and streams[i - 1] != s:
            others = [x for x in reversed(seen) if x != streams[i - 1]][:16]
            counts[others.index(s) + 1 if s in others else 0] += 1
        if s in seen:
            seen.remove(s)
        seen.append(s)
    return counts


RUN_STARTS = (1, 2, 3, 4, 8)


def _runs_counted(df: pl.DataFrame) -> list[dict[str, int]]:
    """`ties.runs` pooled over classes, counted by hand: over consecutive requests stamped
    alike whose first one's stream has a later request at that instant, by the length of
    that stream's run of requests in a row so far, the pairs and how many went on."""
    s, ts = df["stream"].to_numpy(), df["ts_ns"].to_numpy()
    later: dict[tuple[int, int], int] = {}
    for i in range(len(s) - 1, -1, -1):  # each (stream, stamp)'s requests still to come
        later[(s[i], ts[i])] = later.get((s[i], ts[i]), 0) + 1
    cells = [{"pairs": 0, "same": 0} for _ in RUN_STARTS]
    run = 1
    for i in range(len(s) - 1):
        later[(s[i], ts[i])] -= 1
        if ts[i + 1] == ts[i] and later[(s[i], ts[i])] > 0:
            cell = cells[max(k for k, start in enumerate(RUN_STARTS) if start <= run)]
            cell["pairs"] += 1
            cell["same"] += int(s[i + 1] == s[i])
        run = run + 1 if ts[i + 1] == ts[i] and s[i + 1] == s[i] else 1
    return cells


def _goes_on_by_run(df: pl.DataFrame) -> list[float]:
    """`_runs_counted` as odds: the share of pairs whose stream went on, per run length."""
    return [c["same"] / c["pairs"] for c in _runs_counted(df)]


def model_reads_together(df: pl.DataFrame) -> float:
    """Of the reads in file order, the share whose next read is of the same stream."""
    reads = df.filter(pl.col("op") == 0)["stream"].to_numpy()
    return float((reads[1:] == reads[:-1]).mean())


def _near_reads(df: pl.DataFrame) -> float:
    """Of the reads in file order, the share whose next read starts within 1 MiB of its
    end."""
    reads = df.filter(pl.col("op") == OP_READ)
    start = reads["offset"].to_numpy().astype(np.int64)
    end = start + reads["size"].to_numpy()
    return float((np.abs(start[1:] - end[:-1]) < 2**20).mean())


def near_as_other(ties: dict, keep: tuple[str, ...]) -> dict:
    """`ties` as a model from before near requests counted them (with them in 'other'), with
    only the parts in `keep` besides."""

    def merged(classes: dict) -> dict:
        near, other = classes["near"], classes["other"]
        pooled = {k: near[k] + other[k] for k in ("pairs", "same")}
        return {"sequential": classes["sequential"], "other": pooled}

    out = {k: v for k, v in ties.items() if k in keep} | merged(ties)
    if "operations" in out:
        out["operations"] = {op: merged(c) for op, c in ties["operations"].items()}
    return out


def test_streams_at_one_instant_interleave_as_fitted(twins: dict) -> None:
    """Tencent stamps whole seconds: its 50,000 requests share 2 stamps, and the file order
    interleaves the 2,038 volumes. The fit counts it (`ties`) and the twin follows it, where
    a merge stream by stream put 95% of the twin's requests next to their own stream's."""
    trace, model, _, _ = twins["tencent_cbs_excerpt.csv.bz2"]
    ties = model.doc["ties"]
    # counted independently: pairs whose first stream has another request at that instant
    df = trace.df.with_row_index("i")
    nxt = df.with_columns(
        pl.col("i").shift(-1).over("stream").alias("next_i"),
        pl.col("ts_ns").shift(-1).over("stream").alias("next_ts"),
        (pl.col("offset") + pl.col("size")).alias("end"),
    )
    later = nxt.join(
        nxt.select(
            pl.col("i").alias("next_i"),
            pl.col("offset").alias("next_off"),
            pl.col("op").alias("next_op"),
        ),
        on="next_i",
    )
    row = later.sort("i")
    following = df["stream"].shift(-1)
    stamp = df["ts_ns"].shift(-1)
    eligible = row.join(
        pl.DataFrame({"i": df["i"], "following": following, "stamp": stamp}), on="i"
    ).filter((pl.col("stamp") == pl.col("ts_ns")) & (pl.col("next_ts") == pl.col("ts_ns")))
    sequential = eligible.filter(pl.col("next_off") == pl.col("end"))
    apart = eligible.filter(pl.col("next_off") != pl.col("end"))
    near_end = (pl.col("next_off").cast(pl.Int64) - pl.col("end").cast(pl.Int64)).abs() < 2**20
    near, other = apart.filter(near_end), apart.filter(~near_end)
    same = lambda f: int((f["following"] == f["stream"]).sum())  # noqa: E731
    classes = (("sequential", sequential), ("near", near), ("other", other))
    for name, part in classes:
        assert ties[name] == {"pairs": part.height, "same": same(part)}
    assert sum(ties[name]["pairs"] for name, _ in classes) > 45_000
    # apart by the operation of the stream's next request (a read, or not)
    for op, reads in (("read", True), ("write", False)):
        for name, part in classes:
            mine = part.filter((pl.col("next_op") == OP_READ) == reads)
            assert ties["operations"][op][name] == {"pairs": mine.height, "same": same(mine)}
    # measured: a volume goes on before a read of its own within 1 MiB of its previous
    # request's end 68.0% of the time (5,302 of 7,802), before one elsewhere 37.2% (5,454 of
    # 14,672); before a write 50.4% and 37.8%
    assert ties["operations"]["read"]["near"] == {"pairs": 7_802, "same": 5_302}
    assert ties["operations"]["read"]["other"] == {"pairs": 14_672, "same": 5_454}
    assert ties["operations"]["write"]["near"] == {"pairs": 5_306, "same": 2_673}
    assert ties["operations"]["write"]["other"] == {"pairs": 16_256, "same": 6_144}
    # where a switch at one instant goes: the rank of the next stream among those seen at the
    # instant, the latest first, without the one left (0: none of the latest 16)
    assert ties["recency"] == _switch_ranks(trace.df)
    assert ties["recency"][:3] == [14_829, 6_105, 3_456]  # measured: 20.8% go back
    original = _same_stream_share(trace.df)
    twin = model.synth(requests=trace.df.height, seed=SEED).df
    assert original == pytest.approx(0.413, abs=0.001)
    assert _same_stream_share(twin) == pytest.approx(original, abs=0.01)
    # so a volume's reads come together as the original's: the next read in the file is the
    # same volume's 53.7% of the time; merged by the odds of both operations and switching by
    # weight, the twin's 38.5% (4 seeds: 38.5% -> 42.2% by operation, 49.1% with switches
    # back to volumes just left; whatif cache's largest error .247 -> .196 -> .120)
    older = Model.from_doc({**model.doc, "ties": near_as_other(ties, keep=("sequential",))})
    merged_alike = older.synth(requests=trace.df.height, seed=SEED).df
    assert model_reads_together(trace.df) == pytest.approx(0.537, abs=0.001)
    assert model_reads_together(twin) > model_reads_together(merged_alike) + 0.05
    # and near reads go on with their volume: the next read in the file starts within 1 MiB
    # of the read before 26.9% of the time; with near requests counted as others, the
    # twin's 18.9%, with them 23.3% (4 seeds; the reads alone on hdd-7200 4.95 -> 4.76 ms,
    # the original's 4.61, and whatif cache's largest error .120 -> .106)
    apart = near_as_other(ties, keep=("sequential", "operations", "recency"))
    near_unknown = Model.from_doc({**model.doc, "ties": apart})
    before = near_unknown.synth(requests=trace.df.height, seed=SEED).df
    assert _near_reads(trace.df) == pytest.approx(0.269, abs=0.001)
    assert _near_reads(twin) > _near_reads(before) + 0.03
    back = [_switch_ranks(df)[1] / sum(_switch_ranks(df)) for df in (trace.df, twin, merged_alike)]
    assert back[0] == pytest.approx(0.208, abs=0.001)
    assert abs(back[1] - back[0]) < 0.03 < back[0] - back[2]
    console = Console(width=200, record=True)
    render(model, console)
    shown = console.export_text()
    seq, oth = ties["sequential"], ties["other"]
    heaviest = max(model.streams, key=lambda s: s["weight"])
    mine = trace.df.filter(pl.col("stream") == heaviest["id"])
    lo, hi = mine["offset"].min(), (mine["offset"] + mine["size"]).max()
    assert heaviest["extent"] == [lo, hi]
    assert f"{human_size(lo)} - {human_size(hi)}" in shown
    near = ties["near"]
    flat = " ".join(shown.split())  # the console wraps the line
    pairs = seq["pairs"] + near["pairs"] + oth["pairs"]
    assert (
        f"Streams at one instant ({pairs:,} pairs stamped alike): the same stream goes on "
        f"{seq['same'] / seq['pairs']:.0%} of the time before a sequential request, "
        f"{near['same'] / near['pairs']:.0%} before one within 1 MiB of the previous "
        f"request's end, {oth['same'] / oth['pairs']:.0%} before another"
    ) in flat
    assert "before another read 37%, another write 38%" in flat
    assert "a switch goes back to the stream before 21% of the time, to one of the 16" in flat


def test_parsed_models_leave_the_young_generation_empty() -> None:
    """A model's containers go to the collector's oldest generation as they are parsed, so
    the next allocation does not walk them all; a program's own frozen objects stay frozen."""
    import gc

    from iotwin.model import parse_json

    text = json.dumps({"streams": [{"buckets": [[i, i + 1, 2] for i in range(50_000)]}]})
    doc = parse_json(text)
    assert doc == json.loads(text)
    assert gc.isenabled()
    assert gc.get_count()[0] < 1_000  # not the 50,000 lists just made
    kept = [[1], [2]]
    gc.freeze()
    try:
        frozen = gc.get_freeze_count()
        parse_json(text)
        assert gc.get_freeze_count() == frozen
    finally:
        gc.unfreeze()
    assert kept


@pytest.mark.parametrize("name", ["msr_hm0_excerpt.csv", "tencent_cbs_excerpt.csv.bz2"])
def test_row_groups_fit_as_one_trace(traces: Path, tmp_path: Path, name: str) -> None:
    """A Parquet trace's row groups are fitted where they lie, without joining them: the model
    (ties, Tencent's coarse clock and all) is the one the trace in one piece gives; with
    re-references, which need the whole sequence, too."""
    whole = iotwin.load_trace(traces / name, opts=ReadOptions(stream_by=SHARED[name]))
    path = tmp_path / "groups.parquet"
    groups = max(97, len(whole) // 16)
    whole.df.write_parquet(path, row_group_size=groups, metadata=whole.meta.to_kv())
    for reref in (False, True):
        grouped = iotwin.load_trace(path)
        assert grouped._df.get_column("offset").n_chunks() > 3
        expected, got = (
            fit(whole, levels=2, reref=reref).doc,
            fit(grouped, levels=2, reref=reref).doc,
        )
        for doc in (expected, got):
            doc.pop("fit")
            doc["source"].pop("path")
        assert got == expected
        assert grouped._chunked is not reref  # only re-references joined the row groups
    assert ("clock_ns" in expected["source"]) == name.startswith("tencent")


def test_same_seed_same_bytes(twins: dict, tmp_path: Path) -> None:
    _, model, _, _ = twins["msr_hm0_excerpt.csv"]
    paths = []
    for i in range(2):
        model_again = Model.load(_saved(model, tmp_path / f"m{i}.json"))
        write_trace(model_again.synth(seed=SEED), tmp_path / f"t{i}.parquet")
        paths.append(tmp_path / f"t{i}.parquet")
    assert paths[0].read_bytes() == paths[1].read_bytes()
    other = model.synth(seed=SEED + 1).df
    assert not other.equals(pl.read_parquet(paths[0]))


def test_streamed_synth_writes_the_same_trace(
    twins: dict, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`write_synth` (what `iotwin synth` runs) writes the trace batch by batch as it is
    sampled: the very requests, coarse clock and metadata `synth` gives, for 2,038 streams,
    by count, by duration and for the uniform baseline, in batches far smaller than the trace."""
    import pyarrow.parquet as pq

    import iotwin.model as model_module

    monkeypatch.setattr(model_module, "SYNTH_BATCH", 777)
    _, model, _, _ = twins["tencent_cbs_excerpt.csv.bz2"]
    path = tmp_path / "streamed.parquet"
    for kw in (
        {"requests": 20_000},
        {"duration_s": 0.5},
        {"requests": 5000, "baseline": "uniform"},
    ):
        seen: list[tuple[int, int]] = []

        def record(done: int, total: int, into: list = seen) -> None:
            into.append((done, total))

        n, last_ns = model.write_synth(path, seed=SEED, progress=record, **kw)
        whole, streamed = model.synth(seed=SEED, **kw), iotwin.load_trace(path)
        assert streamed.df.equals(whole.df) and streamed.meta == whole.meta, kw
        assert n == whole.df.height > 0 and last_ns == whole.df["ts_ns"][-1]
        assert pq.ParquetFile(path).metadata.num_row_groups == -(-n // 777)
        assert seen[0] == (777, n) and seen[-1] == (n, n)
    n, _ = model.write_synth(path, requests=0)
    assert n == 0 and iotwin.load_trace(path).df.height == 0


def test_a_long_twin_walks_in_segments_with_the_fitted_counts(traces: Path, tmp_path: Path) -> None:
    """A stream walks in segments of 2^19 requests or more, each on a core of its own with its
    own generator and its own share of the budgets. The paper's model of cloudPhysics (14
    passes of its 110,000-odd requests here, 3 segments): streamed and in memory alike, each
    pass's operations and sizes exactly, and the original's locality, sequentiality and mix
    at the issue's bars."""
    original = iotwin.load_trace(traces / "cloudPhysicsIO.vscsi")
    model = fit(original, levels=2, reref=False)
    passes = 14
    n = passes * int(model.doc["requests"])
    assert n > 3 * 2**19
    path = tmp_path / "long.parquet"
    model.write_synth(path, requests=n, seed=SEED)
    twin = model.synth(requests=n, seed=SEED)
    assert iotwin.load_trace(path).df.equals(twin.df)
    # each operation goes through its passes as one walk would: the mix is the original's
    # times the passes but for the first request, the model's own, which leaves the last
    # pass a request short of each pass before (13 requests off, each counted twice here)
    mix = lambda t: t.df.group_by("op", "size").agg(n=pl.len().cast(pl.Int64))  # noqa: E731
    both = mix(original).join(mix(twin), on=["op", "size"], how="full", coalesce=True)
    off = both.select((pl.col("n").fill_null(0) * passes - pl.col("n_right").fill_null(0)).abs())
    assert 0 < off.sum().item() <= 2 * (passes - 1)
    report = validate(original, twin)
    m = report["metrics"]
    assert m["read_fraction"]["deviation"] == 0
    assert m["sequential_fraction"]["deviation"] <= 0.02
    assert max(v["deviation"] for v in metrics(report, "locality_l1").values()) <= 0.01
    assert not twin.df.equals(model.synth(requests=n, seed=SEED + 1).df)


def test_synthesis_too_large_to_hold_is_refused_clearly(twins: dict, tmp_path: Path) -> None:
    """A twin whose re-reference history cannot be held (32-bit positions) is refused before
    anything is allocated or written (it aborted the process with a Rust backtrace)."""
    _, model, _, _ = twins["msr_hm0_excerpt.csv"]
    model_path, out = _saved(model, tmp_path / "m.json"), tmp_path / "t.parquet"
    run = CliRunner().invoke(
        app, ["synth", str(model_path), "-o", str(out), "--requests", "5000000000"]
    )
    assert isinstance(run.exception, IotwinError), run.output
    message = str(run.exception)
    assert "5,000,000,000 requests in one re-reference history" in message
    assert "--no-reref" in message
    assert not out.exists() and list(tmp_path.iterdir()) == [model_path]


def test_output_where_nothing_can_be_written_is_a_clear_error(twins: dict, tmp_path: Path) -> None:
    _, model, _, _ = twins["msr_hm0_excerpt.csv"]
    model_path = _saved(model, tmp_path / "m.json")
    run = CliRunner().invoke(app, ["synth", str(model_path), "-o", "/proc/iotwin-twin.parquet"])
    assert isinstance(run.exception, IotwinError), run.output
    assert str(run.exception).startswith("/proc/iotwin-twin.parquet: cannot write here: ")


def test_sigterm_during_synth_leaves_no_partial_file(twins: dict, tmp_path: Path) -> None:
    """`iotwin synth` stopped by SIGTERM (a job scheduler's stop) unwinds like Ctrl-C: exit
    status 143, and neither the output nor its temporary file remains."""
    import signal
    import subprocess
    import sys
    import time

    _, model, _, _ = twins["msr_hm0_excerpt.csv"]
    model_path, out = _saved(model, tmp_path / "m.json"), tmp_path / "big.parquet"
    cli = Path(sys.executable).parent / "iotwin"
    args = [str(cli), "synth", str(model_path), "-o", str(out), "--requests", "200000000"]
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while not list(tmp_path.glob(".big.parquet.*")) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert list(tmp_path.glob(".big.parquet.*")), "synth never started writing"
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=60) == 128 + signal.SIGTERM
    assert not out.exists() and not list(tmp_path.glob(".big.parquet.*"))


def test_fitted_models_pass_the_schema(twins: dict) -> None:
    """fit() skips the schema check of the core's own document: every kind it writes must
    pass it (hierarchical, flat, types, no re-references, global re-use on a file trace)."""
    trace, model, _, _ = twins["msr_hm0_excerpt.csv"]
    kinds = [
        model,
        fit(trace, levels=3, flat=True),
        fit(trace, types=True),
        fit(trace, reref=False, iat="gamma"),
        fit(iotwin.load_trace(Path(__file__).parent.parent / "samples" / "pgbench.parquet")),
    ]
    for i, m in enumerate(kinds):
        check_model(json.loads(json.dumps(m.doc)), f"kind {i}")


def test_saved_models_hold_a_transition_a_line(twins: dict, tmp_path: Path) -> None:
    """A saved model reads back as the very document, the same bytes each time, with the
    document's and each stream's keys one a line and each transition one a line (compact,
    not indented at every level: a third of the size)."""
    _, model, _, _ = twins["msr_hm0_excerpt.csv"]
    path = _saved(model, tmp_path / "m.json")
    text = path.read_bytes()
    assert Model.load(path).doc == model.doc
    assert _saved(Model.load(path), tmp_path / "again.json").read_bytes() == text
    lines = text.decode().splitlines()
    assert lines[0] == "{" and lines[-1] == "}"
    assert sum(line.startswith('    {"categories"') for line in lines) == model.transition_count
    assert ' "format": "iotwin-model",' in lines and '   "id": 0,' in lines
    assert len(text) < len(json.dumps(model.doc, indent=1)) / 2


def _saved(model: Model, path: Path) -> Path:
    model.save(path)
    return path


def test_hierarchical_and_flat_side_by_side(traces: Path) -> None:
    """seed 000 Table I and its claim: the hierarchical model's fidelity is within 5% of the
    flat model's, with far fewer possible transitions. Scores averaged over 3 twins; single
    twins differ by 0.5% to 2.0% (seeds 0-7, measured; 4.3% to 5.7% before the walk's jumps
    put back sequential draws, docs/model.md)."""
    assert [transition_counts(level, 4) for level in (1, 2, 3, 4)] == [
        (16, 16),
        (76, 256),
        (316, 4096),
        (1276, 65536),
    ]
    trace = iotwin.load_trace(traces / "cloudPhysicsIO.vscsi")
    scores = {}
    for flat in (False, True):
        model = fit(trace, levels=3, flat=flat)
        twins = [model.synth(seed=seed) for seed in range(3)]
        scores[flat] = statistics.mean(validate(trace, t, per_stream=False)["score"] for t in twins)
        assert model.transition_count <= transition_counts(3, 4)[1 if flat else 0]
    assert abs(scores[False] - scores[True]) <= 0.05 * scores[True], scores


def test_intensity_compress_and_duration(twins: dict) -> None:
    trace, model, _, _ = twins["msr_hm0_excerpt.csv"]
    span = trace.df["ts_ns"][-1]
    fast = model.synth(seed=SEED, intensity=2.0).df
    assert fast.height == trace.df.height
    assert fast["ts_ns"][-1] == pytest.approx(span / 2, rel=0.02)
    # the fluctuation phases 4 times shorter at the original rate, for two cycles: each cycle
    # holds a quarter of the requests, in the original's shape
    cycle_s = span / 1e9 / 4
    short = model.synth(duration_s=2 * cycle_s, compress=4.0, seed=SEED).df
    assert short["ts_ns"][-1] <= 2 * cycle_s * 1e9
    assert short.height == pytest.approx(2 * trace.df.height / 4, rel=0.01)
    windows = model.streams[0]["windows"]
    first = short.filter(pl.col("ts_ns") < cycle_s * 1e9)["ts_ns"].to_numpy()
    counts = np.bincount(
        (first // (model.doc["window_ns"] / 4)).astype(int), minlength=len(windows)
    )
    assert np.corrcoef(counts[: len(windows)], windows)[0, 1] > 0.99


def test_forced_and_chosen_interarrival_families(traces: Path) -> None:
    trace = iotwin.load_trace(traces / "msr_hm0_excerpt.csv")
    forced = fit(trace, iat="gamma")
    dists = {
        c["iat"]["dist"] for s in forced.streams for t in s["transitions"] for c in t["categories"]
    }
    assert dists <= {"gamma", "exponential"}  # gamma where it fits, else its fallback
    chosen = fit(trace)
    for s in chosen.streams:
        for t in s["transitions"]:
            for c in t["categories"]:
                assert c["iat"]["samples"] == c["count"]
                assert 0 <= c["iat"]["ks"] <= 1


def test_types_reassemble_the_thread_mix(twins: dict) -> None:
    trace, _, _, _ = twins["tencent_cbs_excerpt.csv.bz2"]
    model = fit(trace, types=True)
    assert sum(t["count"] for t in model.doc["types"]) == trace.df["stream"].n_unique() == 2038
    assert len(model.streams) == len(model.doc["types"]) < 10
    # each member draws its requests from its type's whole pool, so the mix is exact only
    # on average: the mean size is .010 off over seeds 0-11 (.029 at most), so 6 seeds
    reports = []
    for seed in range(SEED, SEED + 6):
        twin = model.synth(seed=seed)
        assert twin.df["stream"].n_unique() == 2038
        reports.append(validate(trace, twin, per_stream=False)["metrics"])
    for name, bar in (
        ("read_fraction", 0.01),
        ("sequential_fraction", 0.02),
        ("mean_size_bytes", 0.02),
    ):
        assert sum(r[name]["deviation"] for r in reports) / len(reports) <= bar, name


def test_bad_models_get_clear_errors(twins: dict, tmp_path: Path) -> None:
    _, model, _, _ = twins["msr_hm0_excerpt.csv"]
    doc = json.loads(json.dumps(model.doc))
    doc["streams"][0]["transitions"][0]["categories"][0]["p"] += 0.25
    with pytest.raises(iotwin.IotwinError, match="transitions/0: category probabilities sum to"):
        Model.from_doc(doc, "m.json")
    doc = json.loads(json.dumps(model.doc))
    doc["streams"][0]["transitions"][0]["categories"][0]["iat"] = {"dist": "gamma", "shape": 1}
    with pytest.raises(
        iotwin.IotwinError, match=r"categories/0/iat: \"scale_ns\" is a required property"
    ):
        Model.from_doc(doc, "m.json")
    doc = json.loads(json.dumps(model.doc))
    doc["ties"]["other"]["same"] = doc["ties"]["other"]["pairs"] + 1
    with pytest.raises(
        iotwin.IotwinError, match=r"m\.json: at ties/other: same \(\d+\) exceeds pairs"
    ):
        Model.from_doc(doc, "m.json")
    doc = json.loads(json.dumps(model.doc))
    reads = doc["ties"]["operations"]["read"]["other"]
    reads["same"] = reads["pairs"] + 1
    with pytest.raises(
        iotwin.IotwinError, match=r"at ties/operations/read/other: same \(\d+\) exceeds pairs"
    ):
        Model.from_doc(doc, "m.json")
    doc = json.loads(json.dumps(model.doc))
    lo, hi = doc["streams"][0]["extent"]
    doc["streams"][0]["extent"] = [hi, lo]
    with pytest.raises(
        iotwin.IotwinError, match=rf"m\.json: at streams/0/extent: starts at {hi}, after its end"
    ):
        Model.from_doc(doc, "m.json")
    doc["streams"][0]["extent"] = [lo, hi]
    doc["streams"][0]["window_spans"][1] = [0.9, 0.1]
    with pytest.raises(
        iotwin.IotwinError,
        match=r"m\.json: at streams/0/window_spans/1: starts at 0\.9, after its end 0\.1",
    ):
        Model.from_doc(doc, "m.json")
    doc["streams"][0]["window_spans"][1] = [0.0, 1.0]
    doc["streams"][0]["extent"] = [lo]
    with pytest.raises(
        iotwin.IotwinError, match=r"at streams/0/extent: \[\d+\] has less than 2 items"
    ):
        Model.from_doc(doc, "m.json")
    doc["streams"][0]["extent"] = [lo, hi]
    reads = doc["streams"][0]["window_reads"]
    doc["streams"][0]["window_reads"] = reads[:-1]
    with pytest.raises(
        iotwin.IotwinError,
        match=rf"at streams/0/window_reads: {len(reads) - 1} windows, 'windows' has {len(reads)}",
    ):
        Model.from_doc(doc, "m.json")
    doc["streams"][0]["window_reads"] = [*reads[:2], 99, *reads[3:]]
    with pytest.raises(
        iotwin.IotwinError, match=r"at streams/0/window_reads/2: 99 reads in a window of 14 "
    ):
        Model.from_doc(doc, "m.json")
    doc["version"] = 99
    with pytest.raises(iotwin.IotwinError, match="model version 99 is not supported"):
        Model.from_doc(doc, "m.json")
    broken = tmp_path / "broken.json"
    broken.write_text('{"format": "iotwin-model",\n "version": 1,\n oops}\n')
    with pytest.raises(iotwin.IotwinError, match=r"broken\.json: line 3: not valid JSON"):
        Model.load(broken)


def test_short_trace_warns_and_fits_what_is_there(traces: Path) -> None:
    trace = iotwin.load_trace(traces / "msr_hm0_excerpt.csv")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model = fit(trace, levels=6)
    assert any(issubclass(w.category, ShortTraceWarning) for w in caught)
    assert model.doc["levels"] == 6 and model.doc["requests"] == 1000
    assert model.synth(seed=SEED).df.height == 1000


def test_cli_pipeline_and_level_sweep(traces: Path, tmp_path: Path) -> None:
    runner = CliRunner()
    src = str(traces / "msr_hm0_excerpt.csv")
    model, twin = str(tmp_path / "m.json"), str(tmp_path / "t.parquet")
    run = runner.invoke(app, ["fit", src, "-o", model, "--levels", "auto"])
    assert run.exit_code == 0, run.output
    assert "Level sweep" in run.output and "chosen" in run.output
    sweep = json.loads(Path(model).read_text())["fit"]["level_sweep"]
    assert [p["levels"] for p in sweep] == list(range(1, len(sweep) + 1))
    run = runner.invoke(app, ["show", model])
    assert run.exit_code == 0 and "Table I" in run.output and "->" in run.output
    run = runner.invoke(app, ["synth", model, "-o", twin, "--seed", "3"])
    assert run.exit_code == 0 and "1,000 requests" in run.output
    run = runner.invoke(app, ["validate", src, twin, "--json"])
    report = json.loads(run.output)
    m = report["metrics"]["read_fraction"]
    assert set(m) == {"original", "synthetic", "deviation", "kind", "tolerance", "pass"}
    assert m["original"] == 0.508 and m["kind"] == "absolute"
    strict = runner.invoke(app, ["validate", src, twin, "--check", "--tolerance", "0"])
    assert strict.exit_code == 1


@pytest.mark.parametrize(
    "name", ["cloudPhysicsIO.vscsi", "msr_hm0_excerpt.csv", "tencent_cbs_excerpt.csv.bz2"]
)
def test_reref_extension_beats_the_papers_model_on_caching(twins: dict, name: str) -> None:
    """The paper's model (no re-reference category) invents no block reuse beyond chance;
    the optional extension brings the miss-ratio curve close (both shown, as the issue asks)."""
    trace, _, with_reref, _ = twins[name]
    plain = fit(trace, levels=2, reref=False)
    without = validate(trace, plain.synth(seed=SEED), per_stream=False)
    err = lambda r: sum(v["deviation"] for v in metrics(r, "miss_ratio").values())  # noqa: E731
    assert err(with_reref) < err(without)
    assert max(v["deviation"] for v in metrics(without, "miss_ratio").values()) > 0.05


def _resumed_lags(t: iotwin.Trace, window: int = 12) -> list[int]:
    """Each request's resumed-run lag, computed from scratch: k >= 2 when it starts where the
    k-th latest still open run of its stream (among its `window` latest requests) ended."""
    ends: dict[int, list[int | None]] = {}
    out = []
    cols = (t.df["stream"].to_list(), t.df["offset"].to_list(), t.df["size"].to_list())
    for stream, offset, size in zip(*cols, strict=True):
        ring = ends.setdefault(stream, [])
        lag = 0
        open_runs = (i for i in reversed(range(len(ring))) if ring[i] is not None)
        for rank, i in enumerate(open_runs):
            if ring[i] == offset:
                ring[i] = None  # continued: closed
                lag = rank + 1 if rank else 0  # rank 0 is the previous request: sequential
                break
        ring.append(offset + size)
        if len(ring) > window:
            ring.pop(0)
        out.append(lag)
    return out


# The share of the original's resumed requests the twin resumes at least (measured .293, .759,
# .936). A resumed re-scan takes only a run of old data, a resumed run of new data only one of
# new data; cloudPhysics' twin had resumed .55 of them while they took any run, but its
# re-scans then went on over fresh blocks (docs/model.md).
RESUMED_SHARE = {
    "cloudPhysicsIO.vscsi": 0.25,
    "msr_hm0_excerpt.csv": 0.65,
    "tencent_cbs_excerpt.csv.bz2": 0.9,
}


@pytest.mark.parametrize("name", list(RESUMED_SHARE))
def test_resumed_runs_are_counted_and_regenerated(twins: dict, name: str) -> None:
    """A stream picking up one of its recent runs where it ended (interleaved sequential runs)
    is the re-reference extension's `resume` category (`resume-reref` over old data), with its
    lags; the twin resumes runs too (cloudPhysics: 29% of the original's requests, 8% of the
    twin's, whose re-scans find no run of old data open in their target leaf most of the time
    and re-read old data at their distance instead)."""
    trace, model, _, _ = twins[name]
    lags = [k for k in _resumed_lags(trace) if k]
    kinds = [c for s in model.streams for t in s["transitions"] for c in t["categories"]]
    resumes = ("resume", "resume-reref")
    assert sum(c["count"] for c in kinds if c["kind"] in resumes) == len(lags) > 0
    fitted: Counter[int] = Counter()
    for s in model.streams:
        for lo, hi, count in s.get("resume", []):
            assert hi == lo + 1  # lags below 16 have buckets of their own
            fitted[lo] += count
    assert fitted == Counter(lags)
    twin = model.synth(requests=trace.df.height, seed=SEED)
    resumed = sum(1 for k in _resumed_lags(twin) if k)
    # (a random request's jump may land on an open run's end: Tencent's twin 3,855 against
    # 3,849)
    assert RESUMED_SHARE[name] * len(lags) <= resumed <= 1.02 * len(lags)
    plain = fit(trace, levels=2, reref=False)
    assert all("resume" not in s for s in plain.streams)


def _two_files_trace() -> iotwin.Trace:
    """One thread over two files: 4 KiB reads of a 992 KiB file (which the 1 MiB layout pads
    by 32 KiB) and a 64 KiB one, at random and in whole-file sweeps; at levels 2 the leaves
    that hold the first file's end and the second's start also hold the padding."""
    rng = np.random.default_rng(3)
    sizes = {0: (1 << 20) - (32 << 10), 1: 64 << 10}
    rows = []
    for _ in range(6):
        for fid, size in sizes.items():
            rows += [(fid, off) for off in range(0, size, 4096)]  # a sweep
            rows += [(fid, int(b) * 4096) for b in rng.integers(0, size // 4096, 300)]
    n = len(rows)
    df = pl.DataFrame(
        {
            "ts_ns": np.arange(n, dtype=np.int64) * 100_000,
            "stream": np.zeros(n, dtype=np.uint32),
            "op": np.zeros(n, dtype=np.uint8),
            "offset": np.array([r[1] for r in rows], dtype=np.uint64),
            "size": np.full(n, 4096, dtype=np.uint32),
            "file": np.array([r[0] for r in rows], dtype=np.uint32),
        }
    )
    files = [{"id": f, "path": f"/db/f{f}", "size": s} for f, s in sizes.items()]
    return iotwin.Trace(df, iotwin.TraceMeta(stream_by="thread", files=files))


@pytest.mark.parametrize("scope", ["auto", "stream"])
def test_file_level_twin_keeps_each_files_requests(scope: str) -> None:
    """Placed by leaf alone, a twin's new data and runs spilled into the padding between
    files, where a replay credits them to the file before. Inside their files, each file keeps
    its count (one history of all streams packs new data; per-stream ones draw it)."""
    trace = _two_files_trace()
    model = fit(trace, levels=2, reuse_scope=scope)
    twin = model.synth(requests=trace.df.height, seed=SEED).df
    layout = sorted(model.doc["files"], key=lambda f: f["base"])
    bases = np.array([f["base"] for f in layout], dtype=np.uint64)
    offsets = twin["offset"].to_numpy()
    fid = np.searchsorted(bases, offsets, side="right") - 1
    ends = np.array([f["base"] + f["size"] for f in layout], dtype=np.uint64)[fid]
    outside = int(np.sum(offsets + twin["size"].to_numpy() > ends))
    assert outside == 0, f"{outside} of {twin.height} requests lie past their file's end"
    # a run may carry a request into the next leaf of its file, so leaf counts drift by a few
    got = Counter(layout[i]["path"] for i in fid)
    for f, n in Counter(trace.df["file"].to_list()).items():
        assert got[f"/db/f{f}"] == pytest.approx(n, abs=5)


def _window_stretches(df: pl.DataFrame, window_ns: int) -> dict[tuple[int, int], tuple[int, int]]:
    """(stream, window) -> (first, last) request time."""
    per = df.group_by("stream", (pl.col("ts_ns") // window_ns).alias("w")).agg(
        pl.col("ts_ns").min().alias("first"), pl.col("ts_ns").max().alias("last")
    )
    return {(s, w): (a, b) for s, w, a, b in per.iter_rows()}


def test_streams_keep_their_active_stretch_of_each_window() -> None:
    """pgbench's processes take turns inside the fluctuation windows (the checkpointer-like
    stream writes in the first window's first three quarters, the clients start after it,
    the WAL writer works only at the last window's end). The model keeps each stream's first
    and last request of each window, and the twin spreads that window's requests over the
    stretch in between, not over the whole window: every twin request lies inside its
    stream's stretch of its window."""
    trace = iotwin.load_trace(Path(__file__).parent.parent / "samples" / "pgbench.parquet")
    model = fit(trace)
    window_ns = model.doc["window_ns"]
    span_ns = model.doc["span_ns"]
    original = _window_stretches(trace.df, window_ns)
    wal = max(model.streams, key=lambda s: s["window_spans"][-2][0])
    # its stretch of the last full window: the last fifth, as the original's requests say
    first, last = original[(wal["id"], len(wal["windows"]) - 2)]
    start = (len(wal["windows"]) - 2) * window_ns
    assert wal["window_spans"][-2] == pytest.approx(
        [(first - start) / window_ns, (last - start) / window_ns], abs=1e-4
    )
    assert wal["window_spans"][-2][0] > 0.75
    twin = model.synth(requests=trace.df.height, seed=SEED)
    slack = 2e-4 * window_ns  # the fractions' 4 decimals, and rounding to the nanosecond
    outside = 0
    for (stream, w), (a, b) in _window_stretches(twin.df, window_ns).items():
        lo, hi = original[(stream, w)]
        outside += a < lo - slack or b > hi + slack
    assert outside == 0
    assert twin.df["ts_ns"].max() <= span_ns


def test_a_stream_alone_fills_whole_windows(twins: dict) -> None:
    """One stream takes no turns: its stretches would only cut its windows' idle edges,
    which its gaps already hold (MSR's whatif-levels mean moved from +0.7% to +3.4% with
    them), so its twin ignores them and is the twin of a model without them."""
    _, model, _, _ = twins["msr_hm0_excerpt.csv"]
    spans = model.streams[0]["window_spans"]
    assert min(s[0] for s in spans) == 0.0 and max(s[0] for s in spans) > 0.05
    bare = json.loads(json.dumps(model.doc))
    del bare["streams"][0]["window_spans"]
    a = model.synth(requests=2000, seed=SEED).df
    b = Model.from_doc(bare).synth(requests=2000, seed=SEED).df
    assert a.equals(b)


def _window_reads(df: pl.DataFrame, window_ns: int) -> list[int]:
    """Reads per fluctuation window."""
    w = (pl.col("ts_ns") // window_ns).alias("w")
    per = df.group_by(w).agg((pl.col("op") == OP_READ).sum().alias("reads")).sort("w")
    return per["reads"].to_list()


def test_each_window_keeps_its_share_of_reads(twins: dict) -> None:
    """cloudPhysics reads almost only in its two busy windows (21,910 and 22,116 of 46,974
    reads; 0 to 377 in each of the nine others) and writes in every window. The model keeps
    each window's reads (`window_reads`) and the walk steers its categories toward them:
    measured at seed 7, 804 reads (1.7%) sit in another window than the original's, against
    a twin of the same model without them (13,616, 29%), which spreads its reads by the
    stream's share (41%) over every window. Transitions and categories keep their exact
    counts."""
    trace, model, _, _ = twins["cloudPhysicsIO.vscsi"]
    window_ns = model.doc["window_ns"]
    original = _window_reads(trace.df, window_ns)
    assert model.streams[0]["window_reads"] == original
    bare = json.loads(json.dumps(model.doc))
    del bare["streams"][0]["window_reads"]
    total = sum(original)

    def misplaced(m: Model) -> float:
        twin = m.synth(requests=trace.df.height, seed=SEED).df
        assert (twin["op"] == OP_READ).sum() == total
        got = _window_reads(twin, window_ns)
        return sum(abs(a - b) for a, b in zip(got, original, strict=True)) / total

    assert misplaced(model) < 0.02
    assert misplaced(Model.from_doc(bare)) > 0.2
    # `show` prints each window's share of reads (a model from before them: no line)
    console = Console(width=200, record=True)
    render(model, console)
    assert "  reads: 0%, 1%, 49%, 12%, 2%, 38%, 1%, 49%, 13%, 1%, 0%\n" in console.export_text()
    console = Console(width=200, record=True)
    render(Model.from_doc(bare), console)
    assert "  reads:" not in console.export_text()


def test_window_reads_are_an_extension_that_can_be_left_off(
    twins: dict, traces: Path, tmp_path: Path
) -> None:
    """`window_reads` extends the paper's model (design.md: extensions stay optional): fitted
    without it (`--no-window-ops`, `fit(window_reads=False)`), the model is the same but
    for it, and its twin draws operations as the paper's walk does."""
    trace, model, _, _ = twins["cloudPhysicsIO.vscsi"]
    plain = iotwin.fit(trace, levels=2, window_reads=False)
    bare = json.loads(json.dumps(model.doc))
    for s in bare["streams"]:
        del s["window_reads"]
    assert plain.doc["streams"] == bare["streams"]
    out = tmp_path / "m.json"
    args = ["fit", str(traces / "msr_hm0_excerpt.csv"), "-o", str(out), "--no-window-ops"]
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 0, res.output
    assert all("window_reads" not in s for s in Model.load(out).streams)
    res = CliRunner().invoke(app, args[:-1])
    assert res.exit_code == 0, res.output
    assert all("window_reads" in s for s in Model.load(out).streams)


def test_a_stream_whose_operations_keep_apart_is_not_steered(twins: dict) -> None:
    """MSR reads in one window (502 of its 508 reads), but on leaves of their own: 88 of its
    requests are in transitions that hold both operations, against 458 a walk blind to
    windows puts in another window. Steering its categories moved only those few (its busy
    window's reads 299 -> 320 of 502) and its simulated mean by +4.6% (docs/model.md), so
    its twin is the twin of the model without `window_reads`."""
    _, model, _, _ = twins["msr_hm0_excerpt.csv"]
    reads = model.streams[0]["window_reads"]
    assert (reads[9], sum(reads)) == (502, 508)
    bare = json.loads(json.dumps(model.doc))
    del bare["streams"][0]["window_reads"]
    a = model.synth(requests=1000, seed=SEED).df
    b = Model.from_doc(bare).synth(requests=1000, seed=SEED).df
    assert a.equals(b)


def test_cli_errors_keep_bracketed_text(twins: dict, tmp_path: Path) -> None:
    """An error naming a file or field with brackets (a model saved as m[old].json) reaches
    the user whole: the CLI's error line is rich markup, which took [old] for a tag."""
    _, model, _, _ = twins["msr_hm0_excerpt.csv"]
    doc = json.loads(json.dumps(model.doc))
    doc["streams"][0]["extent"] = doc["streams"][0]["extent"][:1]
    bad = tmp_path / "m[old].json"
    bad.write_text(json.dumps(doc))
    out = tmp_path / "t.parquet"
    cmd = [sys.executable, "-m", "iotwin.cli", "synth", str(bad), "-o", str(out)]
    run = subprocess.run(cmd, capture_output=True, text=True)
    assert run.returncode == 2
    lo = doc["streams"][0]["extent"][0]
    assert f"m[old].json: at streams/0/extent: [{lo}] has less than 2 items" in run.stderr
    assert not out.exists()


def test_a_trace_not_counted_from_its_first_request_fits_as_if_it_were(traces: Path) -> None:
    """Canonical traces count time from their first request; one built through the API from
    raw stamps had every request counted in its last fluctuation window. It is counted from
    its first request now, so it fits the same model."""
    import polars as pl

    trace = iotwin.load_trace(traces / "msr_hm0_excerpt.csv")
    shifted = iotwin.Trace(trace.df.with_columns(pl.col("ts_ns") + 10**12), trace.meta)
    plain, moved = fit(trace, bursts=True), fit(shifted, bursts=True)
    assert moved.streams[0]["windows"] == plain.streams[0]["windows"]
    assert moved.streams[0]["windows"][9] == 538
    assert moved.streams[0]["window_bursts"] == plain.streams[0]["window_bursts"]
    assert moved.synth(requests=500, seed=2).df.equals(plain.synth(requests=500, seed=2).df)
