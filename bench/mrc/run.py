#!/usr/bin/env python3
"""bench/mrc: the LRU miss-ratio curve `iotwin validate` measures, against libCacheSim, in one
run on the same block stream.

`validate` (and `whatif cache`, the report's MRC figure) needs the LRU miss ratio at 1, 2, 5,
10, 20 and 50% of a trace's footprint. iotwin gets all six from one pass of exact stack
distances (`_core.lru_miss_ratios`, src/stats/mrc.rs); the anchor is what a user of
libCacheSim does: one LRU simulation per cache size (`process_trace` over its oracleGeneral
binary trace, fastest of three initial hash-table sizes per size). The stream is bench/sim's
cloudPhysics block stream (cloudPhysicsIO.vscsi's 4 KiB blocks, repeated to the length asked).
Each side runs in a fresh process, input loaded before the clock starts; the miss ratios must
agree exactly. Prints the times and the ratio.
Usage: python bench/mrc/run.py [--accesses N] [--write-results]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE.parent / "sim"))
from common import run_step, write_section  # noqa: E402
from run import HASHPOWERS, libcachesim_step, make_streams  # noqa: E402

FRACTIONS = (0.01, 0.02, 0.05, 0.1, 0.2, 0.5)  # of the footprint, as validate's


def iotwin_step(npy: Path, out: Path) -> dict:
    """The six miss ratios from one pass, sizes from the footprint (counted first, as
    validate counts the original's)."""
    setup = (
        "import json, math, numpy as np\nfrom iotwin import _core\n"
        f"blocks = np.load({str(npy)!r})\n"
        "offset = blocks * np.uint64(4096)\n"
        "size = np.full(len(blocks), 4096, dtype=np.uint32)\n"
        "space = np.zeros(len(blocks), dtype=np.uint64)\n"
        "op = np.zeros(len(blocks), dtype=np.uint8)\n"  # reads, as libCacheSim's stream
    )
    code = (
        "_, footprint, _, _ = _core.lru_miss_ratios(space, offset, size, op, 4096, [])\n"
        f"sizes = [max(1, math.ceil(f * footprint)) for f in {FRACTIONS!r}]\n"
        "n, _, ratios, _ = _core.lru_miss_ratios(space, offset, size, op, 4096, sizes)\n"
        f"open({str(out)!r}, 'w').write(json.dumps([sizes, ratios, n]))"
    )
    timing = run_step(code, setup=setup)
    sizes, ratios, n = json.loads(out.read_text())
    return {**timing, "sizes": sizes, "ratios": ratios, "n": n}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--accesses", type=int, default=10_000_000)
    ap.add_argument("--write-results", action="store_true")
    args = ap.parse_args()
    npy = make_streams(args.accesses)["cloudphysics"]
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "result.json"
        ours = iotwin_step(npy, out)
        print(f"iotwin: 6 sizes in one pass {ours['seconds']:.2f} s", flush=True)
        theirs = []
        for size in ours["sizes"]:
            best = min(
                (libcachesim_step(npy, "lru", size, hp, out) for hp in HASHPOWERS),
                key=lambda r: r["seconds"],
            )
            theirs.append(best)
            print(f"libCacheSim LRU {size:>9,} blocks {best['seconds']:.2f} s", flush=True)
    n = ours["n"]
    lcs_ratios = [1 - r["hits"] / r["n"] for r in theirs]
    agree = all(abs(a - b) < 1e-12 for a, b in zip(ours["ratios"], lcs_ratios, strict=True))
    lcs_total = sum(r["seconds"] for r in theirs)
    rows = "\n".join(
        f"| {f:.0%} | {s:,} | {a:.4f} | {b:.4f} | {r['seconds']:.2f} s |"
        for f, s, a, b, r in zip(
            FRACTIONS, ours["sizes"], ours["ratios"], lcs_ratios, theirs, strict=True
        )
    )
    body = (
        f"`python bench/mrc/run.py --accesses {args.accesses}`: the cloudPhysics block stream, "
        f"{n:,} 4 KiB-block accesses. iotwin: footprint, then the six miss ratios from one "
        "pass of exact stack distances; libCacheSim: one LRU simulation per size (fastest of "
        f"initial hash-table sizes 2^{HASHPOWERS[0]}..2^{HASHPOWERS[-1]}). Fresh process per "
        "step, input loaded before the clock.\n\n"
        "| cache (of footprint) | blocks | iotwin miss ratio | libCacheSim miss ratio | "
        "libCacheSim time |\n|---|---|---|---|---|\n"
        + rows
        + f"\n\n| step | time | peak RSS |\n|---|---|---|\n"
        f"| iotwin, all six sizes | {ours['seconds']:.2f} s | {ours['peak_rss_mib']:.0f} MiB |\n"
        f"| libCacheSim LRU, six runs | {lcs_total:.2f} s | "
        f"{max(r['peak_rss_mib'] for r in theirs):.0f} MiB |\n\n"
        f"iotwin is {lcs_total / ours['seconds']:.2f}x as fast as libCacheSim for the curve; "
        f"miss ratios {'identical' if agree else '**differ**'}."
    )
    print(body)
    if not agree:
        sys.exit("miss ratios differ from libCacheSim's")
    if args.write_results:
        write_section("mrc", body)


if __name__ == "__main__":
    main()
