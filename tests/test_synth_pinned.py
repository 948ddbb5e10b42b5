"""The sampler's output is pinned: the same model and seed give the same requests, byte for
byte, across changes to the sampler's internals (speed work must not change the draws).

The models under tests/data were fitted once on shared traces (msr_hm0 at levels 2, also
flat; the captured pgbench sample at level 1, one history of all streams; tpcc_small by
device at level 1, 16 streams with their own histories); the hashes were computed from the
sampler before its speed work. A change that alters the draws on purpose updates them: the
multi-stream ones changed when streams at one instant began to interleave by weight (and by
a model's fitted `ties`) instead of stream by stream; the ones whose walk jumps (its leaf's
transitions used up) changed when jumps began to put back sequential draws; the pgbench
ones changed when a file-level model's new data and runs began to stay inside its files; all
changed when the re-reference history began to count every block a request spans."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest

from iotwin import _core
from iotwin.model import Model

DATA = Path(__file__).parent / "data"
COLUMNS = ("ts_ns", "stream", "op", "offset", "size")

# (model, synth arguments) -> sha256 of the columns' bytes, first 16 hex digits
PINNED = [
    ("msr_l2", {"requests": 30_000, "seed": 1}, "21b9b11e2bd269f2"),
    ("msr_l2", {"requests": 20_000, "seed": 2, "baseline": "uniform"}, "92d0d833c049b236"),
    (
        "msr_l2",
        {"duration_s": 600.0, "intensity": 1.5, "compress": 2.0, "seed": 3},
        "d7424b91902a4526",
    ),
    ("msr_flat_l2", {"requests": 30_000, "seed": 4}, "0abde0f97dcc71ec"),
    ("pgbench_l1", {"requests": 30_000, "seed": 5}, "06824c58c0f9854f"),
    ("tpcc_l1", {"requests": 30_000, "seed": 6}, "c9fa6d48371bbec4"),
    # enough requests for the streams to walk on several threads
    ("tpcc_l1", {"requests": 200_000, "seed": 14}, "18b533b38639ca9c"),
    ("pgbench_l1", {"requests": 150_000, "seed": 15}, "8ecdf82174883198"),
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


@pytest.mark.parametrize("model", sorted({p[0] for p in PINNED}))
def test_the_dict_and_the_text_of_a_model_sample_alike(model: str) -> None:
    """The core reads a model's dict as it would read its JSON text (floats included, which
    its JSON parser may round differently from Python's in the last bit)."""
    doc = Model.load(DATA / f"synth_{model}.model.json").doc
    args = (20_000, None, 1.5, 2.0, 3, False)
    from_text = _core.synth_model(json.dumps(doc), args)
    from_dict = _core.synth_model(doc, args)
    assert len(from_dict["ts_ns"]) > 1000
    assert from_dict == from_text


def test_a_model_that_is_not_json_gets_a_clear_error() -> None:
    doc = Model.load(DATA / "synth_msr_l2.model.json").doc
    with pytest.raises(ValueError, match="model is not JSON: a value of type set"):
        _core.synth_model({**doc, "levels": {2}}, (100, None, 1.0, 1.0, 0, False))
