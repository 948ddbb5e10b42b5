"""`iotwin show`: a model as a person reads it (seed 000 Table I and Figure 1)."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table

from .formats.base import OP_NAMES
from .model import BURST_GAP_NS, Model, transition_counts


def human_size(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" or n == int(n) else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n} B"


def human_time(ns: float) -> str:
    if ns >= 1e9:
        return f"{ns / 1e9:.3g} s"
    if ns >= 1e6:
        return f"{ns / 1e6:.3g} ms"
    if ns >= 1e3:
        return f"{ns / 1e3:.3g} us"
    return f"{ns:.0f} ns"


def iat_mean(iat: dict[str, Any]) -> float:
    d = iat["dist"]
    if d == "fixed":
        return iat["value_ns"]
    if d == "gamma":
        return iat["shape"] * iat["scale_ns"]
    if d == "hyperexp":
        return iat["p"] * iat["mean1_ns"] + (1 - iat["p"]) * iat["mean2_ns"]
    if d == "empirical":
        n = sum(b[2] for b in iat["buckets"]) or 1
        return sum((b[0] + b[1] - 1) / 2 * b[2] for b in iat["buckets"]) / n
    return iat["mean_ns"]


def state_of(model: Model, t: dict[str, Any], end: str) -> str:
    """A transition end as a state name: the node's child as "depth.index" (1-based)."""
    if model.doc["flat"]:
        return f"leaf {t[end + '_leaf'] + 1}"
    b = model.doc["fanout"]
    child = t["node"] * b + t[end]
    return f"{t['depth'] + 1}.{child + 1}"


def describe(model: Model, t: dict[str, Any], total: int) -> list[str]:
    """Figure 1's reading: "state 1 -> state 2: 11.8%, 4 KiB read, random, iat 3.15 ms, exponential"."""
    share = t["count"] / max(1, total)
    c = t["categories"][0]
    return [
        f"{state_of(model, t, 'from')} -> {state_of(model, t, 'to')}",
        f"{share:.1%}",
        f"{human_size(c['size'])} {OP_NAMES.get(c['op'], c['op'])}, {c['kind']} ({c['p']:.0%})",
        f"{human_time(iat_mean(c['iat']))}, {c['iat']['dist']}",
        str(len(t["categories"])),
    ]


def render(model: Model, console: Console, top: int = 10) -> None:
    doc = model.doc
    levels, b = doc["levels"], doc["fanout"]
    src = doc.get("source", {})
    console.print(
        f"[bold]iotwin model[/bold] v{doc['version']}: {doc['requests']:,} requests from "
        f"{src.get('path', '?')} ({src.get('format', '?')}), {len(doc['streams'])} streams by "
        f"{src.get('stream_by', '?')}; {'flat' if doc['flat'] else 'hierarchical'}, "
        f"{levels} levels, fanout {b}, capacity {human_size(doc['capacity'])}, "
        f"re-references {'on' if doc.get('reref') else 'off'}"
    )
    if (reuse := _reuse_line(model)) is not None:
        console.print(reuse)
    console.print(_levels_table(model))
    console.print(_streams_table(model))
    console.print(_phases(model))
    if (ties := _ties(model)) is not None:
        console.print(ties)
    console.print(_transitions_table(model, top))


def median_distance(buckets: list[list[int]]) -> int | None:
    """The lower edge of the bucket holding a distance histogram's median."""
    total, seen = sum(c for *_, c in buckets), 0
    for lo, _, c in buckets:
        seen += c
        if total and 2 * seen >= total:
            return lo
    return None


def _reuse_line(model: Model) -> str | None:
    """Re-reference distances by operation (median stack distance of reads and writes, all
    streams' histograms together) and the calibration, if any."""
    reads: dict[tuple[int, int], int] = {}
    writes: dict[tuple[int, int], int] = {}
    for s in model.streams:
        w = {(lo, hi): c for lo, hi, c in s.get("reuse_write") or []}
        for lo, hi, c in s.get("reuse") or []:
            reads[(lo, hi)] = reads.get((lo, hi), 0) + c - w.get((lo, hi), 0)
        for key, c in w.items():
            writes[key] = writes.get(key, 0) + c
    if not reads and not writes:
        return None
    parts = []
    if writes:
        as_rows = lambda d: [[lo, hi, c] for (lo, hi), c in sorted(d.items())]  # noqa: E731
        med_r, med_w = median_distance(as_rows(reads)), median_distance(as_rows(writes))
        parts.append(
            f"re-reference distances by operation: median {med_r or 0:,} blocks for reads, "
            f"{med_w or 0:,} for writes"
        )
    cal = model.doc.get("fit", {}).get("calibration")
    if cal:
        from .calibrate import candidate_label

        scores = cal["largest_miss_ratio_deviation"]
        parts.append(
            f"calibrated over {cal['rounds']} rounds ({candidate_label(cal['chosen'])} kept: "
            f"largest miss-ratio deviation {scores[0]:.3f} -> {scores[cal['chosen']]:.3f}), picks "
            f"{model.doc.get('reuse_pick', 'nearest')}"
        )
    return "; ".join(parts) if parts else None


def _levels_table(model: Model) -> Table:
    doc = model.doc
    b = doc["fanout"]
    t = Table(title="States and transitions per level (seed 000, Table I)")
    for col in (
        "level",
        "states",
        "possible (hierarchical)",
        "possible (flat)",
        "used by this model",
    ):
        t.add_column(col, justify="right")
    used: dict[int, set] = {}
    for s in model.streams:
        for tr in s["transitions"]:
            key = tr.get("depth", doc["levels"] - 1)
            used.setdefault(key, set()).add(
                (
                    tr.get("node"),
                    tr.get("from", tr.get("from_leaf")),
                    tr.get("to", tr.get("to_leaf")),
                )
            )
    for level in range(1, doc["levels"] + 1):
        hier, flat = transition_counts(level, b)
        n_used = sum(len(used.get(d, ())) for d in range(level))
        t.add_row(
            str(level),
            f"{b**level:,}",
            f"{hier:,}",
            f"{flat:,}",
            f"{n_used:,}" if level == doc["levels"] else "",
        )
    return t


def extent_of(stream: dict[str, Any]) -> str:
    """Where the stream's requests lay (its random requests stay there): "lo - hi"."""
    if "extent" not in stream:
        return "-"
    lo, hi = stream["extent"]
    return f"{human_size(lo)} - {human_size(hi)}" if lo < hi else "none (no data)"


def _streams_table(model: Model, limit: int = 15) -> Table:
    t = Table(title="Streams (thread weights and types)")
    for col in ("stream", "weight", "requests", "type", "transitions", "extent"):
        t.add_column(col, justify="left" if col in ("stream", "type") else "right")
    ranked = sorted(model.streams, key=lambda s: -s["weight"])
    for s in ranked[:limit]:
        t.add_row(
            s.get("name", str(s["id"])),
            f"{s['weight']:.4f}",
            f"{s['requests']:,}",
            s.get("type", "-"),
            f"{len(s['transitions']):,}",
            extent_of(s),
        )
    if len(ranked) > limit:
        t.caption = f"{len(ranked) - limit} more streams"
    return t


def _phases(model: Model) -> str:
    """Fluctuation phases: each window's intensity relative to the mean."""
    counts = [0] * max((len(s["windows"]) for s in model.streams), default=0)
    for s in model.streams:
        for i, c in enumerate(s["windows"]):
            counts[i] += c
    if not counts:
        return "no fluctuation windows"
    mean = sum(counts) / len(counts) or 1
    bars = "▁▂▃▄▅▆▇█"
    peak = max(counts) or 1
    spark = "".join(bars[min(7, int(c / peak * 7.999))] for c in counts)
    mult = ", ".join(f"{c / mean:.2f}" for c in counts[:12])
    more = ", ..." if len(counts) > 12 else ""
    window = human_time(model.doc["window_ns"])
    text = f"Fluctuation phases ({len(counts)} windows of {window}): {spark}\n  intensity multipliers: {mult}{more}"
    reads = _window_reads(model, len(counts))
    if reads is not None:
        shares = ", ".join(
            f"{r / c:.0%}" if c else "-" for r, c in zip(reads, counts[:12], strict=True)
        )
        text += f"\n  reads: {shares}{more}"
    if (bursts := _bursts(model, len(counts))) is not None:
        text += f"\n  {bursts}{more}"
    return text


def _bursts(model: Model, windows: int) -> str | None:
    """The bursts a model fitted with --bursts keeps: how many, their median and largest
    length over all streams, and each window's largest (None: fitted without them)."""
    lengths = [(lo, c) for s in model.streams for lo, _, c in s.get("bursts", [])]
    if not lengths:
        return None
    total = sum(c for _, c in lengths)
    median = median_distance([[lo, lo + 1, c] for lo, c in sorted(lengths)])
    largest = [0] * windows
    for s in model.streams:
        for w, buckets in s.get("window_bursts", []):
            if w < windows:
                largest[w] = max(largest[w], max(lo for lo, _, _ in buckets))
    gap = human_time(model.doc.get("burst_gap_ns", BURST_GAP_NS))
    per_window = ", ".join(str(n) if n else "-" for n in largest[:12])
    return (
        f"bursts (runs under {gap} apart): {total:,}, median {median}, largest "
        f"{max(lo for lo, _ in lengths)}; largest per window: {per_window}"
    )


def _window_reads(model: Model, windows: int) -> list[int] | None:
    """Reads per window over all streams (None: a model from before `window_reads`)."""
    if not all("window_reads" in s for s in model.streams):
        return None
    reads = [0] * windows
    for s in model.streams:
        for i, r in enumerate(s["window_reads"]):
            reads[i] += r
    return reads[:12]


def _ties(model: Model) -> str | None:
    """How streams interleave at one instant (None: one stream, or no requests stamped alike
    with several streams)."""
    ties = model.doc.get("ties")
    if ties is None or len(model.streams) < 2:
        return None
    classes = [c for c in ("sequential", "near", "other") if c in ties]
    pairs = sum(ties[c]["pairs"] for c in classes)
    if pairs == 0:
        return None

    def odds(c: dict[str, int]) -> str:
        return f"{c['same'] / c['pairs']:.0%}" if c["pairs"] else "-"

    near = (
        f"{odds(ties['near'])} before one within 1 MiB of the previous request's end, "
        if "near" in ties
        else ""
    )
    line = (
        f"Streams at one instant ({pairs:,} pairs stamped alike): the same stream goes on "
        f"{odds(ties['sequential'])} of the time before a sequential request, {near}"
        f"{odds(ties['other'])} before another"
    )
    if "operations" in ties:  # before another request, by its operation
        ops = ties["operations"]
        line += (
            f"; before another read {odds(ops['read']['other'])}, "
            f"another write {odds(ops['write']['other'])}"
        )
    if runs := ties.get("runs"):  # a stream that has gone on goes on more
        first, *rest = [odds(_pooled(run)) for run in runs]
        starts = ("2", "3", "4-7", "8 or more")
        later = ", ".join(f"{n} {o}" for n, o in zip(starts, rest, strict=True))
        line += f"; after 1 of its requests in a row {first}, after {later}"
    recency = ties.get("recency") or []
    if switches := sum(recency):  # where a switch goes: back to a stream just left
        line += (
            f"; a switch goes back to the stream before {recency[1] / switches:.0%} of the "
            f"time, to one of the {len(recency) - 1} before {1 - recency[0] / switches:.0%}"
        )
    return line


def _pooled(classes: dict[str, dict[str, int]]) -> dict[str, int]:
    """A `ties` entry's classes counted as one."""
    return {k: sum(c[k] for c in classes.values()) for k in ("pairs", "same")}


def _transitions_table(model: Model, top: int) -> Table:
    t = Table(title=f"Top transitions (seed 000, Figure 1); {model.transition_count:,} in all")
    for col in ("stream", "transition", "share", "main category", "inter-arrival", "categories"):
        t.add_column(col)
    rows = []
    for s in model.streams:
        total = sum(tr["count"] for tr in s["transitions"])
        for tr in s["transitions"]:
            rows.append((tr["count"] * s["weight"] / max(1, total), s, tr, total))
    rows.sort(key=lambda r: -r[0])
    for _, s, tr, total in rows[:top]:
        t.add_row(s.get("name", str(s["id"])), *describe(model, tr, total))
    return t
