"""bench/distributed: fitting a partitioned dataset in-process vs on a Dask LocalCluster.

Makes a seeded dataset of N records once (default 100 million, under bench/data/: 32 streams
of unequal weight, each with its own read share, sizes and sequential runs over a 64 GiB
device with a hot 1 GiB region, written by stream and every 4Mi requests), then times, each in
a fresh process on the same dataset:
  - `fit_dataset` and `characterize_dataset` in-process (one task after another),
  - the same on a LocalCluster of W worker processes (default 2, one thread each),
with wall time, peak RSS of the client and of every worker, and each task's throughput from
Dask's task stream. It checks that both give the same result, and projects the time for the
full MSR Cambridge (~434M requests, 36 volumes) and Alibaba (~20 billion, 1,000 volumes)
collections on a 16-node cluster from the measured per-task throughput.
Usage: python bench/distributed/run.py [--records N] [--workers W] [--write-results]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import polars as pl

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
from common import BENCH, run_step, write_section  # noqa: E402

DATA = BENCH / "data"
LOAD_AT_START = 0.0
STREAMS = 32
CHUNK = 4_000_000
DEVICE = 64 << 30
HOT = 1 << 30
SIZES = np.array([4096, 8192, 16384, 65536, 131072], dtype=np.int64)
SIZE_P = np.array([0.45, 0.2, 0.15, 0.12, 0.08])
COLLECTIONS = {  # requests, streams (volumes): public figures of the collections
    "MSR Cambridge": (434_000_000, 36),
    "Alibaba block traces": (20_000_000_000, 1000),
}
NODES, CORES_PER_NODE = 16, 2  # cores per node as this machine: a conservative node


# -- input -----------------------------------------------------------------------------------
def make_dataset(path: Path, records: int, seed: int = 1) -> None:
    """A canonical trace generated chunk by chunk in time order, split as ingest splits."""
    from iotwin.dataset import RUN_START, open_dataset, write_batches

    if (path / "_iotwin.json").exists() and RUN_START in open_dataset(path).columns:
        return
    from iotwin.trace import TraceMeta

    meta = TraceMeta(
        source=f"bench/distributed synthetic (seed {seed}, {records} records)",
        format="synthetic",
        stream_by="volume",
        capacity=DEVICE,
        streams={s: f"volume {s}" for s in range(STREAMS)},
    )
    write_batches(_chunks(records, seed), meta, path, partition_rows=4 << 20)


def _chunks(records: int, seed: int) -> Iterator[pl.DataFrame]:
    rng = np.random.default_rng(seed)
    weights = 1.0 / (1.0 + np.arange(STREAMS) / 8.0)
    weights /= weights.sum()
    read_p = rng.uniform(0.2, 0.9, STREAMS)
    seq_p = rng.uniform(0.1, 0.7, STREAMS)
    hot_p = rng.uniform(0.1, 0.5, STREAMS)
    ends = np.zeros(STREAMS, dtype=np.int64)  # each stream's last end, carried across chunks
    t = 0
    for start in range(0, records, CHUNK):
        n = min(CHUNK, records - start)
        ts = t + np.cumsum(rng.exponential(50_000, n).astype(np.int64))
        t = int(ts[-1])
        stream = rng.choice(STREAMS, n, p=weights).astype(np.uint32)
        size = rng.choice(SIZES, n, p=SIZE_P)
        offset = np.empty(n, dtype=np.int64)
        for s in range(STREAMS):
            rows = np.flatnonzero(stream == s)
            if rows.size:
                offset[rows] = _stream_offsets(rng, size[rows], seq_p[s], hot_p[s], ends, s)
        op = (rng.random(n) >= read_p[stream]).astype(np.uint8)
        yield pl.DataFrame(
            {
                "ts_ns": ts,
                "stream": stream,
                "op": op,
                "offset": offset.astype(np.uint64),
                "size": size.astype(np.uint32),
            }
        )


def _stream_offsets(
    rng: np.random.Generator, size: np.ndarray, seq_p: float, hot_p: float, ends: np.ndarray, s: int
) -> np.ndarray:
    """Runs of sequential requests from random 4 KiB-aligned starts (some in the hot region)."""
    n = size.size
    starts_run = rng.random(n) >= seq_p
    hot = rng.random(n) < hot_p
    base = np.where(hot, rng.integers(0, HOT >> 12, n), rng.integers(0, DEVICE >> 12, n)) << 12
    run = np.cumsum(starts_run) - 1  # -1: continues the previous chunk's run
    before = np.cumsum(size) - size  # bytes of this stream's requests before each one
    run_base = np.concatenate(([ends[s]], base[starts_run]))
    run_before = np.concatenate(([0], before[starts_run]))
    offset = run_base[run + 1] + before - run_before[run + 1]
    offset = np.minimum(offset, DEVICE - size)
    ends[s] = offset[-1] + size[-1]
    return offset


# -- steps -----------------------------------------------------------------------------------
JOBS = {  # what a step runs on PATH, leaving its result at OUT
    "fit": "fit_dataset(PATH, client=CLIENT).save(OUT)",
    "characterize": "Path(OUT).write_text(json.dumps(characterize_dataset(PATH, client=CLIENT)))",
}

IN_PROCESS = """
import json
import os
from pathlib import Path
from iotwin.distributed import characterize_dataset, fit_dataset
JOB
"""

ON_DASK = """
import json, resource, sys, time
from pathlib import Path
from distributed import Client, LocalCluster, get_task_stream
from iotwin.distributed import characterize_dataset, fit_dataset

def peak_mib():
    # VmHWM: this process's own peak (ru_maxrss would include a large parent's at fork)
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024

if __name__ == "__main__":
    t0 = time.perf_counter()
    cluster = LocalCluster(n_workers=WORKERS, threads_per_worker=1, processes=True,
                           dashboard_address=":0", silence_logs=50)
    client = Client(cluster)
    started = time.perf_counter()
    with get_task_stream(client) as stream:
        JOB
    fitted = time.perf_counter()
    tasks = [
        {"name": t["key"] if isinstance(t["key"], str) else str(t["key"]),
         "seconds": sum(s["stop"] - s["start"] for s in t["startstops"] if s["action"] == "compute")}
        for t in stream.data
    ]
    workers = client.run(peak_mib)
    print(json.dumps({
        "startup": started - t0, "fit": fitted - started, "client_peak_mib": peak_mib(),
        "worker_peak_mib": sorted(workers.values()), "tasks": tasks,
    }))
    client.close(); cluster.close()
"""


def _job(job: str, path: Path, out: Path, client: str) -> str:
    return (
        JOBS[job]
        .replace("PATH", repr(str(path)))
        .replace("OUT", repr(str(out)))
        .replace("CLIENT", client)
    )


def in_process(job: str, path: Path, out: Path) -> dict:
    code = IN_PROCESS.replace("JOB", _job(job, path, out, "None"))
    return run_step(code, setup="import iotwin.distributed")


def on_dask(job: str, path: Path, out: Path, workers: int) -> dict:
    script = DATA / "bench_distributed_dask.py"
    code = ON_DASK.replace("JOB", _job(job, path, out, "client")).replace("WORKERS", str(workers))
    script.write_text(code)  # a file, so the worker processes can import the main module
    t0 = time.perf_counter()
    done = subprocess.run([sys.executable, str(script)], check=True, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    result = json.loads(done.stdout.strip().splitlines()[-1])
    result["wall"] = wall
    return result


def same_result(a: Path, b: Path) -> bool:
    """The same model (bar the fit's own timing) or the same characterization."""
    docs = [json.loads(p.read_text()) for p in (a, b)]
    for d in docs:
        d.pop("fit", None)
    return docs[0] == docs[1]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=100_000_000)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--write-results", action="store_true")
    ap.add_argument("--make-only", action="store_true", help="only make the dataset")
    args = ap.parse_args()
    global LOAD_AT_START
    LOAD_AT_START = os.getloadavg()[0]  # the machine may be shared: say how busy it was
    DATA.mkdir(exist_ok=True)
    path = DATA / f"distributed-{args.records}.ds"
    t0 = time.perf_counter()
    if args.make_only:
        make_dataset(path, args.records)
        return
    # made in a child process: the steps' peak RSS (ru_maxrss) starts from this process's
    # RSS when it forks them, which generating 100M records would raise to gigabytes
    make = [sys.executable, __file__, "--records", str(args.records), "--make-only"]
    subprocess.run(make, check=True)
    made = time.perf_counter() - t0
    from iotwin.dataset import open_dataset

    ds = open_dataset(path)
    size_mib = sum(ds.file(p).stat().st_size for p in ds.partitions) / 2**20
    lengths = sorted(ds.stream_lengths().values())
    print(
        f"dataset: {ds.requests:,} requests, {len(lengths)} streams "
        f"({lengths[0]:,} .. {lengths[-1]:,}), {len(ds.partitions)} partitions, "
        f"{size_mib:.0f} MiB ({made:.1f} s to make or find)"
    )
    runs = {}
    for job in ("fit", "characterize"):
        outs = [DATA / f"distributed-{job}-{where}.json" for where in ("inprocess", "dask")]
        one = in_process(job, path, outs[0])
        print(f"{job} in-process: {one['seconds']:.1f} s, peak RSS {one['peak_rss_mib']:.0f} MiB")
        dask = on_dask(job, path, outs[1], args.workers)
        print(job, json.dumps({k: v for k, v in dask.items() if k != "tasks"}))
        identical = same_result(*outs)
        print(f"{job}: identical results: {identical}")
        runs[job] = (one, dask, identical)
    body = report(ds, args, runs, size_mib, lengths)
    print(body)
    if args.write_results:
        write_section("distributed", body)


def report(ds, args, runs: dict, size_mib: float, lengths) -> str:
    rows = ds.requests
    lines = [
        f"`python bench/distributed/run.py --records {args.records} --workers {args.workers}`; "
        f"input: {rows:,} requests in {len(lengths)} streams ({lengths[0]:,} to {lengths[-1]:,} "
        f"requests each), {len(ds.partitions)} partitions (by stream, every 4Mi requests), "
        f"{size_mib:.0f} MiB of Parquet. fit with re-references on (the default), so a fit "
        "task is one stream's partitions in time order; a characterize task is one stream too. "
        f"Load average at the start: {LOAD_AT_START:.1f} on {os.cpu_count()} cores.",
        "",
        "| run | wall | work | rate | peak RSS | result identical |",
        "|---|---|---|---|---|---|",
    ]
    per_task: dict[str, float] = {}
    notes = []
    for job, (one, dask, identical) in runs.items():
        tasks = [t for t in dask["tasks"] if t["name"].startswith(f"{job}_unit")]
        merges = [t for t in dask["tasks"] if t["name"].startswith("merge_")]
        per_task[job] = rows / sum(t["seconds"] for t in tasks)  # per worker core
        task_s = sorted(t["seconds"] for t in tasks)
        lines += [
            f"| {job}, in-process (1 process) | {one['seconds']:.1f} s | {one['seconds']:.1f} s | "
            f"{rows / one['seconds'] / 1e6:.2f} M/s | {one['peak_rss_mib']:.0f} MiB | |",
            f"| {job}, LocalCluster of {args.workers} workers | {dask['wall']:.1f} s (incl. "
            f"{dask['startup']:.1f} s start-up) | {dask['fit']:.1f} s | "
            f"{rows / dask['fit'] / 1e6:.2f} M/s | client {dask['client_peak_mib']:.0f} MiB, "
            f"workers {', '.join(f'{m:.0f}' for m in dask['worker_peak_mib'])} MiB | "
            f"**{identical}** |",
        ]
        notes.append(
            f"- {job}: speed-up on {args.workers} workers {one['seconds'] / dask['fit']:.2f}x; "
            f"per task (read from Parquet and count) {per_task[job] / 1e6:.2f} M requests/s "
            f"per worker core over {len(tasks)} tasks ({task_s[0]:.1f} s to {task_s[-1]:.1f} s "
            f"each); {len(merges)} merges took {sum(t['seconds'] for t in merges):.2f} s."
        )
    rate = per_task["fit"]
    workers = NODES * CORES_PER_NODE
    lines += [
        "",
        "*work* is the fit or characterization, merges and finalisation included (cluster "
        "start-up excluded); *result identical*: in-process vs cluster, model JSON without its "
        "timing field, characterization JSON as is.",
        "",
        *notes,
        "",
        f"Projection of a fit on {NODES} nodes of {CORES_PER_NODE} cores ({workers} workers) at "
        f"the measured {rate / 1e6:.2f} M requests/s per worker, reading from shared storage "
        "that keeps up: the time is the larger of (requests / all workers) and the largest "
        "volume's own time (with re-references a volume is one task; with `--no-reref` its "
        "partitions run in parallel and only the first term counts).",
        "",
        "| collection | requests | volumes | balanced time | if the largest volume holds 10% |",
        "|---|---|---|---|---|",
    ]
    for name, (requests, volumes) in COLLECTIONS.items():
        balanced = requests / (workers * rate)
        skewed = max(balanced, 0.10 * requests / rate)
        lines.append(f"| {name} | {requests:,} | {volumes:,} | {_dur(balanced)} | {_dur(skewed)} |")
    return "\n".join(lines)


def _dur(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.1f} h"


if __name__ == "__main__":
    main()
