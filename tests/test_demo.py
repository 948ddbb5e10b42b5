"""The README's first command: `make demo` runs the whole pipeline on the embedded sample and
ends with a report holding every section its outputs feed."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from iotwin.report.inputs import load_inputs
from iotwin.report.sections import WHATIF_SECTIONS

ROOT = Path(__file__).resolve().parents[1]
CORE_SECTIONS = [
    "inputs", "characterization", "validation", "locality", "fluctuation", "distributions",
    "mrc", "levels", "runs",
]  # fmt: skip


def test_make_demo_writes_a_report_with_every_section(tmp_path: Path) -> None:
    make = shutil.which("make")
    if make is None:
        pytest.fail("make not found")
    venv = Path(sys.prefix)
    out = tmp_path / "out"
    # The exact steps of `make demo`, with this test's virtual environment taken as built
    # (-o: never rebuilt here) and the outputs in a temporary directory.
    proc = subprocess.run(
        [make, "-C", str(ROOT), "demo", f"VENV={venv}", f"OUT={out}",
         "-o", f"{venv}/.built", "-o", f"{venv}/.deps"],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    report = out / "report.html"
    assert f"report: {report}" in proc.stdout
    html = report.read_text()
    kinds = {i.kind for i in load_inputs([out]).inputs}
    assert {"whatif-cache", "whatif-intensity", "whatif-defrag"} <= kinds
    expected = CORE_SECTIONS + [k for k in WHATIF_SECTIONS if k in kinds]
    assert re.findall(r'<section id="([^"]+)"', html) == expected
    assert not (out / "target.img").exists()
