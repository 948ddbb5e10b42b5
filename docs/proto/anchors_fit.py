"""Prototype: jumps of random requests from the nearest of the stream's last 16 requests."""
import json, sys
import numpy as np
from iotwin import load_trace
from iotwin.formats import ReadOptions
from iotwin.model import fit, Model

SUB_BITS = 3; SUB = 8; LINEAR = 16
def bucket(v):
    if v < LINEAR: return v
    e = v.bit_length() - 1
    sub = (v >> (e - SUB_BITS)) & (SUB - 1)
    return LINEAR + (e - (SUB_BITS + 1)) * SUB + sub
def brange(b):
    if b < LINEAR: return (b, b + 1)
    e = (b - LINEAR) // SUB + SUB_BITS + 1
    sub = (b - LINEAR) % SUB
    w = 1 << (e - SUB_BITS)
    lo = (1 << e) + sub * w
    return (lo, lo + w)
def hist(vals):
    c = {}
    for v in vals: c[bucket(v)] = c.get(bucket(v), 0) + 1
    return [[*brange(b), n] for b, n in sorted(c.items())]

def anchored(trace, doc, K=16):
    cap = doc["capacity"]; levels = doc["levels"]; fan = doc.get("fanout", 4)
    leaf = -(-cap // fan ** levels)
    df = trace.df
    st = df["stream"].to_numpy(); off = df["offset"].to_numpy().astype(np.int64); sz = df["size"].to_numpy().astype(np.int64)
    last, seen = {}, {}
    ahead, behind = {}, {}
    ranks = np.zeros(K, np.int64)
    for i in range(len(st)):
        s = int(st[i]); o = int(off[i]); e = o + int(sz[i])
        L = last.setdefault(s, []); B = seen.setdefault(s, set())
        blocks = range(o // 4096, (e - 1) // 4096 + 1)
        cold = not any(b in B for b in blocks)
        if L and o != L[-1][1] and cold and all(o != x[1] for x in L[-12:]) and L[-1][0] // leaf == o // leaf:
            cands = [(abs(o - b), r, b) for r, (a, b) in enumerate(reversed(L[-K:])) if a // leaf == o // leaf]
            d, r, b = min(cands)
            ranks[r] += 1
            (ahead if o >= b else behind).setdefault(s, []).append(abs(o - b))
        L.append((o, e))
        if len(L) > K: L.pop(0)
        B.update(blocks)
    return ahead, behind, ranks

if __name__ == "__main__":
    path = "../shared/traces/tencent_cbs_excerpt.csv.bz2"
    trace = load_trace(path, opts=ReadOptions(stream_by="volume"))
    m = fit(trace)
    doc = json.loads(json.dumps(m.doc))
    K = int(sys.argv[1]) if len(sys.argv) > 1 else 16
    ahead, behind, ranks = anchored(trace, doc, K)
    print("ranks", (ranks / ranks.sum()).round(3))
    n_old = sum(sum(c for _, _, c in s.get("jumps_ahead", [])) + sum(c for _, _, c in s.get("jumps_behind", [])) for s in doc["streams"])
    print("jumps fitted", n_old, "anchored", sum(len(v) for v in ahead.values()) + sum(len(v) for v in behind.values()))
    for s in doc["streams"]:
        sid = s["id"]
        s["jumps_ahead"] = hist(ahead.get(sid, []))
        s["jumps_behind"] = hist(behind.get(sid, []))
        s["jump_anchors"] = ranks.tolist()
    Model.from_doc(doc).save(f"tencent_anch{K}.model.json")
    m.save("tencent_main.model.json")
