"""Cache policies of the simulator's SSD cache, run on their own over a trace's block stream.

The policies live in the Rust core (`src/sim/cache/`); this module turns a trace into the
stream of 4 KiB blocks its requests touch and counts the hits of one policy at one size.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from . import _core
from .errors import IotwinError
from .trace import Trace

BLOCK = 4096
SPACE_SHIFT = 44  # block bits kept when several address spaces share one key


def policies() -> list[tuple[str, str]]:
    """(name, about) of every cache policy, in registry order."""
    return list(_core.cache_policies())


def space_ids(trace: Trace, keep: np.ndarray | None = None) -> np.ndarray | None:
    """A dense id per request's address space (volume, device or file), of the requests
    `keep` marks (all by default), or None when the trace has a single one. Spaces follow
    `validate.address_space`, as the MRC does."""
    from .validate import address_space

    space = address_space(trace)
    space = space if keep is None else space[keep]
    uniq, ids = np.unique(space, return_inverse=True)
    if len(uniq) <= 1:
        return None
    if len(uniq) >= 1 << (64 - SPACE_SHIFT):
        raise IotwinError(f"{trace.meta.source}: {len(uniq)} address spaces are too many")
    return ids.astype(np.uint64)


def block_stream(trace: Trace, block: int = BLOCK) -> np.ndarray:
    """The blocks the trace's reads and writes touch, in trace order: request i touches
    offset // block .. (offset + size - 1) // block. Flushes, trims and zero-sized requests
    carry no data and touch none (as in the simulator's tiered device). When the trace has
    several address spaces (volumes, or files in a file-level trace), a block's key is its
    space id << 44 | block number, so equal offsets of different spaces stay apart."""
    if block <= 0:
        raise IotwinError(f"block size must be positive, not {block}")
    df = trace.df
    keep = ((df.get_column("op") <= 1) & (df.get_column("size") > 0)).to_numpy()
    off = trace.numpy("offset", np.uint64)[keep]
    size = trace.numpy("size", np.uint64)[keep]
    b = np.uint64(block)
    first = off // b
    counts = ((off + size - np.uint64(1)) // b - first + np.uint64(1)).astype(np.int64)
    starts = np.cumsum(counts) - counts
    step = (np.arange(int(counts.sum()), dtype=np.int64) - np.repeat(starts, counts)).astype(
        np.uint64
    )
    blocks = np.repeat(first, counts) + step
    ids = space_ids(trace, keep)
    if ids is None:
        return blocks
    if blocks.size and int(blocks.max()) >= 1 << SPACE_SHIFT:
        raise IotwinError(
            f"{trace.meta.source}: field 'offset': block numbers reach "
            f"{int(blocks.max())}, beyond 2^{SPACE_SHIFT} with several address spaces"
        )
    return (np.repeat(ids, counts) << np.uint64(SPACE_SHIFT)) | blocks


def simulate(
    trace_or_blocks: Trace | np.ndarray | str | Path,
    policy: str,
    size_bytes: int,
    block: int = BLOCK,
) -> dict[str, object]:
    """Hits and misses of a `size_bytes` cache of `policy` over a trace (object or path) or a
    ready block stream (integer array); the cache starts empty."""
    names = [name for name, _ in policies()]
    if policy not in names:
        raise IotwinError(f"unknown cache policy {policy!r} (known: {', '.join(names)})")
    if size_bytes < 0:
        raise IotwinError(f"cache size must be >= 0 bytes, not {size_bytes}")
    if isinstance(trace_or_blocks, str | Path):
        from .ingest import load_trace

        trace_or_blocks = load_trace(trace_or_blocks)
    if isinstance(trace_or_blocks, Trace):
        blocks = block_stream(trace_or_blocks, block)
    else:
        blocks = np.ascontiguousarray(trace_or_blocks, dtype=np.uint64)
    cache_blocks = size_bytes // block
    hits, misses = _core.cache_simulate(blocks, policy, cache_blocks)
    total = hits + misses
    return {
        "policy": policy,
        "cache_blocks": cache_blocks,
        "hits": hits,
        "misses": misses,
        "hit_ratio": hits / total if total else 0.0,
    }


ORACLE_GENERAL = np.dtype(
    [("clock_time", "<u4"), ("obj_id", "<u8"), ("obj_size", "<u4"), ("next_access_vtime", "<i8")]
)


def write_libcachesim(blocks: np.ndarray, path: str | Path) -> Path:
    """Writes a block stream as a libCacheSim `oracleGeneral` binary trace (24-byte records:
    time, object id, size, next access), each block an object of size 1, so that a libCacheSim
    cache of N bytes holds N blocks, as an iotwin cache of N blocks does. The time field is 0
    (no policy compared here reads it; it also keeps libCacheSim's TTL from expiring objects)
    and next access is -1 (unknown)."""
    from .source import atomic_output

    records = np.zeros(len(blocks), dtype=ORACLE_GENERAL)
    records["obj_id"] = blocks
    records["obj_size"] = 1
    records["next_access_vtime"] = -1
    with atomic_output(path) as tmp:
        records.tofile(tmp)
    return Path(path)
