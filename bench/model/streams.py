"""Streamed synthesis of many-stream models: `iotwin synth` (window by window, written to
Parquet as it is sampled) against `synth()` in memory (each stream walked whole on a core of
its own), same model, seed and request count, in one run.

Models: the shared Tencent excerpt by volume (2,038 streams) and TPC-C by device (16),
fitted with defaults. Usage: python bench/model/streams.py [--requests N] [--write-results]
(IOTWIN_SHARED locates the traces; --write-results replaces the `streamed synthesis`
section of bench/RESULTS.md).
"""

from __future__ import annotations

import argparse
import hashlib
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import polars as pl

import iotwin
from iotwin.formats import ReadOptions
from iotwin.model import Model, fit

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from common import write_section

ROOT = Path(__file__).resolve().parents[2]
SHARED = Path(os.environ.get("IOTWIN_SHARED", ROOT.parent / "shared")) / "traces"
MODELS = {"tencent_cbs_excerpt.csv.bz2": "volume", "tpcc_small.disksim": "device"}
COLUMNS = ("ts_ns", "stream", "op", "offset", "size")


def digest(df: pl.DataFrame) -> str:
    h = hashlib.sha256()
    for name in COLUMNS:
        h.update(np.ascontiguousarray(df[name].to_numpy()).tobytes())
    return h.hexdigest()[:16]


def best_of(n: int, fn) -> float:
    times = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def measure(model: Model, requests: int, out: Path) -> dict:
    streamed = best_of(3, lambda: model.write_synth(out, requests=requests, seed=1))
    written = pl.read_parquet(out)
    in_memory = best_of(3, lambda: model.synth(requests=requests, seed=1))
    same = digest(written) == digest(model.synth(requests=requests, seed=1).df)
    return {"streamed_s": streamed, "in_memory_s": in_memory, "same_requests": same}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--requests", type=int, default=2_000_000)
    ap.add_argument("--write-results", action="store_true")
    args = ap.parse_args()
    n = args.requests
    rows = [
        "| model | streams | iotwin synth, streamed to Parquet | synth() in memory | streamed / in memory "
        "| same requests |",
        "|---|---|---|---|---|---|",
    ]
    with tempfile.TemporaryDirectory() as tmp:
        for name, stream_by in MODELS.items():
            trace = iotwin.load_trace(SHARED / name, opts=ReadOptions(stream_by=stream_by))
            model = fit(trace)
            r = measure(model, n, Path(tmp) / "twin.parquet")
            streams = len(model.doc["streams"])
            line = (
                f"| {name} | {streams:,} | {n / r['streamed_s'] / 1e6:.2f} M/s "
                f"| {n / r['in_memory_s'] / 1e6:.2f} M/s "
                f"| {r['in_memory_s'] / r['streamed_s']:.2f}x | {r['same_requests']} |"
            )
            print(line, flush=True)
            rows.append(line)
    body = (
        f"`python bench/model/streams.py --requests {n}`: models fitted with defaults, seed 1, "
        "best of 3 in one process each way; the streamed side includes writing Parquet, the "
        "in-memory side does not.\n\n" + "\n".join(rows)
    )
    print(body)
    if args.write_results:
        write_section("streamed synthesis", body)


if __name__ == "__main__":
    main()
