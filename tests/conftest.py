"""Shared fixtures: where the real traces live, and small helpers."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("IOTWIN_SHARED", ROOT.parent / "shared"))
TRACES = SHARED / "traces"


@pytest.fixture(scope="session")
def traces() -> Path:
    """The directory of shared real traces (../shared/traces); never copied into the repo."""
    if not TRACES.is_dir():
        pytest.fail(f"shared traces not found at {TRACES} (set IOTWIN_SHARED)")
    return TRACES
