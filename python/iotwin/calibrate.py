"""Calibrating a fitted model's re-reference distances by simulation.

The fit keeps each stream's LRU stack distances (`reuse`, `resume_reuse`), but the twin does
not re-read at exactly the drawn distances: a pick lands on the nearest old request of its
target leaf, the runs that follow it re-read what lies after, and early draws deeper than
the twin's history find nothing. So the twin's miss-ratio curve (MRC) departs from the
original's even though its distances were the original's. Calibration closes the loop the
way the method of simulated moments does: synthesize twins, measure where along the stack
they hit less or more than the original, multiply each distance bucket by the ratio of the
two hit densities (clipped), and repeat; every candidate is scored and the best kept. Only
distances below a share of the original's footprint move: past it the twin's excess cold
blocks (which no distance can re-read) dominate, and moving weight there takes it from the
small caches (docs/model.md, sessions 35 and 38). Re-weighted models pick, among up to 4 old
requests on each side of a drawn distance, the nearest one followed by old data
(`reuse_pick: "followed"`), so a re-scan continuing it stays on old blocks.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import numpy as np
import polars as pl

from .errors import IotwinError
from .trace import Trace
from .validate import cache_sizes, lru

#: Each round multiplies a bucket by the hit-density ratio to this power: more than 1, as a
#: twin's hits at a distance also come from the runs after its picks, so the ratio itself
#: undershoots. Measured (10 evaluation twins, largest deviation on average): cloudPhysics
#: .5 -> .054, 1 -> .047, 1.5 -> .040, 2 -> .037, 3 -> .039, 4 -> .038; MSR 1 -> .032, 2 ->
#: .023; TPC-C and Tencent the same at 1 and 2.
POWER = 2.0
#: A round moves one bucket by at most this factor, up or down.
CLIP = 5.0
#: Buckets at or past this share of the original's footprint keep their counts.
CUT = 0.3
#: The histograms calibrated.
KEYS = ("reuse", "resume_reuse")
#: Twins each candidate is measured on (their miss ratios averaged): with one, the chosen
#: model's score on other seeds varied by about .005 with the calibration's seeds.
TWINS = 2
#: Seeds of the calibration twins (round r uses FIRST_SEED + r), apart from users' seeds.
FIRST_SEED = 1_000_003


def calibrate(
    model: Any,
    trace: Trace,
    rounds: int = 3,
    progress: Callable[[int], None] | None = None,
) -> Any:
    """A copy of `model` (fitted to `trace`, with re-references) whose streams' distance
    histograms (`KEYS`) are re-weighted round after round so its twins' MRC follows the
    trace's, picking followed old requests. Every candidate is scored by its twin's largest
    miss-ratio deviation at `validate`'s cache sizes: the model as fitted (entry 0, nearest
    picks), the followed picks before any re-weighting (1), then each round's (2 ..
    `rounds` + 1); the best is returned, so calibration never does worse than the fit on its
    own twins, and re-weighting, which is not a contraction (a bucket's weight also moves
    hits to wherever the runs after its picks go), may stop improving. `progress(k)` is
    called as candidate k is scored. The document's `fit.calibration` keeps the scores and
    the candidate chosen."""
    from .model import Model

    if rounds < 0:
        raise IotwinError(f"calibration rounds must be >= 0, got {rounds}")
    if not any(s.get("reuse") for s in model.doc["streams"]):
        raise IotwinError(
            "calibration re-weights re-reference distances: fit the model with re-references "
            "(not --no-reref), on a trace that re-reads data"
        )
    if "types" in model.doc:
        raise IotwinError("calibration needs a model of the trace's streams, not of --types")
    groups = _stream_groups(model.doc)
    originals = {
        key: _hit_density(_part(trace, ids), model.doc, ids) for key, ids in groups.items()
    }
    sizes = cache_sizes(trace)
    target = np.asarray(lru(trace, sizes).miss_ratios)
    candidates: list[dict[str, Any]] = []
    scores: list[float] = []
    doc = copy.deepcopy(model.doc)
    for k in range(rounds + 2):
        if k == 1:
            doc["reuse_pick"] = "followed"
        seeds = range(FIRST_SEED + TWINS * k, FIRST_SEED + TWINS * (k + 1))
        twins = [Model(doc).synth(requests=trace.df.height, seed=s) for s in seeds]
        curve = np.mean([lru(t, sizes).miss_ratios for t in twins], axis=0)
        scores.append(float(np.abs(curve - target).max()))
        candidates.append(copy.deepcopy(doc))
        if progress is not None:
            progress(k)
        if 1 <= k <= rounds:
            for key, ids in groups.items():
                original, footprint = originals[key]
                synthetic = _mean_density([_hit_density(_part(t, ids), doc, ids)[0] for t in twins])
                for s in doc["streams"]:
                    if s["id"] in ids and s.get("reuse"):
                        _reweigh_stream(s, original, synthetic, CUT * footprint)
    best = int(np.argmin(scores))
    chosen = candidates[best]
    chosen.setdefault("fit", {})["calibration"] = {
        "rounds": rounds,
        "chosen": best,
        "largest_miss_ratio_deviation": scores,
    }
    return Model.from_doc(chosen, where="calibrated model")


def candidate_label(k: int) -> str:
    """What calibration candidate `k` is (`fit.calibration` scores are in this order)."""
    return ("as fitted", "followed picks")[k] if k < 2 else f"round {k - 1}"


def _stream_groups(doc: dict[str, Any]) -> dict[str, list[int]]:
    """Streams whose distances count against one history: all of them with global distances
    or a single stream, else each stream alone (devices, volumes)."""
    ids = [s["id"] for s in doc["streams"]]
    if doc.get("reuse_scope") == "global" or len(ids) == 1:
        return {"all": ids}
    return {str(i): [i] for i in ids}


def _part(trace: Trace, ids: list[int]) -> Trace:
    """The requests of streams `ids` (the whole trace when it has no others)."""
    if trace.df["stream"].n_unique() <= len(ids):
        return trace
    return Trace(trace.df.filter(pl.col("stream").is_in(ids)), trace.meta)


def _edges(doc: dict[str, Any], ids: list[int]) -> list[int]:
    """The positive bucket edges of the streams' calibrated histograms (`KEYS`)."""
    edges = {
        edge
        for s in doc["streams"]
        if s["id"] in ids
        for key in KEYS
        for lo, hi, _ in s.get(key) or []
        for edge in (lo, hi)
    }
    return sorted(e for e in edges if e > 0)


def _hit_density(trace: Trace, doc: dict[str, Any], ids: list[int]) -> tuple[dict[int, float], int]:
    """The trace's LRU miss ratio at each bucket edge (1 at 0), so that the difference
    between two edges is the share of block accesses re-read at distances between them, and
    its footprint in blocks."""
    edges = _edges(doc, ids)
    if trace.df.height == 0:
        return dict.fromkeys([0, *edges], 1.0), 0
    curve = lru(trace, edges)
    return {0: 1.0, **dict(zip(edges, curve.miss_ratios, strict=True))}, curve.distinct


def _reweigh_stream(
    stream: dict[str, Any], original: dict[int, float], synthetic: dict[int, float], cut: float
) -> None:
    """Re-weights the stream's distance histograms (`KEYS`), their reads' and writes' parts
    (`reuse_write`, ...) each keeping its own total, so the split by operation holds."""
    for key in KEYS:
        if not stream.get(key):
            continue
        writes = {(lo, hi): c for lo, hi, c in stream.get(f"{key}_write") or []}
        read, write = (
            _reweighted(part, original, synthetic, cut)
            for part in (
                [[lo, hi, c - writes.get((lo, hi), 0)] for lo, hi, c in stream[key]],
                [[lo, hi, writes.get((lo, hi), 0)] for lo, hi, _ in stream[key]],
            )
        )
        stream[key] = [[lo, hi, r + w] for (lo, hi, r), (_, _, w) in zip(read, write, strict=True)]
        if f"{key}_write" in stream:
            stream[f"{key}_write"] = [b for b in write if b[2] > 0]


def _mean_density(densities: list[dict[int, float]]) -> dict[int, float]:
    """The edge-wise mean of several traces' miss ratios (`_hit_density`)."""
    return {edge: float(np.mean([d[edge] for d in densities])) for edge in densities[0]}


def _reweighted(
    buckets: list[list[int]], original: dict[int, float], synthetic: dict[int, float], cut: float
) -> list[list[int]]:
    """The buckets below `cut` multiplied by the original's over the twin's hit density
    (damped, clipped), rescaled to keep their total; the others as they were."""
    eps = 1e-5
    scaled = []
    for lo, hi, count in buckets:
        hits_o = original.get(lo, 1.0) - original.get(hi, 0.0)
        hits_t = synthetic.get(lo, 1.0) - synthetic.get(hi, 0.0)
        ratio = float(np.clip(((hits_o + eps) / (hits_t + eps)) ** POWER, 1 / CLIP, CLIP))
        scaled.append(count * ratio if lo < cut else float(count))
    before = sum(c for (lo, _, c) in buckets if lo < cut)
    after = sum(c for (lo, _, _), c in zip(buckets, scaled, strict=True) if lo < cut)
    keep = before / after if after > 0 else 1.0
    return [
        [lo, hi, max(0, round(c * keep)) if lo < cut else count]
        for (lo, hi, count), c in zip(buckets, scaled, strict=True)
    ]
