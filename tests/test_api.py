"""The documented Python API, the runnable example and `iotwin --version`."""

from __future__ import annotations

import inspect
import os
import re
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import pytest

import iotwin

ROOT = Path(__file__).resolve().parents[1]
PIPELINE = ("read_trace", "characterize", "fit", "validate", "run", "simulate")


def test_pipeline_functions_are_exported_and_documented() -> None:
    for name in PIPELINE:
        func = getattr(iotwin, name)
        assert callable(func) and name in iotwin.__all__, name
        assert inspect.getdoc(func), f"{name} has no docstring"
    assert inspect.getdoc(iotwin.Model.synth)
    assert all(hasattr(iotwin, name) for name in iotwin.__all__)


def test_api_accepts_paths_and_checks_levels(tmp_path: Path) -> None:
    sample = ROOT / "samples" / "pgbench.parquet"
    model = iotwin.fit(sample, levels=1)
    twin = model.synth(requests=5000, seed=3)
    assert twin.df.height == 5000 and twin.meta.format == "synth"
    assert model.synth(requests=5000, seed=3).df.equals(twin.df)
    report = iotwin.validate(sample, sample)
    assert report["passed"] and report["score"] == 1.0
    sim = iotwin.simulate(model, "ssd-sata", intensity=0.5, seed=3)
    assert sim["kind"] == "sim" and sim["of"] == "twin" and sim["requests"] == 37083
    assert sim == iotwin.simulate(model, "ssd-sata", intensity=0.5, seed=3)
    assert sim["completed_iops"] > 0 and sim["p95_ms"] >= sim["p50_ms"] > 0
    with pytest.raises(iotwin.IotwinError, match="levels 'many'"):
        iotwin.fit(sample, levels="many")


def test_quickstart_example_runs(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "quickstart.py"), str(tmp_path)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0] == "37,083 requests from 20 streams, 11.5% reads, 24.6% sequential"
    assert lines[1] == "model: 2 levels, 182 transitions"
    assert re.fullmatch(r"fidelity score 0\.\d{3}, \d+ metrics out of tolerance", lines[2])
    assert lines[-1] == f"report: {tmp_path / 'report.html'}"
    for name in ("model.json", "twin.parquet", "validation.json", "run.json", "report.html"):
        assert (tmp_path / name).stat().st_size > 0, name
    assert not (tmp_path / "target.img").exists()


def test_version() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "iotwin.cli", "--version"], capture_output=True, text=True
    )
    assert proc.returncode == 0
    assert proc.stdout.strip() == f"iotwin {version('iotwin')}" == f"iotwin {iotwin.__version__}"


def test_import_keeps_openblas_to_one_thread_unless_the_user_chose() -> None:
    """numpy's OpenBLAS threads spin after start-up and steal a core from the work."""
    probe = "import os, iotwin; print(os.environ['OPENBLAS_NUM_THREADS'])"
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    default = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True)
    chosen = subprocess.run(
        [sys.executable, "-c", probe],
        env={**env, "OPENBLAS_NUM_THREADS": "3"},
        capture_output=True,
        text=True,
    )
    assert default.stdout.strip() == "1"
    assert chosen.stdout.strip() == "3"


def test_the_cli_starts_without_the_heavy_libraries() -> None:
    """Every `iotwin` command pays for what the CLI imports before it runs: scipy.stats alone
    took 0.7 s of a 1.4 s start (session 44). The libraries only some commands need are
    imported where they are used."""
    heavy = ("scipy", "matplotlib", "pyarrow", "dask", "distributed")
    code = (
        "import sys, iotwin.cli\n"
        f"print(sorted({{m.split('.')[0] for m in sys.modules}} & set({heavy!r})))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout
    # and a command that needs one still finds it (whatif's confidence intervals: scipy)
    from iotwin.whatif import half_width

    assert half_width([1.0, 2.0, 3.0]) == pytest.approx(2.4841, abs=1e-4)
