# Usage: python docs/proto/bursts.py TRACE TAU_MS TWINS [main,rebursted]  (TRACE a shared trace name, or pgbench)
"""Per stream and per fluctuation window: a twin's gaps re-positioned so that its bursts (runs
of gaps under TAU) take the original stream's burst lengths; each window keeps its requests,
its gaps (the multiset) and its span."""
import sys
import numpy as np, polars as pl, iotwin
from iotwin.formats import ReadOptions
from iotwin.model import fit
from iotwin.sim import placed
from iotwin.whatif import Workload
from iotwin.whatif.cache import study

name, TAU, twins = sys.argv[1], float(sys.argv[2]) * 1e6, int(sys.argv[3])
sb = {"tencent_cbs_excerpt.csv.bz2": "volume", "tpcc_small.disksim": "device"}.get(name)
root = __import__("pathlib").Path(__file__).resolve().parents[2]
path = root / "samples" / "pgbench.parquet" if name == "pgbench" else root.parent / "shared" / "traces" / name
tr = iotwin.load_trace(path, opts=ReadOptions(stream_by=sb))
m = fit(tr)
d = m.to_dict() if hasattr(m, "to_dict") else m.doc
W = d["window_ns"]

def burst_lengths(ts):
    g = np.diff(ts); c = np.flatnonzero(g >= TAU)
    return np.diff(np.r_[0, c + 1, len(ts)])

orig_b = {}
for s, g in tr.df.group_by("stream"):
    orig_b[s[0]] = burst_lengths(np.sort(g["ts_ns"].to_numpy()))
allb = np.concatenate(list(orig_b.values()))

def rebursted(ts, blen, rng):
    g = np.diff(ts)
    long_idx = np.flatnonzero(g >= TAU); L = len(long_idx)
    if L == 0 or len(g) < 2:
        return ts.astype(np.float64)
    short = g[g < TAU]; longs = rng.permutation(g[long_idx])
    n = len(ts)
    lens = rng.choice(blen, L + 1).astype(float)
    lens = np.maximum(1, np.round(lens * n / lens.sum())).astype(int)
    ends = np.unique(np.clip(np.cumsum(lens)[:-1] - 1, 0, len(g) - 1))
    if len(ends) > L:
        ends = np.sort(rng.choice(ends, L, replace=False))
    new = np.empty_like(g); mask = np.zeros(len(g), bool); mask[ends] = True
    k = mask.sum(); new[mask] = longs[:k]
    rest = np.r_[short, longs[k:]]; new[~mask] = rest[: (~mask).sum()]
    return np.r_[ts[0], ts[0] + np.cumsum(new)].astype(np.float64)

class Rebursted(Workload):
    def _synth(self, seed, baseline):
        t = self.model.synth(requests=len(self.original), seed=seed, baseline=baseline)
        if baseline is None:
            rng = np.random.default_rng(seed)
            df = t.df.with_row_index("_i").sort(["stream", "ts_ns"], maintain_order=True)
            ts = df["ts_ns"].to_numpy(); st = df["stream"].to_numpy()
            t0 = ts.min(); out = ts.astype(np.float64).copy()
            starts = np.flatnonzero(np.r_[True, st[1:] != st[:-1]]); ends = np.r_[starts[1:], len(ts)]
            for a, b in zip(starts, ends):
                blen = orig_b.get(st[a], allb)
                w = (ts[a:b] - t0) // W
                for k in np.unique(w):
                    idx = a + np.flatnonzero(w == k)
                    if len(idx) > 2:
                        out[idx] = rebursted(ts[idx], blen, rng)
            df = df.with_columns(pl.Series("ts_ns", out.astype(np.int64))).sort(["ts_ns", "_i"]).drop("_i")
            t = iotwin.Trace(df, t.meta)
        return placed(t)

modes = sys.argv[4].split(",") if len(sys.argv) > 4 else ["main", "rebursted"]
for label in modes:
    w = Rebursted(name, tr, m) if label == "rebursted" else Workload(name, tr, m)
    r = study(w, None, seed=0, twins=twins)
    print(name, label, [round(x, 2) for x in r["curves"]["twin"]], "orig", [round(x, 2) for x in r["curves"]["original"]],
          "err", round(r["twin_max_error"], 3), "busy", round(r["twin_max_busy_error"], 3),
          "alone", {k: round(v or 0, 2) for k, v in r["reads_alone_ms"].items()}, flush=True)
