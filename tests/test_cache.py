"""Cache policies (src/sim/cache): hit counts equal libCacheSim's, access for access, on the
shared cloudPhysics trace's 4 KiB block stream; LRU equals the exact stack-distance MRC; the
Python block stream on hand-made traces."""

from __future__ import annotations

from pathlib import Path

import libcachesim as lcs
import numpy as np
import polars as pl
import pytest

import iotwin
from iotwin import _core, cache
from iotwin.formats.base import CANONICAL_SCHEMA
from iotwin.validate import lru  # `iotwin.validate` is the API function

SIZES = [1024, 8192, 32768, 131072]  # cache sizes in 4 KiB blocks
BLOCK_ACCESSES = 1_141_869  # blocks touched by cloudPhysicsIO.vscsi's 113,872 requests


@pytest.fixture(scope="module")
def cloudphysics(traces: Path) -> iotwin.Trace:
    return iotwin.load_trace(traces / "cloudPhysicsIO.vscsi")


@pytest.fixture(scope="module")
def blocks(cloudphysics: iotwin.Trace) -> np.ndarray:
    return cache.block_stream(cloudphysics)


@pytest.fixture(scope="module")
def lcs_trace(blocks: np.ndarray, tmp_path_factory: pytest.TempPathFactory) -> str:
    return str(cache.write_libcachesim(blocks, tmp_path_factory.mktemp("lcs") / "cp.bin"))


def libcachesim_hits(path: str, policy: str, cache_blocks: int) -> int:
    """Hits of libCacheSim's own policy over the oracleGeneral trace (objects of size 1, so a
    cache of `cache_blocks` bytes holds that many blocks)."""
    make = {"lru": lcs.LRU, "fifo": lcs.FIFO, "clock": lcs.Clock, "arc": lcs.ARC}
    make["s3fifo"] = lcs.S3FIFO  # defaults: small 0.1, ghost 0.9, move-to-main threshold 2
    reader = lcs.TraceReader(path, lcs.TraceType.ORACLE_GENERAL_TRACE)
    miss_ratio, _ = make[policy](cache_blocks, hashpower=20).process_trace(reader)
    n = reader.get_num_of_req()
    return n - round(miss_ratio * n)


def test_block_stream_of_cloudphysics(blocks: np.ndarray, cloudphysics: iotwin.Trace) -> None:
    assert blocks.dtype == np.uint64 and len(blocks) == BLOCK_ACCESSES
    # first request: a 512-byte write at LBA 0x028F1A09 (sector 42,932,745) -> one block
    assert blocks[0] == 0x028F1A09 * 512 // 4096
    off = cloudphysics.numpy("offset", np.uint64)
    size = cloudphysics.numpy("size", np.uint64)
    assert len(blocks) == int(((off + size - 1) // 4096 - off // 4096 + 1).sum())


@pytest.mark.parametrize("policy", ["lru", "fifo", "clock", "arc", "s3fifo"])
def test_hits_equal_libcachesim(policy: str, blocks: np.ndarray, lcs_trace: str) -> None:
    # Exact for all five: libCacheSim's definitions match (ARC with a real-valued p,
    # S3-FIFO as its S3FIFO.c; see src/sim/cache/*.rs). Sizes >= 20 blocks avoid the one
    # documented difference (libCacheSim's S3-FIFO caches nothing below 20 blocks).
    ours = [cache.simulate(blocks, policy, c * 4096)["hits"] for c in SIZES]
    theirs = [libcachesim_hits(lcs_trace, policy, c) for c in SIZES]
    assert ours == theirs


def test_s3fifo_tiny_caches_differ_from_libcachesim_on_purpose(tmp_path: Path) -> None:
    # Below 20 blocks libCacheSim's S3-FIFO has a one-block small queue and admits nothing;
    # ours keeps caching (src/sim/cache/s3fifo.rs). From 20 blocks on, both agree.
    stream = np.array([1, 1, 1, 2, 2, 3, 3, 3, 1, 1] * 100, dtype=np.uint64)
    path = str(cache.write_libcachesim(stream, tmp_path / "tiny.bin"))
    assert libcachesim_hits(path, "s3fifo", 10) == 0
    assert cache.simulate(stream, "s3fifo", 10 * 4096)["hits"] == 997
    assert libcachesim_hits(path, "s3fifo", 20) == 997
    assert cache.simulate(stream, "s3fifo", 20 * 4096)["hits"] == 997


def test_hit_counts_pinned(blocks: np.ndarray) -> None:
    # The libCacheSim-checked numbers, pinned so a regression shows without libCacheSim.
    expected = {
        "lru": [112904, 124892, 149945, 534702],
        "arc": [112694, 141642, 228017, 516932],
        "s3fifo": [113434, 137037, 228814, 598356],
    }
    for policy, hits in expected.items():
        assert [cache.simulate(blocks, policy, c * 4096)["hits"] for c in SIZES] == hits


def test_lru_equals_the_exact_mrc(cloudphysics: iotwin.Trace, blocks: np.ndarray) -> None:
    accesses, distinct, ratios, (reads, reread, writes, rewritten) = lru(cloudphysics, SIZES)
    assert accesses == len(blocks)
    # every access is a read or a write, and each block's first access is a miss of any cache
    assert reads + writes == accesses
    assert accesses - reread - rewritten == distinct == len(np.unique(blocks))
    for c, ratio in zip(SIZES, ratios, strict=True):
        r = cache.simulate(blocks, "lru", c * 4096)
        assert r["misses"] / accesses == ratio


def canonical(rows: list[tuple[int, int, int, int]], file: list[int] | None = None) -> iotwin.Trace:
    df = pl.DataFrame(
        {
            "ts_ns": list(range(len(rows))),
            "stream": [r[0] for r in rows],
            "op": [r[1] for r in rows],
            "offset": [r[2] for r in rows],
            "size": [r[3] for r in rows],
        },
        schema=CANONICAL_SCHEMA,
    )
    if file is not None:
        df = df.with_columns(pl.Series("file", file, dtype=pl.UInt32))
    return iotwin.Trace(df, iotwin.TraceMeta(stream_by="thread" if file else "device"))


def test_block_stream_hand_made() -> None:
    trace = canonical(
        [
            (0, 0, 4096, 4096),  # block 1
            (0, 1, 4000, 200),  # straddles blocks 0 and 1
            (0, 2, 0, 0),  # a flush: no data, no block
            (0, 0, 8192, 0),  # zero-sized read: no block
            (0, 0, 12288 - 1, 4098),  # blocks 2, 3 and 4
        ]
    )
    assert cache.block_stream(trace).tolist() == [1, 0, 1, 2, 3, 4]
    # 1 0 1 2 3 4 on a 2-block LRU: only the second access of block 1 hits
    r = cache.simulate(trace, "lru", 2 * 4096)
    assert (r["hits"], r["misses"], r["cache_blocks"]) == (1, 5, 2)
    assert cache.block_stream(trace, block=512).tolist()[:3] == [8, 9, 10]


def test_file_level_blocks_keep_files_apart() -> None:
    # two files, the same offset: different blocks; file ids are dense space ids
    trace = canonical([(0, 0, 0, 4096), (0, 0, 0, 4096), (0, 0, 4096, 4096)], file=[3, 7, 3])
    keys = cache.block_stream(trace).tolist()
    assert keys == [0, 1 << 44, 1]
    assert cache.simulate(trace, "lru", 10 * 4096)["hits"] == 0


def test_simulate_small_cases() -> None:
    stream = np.array([1, 2, 1, 3, 2, 1], dtype=np.uint64)
    assert cache.simulate(stream, "lru", 2 * 4096)["hits"] == 1
    assert cache.simulate(stream, "lru", 3 * 4096)["hits"] == 3
    assert cache.simulate(stream, "lru", 0)["hits"] == 0  # no cache
    assert cache.simulate(stream, "arc", 4095)["misses"] == 6  # less than a block: no cache
    r = cache.simulate([5, 5, 5], "fifo", 4096)
    assert (r["hits"], r["misses"], r["hit_ratio"]) == (2, 1, 2 / 3)
    assert cache.simulate(np.array([], dtype=np.uint64), "s3fifo", 4096)["hit_ratio"] == 0.0


def test_policies_and_errors() -> None:
    names = [name for name, _ in cache.policies()]
    assert names == ["lru", "fifo", "clock", "arc", "s3fifo"]
    with pytest.raises(iotwin.IotwinError, match=r"unknown cache policy 'lfu' \(known: lru, fifo"):
        cache.simulate(np.zeros(3, dtype=np.uint64), "lfu", 4096)
    with pytest.raises(iotwin.IotwinError, match="cache size must be >= 0"):
        cache.simulate(np.zeros(3, dtype=np.uint64), "lru", -1)
    with pytest.raises(ValueError, match="unknown cache policy"):
        _core.cache_simulate(np.zeros(3, dtype=np.uint64), "nope", 4)
