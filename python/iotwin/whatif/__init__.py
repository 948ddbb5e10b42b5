"""What-if studies on the simulator (seed 000 sections III.D.3, IV.D, V; seed 001 section 6):
one module per study, each with a function returning a JSON-ready dict (its `kind` names the
study, so `iotwin report` can render it) and a `render` for the terminal.

Shared here: loading a workload given as a trace or a model, and making the trace's twin and
its uniform (IOMeter-like) baseline.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from math import sqrt
from pathlib import Path
from statistics import fmean, stdev
from typing import Any

from ..errors import IotwinError
from ..model import Model, fit
from ..sim import PeakLoad, SimResult, arrival_times, placed, simulate
from ..trace import Trace

# The auto intensity keeps the original's device at most this busy in its busiest second
# (what iostat's %util would show), so response times compare service, not runaway queues.
PEAK_UTILISATION = 0.7
PEAK_WINDOW_NS = 1_000_000_000

# `--twins auto`: one realization of a short trace is noisy (MSR's 1,000-request excerpt: the
# twin's simulated mean response has a 21% standard deviation over seeds, cloudPhysics'
# 113,872 requests 0.2%), so studies add twins in rounds of MIN_TWINS, twice as many, ...
# until the 95% confidence interval of every mean they report is within PRECISION of it
# (replications until a relative precision, as in Law's "Simulation Modeling and Analysis",
# chapter 9), at most MAX_TWINS and as many as keep their synthesized requests (per level)
# within TWIN_REQUEST_BUDGET. Five fixed twins had put MSR's level-2 twin at -6.8% on the mean
# response (a 10% standard error); the 384 it now gets put it at -13.3% +- 1.8%.
MIN_TWINS = 3
MAX_TWINS = 384
PRECISION = 0.02
TWIN_REQUEST_BUDGET = 2_000_000
CONFIDENCE = 0.95


class Workload:
    """What a study runs: the original trace (None when given a model) and its model, which
    a trace gets fitted (at `levels`, or the default) only when a study first asks for it:
    simulating or sweeping the original needs none."""

    def __init__(
        self,
        name: str,
        original: Trace | None,
        model: Model | None = None,
        levels: int | None = None,
        calibrate: int = 0,
        bursts: bool = False,
    ) -> None:
        if original is None and model is None:
            raise ValueError("a workload needs a trace or a model")
        self.name = name
        self.original = original
        self._model = model
        self._levels = levels
        self._calibrate = calibrate
        self._bursts = bursts

    @property
    def model(self) -> Model:
        return self.fit()

    def fit(self) -> Model:
        """The model, fitting the original now if it has not been."""
        if self._model is None:
            assert self.original is not None
            levels = {} if self._levels is None else {"levels": self._levels}
            self._model = fit(self.original, bursts=self._bursts, **levels)
            if self._calibrate:
                from ..calibrate import calibrate

                self._model = calibrate(self._model, self.original, self._calibrate)
        return self._model

    def twin(self, seed: int = 0) -> Trace:
        return self._synth(seed, baseline=None)

    def uniform(self, seed: int = 0) -> Trace:
        return self._synth(seed, baseline="uniform")

    def _synth(self, seed: int, baseline: str | None) -> Trace:
        """The model's trace, as long as the original when there is one."""
        requests = len(self.original) if self.original is not None else None
        return placed(self.model.synth(requests=requests, seed=seed, baseline=baseline))

    @property
    def requests(self) -> int:
        """Requests per twin: the original's, or the model's own count."""
        return len(self.original) if self.original is not None else int(self.model.doc["requests"])

    def reference(self, seed: int = 0) -> Trace:
        """The original when there is one, else the model's twin."""
        return placed(self.original) if self.original is not None else self.twin(seed)


def twin_rounds(twins: int | None, requests: int) -> list[int]:
    """The twin counts after which a study checks its precision: [twins] when given, else
    (None, 'auto') MIN_TWINS, twice that, ... up to the cap (MAX_TWINS, and the request
    budget; at least one twin)."""
    if twins is not None:
        if twins < 1:
            raise IotwinError(f"--twins {twins}: expected 1 or more")
        return [twins]
    cap = max(1, min(MAX_TWINS, TWIN_REQUEST_BUDGET // max(requests, 1)))
    rounds = []
    n = MIN_TWINS
    while n < cap:
        rounds.append(n)
        n *= 2
    return [*rounds, cap]


def half_width(values: Sequence[float]) -> float | None:
    """The half-width of the CONFIDENCE interval of the values' mean (Student's t), None for
    fewer than two values."""
    if len(values) < 2:
        return None
    from scipy.stats import t as t_dist  # imported here: scipy.stats costs 0.7 s at CLI start

    return float(
        t_dist.ppf(0.5 + CONFIDENCE / 2, len(values) - 1) * stdev(values) / sqrt(len(values))
    )


def precise(samples: Iterable[Sequence[float]]) -> bool:
    """Whether every sample's mean is known to within PRECISION of it (its confidence
    interval's half-width); a sample without spread is, one value is not."""
    for values in samples:
        h = half_width(values)
        if h is None or h > PRECISION * abs(fmean(values)):
            return False
    return True


def replicate(
    twins: int | None,
    requests: int,
    seed: int,
    run: Callable[[list[int]], None],
    samples: Callable[[], Iterable[Sequence[float]]],
) -> tuple[list[int], bool]:
    """Runs a study's twins in rounds (`twin_rounds`): `run(seeds)` simulates the next seeds,
    `samples()` gives every figure's values so far. Returns the seeds run and whether the
    means reached PRECISION (always True for a fixed count)."""
    seeds: list[int] = []
    for target in twin_rounds(twins, requests):
        fresh = list(range(seed + len(seeds), seed + target))
        run(fresh)
        seeds += fresh
        if twins is None and precise(samples()):
            return seeds, True
    return seeds, twins is not None


def ensemble(values: list[float]) -> dict[str, float | None]:
    """Mean, range and confidence half-width (`half_width`) of one figure over the twins."""
    return {
        "mean": fmean(values),
        "low": min(values),
        "high": max(values),
        "ci95": half_width(values),
    }


def precision_note(r: dict[str, Any], what: str) -> str:
    """How a study's twin count came about, for its table's footnote."""
    n, seeds = r["twins"], r.get("seeds")
    text = f"means over {n} twins {what}"
    if seeds:
        text += f" (seeds {seeds[0]}-{seeds[-1]})" if n > 1 else f" (seed {seeds[0]})"
    p = r.get("precision")
    if not isinstance(p, dict) or p.get("fixed"):
        return text
    target = f"{p['target']:.0%}"
    if p["reached"]:
        return text + f": twins were added until each mean's 95% interval was within {target}"
    return text + f", the most allowed: some 95% intervals (±) are still wider than {target}"


def is_model_file(path: Path) -> bool:
    return path.suffix.lower() == ".json"


def load_workload(
    path: Path,
    trace_loader,
    levels: int | str | None = None,
    calibrate: int = 0,
    bursts: bool = False,
) -> Workload:
    """A model file as it is, or a trace to be fitted with default settings (or `levels`)
    when a study first needs its model, and calibrated over `calibrate` rounds."""
    if is_model_file(path):
        if calibrate or bursts:
            flag = "--calibrate tunes a model to" if calibrate else "--bursts are fitted from"
            raise IotwinError(f"{flag} its trace: give the trace, not {path}")
        return Workload(path.name, None, Model.load(path))
    trace = trace_loader(path)
    if len(trace) == 0:
        raise IotwinError(f"{path}: the trace has no requests")
    levels = None if levels is None else int(levels)
    return Workload(path.name, trace, levels=levels, calibrate=calibrate, bursts=bursts)


def auto_intensity(trace: Trace, device: str | dict, seed: int = 0) -> float:
    """The highest intensity, at most 1, at which `trace` keeps `device` at most
    PEAK_UTILISATION busy in every second (bisection on the measured per-request demands)."""
    probe = simulate(trace, device, 1.0, seed)
    ts, _ = arrival_times(trace)  # placing files on the virtual device keeps the row order
    load = PeakLoad(probe, ts, PEAK_WINDOW_NS)
    if load(1.0) <= PEAK_UTILISATION:
        return 1.0
    lo, hi = 0.0, 1.0
    # bisect until both ends round alike: rounding is monotone, so the threshold between
    # them rounds to the same 3 significant digits (at most 40 halvings, as before)
    for _ in range(40):
        if lo > 0 and f"{lo:.3g}" == f"{hi:.3g}":
            break
        mid = (lo + hi) / 2
        if load(mid) <= PEAK_UTILISATION:
            lo = mid
        else:
            hi = mid
    if lo == 0.0:
        raise IotwinError(
            "no intensity keeps the device under its peak load (a single request is too long?)"
        )
    return float(f"{lo:.3g}")


def parse_list(text: str, what: str, convert) -> list:
    try:
        values = [convert(v.strip()) for v in text.split(",") if v.strip()]
    except IotwinError:
        raise  # the converter named the option and the value already
    except ValueError as exc:
        raise IotwinError(f"{what} '{text}': {exc}") from None
    if not values:
        raise IotwinError(f"{what} '{text}': give a comma-separated list")
    return values


__all__ = [
    "SimResult",
    "Workload",
    "auto_intensity",
    "ensemble",
    "half_width",
    "load_workload",
    "parse_list",
    "precision_note",
    "replicate",
]
