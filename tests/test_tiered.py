"""The tiered device (an SSD cache of 4 KiB blocks over an HDD): its cache sees exactly the
block stream a cache simulator sees, and write-back / write-through behave as documented
(docs/simulator.md), checked on a real trace and on hand-computed cases."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
import pytest

import iotwin
from iotwin import _core
from iotwin.cache import block_stream
from iotwin.sim import simulate
from iotwin.trace import Trace, TraceMeta

BLOCK = 4096


def tiered(blocks: int, policy: str = "lru", write: str = "back") -> str:
    return f"tiered:size={blocks * BLOCK},over=hdd-7200,ssd=ssd-sata,policy={policy},write={write}"


def hand_trace(ops: list[tuple[int, int, int]]) -> Trace:
    """(op, first block, blocks) requests, 100 ms apart (plus a few microseconds each, so
    the times do not read as a coarse clock to spread)."""
    n = len(ops)
    df = pl.DataFrame(
        {
            "ts_ns": np.arange(n, dtype=np.int64) * 100_003_001,
            "stream": np.zeros(n, np.uint32),
            "op": np.array([o for o, _, _ in ops], np.uint8),
            "offset": np.array([b * BLOCK for _, b, _ in ops], np.uint64),
            "size": np.array([k * BLOCK for _, _, k in ops], np.uint32),
        }
    )
    return Trace(df, TraceMeta(source="hand-made", format="test", capacity=1 << 30))


@pytest.mark.parametrize("policy", ["lru", "arc", "s3fifo"])
def test_cache_hits_equal_the_cache_simulator_on_cloudphysics(traces: Path, policy: str) -> None:
    """Every block of every read and write goes through the policy in trace order, so the
    device's hits are the policy's hits on the trace's block stream (which tests/test_cache.py
    checks against libCacheSim)."""
    trace = iotwin.load_trace(traces / "cloudPhysicsIO.vscsi")
    blocks = block_stream(trace)
    size = 16_384
    hits, misses = _core.cache_simulate(blocks, policy, size)
    r = simulate(trace, tiered(size, policy), intensity=0.01)
    assert (r.cache_hits, r.cache_misses) == (hits, misses)
    assert r.cache_hits + r.cache_misses == len(blocks) == 1_141_869


def test_write_back_writes_dirty_evictions_once_coalesced() -> None:
    # a 4-block cache: write blocks 0-3 (dirty), then read 8 blocks elsewhere: the four dirty
    # blocks are evicted, then written back as one contiguous 16 KiB write while the disk idles
    trace = hand_trace([(1, 0, 4), (0, 1000, 4), (0, 2000, 4)])
    back = simulate(trace, tiered(4, write="back"))
    assert (back.cache_hits, back.cache_misses) == (0, 12)
    assert back.writebacks == 4
    # write-through: the HDD already has every written block, nothing to write back
    through = simulate(trace, tiered(4, write="through"))
    assert through.writebacks == 0
    # a write-back write completes at SSD speed, a write-through one waits for the HDD
    assert back.response_ns[0] < through.response_ns[0] / 10


def test_rewritten_blocks_are_written_back_once() -> None:
    # the same 2 blocks written three times stay in the cache (hits), one flag each: when a
    # read pushes them out, 2 blocks go back (in the idle time before the next request), not 6
    trace = hand_trace([(1, 0, 2), (1, 0, 2), (1, 0, 2), (0, 500, 2), (0, 900, 1)])
    r = simulate(trace, tiered(2))
    assert (r.cache_hits, r.cache_misses) == (4, 5)
    assert r.writebacks == 2


def test_reads_hit_at_ssd_speed() -> None:
    trace = hand_trace([(0, 7, 1), (0, 7, 1)])
    r = simulate(trace, tiered(8))
    assert (r.cache_hits, r.cache_misses) == (1, 1)
    # the miss pays the HDD (milliseconds); the hit the SSD (tens of microseconds)
    assert r.response_ns[0] > 1_000_000 > 100_000 > r.response_ns[1]
