"""Cross-stream block re-use: how close the twin's cache behaviour and simulated response
come to the original's, per shared trace and on the pgbench sample.

Prints, per trace: the global LRU miss-ratio deviations (validate's sizes), the block
footprints of original and twin, the request-level read hit ratio of a global LRU of 4 KiB
blocks (25,000 blocks, or 1/8 of the footprint), the
`whatif cache` speedup curves (original vs twin), `sim` mean/p95 at the auto intensity on
hdd-7200, and each one's reads alone on that disk (what it serves once a write-back cache
takes the writes). Usage: python bench/reuse/run.py [TRACE ...] [--bursts] [--json OUT]
[--write-results] (--bursts fits every model with its streams' burst lengths)
(IOTWIN_SHARED locates the traces; --write-results replaces the `reuse` section of
bench/RESULTS.md).
"""

from __future__ import annotations

import json
import os
import sys
from collections import OrderedDict
from pathlib import Path

import numpy as np

import iotwin
from iotwin.formats import ReadOptions
from iotwin.model import fit
from iotwin.sim import placed, simulate
from iotwin.validate import cache_sizes, lru
from iotwin.whatif import Workload, auto_intensity
from iotwin.whatif.cache import study

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
from common import write_section  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
SHARED = Path(os.environ.get("IOTWIN_SHARED", ROOT.parent / "shared")) / "traces"
TRACES = {
    "cloudPhysicsIO.vscsi": (SHARED / "cloudPhysicsIO.vscsi", None),
    "msr_hm0_excerpt.csv": (SHARED / "msr_hm0_excerpt.csv", None),
    "tencent_cbs_excerpt.csv.bz2": (SHARED / "tencent_cbs_excerpt.csv.bz2", "volume"),
    "tpcc_small.disksim": (SHARED / "tpcc_small.disksim", "device"),
    "pgbench.parquet": (ROOT / "samples" / "pgbench.parquet", None),
}
BLOCK = 4096


def read_hit_ratio(t: iotwin.Trace, blocks: int) -> float:
    """Reads whose every 4 KiB block is in a global LRU of `blocks` blocks (all requests
    update it), over all reads."""
    off = t.numpy("offset", np.uint64)
    end = off + t.numpy("size", np.uint32).astype(np.uint64)
    ops = t.numpy("op", np.uint8)
    cache: OrderedDict[int, None] = OrderedDict()
    hits = reads = 0
    for o, e, op in zip(off.tolist(), end.tolist(), ops.tolist(), strict=True):
        span = range(o // BLOCK, max(o + 1, e - 1) // BLOCK + 1)
        if op == 0:
            reads += 1
            hits += all(b in cache for b in span)
        for b in span:
            cache[b] = None
            cache.move_to_end(b)
        while len(cache) > blocks:
            cache.popitem(last=False)
    return hits / max(1, reads)


def measure(name: str, path: Path, stream_by: str | None, bursts: bool = False) -> dict:
    trace = iotwin.load_trace(path, opts=ReadOptions(stream_by=stream_by))
    model = fit(trace, bursts=bursts)
    twin = model.synth(requests=len(trace), seed=0)
    sizes = cache_sizes(trace)
    ca, cb = lru(trace, sizes), lru(twin, sizes)
    deviations = [round(abs(a - b), 3) for a, b in zip(ca.miss_ratios, cb.miss_ratios, strict=True)]
    out: dict = {"miss_ratio_dev": deviations}
    # distinct 4 KiB blocks touched (a request touches every block it overlaps)
    out["footprint_blocks"] = {"original": ca.distinct, "twin": cb.distinct}
    po, pt = placed(trace), placed(twin)
    blocks = 25_000 if name == "pgbench.parquet" else max(1, sizes[-1] // 4)
    out["read_hit"] = {
        "blocks": blocks,
        "original": round(read_hit_ratio(po, blocks), 3),
        "twin": round(read_hit_ratio(pt, blocks), 3),
    }
    k = auto_intensity(po, "hdd-7200", 0)
    a, b = simulate(po, "hdd-7200", k, 0), simulate(pt, "hdd-7200", k, 0)
    out["sim"] = {
        "intensity": k,
        "mean_dev": round(b.mean_ms / a.mean_ms - 1, 3),
        "p95_dev": round(b.percentile_ms(95) / a.percentile_ms(95) - 1, 3),
    }
    r = study(Workload(name, trace, model), None, seed=0, twins=1)
    # the study's twin is this one (seed 0, placed) and its intensity k
    for key in ("reads_alone_ms", "reads_alone_service_ms"):
        out[key] = {w: round(r[key][w] or 0.0, 3) for w in ("original", "twin")}
    out["cache"] = {
        "sizes": r["sizes"],
        "original": [round(x, 2) for x in r["curves"]["original"]],
        "twin": [round(x, 2) for x in r["curves"]["twin"]],
        "twin_max_error": round(r["twin_max_error"], 3),
        "busy_original": [round(x, 2) for x in r["busy_curves"]["original"]],
        "busy_twin": [round(x, 2) for x in r["busy_curves"]["twin"]],
        "twin_max_busy_error": round(r["twin_max_busy_error"], 3),
    }
    return out


def markdown(results: dict) -> str:
    """The results as RESULTS.md tables: twin against original, per trace."""
    rows = [
        "| trace | miss-ratio deviation (1..50% of footprint) | read hit orig / twin "
        "| sim mean / p95 twin vs orig | reads alone orig / twin (of it service) |",
        "|---|---|---|---|---|",
    ]
    for name, r in results.items():
        hit, sim, alone = r["read_hit"], r["sim"], r["reads_alone_ms"]
        service = r["reads_alone_service_ms"]
        rows.append(
            f"| {name} | {' '.join(f'{d:.3f}' for d in r['miss_ratio_dev'])} "
            f"| {hit['original']:.2f} / {hit['twin']:.2f} ({hit['blocks']:,} blocks) "
            f"| {sim['mean_dev']:+.1%} / {sim['p95_dev']:+.1%} "
            f"| {alone['original']:.2f} ({service['original']:.2f}) / "
            f"{alone['twin']:.2f} ({service['twin']:.2f}) ms |"
        )
    rows += ["", "`whatif cache` speedups (0, 1/8, 1/4, 1/2, 1 x footprint; one twin):", ""]
    for name, r in results.items():
        c = r["cache"]
        rows.append(
            f"- {name}: original {c['original']}, twin {c['twin']}, max error {c['twin_max_error']}; "
            f"busy time: original {c['busy_original']}, twin {c['busy_twin']}, "
            f"max error {c['twin_max_busy_error']}"
        )
    return "\n".join(rows)


def main() -> None:
    args = sys.argv[1:]
    out = args.pop(args.index("--json") + 1) if "--json" in args else None
    only = [a for a in args if not a.startswith("--")]
    results = {}
    for name, (path, stream_by) in TRACES.items():
        if only and name not in only:
            continue
        results[name] = measure(name, path, stream_by, "--bursts" in args)
        print(name, json.dumps(results[name]), flush=True)
    if out:
        Path(out).write_text(json.dumps(results, indent=1))
    if "--write-results" in args:
        write_section("reuse", markdown(results))


if __name__ == "__main__":
    main()
