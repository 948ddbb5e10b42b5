import os, sys, json
import numpy as np, polars as pl
from iotwin import load_trace
from iotwin.formats import ReadOptions
from iotwin.model import fit, Model
from iotwin.whatif import Workload
from iotwin.whatif.cache import study
t = load_trace("../shared/traces/tencent_cbs_excerpt.csv.bz2", opts=ReadOptions(stream_by="volume"))
m = fit(t)
minv = int(sys.argv[1])
reg = t.df.with_columns((pl.col("offset") // 2**20).alias("r"))
pop = reg.group_by("r").agg(pl.col("stream").n_unique().alias("v"), pl.len().alias("n")).filter(pl.col("v") >= minv).sort("r")
print("shared regions", pop.height, "requests in them", pop["n"].sum())
doc = json.loads(json.dumps(m.doc))
doc["shared_regions"] = [[int(r) << 20, int(n)] for r, n in zip(pop["r"], pop["n"])]
m2 = Model.from_doc(doc)
for q in [float(x) for x in sys.argv[2:]]:
    os.environ["IOTWIN_SHARED_SHARE"] = str(q)
    r = study(Workload("t", t, m2), None, twins=12)
    print(f"min volumes {minv} q {q}: twin", [round(x, 3) for x in r["curves"]["twin"][1:]], "orig", [round(x, 3) for x in r["curves"]["original"][1:]], "max", round(r["twin_max_error"], 4), "reads alone", {k: round(v, 2) for k, v in r["reads_alone_ms"].items()}, "busy", [round(x, 2) for x in r["busy_curves"]["twin"][1:]])
