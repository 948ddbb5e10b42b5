//! Exact LRU miss-ratio curves at block granularity (design.md: "LRU miss ratio at 4 KiB
//! block granularity; a request touches every block it overlaps; exact via stack distances").
//!
//! Each block access gets its stack distance (distinct blocks touched since its previous
//! access) from a Fenwick tree over access positions marking each block's latest access
//! (Bennett and Kruskal's method); a cache of C blocks misses exactly the cold accesses and
//! those at distance >= C.

use crate::fenwick::Fenwick;
use rustc_hash::FxHashMap;

/// Miss ratios of an LRU cache of each size in `cache_blocks` (in blocks of `block` bytes)
/// over the accesses of the requests. `space[i]` separates address spaces (volumes, files):
/// blocks of different spaces never share a cache entry. Returns (accesses, distinct blocks,
/// miss ratios).
pub fn miss_ratios(
    space: &[u64],
    offset: &[u64],
    size: &[u32],
    block: u64,
    cache_blocks: &[u64],
) -> (u64, u64, Vec<f64>) {
    let accesses: usize = (0..offset.len())
        .map(|i| blocks_of(offset[i], size[i], block).count())
        .sum();
    let cap = cache_blocks.iter().copied().max().unwrap_or(0) as usize;
    let mut hist = vec![0u64; cap + 1]; // distances < cap, exactly; the last slot: >= cap or cold
    let mut fen = Fenwick::<i64>::new(accesses.max(1));
    let mut last: FxHashMap<(u64, u64), usize> = FxHashMap::default();
    let mut pos = 0usize;
    for i in 0..offset.len() {
        for b in blocks_of(offset[i], size[i], block) {
            let slot = match last.insert((space[i], b), pos) {
                Some(prev) => {
                    let d = (fen.prefix(pos) - fen.prefix(prev + 1)) as usize;
                    fen.add(prev, -1);
                    d.min(cap)
                }
                None => cap,
            };
            hist[slot] += 1;
            fen.add(pos, 1);
            pos += 1;
        }
    }
    let total = accesses as u64;
    let ratios = cache_blocks
        .iter()
        .map(|&c| {
            let hits: u64 = hist[..(c as usize).min(cap)].iter().sum();
            if total == 0 {
                0.0
            } else {
                (total - hits) as f64 / total as f64
            }
        })
        .collect();
    (total, last.len() as u64, ratios)
}

fn blocks_of(offset: u64, size: u32, block: u64) -> std::ops::RangeInclusive<u64> {
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
        let (n, distinct, r) = miss_ratios(&space, &off, &size, b, &[1, 2, 3, 4]);
        assert_eq!((n, distinct), (7, 4));
        assert_eq!(r, vec![1.0, 1.0, 4.0 / 7.0, 4.0 / 7.0]);
        // a request over two blocks touches both; another space never hits
        let (n, distinct, r) = miss_ratios(&[0, 0, 1], &[0, 0, 0], &[8192, 4096, 4096], b, &[2]);
        assert_eq!((n, distinct), (4, 3));
        assert_eq!(r, vec![0.75]);
    }
}
