//! Sets of positions 0..n with rank and select, kept small enough to stay in cache: the
//! miss-ratio curves' LRU stack marks each block's latest access at its position (`RankSet`);
//! the fitter's and the sampler's stacks weigh each request by the blocks whose latest
//! touch it is (`WeightedSet`). Both ask how much lies above a position.

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

/// Positions per chunk of a `WeightedSet`: a rank sums at most this many weights.
const WEIGHT_CHUNK: usize = 64;

/// Positions 0..n, each with a weight, with rank and select over the weights: the LRU stacks
/// of the fitter and the sampler, whose entries are requests, each weighing the blocks whose
/// latest touch it is (a request touches every block it overlaps, as the miss ratios count).
///
/// The weights sit under levels of sums, each entry the sum of `WEIGHT_CHUNK` entries below
/// it, up to a level of at most `WEIGHT_CHUNK` entries: an update adds to one entry a level
/// (no chain of dependent loads, as a Fenwick tree's), and a rank sums at most
/// `WEIGHT_CHUNK` entries a level.
#[derive(Debug, Clone)]
pub struct WeightedSet {
    weights: Vec<u16>,
    /// The sums of each chunk of weights (at most 64 * 65,535 each).
    chunks: Vec<u32>,
    /// The levels above: each entry the sum of `WEIGHT_CHUNK` entries of the level below.
    upper: Vec<Vec<u64>>,
    total: u64,
}

impl WeightedSet {
    pub fn new(n: usize) -> WeightedSet {
        let chunks = n.div_ceil(WEIGHT_CHUNK).max(1);
        let weights = vec![0; chunks * WEIGHT_CHUNK];
        crate::hugepages::advise(&weights);
        let mut upper = Vec::new();
        let mut len = chunks;
        while len > WEIGHT_CHUNK {
            len = len.div_ceil(WEIGHT_CHUNK);
            upper.push(vec![0u64; len]);
        }
        WeightedSet {
            weights,
            chunks: vec![0; chunks],
            upper,
            total: 0,
        }
    }

    /// Adds `w` to position `p`'s weight (the sum stays below 2^16).
    pub fn add(&mut self, p: usize, w: u16) {
        self.weights[p] += w;
        self.change(p / WEIGHT_CHUNK, w as i64);
        self.total += w as u64;
    }

    /// Takes `w` from position `p`'s weight (at least `w`); returns what is left.
    pub fn take(&mut self, p: usize, w: u16) -> u16 {
        self.weights[p] -= w;
        self.change(p / WEIGHT_CHUNK, -(w as i64));
        self.total -= w as u64;
        self.weights[p]
    }

    /// Adds `delta` to chunk `c`'s sum and to the sums above it.
    #[inline]
    fn change(&mut self, c: usize, delta: i64) {
        self.chunks[c] = self.chunks[c].wrapping_add(delta as u32);
        let mut i = c / WEIGHT_CHUNK;
        for level in &mut self.upper {
            level[i] = level[i].wrapping_add(delta as u64);
            i /= WEIGHT_CHUNK;
        }
    }

    /// The weights in all.
    pub fn total(&self) -> u64 {
        self.total
    }

    /// The weights after position `p`: the stack distance of a block whose latest touch is
    /// at `p` (blocks touched later).
    pub fn after(&self, p: usize) -> u64 {
        self.total - self.rank(p + 1)
    }

    /// The weights below position `i`.
    pub fn rank(&self, i: usize) -> u64 {
        let group = |i: usize| i / WEIGHT_CHUNK * WEIGHT_CHUNK..i;
        let mut sum: u64 = self.weights[group(i)].iter().map(|&w| w as u64).sum();
        let c = i / WEIGHT_CHUNK;
        sum += self.chunks[group(c)].iter().map(|&w| w as u64).sum::<u64>();
        let mut j = c / WEIGHT_CHUNK;
        for level in &self.upper {
            sum += level[group(j)].iter().sum::<u64>();
            j /= WEIGHT_CHUNK;
        }
        sum
    }

    /// The position holding the k-th unit of weight (k >= 1, at most the total).
    pub fn select(&self, k: u64) -> usize {
        // from the top level down: in each group, the entry where the running sum reaches k
        let mut rem = k;
        let mut at = 0usize;
        for level in self.upper.iter().rev() {
            at = find(level, at * WEIGHT_CHUNK, &mut rem, |&x| x);
        }
        at = find(&self.chunks, at * WEIGHT_CHUNK, &mut rem, |&x| x as u64);
        find(&self.weights, at * WEIGHT_CHUNK, &mut rem, |&x| x as u64)
    }
}

/// From `start`, the first entry whose running sum reaches `rem`, with `rem` left as what is
/// still to reach inside it.
#[inline]
fn find<T>(entries: &[T], start: usize, rem: &mut u64, value: impl Fn(&T) -> u64) -> usize {
    let mut p = start;
    loop {
        let w = value(&entries[p]);
        if w >= *rem {
            return p;
        }
        *rem -= w;
        p += 1;
    }
}

/// Blocks touched again, grouped by the request that held them last: the consecutive blocks
/// of one old request (a re-read of it) leave its weight in one update, not one a block.
#[derive(Default)]
pub struct Retouched {
    run: Option<(u32, u16)>,
}

impl Retouched {
    /// Counts one block that position `p` held; returns the run (position, blocks) this
    /// ends, if it ends one.
    pub fn push(&mut self, p: u32) -> Option<(u32, u16)> {
        match &mut self.run {
            Some((q, n)) if *q == p => {
                *n += 1;
                None
            }
            run => run.replace((p, 1)),
        }
    }

    /// The last run, if any.
    pub fn finish(self) -> Option<(u32, u16)> {
        self.run
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
    fn weighted_rank_and_select_match_a_list() {
        let mut rng = Pcg64Mcg::seed_from_u64(3);
        let n = 3000;
        let mut set = WeightedSet::new(n);
        let mut reference = vec![0u64; n];
        for _ in 0..20_000 {
            let p = rng.random_range(0..n);
            if reference[p] > 0 && rng.random_range(0..2) == 0 {
                let w = rng.random_range(1..=reference[p]);
                reference[p] -= w;
                assert_eq!(set.take(p, w as u16) as u64, reference[p]);
            } else {
                let w = rng.random_range(1..20);
                reference[p] += w;
                set.add(p, w as u16);
            }
            let total: u64 = reference.iter().sum();
            assert_eq!(set.total(), total);
            let i = rng.random_range(0..=n);
            assert_eq!(set.rank(i), reference[..i].iter().sum::<u64>());
            let at = rng.random_range(0..n);
            assert_eq!(set.after(at), reference[at + 1..].iter().sum::<u64>());
            if total > 0 {
                let k = rng.random_range(1..=total);
                let p = set.select(k);
                let below: u64 = reference[..p].iter().sum();
                assert!(below < k && k <= below + reference[p], "k {k} at {p}");
            }
        }
    }

    #[test]
    fn weighted_levels_rank_and_select_as_a_tree_over_positions() {
        // 300,000 positions: two levels above the chunks' sums
        let mut rng = Pcg64Mcg::seed_from_u64(9);
        let n = 300_000;
        let mut set = WeightedSet::new(n);
        assert_eq!(set.upper.len(), 2);
        let mut tree = crate::fenwick::Fenwick::<i64>::new(n);
        let mut weight = vec![0u16; n];
        for _ in 0..50_000 {
            let p = rng.random_range(0..n);
            if weight[p] > 0 && rng.random_range(0..3) == 0 {
                let w = rng.random_range(1..=weight[p]);
                weight[p] -= w;
                tree.add(p, -(w as i64));
                assert_eq!(set.take(p, w), weight[p]);
            } else {
                let w = rng.random_range(1..300u16);
                weight[p] += w;
                tree.add(p, w as i64);
                set.add(p, w);
            }
            let i = rng.random_range(0..=n);
            assert_eq!(set.rank(i), tree.prefix(i));
            assert_eq!(set.total(), tree.prefix(n));
            let k = rng.random_range(1..=set.total());
            let (p, _) = tree.descend(k);
            assert_eq!(set.select(k), p);
        }
    }

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
