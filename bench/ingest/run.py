"""bench/ingest: iotwin ingest and characterize against their anchors, in one run.

Generates an MSR Cambridge CSV of N records (default 10 million; realistic mix of streams,
sizes, sequential runs), then times, each in a fresh process on the same file:
  - `iotwin ingest` (parse, normalize, write canonical Parquet),
  - a bare polars `read_csv` of the same file (the anchor to beat: >= 0.8x its speed),
  - pandas `read_csv` (>= 10x),
  - `iotwin characterize` on the Parquet vs a bare polars `read_parquet` (within 2x),
and reports peak RSS of ingest at N and at 3N records (it must not grow with the file).
Usage: python bench/ingest/run.py [--records N] [--skip-large] [--write-results]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from common import BENCH, paired_ratios, run_step, write_section

DATA = BENCH / "data"


def make_msr_csv(path: Path, records: int, seed: int = 7) -> None:
    """An MSR-format CSV: 4 disks, 60% reads, sizes from a realistic set, 30% sequential."""
    if path.exists():
        return
    rng = np.random.default_rng(seed)
    tmp = path.with_suffix(".tmp")
    chunk = 2_000_000
    t = 128166372000000000
    sizes = np.array([512, 4096, 8192, 16384, 65536, 131072], dtype=np.int64)
    with open(tmp, "w") as out:
        for start in range(0, records, chunk):
            n = min(chunk, records - start)
            ts = t + np.cumsum(rng.exponential(2000, n).astype(np.int64) + 1)
            t = int(ts[-1])
            disk = rng.integers(0, 4, n)
            kind = np.where(rng.random(n) < 0.6, "Read", "Write")
            size = sizes[rng.integers(0, len(sizes), n)]
            offset = rng.integers(0, 1 << 27, n) * 512
            seq = rng.random(n) < 0.3
            offset[1:][seq[1:]] = offset[:-1][seq[1:]] + size[:-1][seq[1:]]
            resp = rng.integers(100, 100000, n)
            lines = [
                f"{a},hm,{b},{c},{d},{e},{f}\n"
                for a, b, c, d, e, f in zip(
                    ts.tolist(),
                    disk.tolist(),
                    kind.tolist(),
                    offset.tolist(),
                    size.tolist(),
                    resp.tolist(),
                    strict=True,
                )
            ]
            out.writelines(lines)
    tmp.replace(path)


# Imports happen before each step's clock starts (for iotwin and the anchors alike).
SETUP = "import iotwin, iotwin.characterize, iotwin.ingest, polars as pl, pandas as pd"


def steps(csv: Path, parquet: Path) -> dict[str, str]:
    cols = "['Timestamp','Hostname','DiskNumber','Type','Offset','Size','ResponseTime']"
    return {
        "iotwin ingest": f"iotwin.ingest({str(csv)!r}, {str(parquet)!r})",
        "polars read_csv": f"pl.read_csv({str(csv)!r}, has_header=False)",
        "pandas read_csv": f"pd.read_csv({str(csv)!r}, header=None, names={cols})",
        "iotwin characterize": f"iotwin.characterize({str(parquet)!r})",  # as the CLI calls it
        "polars read_parquet": f"pl.read_parquet({str(parquet)!r})",
    }


ROUNDS = 5


def alternated(named: dict[str, str], rounds: int) -> dict[str, list[dict]]:
    """Every step once per round, in order (ingest first: later steps read its output)."""
    runs: dict[str, list[dict]] = {name: [] for name in named}
    for r in range(rounds):
        for name, code in named.items():
            run = run_step(code, setup=SETUP)
            runs[name].append(run)
            print(
                f"round {r + 1}: {name:22s} {run['seconds']:7.2f} s  CPU "
                f"{run['cpu_seconds']:6.2f} s  peak RSS {run['peak_rss_mib']:7.0f} MiB",
                flush=True,
            )
    return runs


def median_ratio(numerators: list[dict], denominators: list[dict]) -> float:
    """The median over rounds of one step's time over another's in the same round."""
    return statistics.median(paired_ratios(numerators, denominators, "seconds"))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=10_000_000)
    ap.add_argument("--skip-large", action="store_true", help="skip the 3N memory check")
    ap.add_argument("--write-results", action="store_true")
    args = ap.parse_args()
    DATA.mkdir(exist_ok=True)
    n = args.records
    csv, parquet = DATA / f"msr_{n}.csv", DATA / f"msr_{n}.parquet"
    print(f"generating {n:,} MSR records ...", flush=True)
    make_msr_csv(csv, n)
    os.sync()  # a freshly generated file's writeback would overlap the timed steps
    load_before = os.getloadavg()
    rounds = alternated(steps(csv, parquet), ROUNDS)
    times = {name: min(runs, key=lambda r: r["seconds"]) for name, runs in rounds.items()}
    load_after = os.getloadavg()
    ing, pol, pan = (
        times[k]["seconds"] for k in ("iotwin ingest", "polars read_csv", "pandas read_csv")
    )
    char, bare = times["iotwin characterize"]["seconds"], times["polars read_parquet"]["seconds"]
    paired = {
        "ingest": median_ratio(rounds["polars read_csv"], rounds["iotwin ingest"]),
        "pandas": median_ratio(rounds["pandas read_csv"], rounds["iotwin ingest"]),
        "char": median_ratio(rounds["iotwin characterize"], rounds["polars read_parquet"]),
    }
    rows = [
        f"| ingest vs polars read_csv | {pol / ing:.2f}x speed | {paired['ingest']:.2f}x | >= 0.8x |",
        f"| ingest vs pandas read_csv | {pan / ing:.1f}x speed | {paired['pandas']:.1f}x | >= 10x |",
        f"| characterize vs polars read_parquet | {char / bare:.2f}x time | {paired['char']:.2f}x "
        "| <= 2x |",
    ]
    large = ""
    if not args.skip_large:
        big = 3 * n
        bcsv, bpq = DATA / f"msr_{big}.csv", DATA / f"msr_{big}.parquet"
        print(f"generating {big:,} MSR records ...", flush=True)
        make_msr_csv(bcsv, big)
        os.sync()
        rss_big = run_step(steps(bcsv, bpq)["iotwin ingest"], setup=SETUP)
        large = (
            f"| ingest peak RSS at {n // 10**6}M / {big // 10**6}M records | "
            f"{times['iotwin ingest']['peak_rss_mib']:.0f} / {rss_big['peak_rss_mib']:.0f}"
            f" MiB | | flat |"
        )
        rows.append(large)
        print(
            f"ingest peak RSS {n:,}: {times['iotwin ingest']['peak_rss_mib']:.0f} MiB, "
            f"{big:,}: {rss_big['peak_rss_mib']:.0f} MiB ({rss_big['seconds']:.1f} s)"
        )
    table = "\n".join(
        f"| {k} | {v['seconds']:.2f} s | {v['cpu_seconds']:.2f} s | {v['peak_rss_mib']:.0f} MiB |"
        for k, v in times.items()
    )
    loads = " / ".join(", ".join(f"{x:.2f}" for x in load) for load in (load_before, load_after))
    body = (
        f"`python bench/ingest/run.py --records {n}` (MSR CSV, {n:,} records, "
        f"{csv.stat().st_size / 2**20:.0f} MiB; canonical Parquet "
        f"{parquet.stat().st_size / 2**20:.0f} MiB); {ROUNDS} rounds, each running every step "
        "once in a fresh process (imports before the clock starts), so the host's speed drifts "
        "over all steps alike; the table shows each step's best round, CPU is user + system "
        "time of that run, and the paired ratio is the median over rounds of the ratio within "
        f"a round. Load average (1, 5, 15 min) before / after the timed steps: {loads}.\n\n"
        "| step | wall | CPU | peak RSS |\n|---|---|---|---|\n"
        + table
        + "\n\n| ratio | best against best | paired (median of rounds) | goal |\n"
        "|---|---|---|---|\n" + "\n".join(rows)
    )
    print(body)
    if args.write_results:
        write_section("ingest", body)


if __name__ == "__main__":
    main()
