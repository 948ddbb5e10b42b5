"""`whatif intensity`: achieved throughput and response time as the offered load grows (seed
000 Figure 3), and where the device saturates.

The saturation point is the lowest tried intensity at which the device no longer keeps up:
completed IOPS below 95% of offered IOPS (in an open loop the queue then grows for the whole
run). Beside it, the estimate from busy time: at intensity x the device is busy
x * busy(1) / span(1) of the time, so it saturates near span(1) / busy(1). The automatic
sweep is set around that estimate; a model's sweep is the mean of its twins'.
"""

from __future__ import annotations

from collections.abc import Iterable
from statistics import fmean
from typing import Any

from rich.console import Console
from rich.progress import Progress
from rich.table import Table

from ..devices import describe, resolve
from ..sim import Figures, SimResult, simulate, simulate_many
from ..trace import Trace
from . import PRECISION, Workload, ensemble, precision_note, replicate

KEEPS_UP = 0.95
# --scales auto: these multiples of the busy-time estimate of saturation, so the sweep shows
# the knee (a fixed 0.125x-4x missed it on the pgbench sample, saturated from 0.125x)
AROUND_ESTIMATE = (0.125, 0.25, 0.5, 1, 2, 4)


def study(
    w: Workload,
    scales: list[float] | None,
    device: str,
    seed: int = 0,
    progress: Progress | None = None,
    twins: int | None = None,
) -> dict[str, Any]:
    """The sweep of the original trace, or of a model's twins: one realization tells little
    on a short model (msr_hm0's 1,000 requests: a twin's mean response moves ~20% with the
    seed), so a model's figures are means over `twins` twins (None: auto, in rounds until
    every figure that keeps up is precise, as the other studies do: `replicate`). `scales`
    None: around the busy-time estimate of the original (or of the first twin)."""
    spec = resolve(device)
    around = None
    made: dict[int, Trace] = {}  # the realization the auto scales came from, to reuse once
    if scales is None:
        made[seed] = w.reference(seed)
        around = busy_estimate(simulate(made[seed], spec, 1.0, seed))
        scales = auto_scales(around)
    ordered = sorted(scales)
    # 1x is always run: the busy-time estimate of saturation comes from it
    simulated = sorted({*ordered, 1.0})
    task = progress.add_task("simulating", total=0) if progress else None
    runs: list[dict[float, Figures]] = []  # per realization, its run at each scale

    def realize(traces: Iterable[Trace], count: int) -> None:
        """Simulates each trace at every scale, one trace made at a time."""
        if progress is not None and task is not None:
            progress.update(task, total=(len(runs) + count) * len(simulated))
        advance = (lambda: progress.advance(task)) if progress is not None else None
        for trace in traces:
            results = simulate_many(trace, [(spec, x) for x in simulated], seed, advance)
            runs.append(dict(zip(simulated, results, strict=True)))

    if w.original is not None:
        realize([made.pop(seed, None) or w.reference(seed)], 1)
        seeds, reached, fixed = [], True, True
    else:
        seeds, reached = replicate(
            twins,
            w.requests,
            seed,
            lambda fresh: realize((made.pop(s, None) or w.twin(s) for s in fresh), len(fresh)),
            lambda: samples(runs, ordered),
        )
        fixed = twins is not None
    points = [point(x, [run[x] for run in runs]) for x in ordered]
    saturated = [p["scale"] for p in points if not p["keeps_up"]]
    estimates = [busy_estimate(run[1.0]) for run in runs]
    result: dict[str, Any] = {
        "kind": "whatif-intensity",
        "workload": w.name,
        "of": "original" if w.original is not None else "twin",
        "device": describe(spec),
        "requests": w.requests,
        "points": points,
        "saturation_scale": min(saturated) if saturated else None,
        "estimated_saturation_scale": None,
        "scales_around": around,
    }
    if all(e is not None for e in estimates):
        result["estimated_saturation_scale"] = fmean(e for e in estimates if e is not None)
    if w.original is None:
        result["twins"] = len(seeds)
        result["seeds"] = seeds
        result["precision"] = {"target": PRECISION, "reached": reached, "fixed": fixed}
    return result


def auto_scales(estimate: float | None) -> list[float]:
    """AROUND_ESTIMATE times the estimate, to 3 significant digits (around 1x without one: a
    workload that never keeps the device busy)."""
    around = 1.0 if estimate is None else estimate
    return sorted({float(f"{around * f:.3g}") for f in AROUND_ESTIMATE})


def busy_estimate(r: Figures | SimResult) -> float | None:
    """Where the device saturates by its busy time at 1x: span(1) / busy(1)."""
    return r.arrival_span_ns / (r.busy_ns / r.servers) if r.busy_ns else None


def keeps_up(r: Figures) -> bool:
    return r.arrival_span_ns == 0 or r.completed_iops >= KEEPS_UP * r.offered_iops


def samples(runs: list[dict[float, Figures]], scales: list[float]) -> list[list[float]]:
    """The figures whose means must be precise: completed IOPS at every scale, and mean and
    p95 response where every realization keeps up (past saturation the queue, and with it
    the response, grows with the run's length: no figure to pin down)."""
    out = []
    for x in scales:
        at = [run[x] for run in runs]
        out.append([r.completed_iops for r in at])
        if all(keeps_up(r) for r in at):
            out += [[r.mean_ms for r in at], [r.p95_ms for r in at]]
    return out


# The figures a model's sweep gives with their 95% intervals.
WITH_INTERVALS = ("completed_iops", "mean_ms", "p95_ms")


def point(scale: float, at: list[Figures]) -> dict[str, Any]:
    """One intensity's row: means over the realizations (the original's own figures when it
    is the only one), the share that kept up and, for several, each mean's 95% half-width.
    The row keeps up when the mean completed IOPS do."""
    figures = {key: ensemble([getattr(r, key) for r in at]) for key in WITH_INTERVALS}
    timed = all(r.arrival_span_ns for r in at)
    offered = fmean(r.offered_iops for r in at) if timed else None
    completed = figures["completed_iops"]["mean"]
    p: dict[str, Any] = {
        "scale": scale,
        "offered_iops": offered,
        **{key: e["mean"] for key, e in figures.items()},
        "utilisation": fmean(r.utilisation for r in at),
        "keeps_up": offered is None or completed >= KEEPS_UP * offered,
    }
    if len(at) > 1:
        p["kept_up_share"] = sum(keeps_up(r) for r in at) / len(at)
        p["ci95"] = {key: e["ci95"] for key, e in figures.items()}
    return p


def render(r: dict[str, Any], console: Console) -> None:
    many = r.get("twins", 1) > 1
    t = Table(title=f"{r['workload']} ({r['of']}) on {r['device']}: intensity sweep")
    columns = ["x", "offered IOPS", "done IOPS", "mean ms", "p95 ms", "busy"]
    for col in [*columns, *(["twins kept up"] if many else []), ""]:
        t.add_column(col, justify="right")
    for p in r["points"]:
        offered = "-" if p["offered_iops"] is None else f"{p['offered_iops']:,.1f}"
        flag = "" if p["keeps_up"] else "[red]sat.[/red]"
        row = [f"{p['scale']:g}x", offered]
        row += [with_ci(p, key) for key in WITH_INTERVALS]
        row.append(f"{p['utilisation']:.0%}")
        if many:
            row.append(f"{p['kept_up_share']:.0%}")
        t.add_row(*row, flag)
    console.print(t)
    sat = r["saturation_scale"]
    est = r["estimated_saturation_scale"]
    first = f"saturates from {sat:g}x" if sat is not None else "keeps up at every intensity tried"
    console.print(f"{first}; busy-time estimate of saturation: {est:.3g}x" if est else first)
    if r.get("scales_around"):
        console.print(f"(--scales auto: 1/8 to 4 times {r['scales_around']:.3g}x, the estimate)")
    if "twins" in r:
        console.print(
            precision_note(r, "of the model's length")
            + ("; ± the 95% interval of each mean" if many else "")
        )


def with_ci(p: dict[str, Any], key: str) -> str:
    """A point's mean, with ± its 95% half-width where it has one."""
    h = p.get("ci95", {}).get(key)
    return f"{p[key]:,.1f}" + (f" ±{h:,.1f}" if h is not None else "")


def plot(r: dict[str, Any], path) -> None:
    """Completed IOPS and mean response against offered IOPS (seed 000 Figure 3)."""
    from ..figures import save_figure

    def draw(ax) -> None:
        pts = [p for p in r["points"] if p["offered_iops"] is not None]
        x = [p["offered_iops"] for p in pts]
        ax.errorbar(x, [p["completed_iops"] for p in pts], yerr=bars(pts, "completed_iops"),
                    marker="o", capsize=3, label="completed IOPS")  # fmt: skip
        ax.plot(x, x, linestyle=":", color="grey", label="offered")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("offered IOPS")
        ax.set_ylabel("IOPS")
        rt = ax.twinx()
        rt.errorbar(x, [p["mean_ms"] for p in pts], yerr=bars(pts, "mean_ms"), marker="s",
                    color="tab:red", capsize=3, label="mean response")  # fmt: skip
        rt.set_yscale("log")
        rt.set_ylabel("mean response (ms)")
        ax.set_title(f"{r['workload']} on {r['device']}")
        handles, labels = ax.get_legend_handles_labels()
        more, more_labels = rt.get_legend_handles_labels()
        ax.legend(handles + more, labels + more_labels, loc="upper left")

    save_figure(draw, path)


def bars(points: list[dict[str, Any]], key: str) -> list[float] | None:
    """Each point's 95% half-width of `key` for error bars (0 where it has none), or None
    when no point has one (one realization)."""
    halves = [p.get("ci95", {}).get(key) for p in points]
    return None if all(h is None for h in halves) else [h or 0.0 for h in halves]
