"""Alternated timing of builds of the characterize core on one loaded trace.

Loads the trace once, then calls `characterize_chunks` of each given build (a copy of
`_core.abi3.so`, e.g. one saved from main and one from a branch) in turn, many rounds,
alternating the order, and prints the median wall and CPU time of each build and the median of
the paired ratios. The host's speed drifts over minutes, so builds compared in the same seconds
are what a change is judged by. Also checks that every build returns the same result.
Usage: python bench/ingest/core_ab.py [--rounds N] [--trace P] NAME=PATH.so [NAME=PATH.so ...]
"""

from __future__ import annotations

import argparse
import importlib.machinery
import importlib.util
import statistics
import time
from pathlib import Path
from types import ModuleType

import iotwin
from iotwin.characterize import _COUNTED
from iotwin.formats.base import NUMPY_DTYPES

DEFAULT_TRACE = Path(__file__).resolve().parents[1] / "data" / "msr_10000000.parquet"


def load_build(name: str, path: str) -> ModuleType:
    """The extension module at `path`, under a name of its own (builds load side by side)."""
    full = f"{name}_build._core"
    loader = importlib.machinery.ExtensionFileLoader(full, path)
    spec = importlib.util.spec_from_file_location(full, path, loader=loader)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("builds", nargs="+", help="NAME=PATH of a built _core .so")
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--trace", default=str(DEFAULT_TRACE))
    args = ap.parse_args()
    builds = [(n, load_build(n, p)) for n, p in (b.split("=", 1) for b in args.builds)]
    trace = iotwin.load_trace(args.trace)
    names = [*_COUNTED, *(["latency_ns"] if "latency_ns" in trace.columns else [])]
    chunks = trace.column_chunks(names, [NUMPY_DTYPES[n] for n in names])
    latency = chunks[5] if len(chunks) > 5 else None
    call = (*chunks[:5], latency, 4, int(trace.meta.capacity or 0), round(1800e9), 65536)
    wall: dict[str, list[float]] = {n: [] for n, _ in builds}
    cpu: dict[str, list[float]] = {n: [] for n, _ in builds}
    results: dict[str, str] = {}
    for r in range(args.rounds):
        for name, core in builds if r % 2 == 0 else builds[::-1]:
            w, c = time.perf_counter(), time.process_time()
            out = core.characterize_chunks(*call)
            wall[name].append(time.perf_counter() - w)
            cpu[name].append(time.process_time() - c)
            results.setdefault(name, repr(out))
    print("same result from every build:", len(set(results.values())) == 1)
    for name, _ in builds:
        print(
            f"{name:>10}: wall median {statistics.median(wall[name]) * 1e3:6.1f} ms, "
            f"CPU median {statistics.median(cpu[name]) * 1e3:6.1f} ms"
        )
    first = builds[0][0]
    for name, _ in builds[1:]:
        ratio = {
            kind: statistics.median(b / a for a, b in zip(t[first], t[name], strict=True))
            for kind, t in (("wall", wall), ("CPU", cpu))
        }
        print(
            f"{name} / {first}, median of paired ratios: wall {ratio['wall']:.3f}, "
            f"CPU {ratio['CPU']:.3f}"
        )


if __name__ == "__main__":
    main()
