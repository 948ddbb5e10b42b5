"""bench/model: iotwin fit and synth against a straightforward numpy implementation, in one run.

Makes a realistic canonical trace of N records once (default 10 million: a levels-4 model of
/work/shared/traces/cloudPhysicsIO.vscsi, `synth(requests=N, seed=1)`, under bench/data/),
then times, each step in a fresh process on the same input:
  - `iotwin.model.fit` on the Parquet (load + fit), with and without re-references,
  - numpy counting of the same statistics (leaf, hierarchical transition key, category,
    counts and inter-arrival sums with np.unique / np.bincount),
  - `Model.synth(requests=N)` + `write_trace` to Parquet, and `Model.write_synth` (what
    `iotwin synth` runs: row groups written while the next batch is sampled),
  - a numpy Markov sampler over the counted tables + polars `write_parquet`,
and a profile step that splits where iotwin's fit and synth spend their time.
Goals (the issue): fit >= 20M records/s, synth >= 10M requests/s including Parquet.
Usage: python bench/model/run.py [--records N] [--skip-profile] [--write-results]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from bisect import bisect_right
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
from common import BENCH, run_step, write_section  # noqa: E402

DATA = BENCH / "data"
SOURCE = Path("/work/shared/traces/cloudPhysicsIO.vscsi")
LEVELS, FANOUT = 4, 4
FIT_GOAL, SYNTH_GOAL = 20e6, 10e6  # records/s, requests/s
ALIGN = 512

Tables = dict[str, np.ndarray]


# -- input ---------------------------------------------------------------------------------
def make_input(path: Path, records: int) -> None:
    """A canonical trace regenerated from a levels-4 model of the cloudPhysics trace."""
    if path.exists():
        return
    import iotwin
    from iotwin import model

    fitted = model.fit(iotwin.load_trace(SOURCE), levels=LEVELS, fanout=FANOUT)
    iotwin.write_trace(fitted.synth(requests=records, seed=1), path)


def make_model(trace_path: Path, model_path: Path, reref: bool = True) -> None:
    """A model the synth steps start from: iotwin's default fit (re-references on), or the
    paper's model alone (re-references off)."""
    if model_path.exists():
        return
    import iotwin
    from iotwin import model

    fitted = model.fit(iotwin.load_trace(trace_path), levels=LEVELS, fanout=FANOUT, reref=reref)
    fitted.save(model_path)


def paper_model_path(model_path: Path) -> Path:
    """Where the model fitted without re-references sits beside the default one."""
    return model_path.with_name(model_path.name.replace(".model.json", ".noreref.model.json"))


def describe(path: Path) -> str:
    df = pl.read_parquet(path)
    streams = df["stream"].n_unique()
    end = (pl.col("offset") + pl.col("size").cast(pl.UInt64)).shift(1).over("stream")
    seq = df.select((pl.col("offset") == end).mean()).item()
    reads = (df["op"] == 0).mean()
    span = (df["ts_ns"].max() - df["ts_ns"].min()) / 1e9  # type: ignore[operator]
    return (
        f"{df.height:,} requests, {streams} stream(s), {df['size'].n_unique()} sizes, "
        f"{reads:.0%} reads, {seq:.0%} sequential, {span / 3600:.1f} h span, "
        f"{path.stat().st_size / 2**20:.0f} MiB Parquet"
    )


def count(n: int) -> str:
    """10000000 -> '10M', 300000 -> '300K'."""
    return f"{n / 1e6:g}M" if n >= 10**6 else f"{n / 1e3:g}K"


def step_prepare(trace_path: str, records: int, model_path: str, out: str) -> None:
    make_input(Path(trace_path), records)
    make_model(Path(trace_path), Path(model_path))
    make_model(Path(trace_path), paper_model_path(Path(model_path)), reref=False)
    Path(out).write_text(describe(Path(trace_path)))


def _report(out: Path, **inner: float) -> None:
    out.write_text(json.dumps(inner))


# -- iotwin steps (run in fresh processes) -------------------------------------------------
def step_iotwin_fit(trace_path: str, reref: bool, out: str) -> None:
    import iotwin
    from iotwin import model

    t0 = time.perf_counter()
    trace = iotwin.load_trace(trace_path)
    t1 = time.perf_counter()
    model.fit(trace, levels=LEVELS, fanout=FANOUT, reref=reref)
    t2 = time.perf_counter()
    _report(Path(out), load=t1 - t0, work=t2 - t1, records=len(trace))


def step_iotwin_synth(model_path: str, requests: int, parquet: str, out: str) -> None:
    import iotwin
    from iotwin.model import Model

    t0 = time.perf_counter()
    m = Model.load(model_path)
    t1 = time.perf_counter()
    trace = m.synth(requests=requests, seed=2)
    t2 = time.perf_counter()
    iotwin.write_trace(trace, parquet)
    t3 = time.perf_counter()
    _report(Path(out), load=t1 - t0, work=t3 - t1, sample=t2 - t1, write=t3 - t2, records=requests)


def step_iotwin_write_synth(model_path: str, requests: int, parquet: str, out: str) -> None:
    """What `iotwin synth` runs: sampling and writing row groups overlapped, batch by batch."""
    from iotwin.model import Model

    t0 = time.perf_counter()
    m = Model.load(model_path)
    t1 = time.perf_counter()
    m.write_synth(parquet, requests=requests, seed=2)
    t2 = time.perf_counter()
    _report(Path(out), load=t1 - t0, work=t2 - t1, records=requests)


# -- numpy baseline: counting ----------------------------------------------------------------
def _pack(fields: list[np.ndarray]) -> tuple[np.ndarray, list[int]]:
    """Fields (non-negative ints) packed into one uint64 key, first field highest."""
    bits = [max(1, int(f.max()).bit_length()) if f.size else 1 for f in fields]
    if sum(bits) > 64:
        raise ValueError(f"keys need {sum(bits)} bits")
    key = np.zeros(fields[0].shape, dtype=np.uint64)
    for f, b in zip(fields, bits, strict=True):
        key = (key << np.uint64(b)) | f.astype(np.uint64)
    return key, bits


def _unpack(key: np.ndarray, bits: list[int]) -> list[np.ndarray]:
    out = []
    shift = 0
    for b in reversed(bits):
        out.append(((key >> np.uint64(shift)) & np.uint64((1 << b) - 1)).astype(np.int64))
        shift += b
    return out[::-1]


def numpy_fit(df: pl.DataFrame, capacity: int, levels: int, fanout: int) -> Tables:
    """The model's counting in numpy: per stream, each request's leaf, the hierarchical key
    of the transition from the stream's previous request (deepest common ancestor depth, its
    node, from-child, to-child), the category (op, size, sequential or random), and counts and
    inter-arrival sums (and sums of squares) per (transition, category); also leaf visits and
    entry counts (where coarse transitions land), which the sampler needs."""
    stream = df["stream"].to_numpy()
    cols = [df[c].to_numpy() for c in ("ts_ns", "op", "offset", "size")]
    if np.any(stream[1:] < stream[:-1]):  # group by stream, each in time order
        order = np.argsort(stream, kind="stable")
        stream, cols = stream[order], [c[order] for c in cols]
    st = stream
    ts, op, off, size = cols
    leaves = fanout**levels
    if int(off.max()) >= 2**64 // leaves:
        raise ValueError("offset * leaves overflows uint64")
    leaf = np.minimum(off * np.uint64(leaves) // np.uint64(capacity), np.uint64(leaves - 1))
    new_stream = np.empty(len(st), dtype=bool)
    new_stream[0] = True
    new_stream[1:] = st[1:] != st[:-1]
    code = np.cumsum(new_stream) - 1  # dense stream index
    idx = np.flatnonzero(~new_stream)  # requests with a predecessor in their stream
    prev = idx - 1
    p, q = leaf[prev], leaf[idx]
    spans = np.array([fanout ** (levels - d) for d in range(levels + 1)], dtype=np.uint64)
    depth = np.zeros(len(idx), dtype=np.int64)
    for d in range(1, levels):
        depth += p // spans[d] == q // spans[d]
    node = p // spans[depth]
    frm = (p // spans[depth + 1]) % np.uint64(fanout)
    to = (q // spans[depth + 1]) % np.uint64(fanout)
    kind = off[idx] == off[prev] + size[prev]
    iat = np.maximum(ts[idx] - ts[prev], 0).astype(np.float64)
    key, bits = _pack([code[idx], depth, node, frm, to, op[idx], size[idx], kind])
    keys, counts = np.unique(key, return_counts=True)
    inv = np.searchsorted(keys, key)  # some 5x faster than np.unique(return_inverse=True)
    iat_sum = np.bincount(inv, weights=iat, minlength=len(keys))
    iat_sq = np.bincount(inv, weights=iat * iat, minlength=len(keys))
    fields = _unpack(keys, bits)
    nstreams = int(code[-1]) + 1
    visits = np.bincount(code * leaves + leaf.astype(np.int64), minlength=nstreams * leaves)
    coarse = depth + 1 < levels
    entry_idx = (code[idx][coarse] * levels + depth[coarse]) * leaves + q[coarse].astype(np.int64)
    entries = np.bincount(entry_idx, minlength=nstreams * levels * leaves)
    first = np.flatnonzero(new_stream)
    return {
        "stream_ids": st[first].astype(np.int64),
        "stream_requests": np.diff(np.append(first, len(st))),
        "first_leaf": leaf[first].astype(np.int64),
        "r_stream": fields[0],
        "r_depth": fields[1],
        "r_node": fields[2],
        "r_from": fields[3],
        "r_to": fields[4],
        "r_op": fields[5],
        "r_size": fields[6],
        "r_kind": fields[7],
        "count": counts,
        "iat_sum": iat_sum,
        "iat_sq": iat_sq,
        "visits": visits.reshape(nstreams, leaves),
        "entries": entries.reshape(nstreams, levels, leaves),
        "geometry": np.array([capacity, levels, fanout], dtype=np.int64),
    }


def step_numpy_fit(trace_path: str, tables_path: str, out: str) -> None:
    import iotwin

    t0 = time.perf_counter()
    df = pl.read_parquet(trace_path)
    capacity = iotwin.read_parquet_trace(trace_path).meta.capacity or int(
        (df["offset"] + df["size"].cast(pl.UInt64)).max()  # type: ignore[arg-type]
    )
    t1 = time.perf_counter()
    tables = numpy_fit(df, int(capacity), LEVELS, FANOUT)
    t2 = time.perf_counter()
    np.savez(tables_path, **tables)
    _report(Path(out), load=t1 - t0, work=t2 - t1, records=df.height)


# -- numpy baseline: sampling ----------------------------------------------------------------
def _walk_rows(
    tab: Tables, s: int, tids: np.ndarray, levels: int, fanout: int
) -> tuple[list[list[float]], list[list[int]], list[list[int]]]:
    """Per current leaf: cumulative weights over (next leaf, transition) pairs.

    A transition (depth, node, from, to) leaves any leaf under child `from` of `node`; a fine
    one lands on leaf `to`, a coarse one on a leaf under child `to`, weighted by the stream's
    entry counts there. Leaves without an outgoing transition restart by leaf visits on the
    pseudo-transition -1 (the stream's overall category mix)."""
    leaves = fanout**levels
    cum: list[list[float]] = [[] for _ in range(leaves)]
    nxt: list[list[int]] = [[] for _ in range(leaves)]
    via: list[list[int]] = [[] for _ in range(leaves)]
    entries = tab["entries"][s]
    for t in tids.tolist():
        d, node = int(tab["t_depth"][t]), int(tab["t_node"][t])
        span = fanout ** (levels - d - 1)
        src = (node * fanout + int(tab["t_from"][t])) * span
        dst = (node * fanout + int(tab["t_to"][t])) * span
        weight = float(tab["tcount"][t])
        if span == 1:
            targets, w = np.array([dst]), np.array([weight])
        else:
            e = entries[d, dst : dst + span].astype(np.float64)
            if e.sum() == 0:
                e = np.ones(span)
            targets = np.flatnonzero(e) + dst
            w = weight * e[targets - dst] / e.sum()
        for leaf in range(src, src + span):
            nxt[leaf].extend(targets.tolist())
            via[leaf].extend([t] * len(targets))
            cum[leaf].extend(w.tolist())
    visits = tab["visits"][s].astype(np.float64)
    restart = np.flatnonzero(visits)
    for leaf in range(leaves):
        if not cum[leaf]:
            nxt[leaf], via[leaf], cum[leaf] = restart.tolist(), [-1] * len(restart), []
            cum[leaf] = visits[restart].tolist()
        cum[leaf] = np.cumsum(cum[leaf]).tolist()
    return cum, nxt, via


def numpy_synth(tab: Tables, requests: int, seed: int) -> pl.DataFrame:
    """A per-stream Markov walk over the counted tables (with replacement): the next leaf and
    transition from the current leaf's row (a Python loop, the one step numpy cannot
    vectorize), then, vectorized, the category from the transition's category counts, an
    exponential inter-arrival time with the category's mean, and an offset (uniform and
    aligned in the leaf, or the previous request's end when sequential)."""
    rng = np.random.default_rng(seed)
    _, levels, fanout = (int(x) for x in tab["geometry"])
    # transitions: the distinct (stream, depth, node, from, to) of the (sorted) category rows
    names = ("stream", "depth", "node", "from", "to")
    tkey, bits = _pack([tab[f"r_{k}"] for k in names])
    tk, row_t = np.unique(tkey, return_inverse=True)
    tab = dict(tab)
    for name, f in zip(names, _unpack(tk, bits), strict=True):
        tab[f"t_{name}"] = f
    tab["row_t"] = row_t
    tab["tcount"] = np.bincount(row_t, weights=tab["count"])
    shares = tab["stream_requests"] / tab["stream_requests"].sum()
    per_stream = np.floor(shares * requests).astype(np.int64)
    per_stream[: requests - per_stream.sum()] += 1
    parts = []
    for s, n in enumerate(per_stream.tolist()):
        if n == 0:
            continue
        tids = np.flatnonzero(tab["t_stream"] == s)
        cum, nxt, via = _walk_rows(tab, s, tids, levels, fanout)
        u = rng.random(n).tolist()
        tot = [c[-1] for c in cum]
        leaf_out = [0] * n
        trans = [0] * n
        state = int(tab["first_leaf"][s])
        for i in range(n):  # the Markov walk: inherently sequential
            c = cum[state]
            j = bisect_right(c, u[i] * tot[state])
            j = min(j, len(c) - 1)
            trans[i] = via[state][j]
            state = nxt[state][j]
            leaf_out[i] = state
        parts.append(_requests(tab, s, np.array(trans), np.array(leaf_out), rng))
    ts, st, op, off, size = (np.concatenate(c) for c in zip(*parts, strict=True))
    order = np.argsort(ts, kind="stable")
    return pl.DataFrame(
        {
            "ts_ns": ts[order],
            "stream": st[order].astype(np.uint32),
            "op": op[order].astype(np.uint8),
            "offset": off[order].astype(np.uint64),
            "size": size[order].astype(np.uint32),
        }
    )


def _requests(
    tab: Tables, s: int, trans: np.ndarray, leaf: np.ndarray, rng: np.random.Generator
) -> tuple[np.ndarray, ...]:
    """Categories, times and offsets for one stream's walk, vectorized."""
    capacity, levels, fanout = (int(x) for x in tab["geometry"])
    leaves = fanout**levels
    rows = np.flatnonzero(tab["r_stream"] == s)  # this stream's category rows, by transition
    cum = np.cumsum(tab["count"][rows].astype(np.float64))
    # where each transition's rows start in `cum`; the pseudo-transition -1 spans them all
    first_row = np.searchsorted(tab["row_t"][rows], np.arange(len(tab["tcount"])))
    starts = np.concatenate(([0.0], cum))[np.minimum(first_row, len(rows))]
    lo = np.where(trans >= 0, starts[trans], 0.0)
    width = np.where(trans >= 0, tab["tcount"][trans], cum[-1])
    pick = np.searchsorted(cum, lo + rng.random(len(trans)) * width, side="right")
    pick = rows[np.minimum(pick, len(rows) - 1)]
    op, size, seq = tab["r_op"][pick], tab["r_size"][pick], tab["r_kind"][pick].astype(bool)
    mean = tab["iat_sum"][pick] / tab["count"][pick]
    ts = np.cumsum(rng.exponential(1.0, len(trans)) * mean).astype(np.int64)
    start = (leaf * capacity + leaves - 1) // leaves
    end = ((leaf + 1) * capacity + leaves - 1) // leaves
    room = np.maximum((end - start - size) // ALIGN, 0) + 1
    rand_off = (start + ALIGN - 1) // ALIGN * ALIGN + (rng.random(len(leaf)) * room).astype(
        np.int64
    ) * ALIGN
    seq[0] = False
    run_start = np.maximum.accumulate(np.where(seq, 0, np.arange(len(seq))))
    before = np.concatenate(([0], np.cumsum(size)[:-1]))  # bytes before each request
    off = rand_off[run_start] + before - before[run_start]
    stream_id = np.full(len(trans), tab["stream_ids"][s])
    return ts, stream_id, op, off, size


def step_numpy_synth(tables_path: str, requests: int, parquet: str, out: str) -> None:
    t0 = time.perf_counter()
    with np.load(tables_path) as z:
        tab = {k: z[k] for k in z.files}
    t1 = time.perf_counter()
    df = numpy_synth(tab, requests, seed=2)
    t2 = time.perf_counter()
    df.write_parquet(parquet)
    t3 = time.perf_counter()
    _report(Path(out), load=t1 - t0, work=t3 - t1, sample=t2 - t1, write=t3 - t2, records=requests)


# -- profile: where iotwin's fit and synth spend their time --------------------------------
def step_profile(trace_path: str, model_path: str, requests: int, out: str) -> None:
    """Time splits inside one process: the stages of `fit` (through the same calls it makes)
    and of `synth` at `requests`, with the default model and one fitted without re-references."""
    import iotwin
    from iotwin import _core, model
    from iotwin.formats.base import frame_from_columns

    splits: dict[str, float] = {}

    def timed(name: str, fn: Any) -> Any:
        t = time.perf_counter()
        value = fn()
        splits[name] = time.perf_counter() - t
        return value

    trace = timed("fit: load Parquet", lambda: iotwin.load_trace(trace_path))
    cols = timed(
        "fit: columns to numpy",
        lambda: [
            trace.numpy(c, t)
            for c, t in (
                ("ts_ns", np.int64),
                ("stream", np.uint32),
                ("op", np.uint8),
                ("offset", np.uint64),
                ("size", np.uint32),
            )
        ],
    )
    capacity = trace.capacity
    span = int(cols[0][-1] - cols[0][0])
    window = model.default_window_ns(span)

    def core(reref: bool) -> str:
        chunks = [[c] for c in cols]
        return _core.fit_model(
            *chunks, LEVELS, FANOUT, capacity, False, window, reref, "auto", span
        )[0]

    doc_text = timed("fit: core, re-references on", lambda: core(True))
    timed("fit: core, re-references off", lambda: core(False))
    doc = timed("fit: JSON parse", lambda: model.parse_json(doc_text))
    doc["source"] = {"path": "", "format": "", "stream_by": "device", "timed": True}
    # fit() trusts the core's document; loading a model file checks it
    timed("load: schema check (not in fit)", lambda: model.Model.from_doc(doc))
    splits["fit: model JSON MiB"] = len(doc_text) / 2**20

    plain = model.fit(iotwin.load_trace(trace_path), levels=LEVELS, fanout=FANOUT, reref=False).doc
    for label, m in (("on", model.Model.load(model_path).doc), ("off", plain)):
        raw = timed(
            f"synth {count(requests)}: core, re-references {label}",
            lambda m=m: _core.synth_model(m, (requests, None, 1.0, 1.0, 2, False)),
        )
        df = timed(
            f"synth {count(requests)}: to DataFrame ({label})",
            lambda raw=raw: frame_from_columns(raw),
        )
        with tempfile.TemporaryDirectory() as tmp:
            tr = iotwin.Trace(df, iotwin.TraceMeta(capacity=capacity))
            timed(
                f"synth {count(requests)}: write Parquet ({label})",
                lambda tr=tr, tmp=tmp: iotwin.write_trace(tr, Path(tmp) / "t.parquet"),
            )
    Path(out).write_text(json.dumps(splits))


# -- driver ------------------------------------------------------------------------------------
def call(fn: str, *args: object) -> str:
    """Step code: import this module in a fresh process and call `fn(*args)`."""
    return (
        f"import sys; sys.path.insert(0, {str(HERE)!r}); import run; "
        f"run.{fn}({', '.join(repr(a) for a in args)})"
    )


def timed_step(name: str, code: str, inner: Path, repeat: int = 1) -> dict[str, Any]:
    result = run_step(code, repeat=repeat)
    result.update(json.loads(inner.read_text()))
    work = result["work"]
    print(
        f"{name:34s} {result['seconds']:7.2f} s process, {result['load']:6.2f} s load, "
        f"{work:7.2f} s work = {result['records'] / work / 1e6:6.2f} M/s, "
        f"peak RSS {result['peak_rss_mib']:6.0f} MiB",
        flush=True,
    )
    return result


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=10_000_000)
    ap.add_argument("--profile-requests", type=int, default=1_000_000)
    ap.add_argument("--skip-profile", action="store_true")
    ap.add_argument("--write-results", action="store_true")
    args = ap.parse_args()
    DATA.mkdir(exist_ok=True)
    n = args.records
    trace = DATA / f"cloudphysics_synth_{n}.parquet"
    model_path = DATA / f"cloudphysics_synth_{n}.model.json"
    tables = DATA / f"cloudphysics_synth_{n}.numpy.npz"
    print(f"input: {trace} ...", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        # in a child process: a child's peak RSS counts its parent's RSS at the fork, so
        # this process never holds a trace
        info = Path(tmp) / "about.txt"
        run_step(call("step_prepare", str(trace), n, str(model_path), str(info)))
        about = info.read_text()
    print(about, flush=True)
    out_iotwin, out_numpy = DATA / "model_synth_iotwin.parquet", DATA / "model_synth_numpy.parquet"
    with tempfile.TemporaryDirectory() as tmp:
        inner = Path(tmp) / "inner.json"
        steps = {
            "iotwin fit (re-references on)": call("step_iotwin_fit", str(trace), True, str(inner)),
            "iotwin fit (re-references off)": call(
                "step_iotwin_fit", str(trace), False, str(inner)
            ),
            "numpy counting": call("step_numpy_fit", str(trace), str(tables), str(inner)),
            "iotwin synth + Parquet": call(
                "step_iotwin_synth", str(model_path), n, str(out_iotwin), str(inner)
            ),
            "iotwin synth streamed to Parquet (CLI)": call(
                "step_iotwin_write_synth", str(model_path), n, str(out_iotwin), str(inner)
            ),
            "iotwin synth streamed, re-references off": call(
                "step_iotwin_write_synth",
                str(paper_model_path(model_path)),
                n,
                str(out_iotwin),
                str(inner),
            ),
            "numpy sampler + Parquet": call(
                "step_numpy_synth", str(tables), n, str(out_numpy), str(inner)
            ),
        }
        times = {name: timed_step(name, code, inner) for name, code in steps.items()}
        splits: dict[str, float] = {}
        if not args.skip_profile:
            run_step(
                call("step_profile", str(trace), str(model_path), args.profile_requests, str(inner))
            )
            splits = json.loads(inner.read_text())
    s = times["iotwin synth + Parquet"]
    splits[f"synth {count(n)}: core sampling (default model)"] = s["sample"]
    splits[f"synth {count(n)}: DataFrame + write Parquet"] = s["write"]
    for k, v in splits.items():
        print(f"  {k:52s} {v:8.2f}" + ("" if "MiB" in k else " s"))
    print(body := report(n, about, times, splits))
    print(notes := findings(n, args.profile_requests, times, splits))
    if args.write_results:
        write_section("model", body + "\n\n" + notes)


def rate(r: dict[str, Any]) -> float:
    return r["records"] / r["work"]


def report(n: int, about: str, times: dict[str, dict[str, Any]], splits: dict[str, float]) -> str:
    rows = "\n".join(
        f"| {k} | {v['seconds']:.2f} s | {v['load']:.2f} s | {v['work']:.2f} s | "
        f"{rate(v) / 1e6:.2f} M/s | {v['peak_rss_mib']:.0f} MiB |"
        for k, v in times.items()
    )
    fit_on, fit_off = (
        times["iotwin fit (re-references on)"],
        times["iotwin fit (re-references off)"],
    )
    npfit = times["numpy counting"]
    syn, npsyn = times["iotwin synth + Parquet"], times["numpy sampler + Parquet"]
    streamed = times["iotwin synth streamed to Parquet (CLI)"]
    paper = times["iotwin synth streamed, re-references off"]

    def goal(name: str, r: dict[str, Any], target: float) -> str:
        met = "met" if rate(r) >= target else "**missed**"
        total = r["records"] / (r["load"] + r["work"])
        return (
            f"| {name} | {rate(r) / 1e6:.2f} M/s ({total / 1e6:.2f} M/s with load) | "
            f">= {target / 1e6:.0f} M/s | {met} |"
        )

    ratios = (
        f"| iotwin fit (re-references off) / numpy counting | "
        f"{rate(fit_off) / rate(npfit):.2f}x speed |\n"
        f"| iotwin fit (re-references on) / numpy counting | "
        f"{rate(fit_on) / rate(npfit):.2f}x speed |\n"
        f"| iotwin synth / numpy sampler (both incl. Parquet) | "
        f"{rate(syn) / rate(npsyn):.2f}x speed |\n"
        f"| iotwin synth streamed (CLI) / numpy sampler | "
        f"{rate(streamed) / rate(npsyn):.2f}x speed |\n"
        f"| iotwin synth streamed, re-references off / numpy sampler | "
        f"{rate(paper) / rate(npsyn):.2f}x speed |"
    )
    goals = "\n".join(
        [
            goal("fit (re-references on, default)", fit_on, FIT_GOAL),
            goal("fit (re-references off)", fit_off, FIT_GOAL),
            goal("synth incl. Parquet", syn, SYNTH_GOAL),
            goal("synth streamed to Parquet (CLI)", streamed, SYNTH_GOAL),
            goal("synth streamed, re-references off (the paper's model)", paper, SYNTH_GOAL),
        ]
    )
    profile = "\n".join(f"| {k} | {v:.2f}{'' if 'MiB' in k else ' s'} |" for k, v in splits.items())
    return (
        f"`python bench/model/run.py --records {n}`; input: {about} (a levels-{LEVELS} "
        f"model of cloudPhysicsIO.vscsi regenerated with seed 1). Each step once, in a fresh "
        "process; *load* is reading the input (Parquet, or the model / tables), *work* is "
        "fit or sample + write Parquet, and rates are records (requests) per second of work.\n\n"
        "| step | process wall | load | work | rate | peak RSS |\n|---|---|---|---|---|---|\n"
        + rows
        + "\n\n| ratio | measured |\n|---|---|\n"
        + ratios
        + "\n\n| goal | measured | target | |\n|---|---|---|---|\n"
        + goals
        + "\n\nProfile (time splits inside one process):\n\n| stage | time |\n|---|---|\n"
        + profile
    )


def findings(n: int, pn: int, times: dict[str, dict[str, Any]], splits: dict[str, float]) -> str:
    """Findings computed from the profile splits of this run."""
    if "fit: core, re-references on" not in splits:
        return ""
    on, off = splits["fit: core, re-references on"], splits["fit: core, re-references off"]
    parse = splits["fit: JSON parse"]
    keys = ("fit: columns to numpy", "fit: core, re-references on", "fit: JSON parse")
    total = sum(splits[k] for k in keys)
    syn = times["iotwin synth + Parquet"]
    p = f"synth {count(pn)}"
    s_on, s_off = splits[f"{p}: core, re-references on"], splits[f"{p}: core, re-references off"]
    per_n, per_pn = syn["sample"] / n * 1e6, s_on / pn * 1e6
    growth = "grows faster than linearly" if per_n > 1.2 * per_pn else "is about linear"
    return f"""Findings:

- fit: the Rust core is {on / total:.0%} of fit after loading ({on:.2f} s of {total:.2f} s); of it,
  the re-reference extension (stack distances, run ahead of the counting on the other core;
  the core with minus without it) takes {on - off:.2f} s ({(on - off) / on:.0%}), and counting +
  finalising {off:.2f} s. Parsing the {splits["fit: model JSON MiB"]:.1f} MiB model into Python
  adds {parse:.2f} s (fit skips the schema check, {splits["load: schema check (not in fit)"]:.2f} s,
  which loading a model file does), loading the Parquet {splits["fit: load Parquet"]:.2f} s.
  The goal (20M records/s) allows {n / FIT_GOAL:.2f} s for {count(n)} records.
- synth: sampling is {syn["sample"] / syn["work"]:.0%} of synth + Parquet
  ({syn["sample"]:.1f} s of {syn["work"]:.1f} s at {count(n)}); DataFrame + Parquet
  write only {syn["write"]:.2f} s.
- synth: re-references dominate: at {count(pn)} requests the core takes {s_on:.2f} s with
  the default model, {s_off:.2f} s with a model fitted without re-references
  ({s_on / s_off:.0f}x), and the default model's cost {growth}:
  {per_pn:.2f} us/request at {count(pn)}, {per_n:.2f} us/request at {count(n)} (the stream's
  history of touched blocks, read at random positions, outgrows the caches: src/model/history.rs).
"""


if __name__ == "__main__":
    main()
