"""What-if studies on the simulator (seed 000 sections III.D.3, IV.D, V; seed 001 section 6):
one module per study, each with a function returning a JSON-ready dict (its `kind` names the
study, so `iotwin report` can render it) and a `render` for the terminal.

Shared here: loading a workload given as a trace or a model, and making the trace's twin and
its uniform (IOMeter-like) baseline.
"""

from __future__ import annotations

from pathlib import Path
from statistics import fmean

from ..errors import IotwinError
from ..model import Model, fit
from ..sim import PeakLoad, SimResult, arrival_times, placed, simulate
from ..trace import Trace

# The auto intensity keeps the original's device at most this busy in its busiest second
# (what iostat's %util would show), so response times compare service, not runaway queues.
PEAK_UTILISATION = 0.7
PEAK_WINDOW_NS = 1_000_000_000

# `--twins auto`: one realization of a short trace is noisy (MSR's 1,000-request excerpt: the
# twin's simulated mean response has a 23% standard deviation over seeds, cloudPhysics'
# 113,872 requests 0.2%), so studies average several twins, as many as keep the synthesized
# requests near TWIN_REQUEST_BUDGET, between 1 and MAX_TWINS.
MAX_TWINS = 5
TWIN_REQUEST_BUDGET = 2_000_000


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
    ) -> None:
        if original is None and model is None:
            raise ValueError("a workload needs a trace or a model")
        self.name = name
        self.original = original
        self._model = model
        self._levels = levels

    @property
    def model(self) -> Model:
        return self.fit()

    def fit(self) -> Model:
        """The model, fitting the original now if it has not been."""
        if self._model is None:
            assert self.original is not None
            levels = {} if self._levels is None else {"levels": self._levels}
            self._model = fit(self.original, **levels)
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


def twin_count(twins: int | None, requests: int) -> int:
    """How many twins a study averages: `twins`, or (None, 'auto') as many as keep the
    synthesized requests within TWIN_REQUEST_BUDGET, between 1 and MAX_TWINS."""
    if twins is not None:
        if twins < 1:
            raise IotwinError(f"--twins {twins}: expected 1 or more")
        return twins
    return max(1, min(MAX_TWINS, TWIN_REQUEST_BUDGET // max(requests, 1)))


def twin_seeds(seed: int, twins: int) -> list[int]:
    """The seeds of a study's twins: `seed` and the ones after it."""
    return list(range(seed, seed + twins))


def ensemble(values: list[float]) -> dict[str, float]:
    """Mean and range of one figure over the twins."""
    return {"mean": fmean(values), "low": min(values), "high": max(values)}


def is_model_file(path: Path) -> bool:
    return path.suffix.lower() == ".json"


def load_workload(path: Path, trace_loader, levels: int | str | None = None) -> Workload:
    """A model file as it is, or a trace to be fitted with default settings (or `levels`)
    when a study first needs its model."""
    if is_model_file(path):
        return Workload(path.name, None, Model.load(path))
    trace = trace_loader(path)
    if len(trace) == 0:
        raise IotwinError(f"{path}: the trace has no requests")
    return Workload(path.name, trace, levels=None if levels is None else int(levels))


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
    "load_workload",
    "parse_list",
    "twin_count",
    "twin_seeds",
]
