//! Exact LRU miss-ratio curves at block granularity (design.md: "LRU miss ratio at 4 KiB
//! block granularity; a request touches every block it overlaps; exact via stack distances").
//!
//! Each block access gets its stack distance (distinct blocks touched since its previous
//! access) by counting the marks, one per block at its latest access, that lie after the
//! previous access (Bennett and Kruskal's method); a cache of C blocks misses exactly the cold
//! accesses and those at distance >= C. The marks are a `RankSet` (a bit per access, counts
//! per 512: they stay in cache, where a tree over every access missed it at each access) and
//! a block's latest access is found as the fitter's stack distances find it (`LastSeen`).

use crate::model::lastseen::LastSeen;
use crate::rankset::RankSet;
use rustc_hash::FxHashMap;

/// What one pass over a trace's block accesses measures.
#[derive(Debug, Clone, PartialEq)]
pub struct Curve {
    /// Block accesses, and distinct blocks (the footprint).
    pub accesses: u64,
    pub distinct: u64,
    /// LRU miss ratio at each asked cache size.
    pub miss_ratios: Vec<f64>,
    /// Block accesses of reads, and of them those to a block accessed before (by any
    /// request); the same for writes. What a cache of the whole footprint serves: a
    /// write-back cache's speedup comes mostly from its read hits.
    pub reads: (u64, u64),
    pub writes: (u64, u64),
}

/// Miss ratios of an LRU cache of each size in `cache_blocks` (in blocks of `block` bytes)
/// over the accesses of the requests, and re-use by operation (`op`: 0 read, 1 write; empty
/// where unknown). `space[i]` separates address spaces (volumes, files): blocks of different
/// spaces never share a cache entry. With no sizes only the blocks are counted.
pub fn miss_ratios(
    space: &[u64],
    offset: &[u64],
    size: &[u32],
    op: &[u8],
    block: u64,
    cache_blocks: &[u64],
) -> Curve {
    let accesses: u64 = (0..offset.len())
        .map(|i| blocks_of(offset[i], size[i], block).count() as u64)
        .sum();
    let cap = cache_blocks.iter().copied().max().unwrap_or(0) as usize;
    // distances < cap, exactly; the last slot: >= cap or cold
    let mut hist = vec![0u64; cap + 1];
    let mut latest = Latest::new(space, offset, size, block, accesses);
    let mut marks = RankSet::new(if cap > 0 { accesses as usize } else { 0 });
    let mut by_op = [(0u64, 0u64); 2];
    let mut pos = 0usize;
    for i in 0..offset.len() {
        // a request's accesses and its new blocks, from the counts before and after it (no
        // work per block)
        let (pos_before, distinct_before) = (pos, latest.distinct);
        for b in blocks_of(offset[i], size[i], block) {
            let slot = match latest.insert(space[i], b, pos) {
                Some(prev) if cap > 0 => {
                    // marks strictly after prev: distinct blocks touched since
                    let d = marks.after(prev);
                    marks.remove(prev);
                    (d as usize).min(cap)
                }
                _ => cap,
            };
            hist[slot] += 1;
            if cap > 0 {
                marks.insert(pos);
            }
            pos += 1;
        }
        if let Some(c) = op.get(i).and_then(|&o| by_op.get_mut(o as usize)) {
            let touched = (pos - pos_before) as u64;
            c.0 += touched;
            c.1 += touched - (latest.distinct - distinct_before);
        }
    }
    let miss_ratios = cache_blocks
        .iter()
        .map(|&c| {
            let hits: u64 = hist[..(c as usize).min(cap)].iter().sum();
            match accesses {
                0 => 0.0,
                n => (n - hits) as f64 / n as f64,
            }
        })
        .collect();
    Curve {
        accesses,
        distinct: latest.distinct,
        miss_ratios,
        reads: by_op[0],
        writes: by_op[1],
    }
}

/// Each block's latest access: the fitter's `LastSeen` (a table by block where the blocks
/// are few enough, else a map) for one address space, a map keyed by space and block for
/// several (or for more accesses than 32-bit positions hold).
struct Latest {
    map: LatestMap,
    distinct: u64,
}

enum LatestMap {
    /// One address space, blocks counted from `first`.
    One {
        first: u64,
        seen: LastSeen,
    },
    Many(FxHashMap<(u64, u64), usize>),
}

impl Latest {
    fn new(space: &[u64], offset: &[u64], size: &[u32], block: u64, accesses: u64) -> Latest {
        let one_space = space.first().is_none_or(|s| space.iter().all(|x| x == s));
        let map = if one_space && accesses < u32::MAX as u64 - 1 {
            let first = offset.iter().min().map_or(0, |&o| o / block);
            let end = (0..offset.len())
                .map(|i| *blocks_of(offset[i], size[i], block).end() + 1)
                .max()
                .unwrap_or(0);
            let seen = LastSeen::new(accesses as usize, end.saturating_sub(first));
            LatestMap::One { first, seen }
        } else {
            LatestMap::Many(FxHashMap::default())
        };
        Latest { map, distinct: 0 }
    }

    /// Records an access at `pos`; returns the block's previous access, if any.
    fn insert(&mut self, space: u64, b: u64, pos: usize) -> Option<usize> {
        let prev = match &mut self.map {
            LatestMap::One { first, seen } => {
                seen.insert(b - *first, pos as u32).map(|p| p as usize)
            }
            LatestMap::Many(m) => m.insert((space, b), pos),
        };
        if prev.is_none() {
            self.distinct += 1;
        }
        prev
    }
}

pub fn blocks_of(offset: u64, size: u32, block: u64) -> std::ops::RangeInclusive<u64> {
    let first = offset / block;
    let last = (offset + size.max(1) as u64 - 1) / block;
    first..=last
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hand_computed_lru() {
        // blocks a b c a b d a  -> distances: cold cold cold 2 2 cold 2
        let b = 4096u64;
        let off: Vec<u64> = [0u64, 1, 2, 0, 1, 3, 0].iter().map(|x| x * b).collect();
        let size = vec![4096u32; 7];
        let space = vec![0u64; 7];
        // reads a, c, b, a; writes b, a, d
        let op = [0u8, 1, 0, 1, 0, 1, 0];
        let c = miss_ratios(&space, &off, &size, &op, b, &[1, 2, 3, 4]);
        assert_eq!((c.accesses, c.distinct), (7, 4));
        assert_eq!(c.miss_ratios, vec![1.0, 1.0, 4.0 / 7.0, 4.0 / 7.0]);
        // reads: a (cold), c (cold), b (again), a (again); writes: b (cold), a (again), d
        assert_eq!((c.reads, c.writes), ((4, 2), (3, 1)));
        // the footprint alone; ops unknown
        let c = miss_ratios(&space, &off, &size, &[], b, &[]);
        assert_eq!((c.accesses, c.distinct, c.miss_ratios), (7, 4, vec![]));
        assert_eq!((c.reads, c.writes), ((0, 0), (0, 0)));
        // a request over two blocks touches both; another space never hits; a flush (op 2)
        // counts as neither
        let c = miss_ratios(
            &[0, 0, 1],
            &[0, 0, 0],
            &[8192, 4096, 4096],
            &[1, 0, 2],
            b,
            &[2],
        );
        assert_eq!((c.accesses, c.distinct), (4, 3));
        assert_eq!(c.miss_ratios, vec![0.75]);
        assert_eq!((c.reads, c.writes), ((1, 1), (2, 0)));
    }

    #[test]
    fn table_and_map_agree() {
        // a sparse space (far blocks: the map) and the same accesses packed (the table)
        let mut x = 11u64;
        let mut next = || {
            x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
            x >> 40
        };
        let blocks: Vec<u64> = (0..5000).map(|_| next() % 700).collect();
        let size: Vec<u32> = (0..5000).map(|i| 4096 * (1 + (i % 3) as u32)).collect();
        let dense: Vec<u64> = blocks.iter().map(|b| b * 4096).collect();
        let sparse: Vec<u64> = blocks.iter().map(|b| b * 4096 * 1_000_000).collect();
        let space = vec![0u64; 5000];
        let op: Vec<u8> = (0..5000).map(|i| (i % 2) as u8).collect();
        let sizes = [1, 10, 100, 400, 2000];
        let a = miss_ratios(&space, &dense, &size, &op, 4096, &sizes);
        // in the sparse space a request's extra blocks are its own (no overlap with others)
        let b = miss_ratios(&space, &sparse, &vec![4096; 5000], &op, 4096, &sizes);
        let c = miss_ratios(&space, &dense, &vec![4096; 5000], &op, 4096, &sizes);
        assert_eq!(b, c);
        assert_eq!(
            a.accesses,
            size.iter().map(|&s| (s / 4096) as u64).sum::<u64>()
        );
        assert_eq!(a.reads.0 + a.writes.0, a.accesses);
        assert_eq!(a.accesses - a.reads.1 - a.writes.1, a.distinct);
        assert!(a.miss_ratios.windows(2).all(|w| w[0] >= w[1]));
    }
}
