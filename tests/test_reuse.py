"""Cross-stream block re-use (docs/model.md, "Measured: the re-reference extension"): on the
pgbench sample (20 PostgreSQL processes over shared files), backends read pages other
processes wrote, so the twin must re-reference blocks across streams for a shared cache to
see the original's hits."""

from __future__ import annotations

from collections import OrderedDict
from pathlib import Path

import numpy as np
import pytest

import iotwin
from iotwin.model import fit
from iotwin.sim import placed

PGBENCH = Path(__file__).resolve().parents[1] / "samples" / "pgbench.parquet"
BLOCK = 4096
CACHE_BLOCKS = 25_000  # about the original's footprint (25,453 blocks)


def read_hit_ratio(t: iotwin.Trace, blocks: int) -> float:
    """Reads whose every 4 KiB block is in a global LRU of `blocks` blocks."""
    off = t.numpy("offset", np.uint64).tolist()
    size = t.numpy("size", np.uint32).tolist()
    ops = t.numpy("op", np.uint8).tolist()
    cache: OrderedDict[int, None] = OrderedDict()
    hits = reads = 0
    for o, s, op in zip(off, size, ops, strict=True):
        span = range(o // BLOCK, max(o + 1, o + s - 1) // BLOCK + 1)
        if op == 0:
            reads += 1
            hits += all(b in cache for b in span)
        for b in span:
            cache[b] = None
            cache.move_to_end(b)
        while len(cache) > blocks:
            cache.popitem(last=False)
    return hits / reads


@pytest.fixture(scope="module")
def pgbench() -> iotwin.Trace:
    return iotwin.load_trace(PGBENCH)


def test_pgbench_twin_hits_a_shared_cache_like_the_original(pgbench: iotwin.Trace) -> None:
    original = read_hit_ratio(placed(pgbench), CACHE_BLOCKS)
    assert original == pytest.approx(0.911, abs=0.001)
    model = fit(pgbench)
    assert model.doc["reuse_scope"] == "global"
    twin = read_hit_ratio(placed(model.synth(requests=len(pgbench), seed=0)), CACHE_BLOCKS)
    # measured 0.81 (0.78 before new data stayed inside files; per-stream re-use: 0.58, 0.41
    # before); the rest: re-scans that run past old data
    assert twin >= original - 0.15, twin
    per_stream = fit(pgbench, reuse_scope="stream")
    assert "reuse_scope" not in per_stream.doc
    alone = read_hit_ratio(placed(per_stream.synth(requests=len(pgbench), seed=0)), CACHE_BLOCKS)
    assert alone < twin - 0.2, (alone, twin)


def test_block_traces_keep_per_stream_reuse(traces: Path) -> None:
    """Devices and volumes are address spaces of their own: no history is shared."""
    from iotwin.formats import ReadOptions

    tpcc = iotwin.load_trace(traces / "tpcc_small.disksim", opts=ReadOptions(stream_by="device"))
    assert "reuse_scope" not in fit(tpcc).doc


def test_reuse_scope_is_checked(pgbench: iotwin.Trace) -> None:
    with pytest.raises(iotwin.IotwinError, match="reuse scope 'files'"):
        fit(pgbench, reuse_scope="files")
