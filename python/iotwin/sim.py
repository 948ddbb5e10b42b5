"""The storage simulator's face: run a trace (or a model's synthetic twin) on a simulated
device and measure what a storage engineer asks of it.

Storage speedup is defined once, here, and used by every what-if study: the mean response
time on the baseline over that on the studied configuration (open loop, same arrivals), and
beside it the device busy-time ratio (baseline busy time over the studied one's; for a tiered
device the busy time is its HDD's, the tier that saturates).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from functools import partial
from typing import Any, TypeVar

import numpy as np

from . import _core
from .cache import space_ids
from .devices import describe, resolve
from .errors import IotwinError
from .layout import on_virtual_device
from .trace import Trace, coarse_clock_ns

T = TypeVar("T")

PERCENTILES = (50, 95, 99)
# An untimed trace (ARC, some block lists) arrives one request per millisecond before scaling.
UNTIMED_GAP_NS = 1_000_000


@dataclass(frozen=True)
class Figures:
    """A run's figures without its per-request arrays (`SimResult.figures`): what a sweep
    keeps of each run, so that it holds the arrays of one run per core at most."""

    mean_ms: float
    p95_ms: float
    busy_ns: int
    servers: int
    arrival_span_ns: int
    offered_iops: float
    completed_iops: float
    utilisation: float
    cache_hit_ratio: float | None


@dataclass
class SimResult:
    """What one simulation measured; `response_ns` holds every request's response time."""

    device: dict[str, Any]
    intensity: float
    requests: int
    arrival_span_ns: int
    completion_span_ns: int
    busy_ns: int
    servers: int
    cache_hits: int
    cache_misses: int
    writebacks: int
    parts: dict[str, Any]
    response_ns: np.ndarray = field(repr=False)
    demand_ns: np.ndarray = field(repr=False)
    arrivals: str = "as traced"

    @property
    def mean_ms(self) -> float:
        return float(self.response_ns.mean()) / 1e6 if self.requests else 0.0

    def percentile_ms(self, q: float) -> float:
        return float(np.percentile(self.response_ns, q)) / 1e6 if self.requests else 0.0

    @property
    def offered_iops(self) -> float:
        return (
            self.requests / (self.arrival_span_ns / 1e9) if self.arrival_span_ns else float("inf")
        )

    @property
    def completed_iops(self) -> float:
        span = self.completion_span_ns / 1e9
        return self.requests / span if span else 0.0

    @property
    def utilisation(self) -> float:
        """Busy fraction of the device (every server) from first arrival to last completion."""
        span = self.completion_span_ns * self.servers
        return self.busy_ns / span if span else 0.0

    @property
    def cache_hit_ratio(self) -> float | None:
        blocks = self.cache_hits + self.cache_misses
        return self.cache_hits / blocks if blocks else None

    def figures(self) -> Figures:
        return Figures(
            mean_ms=self.mean_ms,
            p95_ms=self.percentile_ms(95),
            busy_ns=self.busy_ns,
            servers=self.servers,
            arrival_span_ns=self.arrival_span_ns,
            offered_iops=self.offered_iops,
            completed_iops=self.completed_iops,
            utilisation=self.utilisation,
            cache_hit_ratio=self.cache_hit_ratio,
        )

    def as_dict(self) -> dict[str, Any]:
        return {
            "device": describe(self.device),
            "intensity": self.intensity,
            "requests": self.requests,
            "offered_iops": self.offered_iops if self.arrival_span_ns else None,
            "completed_iops": self.completed_iops,
            "mean_ms": self.mean_ms,
            **{f"p{q}_ms": self.percentile_ms(q) for q in PERCENTILES},
            "max_ms": float(self.response_ns.max()) / 1e6 if self.requests else 0.0,
            "utilisation": self.utilisation,
            "busy_s": self.busy_ns / 1e9,
            "cache_hit_ratio": self.cache_hit_ratio,
            "writebacks": self.writebacks,
            "arrivals": self.arrivals,
        }


def placed(trace: Trace) -> Trace:
    """The trace in one address space: file-level traces laid out on a virtual device."""
    return on_virtual_device(trace)[0]


def placed_for_threads(trace: Trace) -> Trace:
    """`placed`, once for several runs, with its columns made contiguous before threads read
    them (a multi-chunk trace rechunks on first use, which two threads must not do at once)."""
    trace = placed(trace)
    trace.df  # noqa: B018
    return trace


def arrival_times(trace: Trace) -> tuple[np.ndarray, str]:
    """Arrival times for the simulator, and how they were made: as traced; one per
    millisecond for untimed traces; or, for a clock ticking in whole milliseconds or coarser
    (Tencent's whole seconds), requests stamped alike spread evenly over their tick."""
    ts = trace.numpy("ts_ns", np.int64)
    if not trace.meta.timed:
        return np.arange(len(ts), dtype=np.int64) * UNTIMED_GAP_NS, "untimed: 1 per ms"
    tick = coarse_clock_ns(ts)
    if tick is None:
        return ts, "as traced"
    starts = np.flatnonzero(np.concatenate(([True], ts[1:] != ts[:-1])))
    sizes = np.diff(np.append(starts, len(ts)))
    rank = np.arange(len(ts)) - np.repeat(starts, sizes)
    spread = ts + (rank * tick // np.repeat(sizes, sizes)).astype(np.int64)
    return spread, f"clock tick {tick / 1e9:g} s: spread over each tick"


def volume_spaces(trace: Trace) -> np.ndarray | None:
    """Each request's volume as a dense id where the `placed` trace's streams are volumes or
    devices (Tencent's volumes, TPC-C's disks): they share the simulated device at their own
    offsets, and a tiered device's cache keeps their equal offsets apart, as the miss ratios
    of `validate` do (`cache.space_ids`). None for one address space (files were laid apart
    by `placed`, which drops their ids)."""
    ids = space_ids(trace)
    return None if ids is None else ids.astype(np.uint32)


def simulate(
    trace: Trace, device: str | dict[str, Any], intensity: float = 1.0, seed: int = 0
) -> SimResult:
    """Simulates `trace` on `device` (a spec string or dict, see devices.py), open loop, its
    arrivals scaled by `intensity`."""
    if not intensity > 0:
        raise IotwinError(f"--intensity must be positive, got {intensity}")
    spec = resolve(device)
    trace = placed(trace)
    ts, arrivals = arrival_times(trace)
    response_ns, demand_ns = np.empty(len(ts), np.uint64), np.empty(len(ts), np.uint64)
    try:
        raw = _core.simulate(
            ts,
            trace.numpy("op", np.uint8),
            trace.numpy("offset", np.uint64),
            trace.numpy("size", np.uint32),
            json.dumps(spec),
            int(seed) & (2**64 - 1),
            float(intensity),
            response_ns,
            demand_ns,
            volume_spaces(trace),
        )
    except ValueError as exc:
        raise IotwinError(
            f"simulating on {describe(spec) if 'kind' in spec else spec}: {exc}"
        ) from None
    dev = raw["device"]
    return SimResult(
        device=spec,
        intensity=float(intensity),
        requests=int(raw["requests"]),
        arrival_span_ns=int(raw["arrival_span_ns"]),
        completion_span_ns=int(raw["completion_span_ns"]),
        busy_ns=int(dev["busy_ns"]),
        servers=int(dev["servers"]),
        cache_hits=int(dev["cache_hits"]),
        cache_misses=int(dev["cache_misses"]),
        writebacks=int(dev["writebacks"]),
        parts=dict(dev["parts"]),
        response_ns=response_ns,
        demand_ns=demand_ns,
        arrivals=arrivals,
    )


def simulate_many(
    trace: Trace,
    runs: Sequence[tuple[str | dict[str, Any], float]],
    seed: int = 0,
    done: Callable[[], None] | None = None,
) -> list[Figures]:
    """The figures of `simulate(trace, device, intensity, seed)` for each (device, intensity)
    of `runs`, in their order, run at once (`at_once`); `done` is called as each finishes."""
    trace = placed_for_threads(trace)

    def figures(device: str | dict[str, Any], intensity: float) -> Figures:
        return simulate(trace, device, intensity, seed).figures()

    return at_once([partial(figures, dev, x) for dev, x in runs], done)


def at_once(tasks: Sequence[Callable[[], T]], done: Callable[[], None] | None = None) -> list[T]:
    """Each task's result, in order, the tasks run as many at once as there are cores: the
    core releases the GIL while it simulates or synthesizes (6 simulations over a
    10M-request trace took 1.8x less time on 2 cores). `done` is called as each finishes."""
    workers = max(1, min(len(tasks), os.cpu_count() or 1))
    with ThreadPoolExecutor(max_workers=workers) as pool:
        futures = [pool.submit(task) for task in tasks]
        for _ in as_completed(futures):
            if done is not None:
                done()
        return [f.result() for f in futures]


class PeakLoad:
    """The busiest window's utilisation if the requests arrived at a given intensity with the
    demands `result` measured (demand barely depends on intensity); arrivals and demands are
    converted once, since a search evaluates it at many intensities."""

    def __init__(self, result: SimResult, ts: np.ndarray, window_ns: int) -> None:
        self.since = (ts - ts[0]).astype(np.float64) if len(ts) else ts.astype(np.float64)
        self.demand = result.demand_ns.astype(np.float64)
        self.window_ns = window_ns

    def __call__(self, intensity: float) -> float:
        if len(self.since) == 0:
            return 0.0
        window = (self.since / intensity // self.window_ns).astype(np.int64)
        return float(np.bincount(window, weights=self.demand).max()) / self.window_ns


def speedup(baseline: SimResult | Figures, studied: SimResult | Figures) -> dict[str, float]:
    """The storage speedup of `studied` over `baseline` (see the module's docstring)."""
    mean = baseline.mean_ms / studied.mean_ms if studied.mean_ms else float("inf")
    busy = baseline.busy_ns / studied.busy_ns if studied.busy_ns else float("inf")
    return {"speedup": mean, "busy_ratio": busy}


def registry() -> dict[str, list[tuple[str, str]]]:
    """Device kinds and cache policies the core knows."""
    from .cache import policies

    return {"devices": _core.device_kinds(), "policies": policies()}
