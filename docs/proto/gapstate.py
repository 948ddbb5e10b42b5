"""Session 21 prototype (docs/model.md, "a gap state"): re-times a twin by redrawing each request's
gap from the original's gaps of the same (op, sequential, re-used block) class, plainly or also
conditioned on the class of the previous drawn gap (class edges in ms), then spreads them over
the fitted windows as the sampler does, and simulates on hdd-7200 at the original's auto
intensity. usage: python docs/proto/gapstate.py TRACE_FILE LEVELS TWINS EDGES_MS
(e.g. msr_hm0_excerpt.csv 2 20 1), with the shared traces at /work/shared/traces."""
import sys, numpy as np, polars as pl, iotwin
from iotwin.model import fit, default_window_ns
from iotwin.trace import Trace
from iotwin.validate import validate
from iotwin.sim import simulate, placed
from iotwin.whatif import auto_intensity

name = sys.argv[1]; lv = int(sys.argv[2]); nseeds = int(sys.argv[3])
edges = [float(x) * 1e6 for x in sys.argv[4].split(",")]  # class edges in ms
tr = iotwin.load_trace(f"/work/shared/traces/{name}")

def classes(df):
    off = df["offset"].to_numpy(); size = df["size"].to_numpy(); op = df["op"].to_numpy()
    end = off + size
    seq = np.zeros(len(off), bool); seq[1:] = off[1:] == end[:-1]
    seen = set(); reused = np.zeros(len(off), bool)
    for i, (o, s) in enumerate(zip((off // 4096).tolist(), (((off + np.maximum(size, 1) - 1) // 4096)).tolist())):
        reused[i] = o in seen; seen.update(range(o, s + 1))
    return op.astype(int) * 4 + seq * 2 + reused

def gclass(g):
    return np.searchsorted(edges, g, side="right")

ts0 = tr.df["ts_ns"].to_numpy(); t0 = ts0[0]; span = ts0[-1] - t0
W = default_window_ns(span); nwin = int(np.ceil((span + 1) / W))
quota = np.bincount(((ts0 - t0) // W).astype(int), minlength=nwin)
lens = np.array([min(W, span - w * W) for w in range(nwin)], float)
g0 = np.concatenate([[0.0], np.diff(ts0).astype(float)])
c0 = classes(tr.df); k0 = gclass(g0)
pools = {}; cpools = {}
for i in range(1, len(g0)):
    pools.setdefault(c0[i], []).append(g0[i])
    cpools.setdefault((c0[i], k0[i - 1]), []).append(g0[i])

def place(gaps):
    out = []; i = 0
    for w in range(nwin):
        q = quota[w]
        if q == 0: continue
        g = gaps[i:i + q].copy(); i += q
        if i == q: g[0] = 0.0
        total = g.sum() + g.mean()
        out.append(w * W + np.cumsum(g * (lens[w] / total)))
    return np.concatenate(out).round().astype(np.int64) + t0

dev = "hdd-7200"
orig = placed(tr); scale = auto_intensity(orig, dev, 0); base = simulate(orig, dev, scale, 0)
def lag(df):
    g = np.diff(df["ts_ns"].to_numpy()) / 1e6; lg = np.log10(np.maximum(g, 1e-3)); return np.corrcoef(lg[:-1], lg[1:])[0, 1]
print(f"orig mean {base.mean_ms:.2f} lag1 {lag(tr.df):.3f}")
m = fit(tr, levels=lv)
res = {}
for s in range(nseeds):
    tw = m.synth(requests=len(tr), seed=s)
    rng = np.random.default_rng(s)
    c = classes(tw.df)
    g_plain = np.array([0.0] + [rng.choice(pools[x]) if x in pools else 0.0 for x in c[1:]])
    g_cond = [0.0]; prev = 0
    for x in c[1:]:
        pool = cpools.get((x, prev)) or pools.get(x) or [0.0]
        v = pool[rng.integers(len(pool))]; g_cond.append(v); prev = gclass(v)
    g_cond = np.array(g_cond)
    for rule, g in (("model", None), ("plain", g_plain), ("cond", g_cond)):
        t = tw if g is None else Trace(tw.df.with_columns(pl.Series("ts_ns", place(g))), tw.meta)
        v = validate(tr, t)["metrics"]
        r = simulate(placed(t), dev, scale, 0)
        res.setdefault(rule, []).append((r.mean_ms / base.mean_ms - 1, r.percentile_ms(95) / base.percentile_ms(95) - 1, v["burstiness_1s"]["synthetic"], v["burstiness_10s"]["synthetic"], lag(t.df)))
print("orig IoD", round(v["burstiness_1s"]["original"], 1), round(v["burstiness_10s"]["original"], 1))
for rule, rows in res.items():
    a = np.array(rows)
    print(f"{rule:6s} mean_err {a[:,0].mean():+.3f} (sd {a[:,0].std():.3f}) p95 {a[:,1].mean():+.3f} IoD1 {a[:,2].mean():.1f} IoD10 {a[:,3].mean():.1f} lag1 {a[:,4].mean():.3f}")
