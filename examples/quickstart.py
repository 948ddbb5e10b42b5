"""iotwin's Python API end to end on the embedded sample (a real PostgreSQL pgbench run):
read, characterize, fit, synthesize, validate, run as timed I/O, and write the report.

    python examples/quickstart.py [OUTDIR]      # default: a temporary directory
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

import iotwin
from iotwin.report import build_report

SAMPLE = Path(__file__).resolve().parents[1] / "samples" / "pgbench.parquet"


def main(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    trace = iotwin.read_trace(SAMPLE)
    stats = iotwin.characterize(trace)
    print(
        f"{stats['requests']:,} requests from {stats['stream_count']} streams, "
        f"{stats['read_fraction']:.1%} reads, {stats['sequential_fraction']:.1%} sequential"
    )

    model = iotwin.fit(trace, levels=2)
    model.save(out / "model.json")
    print(f"model: {model.doc['levels']} levels, {model.transition_count:,} transitions")

    twin = model.synth(seed=1)
    iotwin.write_trace(twin, out / "twin.parquet")
    fidelity = iotwin.validate(trace, twin)
    (out / "validation.json").write_text(json.dumps(fidelity, indent=1))
    print(
        f"fidelity score {fidelity['score']:.3f}, {len(fidelity['failed'])} metrics out of tolerance"
    )

    result = iotwin.run(model, out / "target.img", requests=2000, intensity=4, size=64 << 20)
    (out / "target.img").unlink()
    (out / "run.json").write_text(json.dumps(result, indent=1))
    lateness = result["total"]["lateness_ns"]
    print(f"run: {result['iops']:,.0f} IOPS, lateness p99 {lateness['p99'] / 1e3:,.1f} µs")

    report = build_report([SAMPLE, out], out / "report.html")
    print(f"report: {report.output}")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path(tempfile.mkdtemp(prefix="iotwin-")))
