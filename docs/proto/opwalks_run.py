"""Session 41 prototype run (not on main): with docs/proto/opwalks.patch applied and built,
`python docs/proto/opwalks_run.py TRACE TWINS` fits the trace's model and the per-operation
walks (each operation as a stream of its own, one history), and prints the cache curve,
bare-disk errors, reads alone, failing validate metrics and the kinds of each twin's
requests for main and for the walks."""

import sys, copy, dataclasses, numpy as np, polars as pl
from pathlib import Path
import iotwin
from iotwin import model as M
from iotwin.model import Model
from iotwin.trace import Trace
from iotwin.sim import simulate, placed
from iotwin.whatif import load_workload, auto_intensity
from iotwin.whatif.cache import curve, auto_sizes, data_touched, reads_alone
from iotwin.validate import validate

path = Path(sys.argv[1])
nt = int(sys.argv[2])
w = load_workload(path, lambda p: iotwin.load_trace(p))
orig = w.reference(0)
inten = auto_intensity(orig, "hdd-7200", 0)
sizes = auto_sizes(data_touched(orig)[0])
stack = {"over": "hdd-7200", "ssd": "ssd-sata", "policy": "lru", "write": "back", "dirty": 0.5}


def sp(t):
    return np.array([p["speedup"] for p in curve(t, sizes, stack, inten, 0, lambda: None)])


o = sp(orig)
ob = simulate(orig, "hdd-7200", inten)
print("orig", np.round(o, 2), "reads alone %.2f" % reads_alone(orig, "hdd-7200", inten, 0))
main = w.model
split = Trace(
    orig.df.with_columns(stream=(pl.col("stream") * 2 + (pl.col("op") != 0).cast(pl.UInt32))),
    dataclasses.replace(orig.meta, stream_by="thread"),
)
sm = M.fit(split, levels=main.doc["levels"])
doc = copy.deepcopy(main.doc)
by_id = {s["id"]: s for s in sm.doc["streams"]}
for s in doc["streams"]:
    s["op_walks"] = [by_id.get(s["id"] * 2), by_id.get(s["id"] * 2 + 1)]
ow = Model(doc)
for label, m in (("main", main), ("op walks", ow)):
    twins = [placed(m.synth(requests=len(orig), seed=s)) for s in range(nt)]
    tw = np.mean([sp(t) for t in twins], axis=0)
    b = [simulate(t, "hdd-7200", inten) for t in twins]
    print(
        label,
        np.round(tw, 2),
        "err %.3f" % np.max(np.abs(tw - o)),
        "bare %+.1f%% p95 %+.1f%%"
        % (
            100 * (np.mean([x.mean_ms for x in b]) / ob.mean_ms - 1),
            100 * (np.mean([x.percentile_ms(95) for x in b]) / ob.percentile_ms(95) - 1),
        ),
        "reads alone %.2f" % np.mean([reads_alone(t, "hdd-7200", inten, 0) for t in twins]),
    )
    r = validate(orig, twins[0])
    print(
        "   fails:",
        {
            k: round(v["deviation"] or 0, 3)
            for k, v in r["metrics"].items()
            if not v.get("pass", True)
        },
    )
import collections


def kinds(doc):
    c = collections.Counter()
    for s in doc["streams"]:
        for t in s["transitions"]:
            for k in t["categories"]:
                c[(k["kind"], k["op"])] += k["count"]
    return c


ko = kinds(main.doc)
km = kinds(M.fit(main.synth(requests=len(orig), seed=0)).doc)
kw = kinds(M.fit(ow.synth(requests=len(orig), seed=0)).doc)
print("kind op: orig main-twin opwalk-twin")
for k in sorted(set(ko) | set(km) | set(kw)):
    print(k, ko.get(k, 0), km.get(k, 0), kw.get(k, 0))
