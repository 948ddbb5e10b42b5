//! A set of positions 0..n with rank and select, kept small enough to stay in cache: the
//! LRU stacks of the fitter (stack distances) and of the sampler (re-reference history) mark
//! each block's latest access at its position and ask how many marks lie above one.

use crate::fenwick::Fenwick;

/// Positions per chunk: one cache line of bits.
const CHUNK: usize = 512;
const CHUNK_WORDS: usize = CHUNK / 64;

/// A set of positions 0..n with rank and select: one bit per position and a Fenwick tree of
/// the chunks' member counts (512 times smaller than a tree over positions).
#[derive(Debug, Clone)]
pub struct RankSet {
    bits: Vec<u64>,
    /// The chunks' member counts.
    tree: Fenwick<u32>,
    /// Members in all.
    len: u64,
}

impl RankSet {
    pub fn new(n: usize) -> RankSet {
        let chunks = n.div_ceil(CHUNK).max(1);
        RankSet {
            bits: vec![0; chunks * CHUNK_WORDS],
            tree: Fenwick::new(chunks),
            len: 0,
        }
    }

    /// Adds position `p` (not a member).
    pub fn insert(&mut self, p: usize) {
        self.bits[p >> 6] |= 1 << (p & 63);
        self.tree.add(p / CHUNK, 1);
        self.len += 1;
    }

    /// Removes position `p` (a member).
    pub fn remove(&mut self, p: usize) {
        self.bits[p >> 6] &= !(1 << (p & 63));
        self.tree.add(p / CHUNK, -1);
        self.len -= 1;
    }

    /// How many members there are.
    pub fn len(&self) -> u64 {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Members after position `p`: in an LRU stack marking each block's latest access, the
    /// stack distance of the block whose mark is at `p`.
    pub fn after(&self, p: usize) -> u64 {
        self.len - self.rank(p + 1)
    }

    /// Members below position `i`.
    pub fn rank(&self, i: usize) -> u64 {
        let chunk = i / CHUNK;
        let s = self.tree.prefix(chunk);
        let first = chunk * CHUNK_WORDS;
        let whole: u32 = self.bits[first..i >> 6]
            .iter()
            .map(|w| w.count_ones())
            .sum();
        let below = match i & 63 {
            0 => 0,
            b => self.bits[i >> 6] & (u64::MAX >> (64 - b)),
        };
        s + whole as u64 + below.count_ones() as u64
    }

    /// The k-th member (k >= 1, at most the number of members).
    pub fn select(&self, k: u64) -> usize {
        let (chunk, rem) = self.tree.descend(k);
        let mut rem = rem as u32;
        let mut word = chunk * CHUNK_WORDS;
        loop {
            let n = self.bits[word].count_ones();
            if n >= rem {
                return (word << 6) + select_in_word(self.bits[word], rem);
            }
            rem -= n;
            word += 1;
        }
    }
}

/// The position of the r-th set bit (r >= 1) of a word that has at least r.
fn select_in_word(mut x: u64, mut r: u32) -> usize {
    let mut base = 0;
    loop {
        let n = (x & 0xFF).count_ones();
        if n >= r {
            break;
        }
        r -= n;
        x >>= 8;
        base += 8;
    }
    for _ in 1..r {
        x &= x - 1;
    }
    base + x.trailing_zeros() as usize
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{RngExt, SeedableRng};
    use rand_pcg::Pcg64Mcg;
    use std::collections::BTreeSet;

    #[test]
    fn rank_and_select_match_a_sorted_set() {
        let mut rng = Pcg64Mcg::seed_from_u64(1);
        let n = 5000;
        let mut set = RankSet::new(n);
        let mut reference = BTreeSet::new();
        for _ in 0..20_000 {
            let p = rng.random_range(0..n);
            if reference.insert(p) {
                set.insert(p);
            } else {
                reference.remove(&p);
                set.remove(p);
            }
            let i = rng.random_range(0..=n);
            assert_eq!(set.rank(i), reference.range(..i).count() as u64);
            assert_eq!(set.len(), reference.len() as u64);
            let at = rng.random_range(0..n);
            assert_eq!(set.after(at), reference.range(at + 1..).count() as u64);
            if !reference.is_empty() {
                let k = rng.random_range(1..=reference.len());
                assert_eq!(set.select(k as u64), *reference.iter().nth(k - 1).unwrap());
            }
        }
    }
}
