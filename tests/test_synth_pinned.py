"""The sampler's output is pinned: the same model and seed give the same requests, byte for
byte, across changes to the sampler's internals (speed work must not change the draws).

The models under tests/data were fitted once on shared traces (msr_hm0 at levels 2, also
flat; the captured pgbench sample at level 1, one history of all streams; tpcc_small by
device at level 1, 16 streams with their own histories); the hashes were computed from the
sampler before its speed work. A change that alters the draws on purpose updates them."""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pytest

from iotwin.model import Model

DATA = Path(__file__).parent / "data"
COLUMNS = ("ts_ns", "stream", "op", "offset", "size")

# (model, synth arguments) -> sha256 of the columns' bytes, first 16 hex digits
PINNED = [
    ("msr_l2", {"requests": 30_000, "seed": 1}, "b3e3b57f3d0dd59c"),
    ("msr_l2", {"requests": 20_000, "seed": 2, "baseline": "uniform"}, "cba3d1c43535f2b5"),
    (
        "msr_l2",
        {"duration_s": 600.0, "intensity": 1.5, "compress": 2.0, "seed": 3},
        "ab09ab68e4014156",
    ),
    ("msr_flat_l2", {"requests": 30_000, "seed": 4}, "cb21d6554f8660c3"),
    ("pgbench_l1", {"requests": 30_000, "seed": 5}, "49eefcc2859ce030"),
    ("tpcc_l1", {"requests": 30_000, "seed": 6}, "2ac916555d083c6d"),
]


def columns_hash(model: str, args: dict) -> tuple[int, str]:
    trace = Model.load(DATA / f"synth_{model}.model.json").synth(**args)
    digest = hashlib.sha256()
    for name in COLUMNS:
        digest.update(np.ascontiguousarray(trace.df[name].to_numpy()).tobytes())
    return trace.df.height, digest.hexdigest()[:16]


@pytest.mark.parametrize(("model", "args", "expected"), PINNED)
def test_synth_output_is_pinned(model: str, args: dict, expected: str) -> None:
    rows, got = columns_hash(model, args)
    assert rows > 1000
    assert got == expected
