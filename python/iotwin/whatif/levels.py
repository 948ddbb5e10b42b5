"""How much model detail is enough (seed 000 Figure 6): for levels 1..max, the twin fitted at
that level is simulated beside the original on one device at one intensity, and its mean
and p95 response times compared with the original's.

The fits, twins and fidelity scores come from `levels.sweep` (full curve), so the level it
chooses is the one `iotwin fit --levels auto` chooses; the study adds the response-time view
and names the smallest level whose mean response is within 5% of the original's.
"""

from __future__ import annotations

import warnings
from functools import partial
from pathlib import Path
from statistics import fmean
from typing import Any

import numpy as np
from rich.console import Console
from rich.table import Table

from ..devices import describe, resolve
from ..errors import IotwinError
from ..formats.base import OP_READ
from ..levels import MAX_LEVELS, LevelPoint, sweep
from ..model import Model, ShortTraceWarning
from ..sim import Figures, SimResult, at_once, placed, simulate
from ..trace import Trace
from . import PRECISION, auto_intensity, ensemble, precision_note, replicate

KIND = "whatif-levels"
WITHIN = 0.05  # the mean-response bar of the issue (twin within 5% of the original)
SPLIT_ROWS = 12  # windows the table shows: those where twin and original differ the most


def relative_error(twin: float, original: float) -> float:
    """Signed relative difference of the twin against the original (0.1 = 10% higher)."""
    return twin / original - 1.0 if original else 0.0


def study(
    trace: Trace,
    device: str | dict[str, Any] = "hdd-7200",
    max_levels: int = MAX_LEVELS,
    intensity: float | None = None,
    seed: int = 0,
    fanout: int = 4,
    twins: int | None = None,
    bursts: bool = False,
) -> dict[str, Any]:
    """The levels study of `trace` on `device` (intensity None: auto on the original). Each
    level's response times are the means over `twins` twins (None: auto, in rounds until
    every mean is precise: `replicate`), with the range of their errors. `bursts` fits each
    level with its streams' burst lengths (`fit(..., bursts=True)`)."""
    if not 1 <= max_levels <= MAX_LEVELS:
        raise IotwinError(f"--max-levels {max_levels}: expected 1 to {MAX_LEVELS}")
    if len(trace) == 0:
        raise IotwinError(f"{trace.meta.source}: the trace has no requests")
    spec = resolve(device)
    original = placed(trace)
    scale = intensity if intensity is not None else auto_intensity(original, spec, seed)
    base = simulate(original, spec, scale, seed)
    with warnings.catch_warnings():
        # the sweep goes past the levels a short trace can fill on purpose
        warnings.simplefilter("ignore", ShortTraceWarning)
        chosen, sweep_points = sweep(trace, fanout, seed, max_levels, full=True, bursts=bursts)
    base_p95 = base.percentile_ms(95)
    windows = _windows(sweep_points[0].model)

    def twin_run(p: LevelPoint, twin_seed: int) -> tuple[Figures, np.ndarray | None]:
        twin = placed(p.model.synth(requests=len(trace), seed=twin_seed))
        result = simulate(twin, spec, scale, seed)
        split = window_split(twin, result, *windows) if p.levels == chosen else None
        return result.figures(), split

    runs: list[list[Figures]] = [[] for _ in sweep_points]
    splits: list[np.ndarray] = []  # the chosen level's twins, by window

    def run(seeds: list[int]) -> None:
        # every level's next twins synthesized and simulated at once, keeping their figures
        results = at_once([partial(twin_run, p, s) for p in sweep_points for s in seeds])
        for k, level_runs in enumerate(runs):
            done = results[k * len(seeds) : (k + 1) * len(seeds)]
            level_runs += [figures for figures, _ in done]
            splits.extend(split for _, split in done if split is not None)

    def samples() -> list[list[float]]:
        return [[getattr(r, key) for r in rs] for rs in runs for key in ("mean_ms", "p95_ms")]

    seeds, reached = replicate(twins, len(trace), seed, run, samples)
    points = [
        level_point(p, rs, base.mean_ms, base_p95) for p, rs in zip(sweep_points, runs, strict=True)
    ]
    within = next((p["levels"] for p in points if abs(p["mean_error"]) <= WITHIN), None)
    return {
        "kind": KIND,
        "workload": trace.meta.source,
        "device": describe(spec),
        "intensity": scale,
        "seed": seed,
        "twins": len(seeds),
        "seeds": seeds,
        "precision": {"target": PRECISION, "reached": reached, "fixed": twins is not None},
        "original": {
            "mean_ms": base.mean_ms,
            "p95_ms": base.percentile_ms(95),
            "utilisation": base.utilisation,
        },
        "points": points,
        "chosen": chosen,
        "within_5pct": within,
        "by_window": {
            "window_s": windows[0] / 1e9,
            "levels": chosen,
            "original": _rows(window_split(original, base, *windows)),
            "twin": _rows(np.mean(splits, axis=0)),
        },
    }


def _windows(model: Model) -> tuple[int, int]:
    """The model's fluctuation windows: (length in ns, how many)."""
    return int(model.doc["window_ns"]), max(len(s["windows"]) for s in model.streams)


def window_split(trace: Trace, result: SimResult, window_ns: int, windows: int) -> np.ndarray:
    """Per fluctuation window (as the fit cuts them; requests past the last count in it):
    requests, reads, summed response time (s) and of it the reads'. Where a twin's mean
    response matches the original's by errors that cancel (MSR: bursty writes too cheap in
    one window, reads too dear in another), this shows them."""
    ts = trace.numpy("ts_ns", np.int64)
    w = np.clip(ts // max(1, window_ns), 0, windows - 1)
    read = trace.numpy("op", np.uint8) == OP_READ
    seconds = result.response_ns.astype(np.float64) / 1e9
    columns = (
        np.bincount(w, minlength=windows),
        np.bincount(w, weights=read, minlength=windows),
        np.bincount(w, weights=seconds, minlength=windows),
        np.bincount(w, weights=seconds * read, minlength=windows),
    )
    return np.stack([c.astype(np.float64) for c in columns], axis=1)


def _rows(split: np.ndarray) -> list[dict[str, float]]:
    keys = ("requests", "reads", "response_s", "read_response_s")
    return [dict(zip(keys, map(float, row), strict=True)) for row in split]


def level_point(
    p: LevelPoint, runs: list[Figures], base_mean: float, base_p95: float
) -> dict[str, Any]:
    """One level's row: the means of its twins' figures, their errors against the original,
    the range of the single twins' errors and the confidence half-width of the mean error."""
    mean = ensemble([r.mean_ms for r in runs])
    p95 = ensemble([r.p95_ms for r in runs])
    point: dict[str, Any] = {"levels": p.levels}
    for key, e, base in (("mean", mean, base_mean), ("p95", p95, base_p95)):
        point[f"{key}_ms"] = e["mean"]
        point[f"{key}_error"] = relative_error(e["mean"], base)
        point[f"{key}_error_range"] = [relative_error(e[k], base) for k in ("low", "high")]
        point[f"{key}_error_ci95"] = None if e["ci95"] is None or not base else e["ci95"] / base
    point["transitions"] = p.transitions
    point["score"] = p.score
    point["utilisation"] = fmean(r.utilisation for r in runs)
    return point


def render(r: dict[str, Any], console: Console) -> None:
    o = r["original"]
    t = Table(
        title=f"{r['workload']} on {r['device']} at intensity {r['intensity']:.4g}x: original "
        f"mean {o['mean_ms']:.3f} ms, p95 {o['p95_ms']:.3f} ms ({o['utilisation']:.1%} busy)",
        title_justify="left",
    )
    # several twins: each mean error's 95% interval where the study has it, else the range of
    # the single twins' errors
    intervals = r.get("twins", 1) > 1 and "precision" in r
    ranged = r.get("twins", 1) > 1 and not intervals
    for c in ("levels", "transitions", "score", "mean ms", "mean error", "p95 ms", "p95 error"):
        t.add_column(c, justify="right", no_wrap=c.endswith("error"))
        if ranged and c.endswith("error"):
            t.add_column("range", justify="right", style="dim")
    for p in r["points"]:
        row = [f"{p['levels']}{' *' if p['levels'] == r['chosen'] else ''}",
               f"{p['transitions']:,}", f"{p['score']:.3f}"]  # fmt: skip
        for key in ("mean", "p95"):
            ci = p.get(f"{key}_error_ci95")
            error = f"{p[f'{key}_error']:+.1%}" + (f" ±{ci:.1%}" if ci is not None else "")
            row += [f"{p[f'{key}_ms']:.3f}", error]
            if ranged:
                low, high = p[f"{key}_error_range"]
                row.append(f"{low:+.0%} to {high:+.0%}")
        t.add_row(*row, style="bold green" if p["levels"] == r["chosen"] else None)
    console.print(t)
    within = r["within_5pct"]
    console.print(
        f"* chosen by fidelity score: {r['chosen']} levels; smallest level with mean response "
        + (f"within 5%: {within}" if within is not None else "within 5%: none")
    )
    if r.get("twins", 1) > 1:
        console.print(
            "twin figures: "
            + precision_note(r, "per level")
            + ("; ± the 95% interval of the mean error" if intervals else "; their range")
        )
    if "by_window" in r:
        console.print(_split_table(r["by_window"]))


def _split_table(split: dict[str, Any]) -> Table:
    """The chosen level's response time by fluctuation window, original beside the twins'
    mean: the windows where they differ most, in time order."""
    original, twin = split["original"], split["twin"]
    t = Table(
        title=f"Where the response time goes at {split['levels']} levels: summed response per "
        f"{split['window_s']:g} s window (twin: the mean over its twins)",
        title_justify="left",
    )
    for c in ("window", "requests", "reads", "response s", "of it reads s"):
        t.add_column(c, justify="right")
    gap = [abs(b["response_s"] - a["response_s"]) for a, b in zip(original, twin, strict=True)]
    shown = sorted(sorted(range(len(gap)), key=lambda i: -gap[i])[:SPLIT_ROWS])
    for i in shown:
        a, b = original[i], twin[i]
        t.add_row(
            str(i),
            f"{a['requests']:,.0f} / {b['requests']:,.0f}",
            f"{a['reads']:,.0f} / {b['reads']:,.0f}",
            f"{a['response_s']:.2f} / {b['response_s']:.2f}",
            f"{a['read_response_s']:.2f} / {b['read_response_s']:.2f}",
        )
    total = [sum(x["response_s"] for x in rows) for rows in (original, twin)]
    t.caption = f"original / twin; all windows: {total[0]:.2f} / {total[1]:.2f} s" + (
        f"; {len(gap) - len(shown)} windows closer than these not shown"
        if len(gap) > len(shown)
        else ""
    )
    return t


def plot(r: dict[str, Any], path) -> None:
    """Mean and p95 response of the twin per level against the original's (seed 000 Figure 6)."""
    from ..figures import save_figure

    def draw(ax) -> None:
        levels = [p["levels"] for p in r["points"]]
        for key, label, colour in (("mean_ms", "mean", "tab:blue"), ("p95_ms", "p95", "tab:red")):
            ax.plot(levels, [p[key] for p in r["points"]], marker="o", color=colour,
                    label=f"twin {label}")  # fmt: skip
            base = r["original"][key]
            halves = [p.get(f"{label}_error_ci95") for p in r["points"]]
            if all(h is not None for h in halves):  # each mean's 95% interval
                ax.errorbar(levels, [p[key] for p in r["points"]], fmt="none", ecolor=colour,
                            yerr=[base * h for h in halves], capsize=3)  # fmt: skip
            spans = [p.get(f"{label}_error_range") for p in r["points"]]
            if r.get("twins", 1) > 1 and all(spans):
                ax.fill_between(levels, [base * (1 + lo) for lo, _ in spans],
                                [base * (1 + hi) for _, hi in spans], color=colour, alpha=0.15)  # fmt: skip
            ax.axhline(r["original"][key], linestyle=":", color=colour, label=f"original {label}")
        ax.axvline(r["chosen"], color="grey", alpha=0.5, label=f"chosen ({r['chosen']} levels)")
        ax.set_ylim(bottom=0)
        ax.set_xticks(levels)
        ax.set_xlabel("model levels")
        ax.set_ylabel("response time (ms)")
        ax.set_title(f"{Path(r['workload']).name} at {r['intensity']:.3g}x\non {r['device']}")
        ax.legend(fontsize="small")

    save_figure(draw, path)
