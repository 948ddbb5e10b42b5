"""bench/extrapolate: seed 004's extrapolation end to end on PostgreSQL pgbench.

pgbench runs on a fresh throwaway cluster (scale 4, 256 MiB WAL segments so a run's WAL
stays in one file, tables created before the capture) at 2, 4, 8 and 16 clients, each a
user at 5 transactions/s (pgbench -R, Poisson arrivals, --random-seed fixed so runs differ
by their clients only), 20 s each, captured under strace. `iotwin extrapolate` fits the 2, 4 and 8 client runs and predicts 16; the 16-client
run, captured for real, is the truth. Per file: real IOPS (reads + writes), iotwin's
prediction, the IOPS of the model it writes (its synthetic trace mapped back to files), and
the anchor a user would otherwise take: the 8-client run scaled in proportion (x2).
Goal (seed 004): error at most 20% for the files that carry most of the I/O (the busiest
files that together carry 80% of the real run's reads and writes).
Usage: python bench/extrapolate/run.py [--write-results]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from common import write_section

from iotwin.exporters.features import workload
from iotwin.extrapolate import check_against, extrapolate
from iotwin.workloads.pgbench import capture_pgbench

TRAINED, TARGET = (2, 4, 8), 16
SECONDS, RATE, SCALE, WAL_MB, SEED = 20, 5.0, 4, 256, 7
GOAL = 0.20
KEPT_UP: dict[int, tuple[float, float]] = {}  # clients -> (pgbench tps, mean schedule lag ms)


def capture_all(work: Path) -> dict[int, Path]:
    out = {}
    for clients in (*TRAINED, TARGET):
        path = work / f"pgbench-{clients}.parquet"
        started = time.perf_counter()
        r = capture_pgbench(
            path, clients=clients, seconds=SECONDS, scale=SCALE, init_in_capture=False,
            rate_per_client=RATE, wal_segment_mb=WAL_MB, random_seed=SEED,
        )  # fmt: skip
        print(
            f"captured {clients:2d} clients: {r.requests:,} requests on {r.files} files, "
            f"{r.tps} tps, schedule lag {r.lag_ms} ms ({time.perf_counter() - started:.1f} s)",
            flush=True,
        )
        out[clients] = path
        KEPT_UP[clients] = (r.tps or 0.0, r.lag_ms or 0.0)
    return out


def model_iops(x) -> dict[str, float]:
    """Per traced path, the reads + writes per second of the model's own synthetic trace."""
    w = workload(x.model, max_units=10**6)
    return {u.name: sum(j.requests for j in u.jobs) / w.span_s for u in w.units}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--write-results", action="store_true")
    args = ap.parse_args()
    load = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="iotwin-bench-") as tmp:
        runs = capture_all(Path(tmp))
        points = [(runs[u], u) for u in TRAINED]
        started = time.perf_counter()
        x = extrapolate(points, TARGET)
        seconds = time.perf_counter() - started
        checks = check_against(x, points, runs[TARGET])
        base = {c.unit: c for c in check_against(x, points, runs[TRAINED[-1]])}
        # the anchor: the largest traced run scaled in proportion to the users
        scale = TARGET / TRAINED[-1]
        by_path = model_iops(x)
    rows, worst, worst_model, worst_anchor = [], 0.0, 0.0, 0.0
    for c in checks[:12]:
        modelled = next((v for p, v in by_path.items() if p.endswith("/" + c.unit)), 0.0)
        anchor = base[c.unit].real_iops * scale if c.unit in base else 0.0
        anchor_err = (anchor - c.real_iops) / c.real_iops
        model_err = (modelled - c.real_iops) / c.real_iops
        if c.main:
            worst = max(worst, abs(c.error))
            worst_model = max(worst_model, abs(model_err))
            worst_anchor = max(worst_anchor, abs(anchor_err))
        forms = "/".join(
            f.curve.form for f in x.features if f.unit == c.unit and f.name == "IOPS" and f.curve
        )
        rows.append(
            f"| {c.unit} | {c.share:.1%} | {'yes' if c.main else ''} | {c.real_iops:,.2f} | "
            f"{c.predicted_iops:,.2f} ({c.error:+.1%}) | {forms} | {modelled:,.2f} "
            f"({model_err:+.1%}) | {anchor:,.2f} ({anchor_err:+.1%}) |"
        )
    met = "met" if worst <= GOAL else "missed"
    table = "\n".join(
        [
            f"| file | share of I/O at {TARGET} | main | real IOPS at {TARGET} | iotwin "
            f"prediction (error) | forms (read/write IOPS) | model at {TARGET} (error) | "
            f"{TRAINED[-1]}-client run x{scale:g} (error) |",
            "|---|---|---|---|---|---|---|---|",
            *rows,
        ]
    )
    body = (
        f"`python bench/extrapolate/run.py`: PostgreSQL pgbench (scale {SCALE}, "
        f"{RATE:g} transactions/s per client, pgbench --random-seed {SEED}, {SECONDS} s, fresh cluster per run) captured at "
        f"{', '.join(map(str, TRAINED))} and {TARGET} clients; `iotwin extrapolate` fits "
        f"{', '.join(map(str, TRAINED))} and predicts {TARGET} ({seconds:.1f} s). Main files: "
        f"the busiest that together carry 80% of the real run's reads and writes. Goal (seed "
        f"004): the prediction within 20% on every main file: **{met}** (worst {worst:.1%}; "
        f"the model written at {TARGET}, its synthetic trace mapped back to files: worst "
        f"{worst_model:.1%}; the {TRAINED[-1]}-client run scaled x{scale:g}, the anchor: worst "
        f"{worst_anchor:.1%}). Load average at the start: {load:.1f} on {os.cpu_count()} "
        f"cores; pgbench kept its schedule: "
        + ", ".join(
            f"{c} clients {tps:.1f} tps (lag {lag:.1f} ms)" for c, (tps, lag) in KEPT_UP.items()
        )
        + f".\n\n{table}\n"
    )
    print(body)
    if args.write_results:
        write_section("extrapolate", body)


if __name__ == "__main__":
    main()
