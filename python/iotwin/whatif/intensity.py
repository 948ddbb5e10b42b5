"""`whatif intensity`: achieved throughput and response time as the offered load grows (seed
000 Figure 3), and where the device saturates.

The saturation point is the lowest tried intensity at which the device no longer keeps up:
completed IOPS below 95% of offered IOPS (in an open loop the queue then grows for the whole
run). Beside it, the estimate from busy time: at intensity x the device is busy
x * busy(1) / span(1) of the time, so it saturates near span(1) / busy(1).
"""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.progress import Progress
from rich.table import Table

from ..devices import describe, resolve
from ..sim import simulate, simulate_many
from . import Workload

KEEPS_UP = 0.95


def study(
    w: Workload, scales: list[float], device: str, seed: int = 0, progress: Progress | None = None
) -> dict[str, Any]:
    spec = resolve(device)
    trace = w.reference(seed)
    task = progress.add_task("simulating", total=len(scales)) if progress else None
    points, base = [], None
    ordered = sorted(scales)
    advance = (lambda: progress.advance(task)) if progress is not None else None
    runs = simulate_many(trace, [(spec, scale) for scale in ordered], seed, advance)
    for scale, r in zip(ordered, runs, strict=True):
        if scale == 1.0:
            base = r
        keeps_up = r.arrival_span_ns == 0 or r.completed_iops >= KEEPS_UP * r.offered_iops
        points.append(
            {
                "scale": scale,
                "offered_iops": r.offered_iops if r.arrival_span_ns else None,
                "completed_iops": r.completed_iops,
                "mean_ms": r.mean_ms,
                "p95_ms": r.p95_ms,
                "utilisation": r.utilisation,
                "keeps_up": keeps_up,
            }
        )
    saturated = [p["scale"] for p in points if not p["keeps_up"]]
    base = base or simulate(trace, spec, 1.0, seed).figures()
    estimate = base.arrival_span_ns / (base.busy_ns / base.servers) if base.busy_ns else None
    return {
        "kind": "whatif-intensity",
        "workload": w.name,
        "of": "original" if w.original is not None else "twin",
        "device": describe(spec),
        "requests": len(trace),
        "points": points,
        "saturation_scale": min(saturated) if saturated else None,
        "estimated_saturation_scale": estimate,
    }


def render(r: dict[str, Any], console: Console) -> None:
    t = Table(title=f"{r['workload']} ({r['of']}) on {r['device']}: intensity sweep")
    for col in (
        "x",
        "offered IOPS",
        "done IOPS",
        "mean ms",
        "p95 ms",
        "busy",
        "",
    ):
        t.add_column(col, justify="right")
    for p in r["points"]:
        offered = "-" if p["offered_iops"] is None else f"{p['offered_iops']:,.1f}"
        flag = "" if p["keeps_up"] else "[red]sat.[/red]"
        t.add_row(
            f"{p['scale']:g}x", offered, f"{p['completed_iops']:,.1f}", f"{p['mean_ms']:,.1f}",
            f"{p['p95_ms']:,.1f}", f"{p['utilisation']:.0%}", flag,
        )  # fmt: skip
    console.print(t)
    sat = r["saturation_scale"]
    est = r["estimated_saturation_scale"]
    first = f"saturates from {sat:g}x" if sat is not None else "keeps up at every intensity tried"
    console.print(f"{first}; busy-time estimate of saturation: {est:.3g}x" if est else first)


def plot(r: dict[str, Any], path) -> None:
    """Completed IOPS and mean response against offered IOPS (seed 000 Figure 3)."""
    from ..figures import save_figure

    def draw(ax) -> None:
        pts = [p for p in r["points"] if p["offered_iops"] is not None]
        x = [p["offered_iops"] for p in pts]
        ax.plot(x, [p["completed_iops"] for p in pts], marker="o", label="completed IOPS")
        ax.plot(x, x, linestyle=":", color="grey", label="offered")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("offered IOPS")
        ax.set_ylabel("IOPS")
        rt = ax.twinx()
        rt.plot(x, [p["mean_ms"] for p in pts], marker="s", color="tab:red", label="mean response")
        rt.set_yscale("log")
        rt.set_ylabel("mean response (ms)")
        ax.set_title(f"{r['workload']} on {r['device']}")
        ax.legend(loc="upper left")

    save_figure(draw, path)
