"""Extrapolation to more users (seed 004, section 3.3).

Traces of one application at a few user counts are cut into units (a file, matched across
traces by name, for file-level traces; a stream, by name, for block-level ones) and, per unit
and direction, into the features seed 004 extracts: IOPS, the request-size distribution,
randomness and think time, plus the unit's read/write mix and fsync rate. Every feature is
fitted with the four canonical forms (linear, logarithmic, power, exponential) and the form
with the largest R² predicts it at N users (Table 1 of the seed). The model at N users is
fitted to a trace built from the largest traced run, resampled per unit and direction to the
predicted features.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from .errors import IotwinError
from .model import Model, fit
from .trace import Trace, TraceMeta

FORMS = ("linear", "logarithmic", "power", "exponential")
OPS = {0: "read", 1: "write"}
MAX_SIZES = 8  # request sizes fitted per unit and direction
# File-level models: levels deep enough for leaves of at most 64 KiB. Files start on 1 MiB
# boundaries of the virtual device but leaves are capacity / 4^L wide, so only small leaves
# keep a leaf from spanning the end of one file's data and the start of the next (which
# would move requests between files, since a request lands uniformly inside its leaf).
LEAF_TARGET = 64 << 10
MAX_LEVELS = 8


@dataclass
class Curve:
    """One fitted form y = f(users) with its R²."""

    form: str
    a: float
    b: float
    r2: float

    def __call__(self, x: float) -> float:
        if self.form == "linear":
            return self.a + self.b * x
        if self.form == "logarithmic":
            return self.a + self.b * math.log(x)
        if self.form == "power":
            return self.a * x**self.b
        return self.a * math.exp(min(self.b * x, 700.0))

    def text(self) -> str:
        return {
            "linear": f"{self.a:.4g} + {self.b:.4g}·x",
            "logarithmic": f"{self.a:.4g} + {self.b:.4g}·ln x",
            "power": f"{self.a:.4g}·x^{self.b:.4g}",
            "exponential": f"{self.a:.4g}·e^({self.b:.4g}·x)",
        }[self.form]


def fit_forms(xs: list[float], ys: list[float]) -> list[Curve]:
    """All four forms fitted by least squares on the original scale (scipy's curve_fit,
    started from the linearised fit), each with its R²; forms that cannot fit are left out."""
    from scipy.optimize import curve_fit

    x, y = np.asarray(xs, dtype=float), np.asarray(ys, dtype=float)
    funcs = {
        "linear": (lambda t, a, b: a + b * t, np.polyfit(x, y, 1)[::-1]),
        "logarithmic": (lambda t, a, b: a + b * np.log(t), np.polyfit(np.log(x), y, 1)[::-1]),
    }
    if (y > 0).all():
        b, lna = np.polyfit(np.log(x), np.log(y), 1)
        funcs["power"] = (lambda t, a, b: a * np.power(t, b), (math.exp(lna), b))
        b, lna = np.polyfit(x, np.log(y), 1)
        funcs["exponential"] = (
            lambda t, a, b: a * np.exp(np.minimum(b * t, 700.0)),
            (math.exp(lna), b),
        )
    curves = []
    for form in FORMS:
        if form not in funcs:
            continue
        f, p0 = funcs[form]
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                params, _ = curve_fit(f, x, y, p0=list(p0), maxfev=5000)
        except (RuntimeError, ValueError, TypeError):
            params = np.asarray(p0, dtype=float)
        pred = f(x, *params)
        if not np.isfinite(pred).all():
            continue
        curves.append(Curve(form, float(params[0]), float(params[1]), _r2(y, pred)))
    return curves


def _r2(y: np.ndarray, pred: np.ndarray) -> float:
    ss_res = float(((y - pred) ** 2).sum())
    ss_tot = float(((y - y.mean()) ** 2).sum())
    if ss_tot <= 1e-18 * max(1.0, float((y**2).sum())):
        return 1.0 if ss_res <= 1e-12 * max(1.0, float((y**2).sum())) else 0.0
    return 1.0 - ss_res / ss_tot


def best(curves: list[Curve]) -> Curve:
    """The largest R²; ties go to the simpler form (the order of FORMS)."""
    return max(curves, key=lambda c: (round(c.r2, 12), -FORMS.index(c.form)))


# -- features ------------------------------------------------------------------------------


@dataclass
class Feature:
    """One feature of one unit (and direction) across the traced user counts."""

    unit: str
    op: str  # "read", "write" or "" for unit-wide features
    name: str
    values: list[float]  # at each traced user count (0 where the unit is absent)
    curve: Curve | None = None
    predicted: float = 0.0
    bounds: tuple[float, float] = (0.0, math.inf)

    def fit(self, users: list[int], n: int) -> None:
        self.curve = best(fit_forms([float(u) for u in users], self.values))
        lo, hi = self.bounds
        self.predicted = float(min(hi, max(lo, self.curve(n))))


@dataclass
class Run:
    """One traced run: its trace, user count, span and unit of every request."""

    path: str
    users: int
    trace: Trace
    span_s: float
    units: dict[str, int] = field(default_factory=dict)  # unit name -> id in `unit` column


def parse_point(text: str) -> tuple[Path, int]:
    """`TRACE@USERS` -> (path, users)."""
    path, sep, users = text.rpartition("@")
    if not sep or not path:
        raise IotwinError(f"'{text}': expected TRACE@USERS (e.g. run8.parquet@8)")
    try:
        n = int(users)
    except ValueError:
        raise IotwinError(f"'{text}': users '{users}' is not a whole number") from None
    if n <= 0:
        raise IotwinError(f"'{text}': users must be positive")
    return Path(path), n


def file_keys(path_lists: list[list[str]]) -> int:
    """How many trailing path components name files across runs: the fewest that keep every
    run's files apart, so the same application in different directories (a throwaway
    database cluster per run, say) matches file by file."""
    depth = max((len(Path(p).parts) for paths in path_lists for p in paths), default=1)
    for k in range(1, depth + 1):
        if all(len({_tail(p, k) for p in paths}) == len(set(paths)) for paths in path_lists):
            return k
    return depth


def _tail(path: str, k: int) -> str:
    return "/".join(Path(path).parts[-k:])


def load_runs(points: list[tuple[Path, int]]) -> list[Run]:
    from .ingest import load_trace

    if len(points) < 3:
        raise IotwinError("extrapolate needs at least 3 traces (TRACE@USERS), as seed 004 uses")
    users = [u for _, u in points]
    if len(set(users)) != len(users):
        raise IotwinError(f"user counts must differ: {users}")
    runs = []
    for path, n in sorted(points, key=lambda p: p[1]):
        t = load_trace(path)
        if not t.meta.timed:
            raise IotwinError(f"{path}: the trace has no timestamps; IOPS cannot be measured")
        if t.df.height < 2:
            raise IotwinError(f"{path}: fewer than 2 requests")
        span = float(t.df["ts_ns"].max() - t.df["ts_ns"].min()) / 1e9
        if span <= 0:
            raise IotwinError(f"{path}: all requests at the same time; IOPS cannot be measured")
        runs.append(Run(str(path), n, t, span))
    kinds = {"file" in r.trace.df.columns for r in runs}
    if len(kinds) > 1:
        raise IotwinError("mix of file-level and block-level traces; give one kind")
    _assign_units(runs)
    return runs


def _assign_units(runs: list[Run]) -> None:
    """Adds a `unit` column (file names for file-level traces, stream names otherwise)."""
    file_level = "file" in runs[0].trace.df.columns
    if file_level:
        used = []
        for r in runs:
            ids = set(r.trace.df["file"].unique().to_list())
            used.append([str(f["path"]) for f in r.trace.meta.files if int(f["id"]) in ids])
        k = file_keys(used)
    for r in runs:
        df = r.trace.df
        if file_level:
            name_of = {int(f["id"]): _tail(str(f["path"]), k) for f in r.trace.meta.files}
            col, ids = "file", df["file"].unique().sort().to_list()
            names = [name_of.get(int(i), f"file {i}") for i in ids]
        else:
            col, ids = "stream", df["stream"].unique().sort().to_list()
            names = [r.trace.meta.stream_name(int(i)) for i in ids]
        r.units = {name: j for j, name in enumerate(names)}
        mapping = pl.DataFrame(
            {col: ids, "unit": list(range(len(ids)))},
            schema={col: df.schema[col], "unit": pl.Int64},
        )
        df = df.join(mapping, on=col, how="left", maintain_order="left")
        r.trace = Trace(df, r.trace.meta)


def unit_features(runs: list[Run]) -> tuple[list[Feature], dict[tuple[str, str], list[int]]]:
    """Every feature of every unit across runs, and per (unit, op) the sizes tracked."""
    names = sorted({u for r in runs for u in r.units}, key=lambda u: (-_requests(runs, u), u))
    feats: list[Feature] = []
    size_sets: dict[tuple[str, str], list[int]] = {}
    for unit in names:
        per_run = [_unit_rows(r, unit) for r in runs]
        feats.append(_feature(unit, "", "read fraction", per_run, _read_fraction, (0, 1)))
        syncs = [
            float((rows["op"] == 2).sum()) / r.span_s for rows, r in zip(per_run, runs, strict=True)
        ]
        feats.append(Feature(unit, "", "fsync/s", syncs))
        for op, op_name in OPS.items():
            parts = [rows.filter(pl.col("op") == op) for rows in per_run]
            if not any(p.height for p in parts):
                continue
            rate = [p.height / r.span_s for p, r in zip(parts, runs, strict=True)]
            feats.append(Feature(unit, op_name, "IOPS", rate))
            feats.append(_feature(unit, op_name, "mean size B", parts, _mean_size, (1, math.inf)))
            feats.append(_feature(unit, op_name, "random", parts, _random, (0, 1)))
            feats.append(_feature(unit, op_name, "think ms", parts, _think_ms, (0, math.inf)))
            sizes = _top_sizes(parts)
            size_sets[(unit, op_name)] = sizes
            for s in sizes:
                share = [_share(p, s) for p in parts]
                feats.append(Feature(unit, op_name, f"size {s} share", share, bounds=(0, 1)))
    return feats, size_sets


def _requests(runs: list[Run], unit: str) -> int:
    last = runs[-1]
    return _unit_rows(last, unit).height if unit in last.units else 0


def _unit_rows(r: Run, unit: str) -> pl.DataFrame:
    if unit not in r.units:
        return r.trace.df.clear()
    return r.trace.df.filter(pl.col("unit") == r.units[unit])


def _feature(
    unit: str,
    op: str,
    name: str,
    parts: list[pl.DataFrame],
    measure: Callable[[pl.DataFrame], float],
    bounds: tuple[float, float],
) -> Feature:
    return Feature(unit, op, name, [measure(p) for p in parts], bounds=bounds)


def _read_fraction(rows: pl.DataFrame) -> float:
    io = rows.filter(pl.col("op") < 2)
    return float((io["op"] == 0).sum()) / io.height if io.height else 0.0


def _mean_size(rows: pl.DataFrame) -> float:
    return float(rows["size"].mean()) if rows.height else 0.0


def _random(rows: pl.DataFrame) -> float:
    """Share of requests that do not start where the previous one of the unit ended."""
    if rows.height == 0:
        return 0.0
    off = rows["offset"].to_numpy().astype(np.int64)
    end = off + rows["size"].to_numpy().astype(np.int64)
    seq = (off[1:] == end[:-1]).sum()
    return 1.0 - float(seq) / rows.height


def _think_ms(rows: pl.DataFrame) -> float:
    """Mean idle time between a request's completion and the next one's issue (the gap
    between issues where the trace has no latencies)."""
    if rows.height < 2:
        return 0.0
    ts = rows["ts_ns"].to_numpy().astype(np.int64)
    done = ts[:-1]
    if "latency_ns" in rows.columns:
        done = done + rows["latency_ns"].fill_null(0).to_numpy()[:-1].astype(np.int64)
    return float(np.maximum(ts[1:] - done, 0).mean()) / 1e6


def _top_sizes(parts: list[pl.DataFrame]) -> list[int]:
    counts: dict[int, int] = {}
    for p in parts:
        for s, c in p.group_by("size").len().iter_rows():
            counts[int(s)] = counts.get(int(s), 0) + int(c)
    return sorted(sorted(counts, key=lambda s: (-counts[s], s))[:MAX_SIZES])


def _share(rows: pl.DataFrame, size: int) -> float:
    return float((rows["size"] == size).sum()) / rows.height if rows.height else 0.0


# -- the model at N users ------------------------------------------------------------------


@dataclass
class Extrapolation:
    users: list[int]
    to: int
    features: list[Feature]
    model: Model
    file_level: bool

    def predicted(self, unit: str, op: str, name: str) -> float:
        for f in self.features:
            if (f.unit, f.op, f.name) == (unit, op, name):
                return f.predicted
        return 0.0

    def unit_iops(self) -> dict[str, float]:
        """Predicted read + write IOPS per unit."""
        out: dict[str, float] = {}
        for f in self.features:
            if f.name == "IOPS":
                out[f.unit] = out.get(f.unit, 0.0) + f.predicted
        return out

    def to_json(self) -> dict[str, Any]:
        return {
            "users": self.users,
            "to": self.to,
            "features": [
                {
                    "unit": f.unit,
                    "op": f.op or None,
                    "feature": f.name,
                    "values": f.values,
                    "form": f.curve.form if f.curve else None,
                    "r2": f.curve.r2 if f.curve else None,
                    "equation": f.curve.text() if f.curve else None,
                    "predicted": f.predicted,
                }
                for f in self.features
            ],
        }


def extrapolate(
    points: list[tuple[Path, int]], to: int, seed: int = 0, levels: int | None = None
) -> Extrapolation:
    """Fits every feature across the traced runs and builds the model at `to` users."""
    if to <= 0:
        raise IotwinError("--to must be a positive number of users")
    runs = load_runs(points)
    feats, size_sets = unit_features(runs)
    users = [r.users for r in runs]
    for f in feats:
        f.fit(users, to)
    trace = _trace_at(runs, feats, size_sets, to, seed)
    file_level = "file" in trace.df.columns
    model = _fit(trace, file_level, levels)
    model.doc["fit"]["extrapolation"] = {
        "users": users,
        "to": to,
        "traces": [r.path for r in runs],
        "seed": seed,
    }
    return Extrapolation(users, to, feats, model, file_level)


def _fit(trace: Trace, file_level: bool, levels: int | None) -> Model:
    if levels is None:
        levels = 2
        if file_level:
            from .layout import on_virtual_device

            capacity = on_virtual_device(trace)[0].capacity
            levels = max(2, min(MAX_LEVELS, math.ceil(math.log(capacity / LEAF_TARGET, 4))))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fit(trace, levels=levels)


def _trace_at(
    runs: list[Run],
    feats: list[Feature],
    size_sets: dict[tuple[str, str], list[int]],
    to: int,
    seed: int,
) -> Trace:
    """A trace of the largest run's span whose every unit and direction has the predicted
    IOPS, size distribution and randomness; offsets and streams are resampled from the
    largest run holding that unit, arrivals are a Poisson process."""
    rng = np.random.default_rng(seed)
    by_key = {(f.unit, f.op, f.name): f.predicted for f in feats}
    base = runs[-1]
    span_ns = int(base.span_s * 1e9)
    units = sorted({f.unit for f in feats}, key=lambda u: [f.unit for f in feats].index(u))
    file_level = "file" in base.trace.df.columns
    frames, files = [], []
    for uid, unit in enumerate(units):
        source = next(r for r in reversed(runs) if unit in r.units)
        rows = _unit_rows(source, unit)
        if file_level:
            fid = int(rows["file"][0])
            info = next((f for f in source.trace.meta.files if int(f["id"]) == fid), {})
            files.append({"id": uid, "path": info.get("path", unit), "size": info.get("size")})
        for op, op_name in OPS.items():
            part = rows.filter(pl.col("op") == op)
            n = round(by_key.get((unit, op_name, "IOPS"), 0.0) * span_ns / 1e9)
            if n == 0 or part.height == 0:
                continue
            shares = [
                by_key[(unit, op_name, f"size {s} share")] for s in size_sets[(unit, op_name)]
            ]
            frames.append(
                _resample(part, op, n, span_ns, size_sets[(unit, op_name)], shares,
                          by_key[(unit, op_name, "random")], uid, rng)
            )  # fmt: skip
        syncs = round(by_key.get((unit, "", "fsync/s"), 0.0) * span_ns / 1e9)
        sync_rows = rows.filter(pl.col("op") == 2)
        if syncs and sync_rows.height:
            frames.append(_syncs(sync_rows, syncs, span_ns, uid, rng))
    if not frames:
        raise IotwinError(f"every unit is predicted to be idle at {to} users")
    df = pl.concat(frames).sort("ts_ns", maintain_order=True)
    if not file_level:
        df = df.drop("file")
    meta = base.trace.meta
    streams = {}
    for r in runs:
        streams.update(r.trace.meta.streams)
    new_meta = TraceMeta(
        source=f"iotwin extrapolate: {to} users from {', '.join(str(r.users) for r in runs)}",
        format=meta.format,
        stream_by=meta.stream_by,
        timed=True,
        capacity=meta.capacity,
        streams=streams,
        files=files,
    )
    return Trace(df, new_meta)


def _resample(
    part: pl.DataFrame,
    op: int,
    n: int,
    span_ns: int,
    sizes: list[int],
    shares: list[float],
    random: float,
    uid: int,
    rng: np.random.Generator,
) -> pl.DataFrame:
    pick = rng.integers(0, part.height, n)
    offsets = part["offset"].to_numpy().astype(np.int64)[pick]
    streams = part["stream"].to_numpy()[pick]
    p = np.clip(np.asarray(shares, dtype=float), 0, None)
    if p.sum() <= 0:
        size = part["size"].to_numpy().astype(np.int64)[pick]
    else:
        size = np.asarray(sizes, dtype=np.int64)[rng.choice(len(sizes), n, p=p / p.sum())]
    seq = rng.random(n) >= random
    seq[0] = False
    limit = int((part["offset"] + part["size"].cast(pl.UInt64)).max())
    for i in np.flatnonzero(seq):  # continue where the previous request ended
        nxt = offsets[i - 1] + size[i - 1]
        if nxt + size[i] <= limit:
            offsets[i] = nxt
    ts = np.sort(rng.integers(0, max(1, span_ns), n))
    return _frame(ts, streams, op, offsets, size, uid)


def _syncs(
    rows: pl.DataFrame, n: int, span_ns: int, uid: int, rng: np.random.Generator
) -> pl.DataFrame:
    pick = rng.integers(0, rows.height, n)
    ts = np.sort(rng.integers(0, max(1, span_ns), n))
    streams = rows["stream"].to_numpy()[pick]
    zeros = np.zeros(n, dtype=np.int64)
    return _frame(ts, streams, 2, zeros, zeros, uid)


def _frame(
    ts: np.ndarray,
    streams: np.ndarray,
    op: int,
    offsets: np.ndarray,
    size: np.ndarray,
    uid: int,
) -> pl.DataFrame:
    n = len(ts)
    return pl.DataFrame(
        {
            "ts_ns": pl.Series(ts, dtype=pl.Int64),
            "stream": pl.Series(streams, dtype=pl.UInt32),
            "op": pl.Series(np.full(n, op), dtype=pl.UInt8),
            "offset": pl.Series(offsets, dtype=pl.UInt64),
            "size": pl.Series(size, dtype=pl.UInt32),
            "file": pl.Series(np.full(n, uid), dtype=pl.UInt32),
        }
    )


# -- rendering -----------------------------------------------------------------------------


def render(x: Extrapolation, console: Any, top: int = 10, all_features: bool = False) -> None:
    """Seed 004's Table 1, one row per unit and feature: the traced values, the chosen form,
    its R² and the value at N users."""
    from rich.table import Table

    table = Table(title=f"Extrapolation to {x.to} users (form chosen by R², seed 004 Table 1)")
    table.add_column("file" if x.file_level else "stream", overflow="fold", min_width=16)
    table.add_column("feature")
    for u in x.users:
        table.add_column(f"{u} users", justify="right")
    table.add_column(f"{x.to} (extrapolated)", justify="right", style="bold")
    table.add_column("form")
    table.add_column("R²", justify="right")
    shown = []
    for f in x.features:
        if f.unit not in shown:
            if len(shown) >= top:
                continue
            shown.append(f.unit)
        if not all_features and f.name.startswith("size "):
            continue
        table.add_row(
            f.unit, f"{f.op} {f.name}".strip(), *[_num(v) for v in f.values], _num(f.predicted),
            f.curve.form if f.curve else "", f"{f.curve.r2:.4f}" if f.curve else "",
        )  # fmt: skip
    console.print(table, width=max(console.width, 132))
    units = len({f.unit for f in x.features})
    if units > top:
        console.print(f"({units - top} less busy units not shown; --top or --json for all)")


def _num(v: float) -> str:
    if v == 0:
        return "0"
    if abs(v) >= 100:
        return f"{v:,.0f}"
    return f"{v:.3g}"


# -- checking a prediction against a real run ----------------------------------------------

MAIN_SHARE = 0.80  # the files (streams) that carry most of the I/O: busiest first, to 80%


@dataclass
class UnitCheck:
    unit: str
    real_iops: float
    predicted_iops: float
    share: float  # of the real run's reads and writes
    main: bool  # among the busiest units that together carry MAIN_SHARE of the requests

    @property
    def error(self) -> float:
        return (self.predicted_iops - self.real_iops) / self.real_iops if self.real_iops else 0.0


def check_against(x: Extrapolation, points: list[tuple[Path, int]], real: Path) -> list[UnitCheck]:
    """Per unit, the real run's read + write IOPS (`real`, traced at x.to users) against the
    prediction, busiest first; units are matched as `extrapolate` matched them."""
    runs = load_runs([*points, (real, x.to)])
    run = next(r for r in runs if r.users == x.to)
    predicted = x.unit_iops()
    counts = {u: _unit_rows(run, u).filter(pl.col("op") < 2).height for u in run.units}
    total = sum(counts.values()) or 1
    out, covered = [], 0
    for unit in sorted(counts, key=lambda u: (-counts[u], u)):
        if counts[unit] == 0:
            continue
        out.append(
            UnitCheck(
                unit,
                counts[unit] / run.span_s,
                predicted.get(unit, 0.0),
                counts[unit] / total,
                covered < MAIN_SHARE * total,
            )
        )
        covered += counts[unit]
    return out
