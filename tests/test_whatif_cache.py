"""`whatif cache` on a real captured application (the embedded pgbench sample: 20 PostgreSQL
processes under strace): the twin's speedup curve must follow the original's, and the uniform
baseline's (same mix, sizes and rate, no locality) must visibly not (issue: what-if studies)."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from iotwin.cli import app

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "samples" / "pgbench.parquet"
runner = CliRunner()


def test_twin_follows_the_original_and_the_uniform_baseline_does_not() -> None:
    res = runner.invoke(app, ["whatif", "cache", str(SAMPLE), "--json"])
    assert res.exit_code == 0, res.output
    d = json.loads(res.output)
    # sizes: none, then 1/8, 1/4, 1/2 and all of the original's 4 KiB-block footprint
    fp = d["footprint_bytes"]
    assert d["sizes"] == [0, *(int(fp * f) // 4096 * 4096 for f in (0.125, 0.25, 0.5, 1.0))]
    orig, twin, uni = (d["curves"][k] for k in ("original", "twin", "uniform"))
    assert orig[0] == twin[0] == uni[0] == 1.0
    # the application re-reads its data: a cache of the footprint is many times faster
    assert orig[-1] > 4 * orig[1] > 20
    # the twin's curve rises with the original's, within a factor 1.6 of it at every size
    # (twin over original measured 1.42, 1.53, 1.02 and 0.82: the gap issue 5 still has)
    assert twin == sorted(twin)
    assert all(1 / 1.6 < t / o < 1.6 for t, o in zip(twin[1:], orig[1:], strict=True))
    # the baseline without locality sees a flat curve far below: a wrong answer
    assert max(uni[1:]) < 1.3 * min(uni[1:])
    assert uni[-1] < orig[-1] / 3
    errors = [abs(t - o) for t, o in zip(twin, orig, strict=True)]
    assert d["twin_max_error"] == max(errors)
    assert d["uniform_max_error"] > 3 * d["twin_max_error"]
