"""What-if studies on the simulator (seed 000 sections III.D.3, IV.D, V; seed 001 section 6):
one module per study, each with a function returning a JSON-ready dict (its `kind` names the
study, so `iotwin report` can render it) and a `render` for the terminal.

Shared here: loading a workload given as a trace or a model, and making the trace's twin and
its uniform (IOMeter-like) baseline.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..errors import IotwinError
from ..model import Model, fit
from ..sim import SimResult, placed, simulate
from ..trace import Trace

# The auto intensity keeps the original's device this busy (the bar: under 70%).
TARGET_UTILISATION = 0.6


@dataclass
class Workload:
    """What a study runs: the original trace (None when given a model) and its model."""

    name: str
    original: Trace | None
    model: Model

    def twin(self, seed: int = 0) -> Trace:
        requests = len(self.original) if self.original is not None else None
        return placed(self.model.synth(requests=requests, seed=seed))

    def uniform(self, seed: int = 0) -> Trace:
        requests = len(self.original) if self.original is not None else None
        return placed(self.model.synth(requests=requests, seed=seed, baseline="uniform"))

    def reference(self, seed: int = 0) -> Trace:
        """The original when there is one, else the model's twin."""
        return placed(self.original) if self.original is not None else self.twin(seed)


def is_model_file(path: Path) -> bool:
    return path.suffix.lower() == ".json"


def load_workload(path: Path, trace_loader, levels: int | str | None = None) -> Workload:
    """A model file as it is, or a trace fitted with default settings (or `levels`)."""
    if is_model_file(path):
        return Workload(path.name, None, Model.load(path))
    trace = trace_loader(path)
    if len(trace) == 0:
        raise IotwinError(f"{path}: the trace has no requests")
    model = fit(trace) if levels is None else fit(trace, levels=int(levels))
    return Workload(path.name, trace, model)


def auto_intensity(trace: Trace, device: str | dict, seed: int = 0) -> float:
    """The intensity (at most 1) at which `trace` keeps `device` about TARGET_UTILISATION busy;
    busy time barely depends on intensity, so utilisation scales with it."""
    probe = simulate(trace, device, 1.0, seed)
    if probe.busy_ns == 0 or probe.arrival_span_ns == 0:
        return 1.0
    load = probe.busy_ns / (probe.arrival_span_ns * probe.servers)
    return min(1.0, TARGET_UTILISATION / load)


def parse_list(text: str, what: str, convert) -> list:
    try:
        values = [convert(v.strip()) for v in text.split(",") if v.strip()]
    except (ValueError, IotwinError) as exc:
        raise IotwinError(f"{what} '{text}': {exc}") from None
    if not values:
        raise IotwinError(f"{what} '{text}': give a comma-separated list")
    return values


__all__ = ["SimResult", "Workload", "auto_intensity", "load_workload", "parse_list"]
