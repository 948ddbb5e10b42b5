"""Re-makes the embedded default sample: a real PostgreSQL pgbench run captured by iotwin.

    python samples/make_sample.py [--clients 4] [--seconds 10] [--scale 2]

A throwaway cluster is created in a temporary directory, initialised with pgbench's
TPC-B-like tables (scale 2, 200,000 accounts), and 4 clients run for 10 seconds while
`iotwin capture` records every file-level I/O system call of the server and the clients
(strace -f). The trace is written to samples/pgbench.parquet (canonical iotwin trace,
streams = processes).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from iotwin.workloads.pgbench import capture_pgbench

OUT = Path(__file__).resolve().parent / "pgbench.parquet"


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--clients", type=int, default=4)
    ap.add_argument("--seconds", type=int, default=10)
    ap.add_argument("--scale", type=int, default=2)
    ap.add_argument("-o", "--output", type=Path, default=OUT)
    args = ap.parse_args()
    result = capture_pgbench(args.output, args.clients, args.seconds, args.scale)
    size = args.output.stat().st_size
    print(
        f"wrote {args.output}: {result.requests:,} requests, {result.files} files, "
        f"{result.processes} processes, {size / 1e6:.2f} MB"
    )


if __name__ == "__main__":
    main()
