"""Choosing the model's detail: `--levels auto` (seed 000, section IV.D and Figure 6).

For levels 1..8 the trace is fitted, a twin of the same size synthesized with a fixed seed,
and its fidelity scored (`validate.fidelity_score`: 1 minus the mean deviation-to-tolerance
ratio). The chosen level is the first after which the score changes by less than 2%, the
paper's rule with a measured score.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from itertools import pairwise

from .model import Model, fit
from .trace import Trace
from .validate import validate

MAX_LEVELS = 8
STABLE = 0.02


@dataclass
class LevelPoint:
    levels: int
    score: float
    transitions: int
    failed: int
    model: Model


def chosen_model(chosen: int, points: list[LevelPoint]) -> Model:
    """The sweep's chosen model, with the sweep kept in its `fit.level_sweep`."""
    model = next(p.model for p in points if p.levels == chosen)
    model.doc["fit"]["level_sweep"] = [
        {"levels": p.levels, "score": p.score, "transitions": p.transitions} for p in points
    ]
    return model


def sweep(
    trace: Trace,
    fanout: int = 4,
    seed: int = 0,
    max_levels: int = MAX_LEVELS,
    full: bool = False,
    on_level: Callable[[LevelPoint], None] | None = None,
    **fit_args,
) -> tuple[int, list[LevelPoint]]:
    """(chosen levels, the sweep up to one level past the choice, or every level up to
    `max_levels` when `full`: the choice is the same either way). `on_level` hears of each
    level as it is scored (a sweep of a large trace takes a while)."""
    points: list[LevelPoint] = []
    for levels in range(1, max_levels + 1):
        points.append(level_point(trace, levels, fanout, seed, **fit_args))
        if on_level is not None:
            on_level(points[-1])
        chosen = first_stable(points)
        if chosen is not None and not full:
            return chosen, points
    chosen = first_stable(points)
    return chosen if chosen is not None else max(points, key=lambda p: p.score).levels, points


def level_point(trace: Trace, levels: int, fanout: int, seed: int, **fit_args) -> LevelPoint:
    """The model fitted at `levels` and the fidelity score of its twin."""
    model = fit(trace, levels=levels, fanout=fanout, **fit_args)
    twin = model.synth(requests=trace.df.height, seed=seed)
    report = validate(trace, twin, per_stream=False)
    return LevelPoint(levels, report["score"], model.transition_count, len(report["failed"]), model)


def first_stable(points: list[LevelPoint]) -> int | None:
    """The first level after which the score changes by at most STABLE, if any."""
    for prev, cur in pairwise(points):
        if abs(cur.score - prev.score) <= STABLE * max(abs(prev.score), 1e-9):
            return prev.levels
    return None
