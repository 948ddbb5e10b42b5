"""Calibrating a fitted model's re-reference distances by simulation.

The fit keeps each stream's LRU stack distances (`reuse`), but the twin does not re-read at
exactly the drawn distances: a pick lands on the nearest old request of its target leaf, the
runs that follow it re-read what lies after, and early draws deeper than the twin's history
find nothing. So the twin's miss-ratio curve (MRC) departs from the original's even though
its distances were the original's. Calibration closes the loop the way the method of
simulated moments does: synthesize a twin, measure where along the stack it hits less or
more than the original, re-weight the distance histogram by the ratio of the two hit
densities (damped: its square root, clipped), and repeat. Only distances below a share of
the original's footprint move: past it the twin's excess cold blocks (which no distance can
re-read) dominate, and moving weight there takes it from the small caches
(docs/model.md, session 35). Calibrated models pick, among up to 4 old requests on each
side of a drawn distance, the nearest one followed by old data (`reuse_pick: "followed"`),
so a re-scan continuing it stays on old blocks; their distances are tuned for that rule.
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

#: Damping: each round multiplies a bucket by the hit-density ratio to this power.
POWER = 0.5
#: A round moves one bucket by at most this factor, up or down.
CLIP = 5.0
#: Buckets at or past this share of the original's footprint keep their counts.
CUT = 0.3
#: The histograms calibrated.
KEYS = ("reuse", "resume_reuse")
#: Seeds of the calibration twins (round r uses FIRST_SEED + r), apart from users' seeds.
FIRST_SEED = 1_000_003


def calibrate(
    model: Any,
    trace: Trace,
    rounds: int = 3,
    progress: Callable[[int], None] | None = None,
) -> Any:
    """A copy of `model` (fitted to `trace`, with re-references) whose streams' distance
    histograms (`KEYS`) are re-weighted round after round so its twins' MRC follows the trace's,
    picking followed old requests. Each round's model is scored by its twin's largest
    miss-ratio deviation at `validate`'s cache sizes, and the best of the `rounds` + 1 is
    returned: re-weighting is not a contraction (a bucket's weight also moves hits where the
    runs after its picks go), so later rounds can be worse. `progress(r)` is called once
    model r (0: before any re-weighting) is scored. The document's `fit.calibration` keeps
    the scores and the model chosen."""
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
    doc = copy.deepcopy(model.doc)
    doc["reuse_pick"] = "followed"
    groups = _stream_groups(doc)
    originals = {key: _hit_density(_part(trace, ids), doc, ids) for key, ids in groups.items()}
    sizes = cache_sizes(trace)
    target = np.asarray(lru(trace, sizes).miss_ratios)
    best: tuple[float, dict[str, Any]] | None = None
    scores = []
    for r in range(rounds + 1):
        twin = Model(doc).synth(requests=trace.df.height, seed=FIRST_SEED + r)
        scores.append(float(np.abs(np.asarray(lru(twin, sizes).miss_ratios) - target).max()))
        if best is None or scores[-1] < best[0]:
            best = (scores[-1], copy.deepcopy(doc))
        if progress is not None:
            progress(r)
        if r == rounds:
            break
        for key, ids in groups.items():
            original, footprint = originals[key]
            synthetic, _ = _hit_density(_part(twin, ids), doc, ids)
            for s in doc["streams"]:
                if s["id"] in ids and s.get("reuse"):
                    _reweigh_stream(s, original, synthetic, CUT * footprint)
    assert best is not None
    chosen = best[1]
    chosen.setdefault("fit", {})["calibration"] = {
        "rounds": rounds,
        "chosen": scores.index(best[0]),
        "largest_miss_ratio_deviation": scores,
    }
    return Model.from_doc(chosen, where="calibrated model")


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
