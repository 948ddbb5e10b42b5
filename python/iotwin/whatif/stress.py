"""Early problem detection (seed 001 section 6.1): the workload at rising intensity, with the
latency of each address region (the model's states at one depth of its tree; depth 1 gives
its `fanout` top-level states) compared against the rest, and the intensity where latency,
lateness or throughput breaks away.

It runs on the simulator (`--device`: the model's twin; every request's response time and
service demand from `SimResult.response_ns` and `demand_ns`; a slow zone can be injected with
`slow_regions`) or on real storage
with the engine (`--target`: a recorded open-loop run per step, response = completion -
scheduled issue, lateness = issue - scheduled issue).

Regions are judged on service time (the simulator's per-request demand; the engine's
completion - issue), so a slow zone's own cost stands apart from the queueing it causes every
request behind it; the steps' mean and p95 are response times.

The rules, stated in every result:
- outlier region: median latency above OUTLIER_RATIO x the median of the region medians and
  more than OUTLIER_MADS median absolute deviations above it; only regions with at least
  MIN_REGION_REQUESTS requests are judged, and only when at least 3 are;
- break-away step: mean response above BREAKAWAY_GROWTH x the first step's, or (engine) mean
  lateness above that growth and LATENESS_FLOOR_MS, or completed throughput below
  THROUGHPUT_FLOOR x offered.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Console
from rich.table import Table

from ..devices import describe, parse_bytes, resolve
from ..errors import IotwinError
from ..model import Model
from ..sim import at_once, placed, placed_for_threads, simulate

KIND = "whatif-stress"
MIN_REGION_REQUESTS = 20
OUTLIER_RATIO = 3.0
OUTLIER_MADS = 3.0
BREAKAWAY_GROWTH = 2.0
THROUGHPUT_FLOOR = 0.95
LATENESS_FLOOR_MS = 1.0
ENGINE_DURATION_S = 5.0

OUTLIER_RULE = (
    f"region median latency > {OUTLIER_RATIO:g} x the median of region medians and > "
    f"{OUTLIER_MADS:g} MADs above it (regions with >= {MIN_REGION_REQUESTS} requests, "
    "at least 3 of them)"
)
BREAKAWAY_RULE = (
    f"mean response > {BREAKAWAY_GROWTH:g} x the first step's (engine: or mean lateness > "
    f"{BREAKAWAY_GROWTH:g} x the first step's and > {LATENESS_FLOOR_MS:g} ms), or completed "
    f"throughput < {THROUGHPUT_FLOOR:.0%} of offered"
)


@dataclass
class Step:
    """What one intensity step measured, per request (times in ns, offsets in model bytes)."""

    intensity: float
    offset: np.ndarray
    response_ns: np.ndarray
    latency_ns: np.ndarray  # what regions are judged on: service time where known
    offered_iops: float
    completed_iops: float
    lateness_ns: np.ndarray | None = None
    extra: dict[str, Any] | None = None


# -- inputs ----------------------------------------------------------------------------------


def parse_ramp(text: str) -> list[float]:
    """Intensities from "1,2,4,8", ascending, each once."""
    values = []
    for item in filter(None, (v.strip() for v in text.split(","))):
        try:
            value = float(item)
        except ValueError:
            raise IotwinError(f"--ramp '{text}': '{item}' is not a number") from None
        if not value > 0:
            raise IotwinError(f"--ramp '{text}': intensities must be positive, got {item}")
        values.append(value)
    if not values:
        raise IotwinError(f"--ramp '{text}': give intensities like 1,2,4,8")
    return sorted(set(values))


def parse_slow(text: str) -> list[float]:
    """[start, end, factor] from "START:STOP:FACTOR" (sizes like 10G accepted)."""
    parts = text.split(":")
    if len(parts) != 3:
        raise IotwinError(f"--slow '{text}': expected START:STOP:FACTOR, e.g. 8G:16G:10")
    start = parse_bytes(parts[0], f"--slow '{text}' START")
    end = parse_bytes(parts[1], f"--slow '{text}' STOP")
    try:
        factor = float(parts[2])
    except ValueError:
        raise IotwinError(f"--slow '{text}': FACTOR '{parts[2]}' is not a number") from None
    if start >= end:
        raise IotwinError(f"--slow '{text}': START must be below STOP")
    if not factor > 0:
        raise IotwinError(f"--slow '{text}': FACTOR must be positive")
    return [start, end, factor]


def with_slow_regions(device: str | dict[str, Any], slow: list[list[float]]) -> dict[str, Any]:
    """The device spec with `slow` added to its slow_regions (a tiered device: its HDD's)."""
    spec = dict(resolve(device))
    if not slow:
        return spec
    if spec["kind"] == "tiered":
        spec["hdd"] = with_slow_regions(spec["hdd"], slow)
        return spec
    spec["slow_regions"] = [*spec.get("slow_regions", []), *slow]
    return spec


# -- regions and rules -----------------------------------------------------------------------


def region_bounds(capacity: int, count: int) -> list[tuple[int, int]]:
    """[start, end) of each of `count` equal regions; offset o is in region o*count//capacity."""
    return [(-(-i * capacity // count), -(-(i + 1) * capacity // count)) for i in range(count)]


def region_stats(step: Step, capacity: int, count: int) -> list[dict[str, Any]]:
    bounds = region_bounds(capacity, count)
    starts = np.array([b[0] for b in bounds], dtype=np.uint64)
    index = np.searchsorted(starts, step.offset, side="right") - 1  # no overflow, exact
    out = []
    for i, (start, end) in enumerate(bounds):
        ms = step.latency_ns[index == i] / 1e6
        out.append(
            {
                "region": i,
                "start": start,
                "end": end,
                "requests": int(ms.size),
                "median_ms": float(np.median(ms)) if ms.size else None,
                "mean_ms": float(ms.mean()) if ms.size else None,
                "p95_ms": float(np.percentile(ms, 95)) if ms.size else None,
                "outlier": False,
            }
        )
    mark_outliers(out)
    return out


def mark_outliers(regions: list[dict[str, Any]]) -> None:
    """Flags regions by OUTLIER_RULE (in place)."""
    judged = [r for r in regions if r["requests"] >= MIN_REGION_REQUESTS]
    if len(judged) < 3:
        return
    medians = np.array([r["median_ms"] for r in judged])
    centre = float(np.median(medians))
    mad = float(np.median(np.abs(medians - centre)))
    for r in judged:
        m = r["median_ms"]
        r["outlier"] = bool(m > OUTLIER_RATIO * centre and m - centre > OUTLIER_MADS * mad)


def summarize(step: Step, capacity: int, count: int) -> dict[str, Any]:
    ms = step.response_ns / 1e6
    doc: dict[str, Any] = {
        "intensity": step.intensity,
        "requests": int(ms.size),
        "offered_iops": step.offered_iops,
        "completed_iops": step.completed_iops,
        "mean_ms": float(ms.mean()) if ms.size else 0.0,
        "p95_ms": float(np.percentile(ms, 95)) if ms.size else 0.0,
    }
    if step.lateness_ns is not None:
        late = step.lateness_ns / 1e6
        doc["lateness_ms"] = float(late.mean()) if late.size else 0.0
        doc["lateness_p95_ms"] = float(np.percentile(late, 95)) if late.size else 0.0
    doc.update(step.extra or {})
    doc["regions"] = region_stats(step, capacity, count)
    return doc


def mark_breakaway(steps: list[dict[str, Any]]) -> float | None:
    """Flags steps by BREAKAWAY_RULE (in place); returns the first flagged intensity."""
    first = steps[0]
    for s in steps:
        why = []
        if s is not first and s["mean_ms"] > BREAKAWAY_GROWTH * first["mean_ms"]:
            why.append(f"mean response {s['mean_ms'] / max(first['mean_ms'], 1e-12):.1f}x")
        late = s.get("lateness_ms")
        if (
            s is not first
            and late is not None
            and late > BREAKAWAY_GROWTH * first["lateness_ms"]
            and late > LATENESS_FLOOR_MS
        ):
            why.append(f"mean lateness {late:.3g} ms")
        if s["completed_iops"] < THROUGHPUT_FLOOR * s["offered_iops"]:
            why.append(f"completed {s['completed_iops'] / s['offered_iops']:.0%} of offered")
        s["breakaway"] = bool(why)
        s["why"] = why
    return next((s["intensity"] for s in steps if s["breakaway"]), None)


def assemble(where: dict[str, Any], model: Model, steps: list[Step], depth: int) -> dict[str, Any]:
    capacity = int(model.doc["capacity"])
    count = int(model.doc["fanout"]) ** depth
    ramp = [summarize(s, capacity, count) for s in steps]
    breakaway = mark_breakaway(ramp)
    outliers = sorted({r["region"] for s in ramp for r in s["regions"] if r["outlier"]})
    return {
        "kind": KIND,
        **where,
        "capacity": capacity,
        "depth": depth,
        "region_count": count,
        "outlier_rule": OUTLIER_RULE,
        "breakaway_rule": BREAKAWAY_RULE,
        "ramp": ramp,
        "outliers": outliers,
        "breakaway_intensity": breakaway,
    }


def _check_depth(model: Model, depth: int) -> None:
    levels = int(model.doc["levels"])
    if not 1 <= depth <= levels:
        raise IotwinError(f"--depth {depth}: the model has levels 1 to {levels}")


# -- the two runners -------------------------------------------------------------------------


def on_simulator(
    model: Model,
    device: str | dict[str, Any],
    ramp: list[float],
    *,
    duration_s: float | None = None,
    slow: list[list[float]] | None = None,
    depth: int = 1,
    seed: int = 0,
    progress: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Stress on the simulator: the twin (the model's length, or `duration_s` of it at each
    intensity) on `device` with `slow` regions injected."""
    _check_depth(model, depth)
    spec = with_slow_regions(device, slow or [])
    whole = None if duration_s is not None else placed_for_threads(model.synth(seed=seed))

    def step(x: float) -> Step:
        if whole is None:
            trace, scale = placed(model.synth(duration_s=duration_s, intensity=x, seed=seed)), 1.0
        else:
            trace, scale = whole, x
        r = simulate(trace, spec, scale, seed)
        return Step(
            intensity=x,
            offset=trace.numpy("offset", np.uint64),
            response_ns=r.response_ns.astype(np.int64),
            latency_ns=r.demand_ns.astype(np.int64),
            offered_iops=r.offered_iops if r.arrival_span_ns else r.completed_iops,
            completed_iops=r.completed_iops,
            extra={"utilisation": r.utilisation},
        )

    finished = 0

    def done() -> None:
        nonlocal finished
        finished += 1
        if progress:
            progress(f"simulating {len(ramp)} intensities, one per core: {finished} done ...")

    if progress:
        progress(f"simulating {len(ramp)} intensities, one per core ...")
    steps = at_once([partial(step, x) for x in ramp], done)
    where = {
        "device": describe(spec),
        "slow_regions": _slow_of(spec),
        "region_latency": "service",
    }
    return assemble(where, model, steps, depth)


def _slow_of(spec: dict[str, Any]) -> list[list[float]]:
    return list((spec["hdd"] if spec["kind"] == "tiered" else spec).get("slow_regions", []))


def on_engine(
    model: Model,
    target: Path,
    ramp: list[float],
    opts: Any,
    *,
    depth: int = 1,
    progress: Callable[[str], None] | None = None,
    warn: Callable[[str], None] | None = None,
    checks: Any = None,
) -> dict[str, Any]:
    """Stress with the real engine: one recorded open-loop run of `opts.duration_s` (default
    ENGINE_DURATION_S) per intensity on the file `target` (devices need the engine's flags)."""
    from dataclasses import replace

    from .. import engine as eng

    _check_depth(model, depth)
    target = Path(target)
    if target.is_dir():
        raise IotwinError(
            f"{target} is a directory: engine stress needs a file target (or a block device "
            "with --allow-device)"
        )
    if opts.requests is None and opts.duration_s is None:
        opts = replace(opts, duration_s=ENGINE_DURATION_S)
    steps, last = [], None
    for x in ramp:
        if progress:
            progress(f"running intensity {x:g}x on {target} ...")
        step_opts = replace(opts, intensity=x, record=True)
        result = eng.run(model, target, step_opts, warn=warn, checks=checks)
        steps.append(_engine_step(x, result))
        last = result
        if result["partial"]:
            break
    where = {
        "target": str(target),
        "target_size": last["target_size"] if last else None,
        "engine": last["engine"] if last else None,
        "region_latency": "service",
        "direct": last["direct"] if last else None,
    }
    return assemble(where, model, steps, depth)


def _engine_step(intensity: float, result: dict[str, Any]) -> Step:
    rec = result["record"]
    sched = np.frombuffer(rec["sched_ns"], dtype=np.int64)
    issue = np.frombuffer(rec["issue_ns"], dtype=np.int64)
    done = np.frombuffer(rec["done_ns"], dtype=np.int64)
    n = sched.size
    start = int(sched.min()) if n else 0
    sched_span = (int(sched.max()) - start) / 1e9 if n else 0.0
    done_span = (int(done.max()) - start) / 1e9 if n else 0.0
    completed = n / done_span if done_span > 0 else 0.0
    return Step(
        intensity=intensity,
        offset=np.frombuffer(rec["offset"], dtype=np.uint64),
        response_ns=done - sched,
        latency_ns=done - issue,
        offered_iops=n / sched_span if sched_span > 0 else completed,
        completed_iops=completed,
        lateness_ns=issue - sched,
        extra={"errors": int(result["total"]["errors"]), "partial": bool(result["partial"])},
    )


# -- rendering -------------------------------------------------------------------------------


def _ms(v: float | None) -> str:
    return "-" if v is None else f"{v:,.3f}"


def _gib(n: float) -> str:
    return f"{n / 2**30:,.2f}"


def render(r: dict[str, Any], console: Console) -> None:
    on = r.get("device") or r.get("target")
    slow = r.get("slow_regions") or []
    injected = "".join(f"; slow [{_gib(a)}, {_gib(b)}) GiB x{f:g}" for a, b, f in slow)
    engine = "lateness_ms" in r["ramp"][0]
    t = Table(title=f"stress on {on}{injected}", title_justify="left")
    cols = ["intensity", "requests", "offered IOPS", "done IOPS", "mean ms", "p95 ms"]
    cols += ["late ms"] if engine else ["busy"]
    for c in [*cols, "break"]:
        t.add_column(c, justify="right")
    for i, s in enumerate(r["ramp"]):
        t.add_row(
            f"{s['intensity']:g}x",
            f"{s['requests']:,}",
            f"{s['offered_iops']:,.1f}",
            f"{s['completed_iops']:,.1f}",
            _ms(s["mean_ms"]),
            _ms(s["p95_ms"]),
            _ms(s["lateness_ms"]) if engine else f"{s['utilisation']:.1%}",
            f"[bold red]({i + 1})[/bold red]" if s["breakaway"] else "",
        )
    console.print(t)
    for i, s in enumerate(r["ramp"]):
        if s["breakaway"]:
            console.print(f"  ({i + 1}) {s['intensity']:g}x: " + "; ".join(s["why"]))
    regions = Table(
        title=f"median {r['region_latency']} time (ms) per region: {r['region_count']} regions "
        f"at depth {r['depth']}",
        title_justify="left",
    )
    for c in ["region", "GiB", "requests"] + [f"{s['intensity']:g}x" for s in r["ramp"]]:
        regions.add_column(c, justify="right")
    for i, first in enumerate(r["ramp"][0]["regions"]):
        cells = []
        for s in r["ramp"]:
            g = s["regions"][i]
            text = _ms(g["median_ms"])
            cells.append(f"[bold red]{text} ![/bold red]" if g["outlier"] else text)
        regions.add_row(
            str(i), f"{_gib(first['start'])}-{_gib(first['end'])}", f"{first['requests']:,}", *cells
        )
    console.print(regions)
    out = ", ".join(map(str, r["outliers"])) or "none"
    brk = r["breakaway_intensity"]
    console.print(f"outlier regions (! above): {out}  [dim]rule: {r['outlier_rule']}[/dim]")
    console.print(
        f"break-away intensity: {'none in the ramp' if brk is None else f'{brk:g}x'}  "
        f"[dim]rule: {r['breakaway_rule']}[/dim]"
    )


def plot(r: dict[str, Any], path) -> None:
    """Mean response against intensity with the break-away marked, and each region's median
    service time (outliers drawn solid, the rest dotted)."""
    from ..figures import save_figure

    def draw(ax) -> None:
        x = [s["intensity"] for s in r["ramp"]]
        ax.plot(x, [s["mean_ms"] for s in r["ramp"]], marker="o", color="black",
                label="mean response")  # fmt: skip
        others = "other regions"
        for i in range(r["region_count"]):
            medians = [s["regions"][i]["median_ms"] for s in r["ramp"]]
            if any(m is None for m in medians):
                continue
            if i in r["outliers"]:
                ax.plot(x, medians, marker=".", label=f"region {i} median {r['region_latency']}")
            else:
                ax.plot(x, medians, linestyle=":", color="grey", label=others)
                others = None  # one legend entry for all of them
        if r["breakaway_intensity"] is not None:
            ax.axvline(r["breakaway_intensity"], color="tab:red", alpha=0.5, label="break-away")
        ax.set_xscale("log")
        ax.set_xticks(x, [f"{v:g}x" for v in x])
        ax.minorticks_off()
        ax.set_yscale("log")
        ax.set_xlabel("intensity")
        ax.set_ylabel("ms")
        ax.set_title(f"stress on {r.get('device') or r.get('target')}", fontsize="small")
        ax.legend(fontsize="small")

    save_figure(draw, path)
