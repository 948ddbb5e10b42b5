"""Choosing the model's detail: `--levels auto` (seed 000, section IV.D and Figure 6).

For levels 1..8 the trace is fitted, a twin of the same size synthesized with a fixed seed,
and its fidelity scored (`validate.fidelity_score`: 1 minus the mean deviation-to-tolerance
ratio). The chosen level is the first after which the score changes by less than 2%, the
paper's rule with a measured score.
"""

from __future__ import annotations

from dataclasses import dataclass

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


def sweep(
    trace: Trace, fanout: int = 4, seed: int = 0, max_levels: int = MAX_LEVELS, **fit_args
) -> tuple[int, list[LevelPoint]]:
    """(chosen levels, the sweep up to one level past the choice)."""
    points: list[LevelPoint] = []
    for levels in range(1, max_levels + 1):
        model = fit(trace, levels=levels, fanout=fanout, **fit_args)
        twin = model.synth(requests=trace.df.height, seed=seed)
        report = validate(trace, twin, per_stream=False)
        points.append(
            LevelPoint(
                levels, report["score"], model.transition_count, len(report["failed"]), model
            )
        )
        if len(points) >= 2:
            prev, cur = points[-2].score, points[-1].score
            if abs(cur - prev) <= STABLE * max(abs(prev), 1e-9):
                return points[-2].levels, points
    best = max(points, key=lambda p: p.score)
    return best.levels, points
