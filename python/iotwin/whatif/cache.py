"""`whatif cache`: storage speedup of an SSD cache of growing size over an HDD (seed 000
section V.A, Figure 7, Table VII), for the original trace, its synthetic twin and the uniform
baseline side by side. The twin should follow the original; the baseline, without locality,
should not (that is the point of modelling locality)."""

from __future__ import annotations

from dataclasses import dataclass
from math import isfinite
from statistics import fmean
from typing import Any

import numpy as np
import polars as pl
from rich.console import Console
from rich.progress import Progress
from rich.table import Table

from ..devices import DEFAULT_DIRTY, describe, resolve, tiered
from ..formats.base import OP_READ
from ..report.figures import bytes_label
from ..sim import simulate, simulate_many, speedup
from ..trace import Trace
from ..validate import lru, reuse_shares
from . import PRECISION, Workload, auto_intensity, half_width, precision_note, replicate

# Cache sizes when none are given: these fractions of the workload's footprint.
AUTO_FRACTIONS = (0.0, 0.125, 0.25, 0.5, 1.0)
BLOCK = 4096


def data_touched(trace: Trace) -> tuple[int, dict[str, float | None]]:
    """The footprint in bytes (the distinct 4 KiB blocks the trace touches, each volume or
    file its own address space, as the miss-ratio curves count them), and the shares of read and of write block accesses to a
    block accessed before (validate's `read_reuse` and `write_reuse`), in one pass: what a
    cache of the whole footprint serves, by operation."""
    curve = lru(trace, [])
    return curve.distinct * BLOCK, reuse_shares(curve)


def shared_offsets(trace: Trace) -> float | None:
    """The share of requests that start on a 4 KiB block where another volume's (or
    device's) requests start too, None where the trace has one address space or its files are
    laid apart (file-level traces). Tencent's volumes share a file-system layout: 8.0% of its
    requests so, its twin's 0.5%. The simulated device keeps each volume at its own offsets,
    which its head sees as near, while its cache keys each volume's blocks apart
    (`sim.volume_spaces`; docs/simulator.md)."""
    from ..cache import SPACE_SHIFT
    from ..validate import address_space

    if "file" in trace.columns or trace.df.height == 0:
        return None
    _, space = np.unique(address_space(trace), return_inverse=True)
    block = trace.numpy("offset", np.uint64) // np.uint64(BLOCK)
    shift = np.uint64(SPACE_SHIFT)
    if space.max() == 0 or space.max() >= 1 << (64 - SPACE_SHIFT) or block.max() >> shift:
        return None  # one address space, or too many to key apart (`cache.block_stream`)
    # each (space, block) once, keyed as `cache.block_stream` keys them; then the blocks
    # more than one space starts a request on
    keys = np.unique((space.astype(np.uint64) << shift) | block)
    blocks, spaces = np.unique(keys & np.uint64((1 << SPACE_SHIFT) - 1), return_counts=True)
    return float(np.isin(block, blocks[spaces > 1]).mean())


def auto_sizes(fp: int) -> list[int]:
    """The AUTO_FRACTIONS of a footprint of `fp` bytes, in whole blocks."""
    return sorted({int(fp * f) // BLOCK * BLOCK for f in AUTO_FRACTIONS})


def curve(
    trace: Trace, sizes: list[int], stack: dict[str, Any], intensity: float, seed: int, tick
) -> list[dict[str, Any]]:
    """Speedup at each cache size over the bare HDD, same arrivals."""
    cached = [size for size in sizes if size]
    runs = [(stack["over"], intensity)] + [(tiered(size, **stack), intensity) for size in cached]
    base, *results = simulate_many(trace, runs, seed, tick)
    by_size = dict(zip(cached, results, strict=True))
    points = []
    for size in sizes:
        if size == 0:
            r, s = base, {"speedup": 1.0, "busy_ratio": 1.0}
            tick()  # the bare disk's run stands for the empty cache
        else:
            r = by_size[size]
            s = speedup(base, r)
        points.append(
            {
                "size": size,
                **s,
                "mean_ms": r.mean_ms,
                "p95_ms": r.p95_ms,
                "hit_ratio": r.cache_hit_ratio,
            }
        )
    return points


@dataclass(frozen=True)
class ReadsAlone:
    """The trace's reads alone on the bare disk: their mean response and, of it, the mean
    service (the disk's busy time per read; the rest is waiting behind other reads)."""

    mean_ms: float
    service_ms: float


def reads_alone(trace: Trace, over: str, intensity: float, seed: int) -> ReadsAlone | None:
    """The trace's reads alone on the bare disk, at their own times: what the disk serves
    once a write-back cache takes the writes. A twin whose reads are less local than the
    original's (runs broken by the writes between them) shows it in their service; one whose
    reads arrive more bunched, in their waiting, while its whole mix matches (None: no
    reads)."""
    reads = trace.df.filter(pl.col("op") == OP_READ)
    if reads.height == 0:
        return None
    r = simulate(Trace(reads, trace.meta), over, intensity, seed)
    return ReadsAlone(r.mean_ms, r.busy_ns / 1e6 / reads.height)


def study(
    w: Workload,
    sizes: list[int] | None,
    over: str = "hdd-7200",
    ssd: str = "ssd-sata",
    policy: str = "lru",
    write: str = "back",
    intensity: float | None = None,
    seed: int = 0,
    progress: Progress | None = None,
    twins: int | None = None,
    dirty: float = DEFAULT_DIRTY,
) -> dict[str, Any]:
    """The curves of the original (when there is one), of `twins` twins (None: auto, in rounds
    until every mean speedup is precise: `replicate`) and of as many uniform baselines, each
    synthesized one after the other (a twin's trace is freed before the next is made); the
    twins' and baselines' curves are their means, with ranges and confidence intervals."""
    makers = {"twin": w.twin, "uniform": w.uniform}
    if w.original is not None:
        makers = {"original": w.reference, **makers}
    first = next(iter(makers))
    reference = makers[first](seed)
    hdd = resolve(over)
    if intensity is None:
        intensity = auto_intensity(reference, hdd, seed)
    reference_touched = data_touched(reference)
    reference_fp = reference_touched[0]
    sizes = auto_sizes(reference_fp) if sizes is None else sorted(set(sizes))
    stack = {"over": over, "ssd": ssd, "policy": policy, "write": write, "dirty": dirty}
    task = progress.add_task("simulating", total=0) if progress else None

    def tick() -> None:
        if progress is not None:
            progress.advance(task)

    planned: list[int] = []  # simulations announced to the progress bar, round by round
    curves: dict[str, list[list[dict[str, Any]]]] = {}
    footprints: dict[str, list[int]] = {}
    reuse: dict[str, list[dict[str, float | None]]] = {}
    alone: dict[str, list[ReadsAlone | None]] = {}
    shared: dict[str, list[float | None]] = {}

    def realize(name: str, seeds: list[int]) -> None:
        """Simulates these realizations one after the other (a trace is freed before the next
        is made), the reference reused."""
        planned.append(len(seeds) * (len(sizes) + 2))
        if progress is not None:
            progress.update(task, total=sum(planned))
        for s in seeds:
            is_reference = (name, s) == (first, seed)
            t = reference if is_reference else makers[name](s)
            fp, shares = reference_touched if is_reference else data_touched(t)
            footprints.setdefault(name, []).append(fp)
            reuse.setdefault(name, []).append(shares)
            curves.setdefault(name, []).append(curve(t, sizes, stack, intensity, seed, tick))
            alone.setdefault(name, []).append(reads_alone(t, over, intensity, seed))
            shared.setdefault(name, []).append(shared_offsets(t))
            tick()

    def run(seeds: list[int]) -> None:
        for name in ("twin", "uniform"):
            realize(name, seeds)

    def samples() -> list[list[float]]:
        return [speedups for name in ("twin", "uniform") for speedups in by_size(curves[name])]

    if "original" in makers:
        realize("original", [seed])
    seeds, reached = replicate(twins, w.requests, seed, run, samples)
    points = {name: mean_points(runs) for name, runs in curves.items()}
    result: dict[str, Any] = {
        "kind": "whatif-cache",
        "workload": w.name,
        # the twin's model calibrated to the trace (rounds, scores), or None
        "calibration": w.model.doc.get("fit", {}).get("calibration"),
        "device": describe(hdd),
        "cache": f"{ssd} {policy} write-{write}"
        + (f", cleaned to {dirty:.0%} dirty" if write == "back" else ""),
        "write": write,
        "intensity": intensity,
        "twins": len(seeds),
        "seeds": seeds,
        "precision": {"target": PRECISION, "reached": reached, "fixed": twins is not None},
        "footprint_bytes": reference_fp,
        "footprints": {name: round(fmean(fp)) for name, fp in footprints.items()},
        "reuse": {name: mean_shares(r) for name, r in reuse.items()},
        "reads_alone_ms": {name: mean_alone(v, "mean_ms") for name, v in alone.items()},
        "reads_alone_service_ms": {name: mean_alone(v, "service_ms") for name, v in alone.items()},
        # volumes' requests on blocks other volumes' requests start on too (None: one
        # address space)
        "shared_offsets": {name: mean_or_none(v) for name, v in shared.items()},
        "sizes": sizes,
        "curves": {name: [p["speedup"] for p in pts] for name, pts in points.items()},
        "busy_curves": {name: [p["busy_ratio"] for p in pts] for name, pts in points.items()},
        "ranges": {name: speedup_range(c) for name, c in curves.items() if name != "original"},
        "ci95": {
            name: [half_width(v) for v in by_size(c)]
            for name, c in curves.items()
            if name != "original"
        },
        "points": points,
    }
    if "original" in points:
        result["twin_max_error"] = max_error(points["original"], points["twin"])
        result["uniform_max_error"] = max_error(points["original"], points["uniform"])
        for name in ("twin", "uniform"):
            result[f"{name}_max_busy_error"] = max_error(
                points["original"], points[name], "busy_ratio"
            )
    return result


def by_size(runs: list[list[dict[str, Any]]]) -> list[list[float]]:
    """Each size's speedups over the realizations."""
    return [[p["speedup"] for p in at] for at in zip(*runs, strict=True)]


def speedup_range(runs: list[list[dict[str, Any]]]) -> dict[str, list[float]]:
    """Each size's lowest and highest speedup over the realizations."""
    at_sizes = by_size(runs)
    return {"low": [min(v) for v in at_sizes], "high": [max(v) for v in at_sizes]}


def mean_shares(runs: list[dict[str, float | None]]) -> dict[str, float | None]:
    """Each share's mean over the realizations (None where a trace has no such operation)."""
    return {key: mean_or_none([r[key] for r in runs]) for key in runs[0]}


def mean_alone(runs: list[ReadsAlone | None], field: str) -> float | None:
    """One figure of the reads alone, averaged over the realizations (None: no reads)."""
    return mean_or_none([None if r is None else getattr(r, field) for r in runs])


def mean_or_none(values: list[float | None]) -> float | None:
    """The mean, or None where a realization has no value (a trace without reads)."""
    return None if None in values else fmean(v for v in values if v is not None)


def mean_points(runs: list[list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """Each size's figures averaged over the realizations (a hit ratio stays None at size 0)."""
    out = []
    for at_size in zip(*runs, strict=True):
        p = {"size": at_size[0]["size"]}
        for key in ("speedup", "busy_ratio", "mean_ms", "p95_ms", "hit_ratio"):
            values = [q[key] for q in at_size]
            p[key] = None if None in values else fmean(values)
        out.append(p)
    return out


def max_error(
    reference: list[dict[str, Any]], other: list[dict[str, Any]], key: str = "speedup"
) -> float:
    """The largest absolute speedup difference over the sizes (`key`: "busy_ratio" for the
    device busy-time speedup)."""
    return max(abs(a[key] - b[key]) for a, b in zip(reference, other, strict=True))


def render(r: dict[str, Any], console: Console) -> None:
    names = list(r["curves"])
    t = Table(
        title=f"SSD cache speedup over {r['device']} ({r['cache']}, intensity {r['intensity']:.3g}x)"
    )
    # several realizations: the mean's 95% interval where the study has it (`ci95`), else the
    # range of the single realizations
    intervals = r.get("ci95", {}) if r.get("twins", 1) > 1 else {}
    ranged = {n for n in names if r.get("twins", 1) > 1 and n in r.get("ranges", {})} - set(
        intervals
    )
    t.add_column("cache\nsize", justify="right", no_wrap=True)
    for name in names:
        t.add_column(f"{name}\nspeedup", justify="right", no_wrap=True)
        if name in ranged:
            t.add_column("range", justify="right", style="dim")
        t.add_column("hit\nratio", justify="right", style="dim", no_wrap=True)
    for i, size in enumerate(r["sizes"]):
        row = [bytes_label(size)]
        for name in names:
            p = r["points"][name][i]
            ci = intervals.get(name, [None] * (i + 1))[i]
            row.append(f"{p['speedup']:.3f}" + (f" ±{ci:.2f}" if ci else ""))
            if name in ranged:
                span = r["ranges"][name]
                row.append(f"{span['low'][i]:.2f}-{span['high'][i]:.2f}")
            row.append("-" if p["hit_ratio"] is None else f"{p['hit_ratio']:.1%}")
        t.add_row(*row)
    console.print(t)
    if r.get("twins", 1) > 1:
        console.print(
            "twin and uniform: "
            + precision_note(r, "and uniform baselines")
            + ("; ± the 95% interval of the mean" if "ci95" in r else "; their range")
        )
    if r.get("calibration"):
        from ..calibrate import candidate_label

        c = r["calibration"]
        scores = c["largest_miss_ratio_deviation"]
        console.print(
            f"twin calibrated to the trace ({c['rounds']} rounds, "
            f"{candidate_label(c['chosen'])} kept): largest LRU miss-ratio deviation "
            f"{scores[0]:.3f} as fitted -> {scores[c['chosen']]:.3f}"
        )
    for line in study_lines(r):
        console.print(line)
    for caution in cautions(r):
        console.print(f"[yellow]{caution}[/yellow]")


def study_lines(r: dict[str, Any]) -> list[str]:
    """The lines under a study's table, for those of its figures it has (the terminal and
    the HTML report print the same)."""
    lines = []
    if "footprints" in r or "footprint_bytes" in r:
        lines.append(footprint_line(r))
    if "reuse" in r:
        lines.append(reuse_line(r))
    if r.get("reads_alone_ms"):
        lines.append(reads_alone_line(r))
    if r.get("busy_curves"):
        lines.append(busy_line(r))
    if "twin_max_error" in r:
        lines.append(errors_line(r))
    return lines


# A twin touching this much more (or less) data than the original shifts its curve.
FOOTPRINT_TOLERANCE = 1.25


def footprint_line(r: dict[str, Any]) -> str:
    sizes = r.get("footprints") or {"workload": r["footprint_bytes"]}
    return "footprint (distinct 4 KiB blocks): " + ", ".join(
        f"{name} {bytes_label(b)}" for name, b in sizes.items()
    )


def reuse_line(r: dict[str, Any]) -> str:
    """Re-read and rewritten shares per workload: a write-back cache's speedup follows the
    re-reads, so a twin re-reading less than its original shows a lower curve."""

    def pct(v: Any) -> str:
        return f"{v:.1%}" if isinstance(v, int | float) else "-"

    return "block accesses to data touched before, reads / writes: " + ", ".join(
        f"{name} {pct(u.get('read'))} / {pct(u.get('write'))}"
        for name, u in r["reuse"].items()
        if isinstance(u, dict)
    )


# A twin re-reading this much less (or more) of its read blocks than the original: validate's
# tolerance for `read_reuse`.
REREAD_TOLERANCE = 0.05


def reuse_caution(r: dict[str, Any]) -> str | None:
    """A warning when the twin re-reads a share of its read blocks far from the original's: a
    cache near the footprint then serves it fewer (or more) reads, so its speedups there are
    off (pgbench's twins: 81.5% against 92.1%)."""
    reuse = r.get("reuse", {})
    shares = [reuse.get(name, {}).get("read") for name in ("original", "twin")]
    if not all(isinstance(v, int | float) for v in shares):
        return None
    original, twin = shares
    if abs(twin - original) <= REREAD_TOLERANCE:
        return None
    direction = "under" if twin < original else "over"
    return (
        f"the twin re-reads {twin:.1%} of its read blocks against the original's "
        f"{original:.1%}: its speedups for caches near the footprint are {direction}estimated"
    )


def reads_alone_line(r: dict[str, Any]) -> str:
    service = r.get("reads_alone_service_ms") or {}

    def figure(name: str, ms: float | None) -> str:
        if ms is None:
            return f"{name} -"
        part = service.get(name)
        return f"{name} {ms:.3g} ms" + ("" if part is None else f" ({part:.3g})")

    heading = "mean response (of it service)" if service else "mean response"
    return f"reads alone on the bare disk, {heading}: " + ", ".join(
        figure(name, ms) for name, ms in r["reads_alone_ms"].items()
    )


# A twin whose reads alone take this much longer (or shorter) than the original's on the bare
# disk: 10%, twice the response-time bar of the whole mix.
READS_ALONE_TOLERANCE = 1.10


def write_back(r: dict[str, Any]) -> bool:
    """Whether the study's cache takes the writes (studies before the `write` field say it in
    their `cache` text)."""
    return r.get("write", "back" if "write-back" in r.get("cache", "") else "") == "back"


def reads_alone_caution(r: dict[str, Any]) -> str | None:
    """A warning when, under a write-back cache, the twin's reads alone cost the bare disk far
    more (or less) than the original's: the cache takes the writes, the disk serves the read
    misses, and their cost, not only their number, sets the speedup. It says which part of
    the cost differs. Service: cloudPhysics' reads resume their run after each write (70% of
    the reads that follow a write start where the previous read ended), its twin's do not
    (3%): 1.85x the original's service. Waiting: TPC-C's twin serves its reads in the
    original's time, but they arrive more bunched and wait 1.45x as long."""
    alone = r.get("reads_alone_ms") or {}
    original, twin = alone.get("original"), alone.get("twin")
    if not original or twin is None or not write_back(r):
        return None
    ratio = twin / original
    if 1 / READS_ALONE_TOLERANCE <= ratio <= READS_ALONE_TOLERANCE:
        return None
    direction = "under" if ratio > 1 else "over"
    return (
        f"the twin's reads alone take {ratio:.2f}x the original's mean response on the bare "
        f"disk{reads_alone_cause(r, original, twin)}, so with the writes in the cache its "
        f"speedups are {direction}estimated"
    )


def reads_alone_cause(r: dict[str, Any], original: float, twin: float) -> str:
    """Which part of the reads' cost sets the twin's apart: their service (where they are)
    or their waiting (when they come)."""
    service = r.get("reads_alone_service_ms") or {}
    so, st = service.get("original"), service.get("twin")
    more = twin > original
    if so is None or st is None:  # a study from before the split
        return f": they are {'less' if more else 'more'} local than the original's"
    extra_service, extra_wait = st - so, (twin - st) - (original - so)
    if abs(extra_service) >= abs(extra_wait):
        why = f"they are {'less' if extra_service > 0 else 'more'} local than the original's"
    else:
        why = f"they arrive {'more' if extra_wait > 0 else 'less'} bunched than the original's"
    return f", {extra_service:+.2f} ms a read in service and {extra_wait:+.2f} ms in waiting: {why}"


def busy_line(r: dict[str, Any]) -> str:
    """The device busy-time speedup per cache size: the disk work the cache saves, which
    queueing does not enter (the response-time speedup's other half)."""
    curves = r.get("busy_curves") or {}

    def cached(values: list[float]) -> str:  # the sizes with a cache (1 without)
        kept = zip(r["sizes"], values, strict=True)
        return " ".join(f"{v:.2f}" for size, v in kept if size and v is not None)

    return "device busy-time speedup (the disk work saved): " + "; ".join(
        f"{name} {cached(values)}" for name, values in curves.items()
    )


def errors_line(r: dict[str, Any]) -> str:
    """The twin's and the baseline's largest differences from the original's curves."""
    line = (
        f"largest speedup difference from the original: twin {r['twin_max_error']:.3f}, "
        f"uniform baseline {r['uniform_max_error']:.3f}"
    )
    if "twin_max_busy_error" in r:
        line += (
            f"; in busy time: twin {r['twin_max_busy_error']:.3f}, "
            f"uniform baseline {r['uniform_max_busy_error']:.3f}"
        )
    return line


def footprint_caution(r: dict[str, Any]) -> str | None:
    """A warning when the twin's footprint is far from the original's: a cache of a given
    size then holds a different share of its data, so the speedups near the footprint are
    off (cloudPhysics' twin touches 2.3x the original's blocks; docs/model.md)."""
    fp = r.get("footprints", {})
    if "original" not in fp or "twin" not in fp or not fp["original"]:
        return None
    ratio = fp["twin"] / fp["original"]
    if 1 / FOOTPRINT_TOLERANCE <= ratio <= FOOTPRINT_TOLERANCE:
        return None
    direction = "under" if ratio > 1 else "over"
    return (
        f"the twin touches {ratio:.2f}x the original's blocks: its speedups for caches near "
        f"the footprint are {direction}estimated"
    )


def baseline_caution(r: dict[str, Any]) -> str | None:
    """A warning when the twin's curve is no closer to the original's than the uniform
    baseline's (largest difference over the sizes): the twin's locality then does not carry
    this decision (measured: TPC-C's twin .110 against the baseline's .087, MSR's 1.84 against
    1.10; pgbench's 5.19 against 22.3 and Tencent's .30 against .94 are closer). Where its
    busy-time curve is the closer one (MSR: .23 against .98), the twin does carry the disk
    work the cache saves, and the warning says so."""
    twin, uniform = r.get("twin_max_error"), r.get("uniform_max_error")
    if twin is None or uniform is None or twin < uniform:
        return None
    busy = [r.get(f"{name}_max_busy_error") for name in ("twin", "uniform")]
    work = (
        f"; its busy-time curve is closer ({busy[0]:.3f} against {busy[1]:.3f}): the twin "
        f"does carry the disk work this cache saves"
        if None not in busy and busy[0] < busy[1]
        else ""
    )
    return (
        f"the twin's speedups are no closer to the original's than the uniform baseline's "
        f"(largest difference {twin:.3f} against {uniform:.3f}): do not size this cache on the "
        f"twin's response times{work}"
    )


# A twin whose cache saves this much more (or less) of the disk's work than the original's,
# at some size: the busy-time speedups' ratio.
BUSY_TOLERANCE = 1.25


def busy_caution(r: dict[str, Any]) -> str | None:
    """A warning when the cache saves the twin's disk far more (or less) work than the
    original's at some size (busy-time speedups more than 1.25x apart), even where the
    response-time speedups agree: pgbench's twins' disk, with the whole footprint cached,
    works 1/22.5 of its bare time against the original's 1/68.3, their speedups 26.2 and
    28.2 (the SSD's latency is most of the response there)."""
    curves = r.get("busy_curves") or {}
    original, twin = curves.get("original"), curves.get("twin")
    if not original or not twin:
        return None
    # (a disk idle under the cache has no finite ratio: nothing to compare there)
    points = zip(original, twin, r["sizes"], strict=True)
    pairs = [(o, t, size) for o, t, size in points if o and t and isfinite(o) and isfinite(t)]
    if not pairs:
        return None
    o, t, size = max(pairs, key=lambda p: max(p[1] / p[0], p[0] / p[1]))
    if 1 / BUSY_TOLERANCE <= t / o <= BUSY_TOLERANCE:
        return None
    return (
        f"the cache saves the twin's disk {'less' if t < o else 'more'} work than the "
        f"original's (busy-time speedup {t:.2f} against {o:.2f} at {bytes_label(size)}): do "
        f"not size the disk's load on the twin"
    )


def cautions(r: dict[str, Any]) -> list[str]:
    """Every warning a cache study's result calls for, in the order they are printed."""
    found = (
        footprint_caution(r),
        reuse_caution(r),
        reads_alone_caution(r),
        busy_caution(r),
        baseline_caution(r),
    )
    return [c for c in found if c]


def plot(r: dict[str, Any], path) -> None:
    """Speedup against cache size, one line per workload (seed 000 Figure 7), and beside it
    the device busy-time speedup (the disk work saved) where the study has it."""
    from ..figures import save_figure

    busy = r.get("busy_curves")

    def curves(ax, values: dict[str, list[float]], ylabel: str, bands: bool) -> None:
        gib = [s / 2**30 for s in r["sizes"]]
        for name, ys in values.items():
            (line,) = ax.plot(gib, ys, marker="o", label=name)
            span = r.get("ranges", {}).get(name)
            if bands and span and r.get("twins", 1) > 1:
                ax.fill_between(gib, span["low"], span["high"], color=line.get_color(), alpha=0.2)
            halves = r.get("ci95", {}).get(name)
            if bands and halves and r.get("twins", 1) > 1:  # each mean's 95% interval
                yerr = [h or 0.0 for h in halves]
                ax.errorbar(gib, ys, yerr=yerr, fmt="none", ecolor=line.get_color(), capsize=3)
        ax.set_xlabel("SSD cache size (GiB)")
        ax.set_ylabel(ylabel)
        ax.legend()

    def draw(axes) -> None:
        first = axes[0] if busy else axes
        curves(first, r["curves"], "storage speedup", bands=True)
        first.set_title(f"SSD cache over {r['device']}")
        if busy:
            curves(axes[1], busy, "device busy-time speedup", bands=False)
            axes[1].set_title("the disk work the cache saves")

    save_figure(draw, path, panels=2 if busy else 1)
