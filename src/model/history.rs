//! The sampler's re-reference history: the LRU stack of the blocks a synthetic stream (or all
//! streams, with one shared history) touched, and for each leaf the positions of its requests
//! that are still the latest touch of one of their blocks, so a re-reference finds the block
//! of its leaf nearest to a drawn stack distance. A request touches every block it overlaps,
//! as the fitter's distances count them (`StackTracker::next`).
//!
//! Every structure answers what a Fenwick tree over positions and one ordered set of
//! positions per leaf would, but keeps its hot part small: a weight per position with sums
//! per 64 of them (a Fenwick tree 64 times smaller, which stays in cache), and per leaf an
//! append-only list of positions with a bit tree of the live ones (positions only grow, so
//! lists stay sorted without a search tree).
//! Positions are 32-bit: a history holds fewer than 2^32 - 1 requests.

use super::lastseen::LastSeen;
use super::stats::{key_block, weighed_blocks};
use crate::rankset::{Retouched, WeightedSet};
use rustc_hash::FxHashMap;

/// Re-references count reuse of 4 KiB blocks.
pub const BLOCK: u64 = 4096;
/// A table of last touches is kept where the space has at most this many blocks per block
/// the history's requests span (so it costs at most 16 bytes each; sparser histories use a
/// map).
const TABLE_SLOTS_PER_BLOCK: u64 = 4;

/// A stream's (or all streams') history of touched blocks.
pub struct History {
    /// Per position, the blocks whose latest touch it is.
    latest: WeightedSet,
    /// block -> position of its latest touch
    last: LastSeen,
    /// The requests by position (one record: a touch that moves a block finds its old one
    /// in one memory access).
    touches: Vec<Touch>,
    /// The requests' sizes by position (read only by followed picks, so kept apart from the
    /// records every touch reads).
    sizes: Vec<u32>,
    /// Leaf -> index into `leaves`.
    leaf_index: FxHashMap<u64, u32>,
    leaves: Vec<LeafList>,
}

impl History {
    /// A history of up to `n` requests spanning about `spans` 4 KiB blocks in all, on a
    /// space of `capacity` bytes (n below 2^32 - 1).
    pub fn new(n: usize, spans: u64, capacity: u64) -> History {
        let blocks = capacity / BLOCK + 1;
        let last = LastSeen::with_limit(blocks, spans.saturating_mul(TABLE_SLOTS_PER_BLOCK));
        History {
            latest: WeightedSet::new(n.max(1)),
            last,
            touches: {
                let v = Vec::with_capacity(n);
                crate::hugepages::advise(&v);
                v
            },
            sizes: Vec::with_capacity(n),
            leaf_index: FxHashMap::default(),
            leaves: Vec::new(),
        }
    }

    /// Whether a request at `offset` of `size` bytes would re-reference data: whether its key
    /// block (`key_block`) was touched before.
    pub fn seen(&self, offset: u64, size: u32) -> bool {
        self.last.get(key_block(offset, size, BLOCK)).is_some()
    }

    /// Records the next request (position `touches.len()`), at `offset` in `leaf`, `size`
    /// bytes long.
    pub fn touch(&mut self, offset: u64, size: u32, leaf: u64) {
        let pos = self.touches.len();
        let blocks = weighed_blocks(offset, size, BLOCK);
        let weight = (blocks.end - blocks.start) as u16;
        let mut retouched = Retouched::default();
        for b in blocks {
            let prev = self.last.insert(b, pos as u32);
            if let Some(run) = prev.and_then(|p| retouched.push(p)) {
                self.release(run);
            }
        }
        if let Some(run) = retouched.finish() {
            self.release(run);
        }
        self.latest.add(pos, weight);
        let next = self.leaves.len() as u32;
        let index = *self.leaf_index.entry(leaf).or_insert(next);
        if index == next {
            self.leaves.push(LeafList::default());
        }
        let slot = self.leaves[index as usize].push(pos as u32);
        self.touches.push(Touch {
            offset,
            leaf: index,
            slot,
        });
        self.sizes.push(size);
    }

    /// Takes `blocks` from the request at position `prev`: touched again. A request none of
    /// whose blocks is its latest touch any more leaves its leaf's live list.
    fn release(&mut self, (prev, blocks): (u32, u16)) {
        if self.latest.take(prev as usize, blocks) == 0 {
            let old = self.touches[prev as usize];
            self.leaves[old.leaf as usize].live.clear(old.slot as usize);
        }
    }

    /// The offset of an old request of `leaf` to re-issue: of the leaf's nearest live
    /// positions on either side of the block at stack distance `dist`, the one whose distance
    /// is nearest `dist` (the older on a tie), if within `search` of it. None where the
    /// history is shallower than `dist` or the leaf has none. With `follow` > 0, up to
    /// `follow` live positions on each side are candidates, and the nearest whose request is
    /// followed by old data wins over nearer ones that are not, so a re-scan continuing it
    /// stays on old blocks (a model's `reuse_pick: "followed"`).
    pub fn at_distance(&self, leaf: u64, dist: u64, search: u64, follow: usize) -> Option<u64> {
        let marks = self.latest.total(); // distinct blocks touched so far
        if dist >= marks {
            return None;
        }
        let at = self.latest.select(marks - dist);
        let index = *self.leaf_index.get(&leaf)?;
        if self.touches[at].leaf == index {
            return Some(self.touches[at].offset); // its own nearest on both sides, at gap 0
        }
        let list = &self.leaves[index as usize];
        let scored = |pos: usize| (self.latest.after(pos).abs_diff(dist), pos);
        let best = if follow == 0 {
            list.neighbours(at).into_iter().flatten().map(scored).min()
        } else {
            // the nearest followed candidate within the search, else the nearest of all
            let near: Vec<_> = list
                .near(at, follow)
                .map(scored)
                .filter(|c| c.0 <= search)
                .collect();
            let followed = near.iter().filter(|c| self.followed(c.1)).min();
            followed.or(near.iter().min()).copied()
        };
        best.filter(|&(gap, _)| gap <= search)
            .map(|(_, pos)| self.touches[pos].offset)
    }

    /// Whether the block just past the request at `pos` was touched.
    fn followed(&self, pos: usize) -> bool {
        let end = self.touches[pos].offset + self.sizes[pos] as u64;
        self.seen(end, BLOCK as u32)
    }
}

/// One request of the history: its offset, its leaf's list and its slot there.
#[derive(Clone, Copy)]
struct Touch {
    offset: u64,
    leaf: u32,
    slot: u32,
}

const HEAD_EVERY: usize = 64;

/// One leaf's requests in the history, by position (ascending: positions only grow), with
/// the ones still the latest touch of their block marked live.
#[derive(Default)]
struct LeafList {
    positions: Vec<u32>,
    /// Every HEAD_EVERY-th position: a small index, searched before the positions it starts
    /// (16 measured no faster than 64 on the bench model).
    heads: Vec<u32>,
    live: FlagTree,
}

impl LeafList {
    /// Appends a live position; returns its slot.
    fn push(&mut self, pos: u32) -> u32 {
        let slot = self.positions.len();
        if slot.is_multiple_of(HEAD_EVERY) {
            self.heads.push(pos);
        }
        self.positions.push(pos);
        self.live.push_set();
        slot as u32
    }

    /// How many positions are at most `at`.
    fn count_upto(&self, at: usize) -> usize {
        let h = self.heads.partition_point(|&p| p as usize <= at);
        if h == 0 {
            return 0;
        }
        let start = (h - 1) * HEAD_EVERY;
        let end = (start + HEAD_EVERY).min(self.positions.len());
        start
            + self.positions[start..end]
                .iter()
                .take_while(|&&p| p as usize <= at)
                .count()
    }

    /// Up to `k` live positions at most `at` (nearest first), then up to `k` at least `at`.
    fn near(&self, at: usize, k: usize) -> impl Iterator<Item = usize> + '_ {
        let n = self.count_upto(at);
        let older = std::iter::successors(n.checked_sub(1).and_then(|s| self.live.pred(s)), |&s| {
            s.checked_sub(1).and_then(|s| self.live.pred(s))
        });
        let younger = std::iter::successors(self.live.succ(n), |&s| self.live.succ(s + 1));
        older
            .take(k)
            .chain(younger.take(k))
            .map(|slot| self.positions[slot] as usize)
    }

    /// The largest live position at most `at` and the smallest at least `at`.
    fn neighbours(&self, at: usize) -> [Option<usize>; 2] {
        let n = self.count_upto(at);
        let on_at = n > 0 && self.positions[n - 1] as usize == at;
        let older = n.checked_sub(1).and_then(|last| self.live.pred(last));
        let younger = self.live.succ(if on_at { n - 1 } else { n });
        [older, younger].map(|slot| slot.map(|i| self.positions[i] as usize))
    }
}

/// Flags over 0..len (growing at the end) with predecessor and successor queries: a 64-ary
/// tree of bit words, where a bit above says the word below it has a flag set.
#[derive(Default)]
struct FlagTree {
    /// levels[0]: one bit per flag; the top level has one word.
    levels: Vec<Vec<u64>>,
    len: usize,
}

impl FlagTree {
    /// Appends a set flag.
    fn push_set(&mut self) {
        let i = self.len;
        self.len += 1;
        if self.levels.is_empty() {
            self.levels.push(Vec::new());
        }
        // grow each level to cover the new index, and add a level while the top has > 1 word
        let mut need = i >> 6;
        let mut lvl = 0;
        loop {
            if self.levels[lvl].len() <= need {
                self.levels[lvl].push(0);
            }
            if self.levels[lvl].len() == 1 && lvl + 1 == self.levels.len() {
                break;
            }
            if lvl + 1 == self.levels.len() {
                // a new top: one bit per word of the old top
                let top = &self.levels[lvl];
                let mut word = 0u64;
                for (w, &x) in top.iter().enumerate() {
                    if x != 0 {
                        word |= 1 << w;
                    }
                }
                self.levels.push(vec![word]);
            }
            need >>= 6;
            lvl += 1;
        }
        self.set(i);
    }

    fn set(&mut self, i: usize) {
        let mut i = i;
        for level in self.levels.iter_mut() {
            let word = &mut level[i >> 6];
            let was = *word;
            *word |= 1 << (i & 63);
            if was != 0 {
                break; // the levels above already say this word has flags
            }
            i >>= 6;
        }
    }

    fn clear(&mut self, i: usize) {
        let mut i = i;
        for level in self.levels.iter_mut() {
            let word = &mut level[i >> 6];
            *word &= !(1 << (i & 63));
            if *word != 0 {
                break;
            }
            i >>= 6;
        }
    }

    /// The largest set index at most `i`.
    fn pred(&self, i: usize) -> Option<usize> {
        let mut i = i.min(self.len.checked_sub(1)?);
        let mut lvl = 0;
        loop {
            let (w, b) = (i >> 6, i & 63);
            let m = self.levels[lvl][w] & (u64::MAX >> (63 - b));
            if m != 0 {
                i = (w << 6) | (63 - m.leading_zeros() as usize);
                break;
            }
            if lvl + 1 == self.levels.len() || w == 0 {
                return None;
            }
            i = w - 1;
            lvl += 1;
        }
        while lvl > 0 {
            lvl -= 1;
            let m = self.levels[lvl][i];
            i = (i << 6) | (63 - m.leading_zeros() as usize);
        }
        Some(i)
    }

    /// The smallest set index at least `i`.
    fn succ(&self, i: usize) -> Option<usize> {
        if i >= self.len {
            return None;
        }
        let mut i = i;
        let mut lvl = 0;
        loop {
            let (w, b) = (i >> 6, i & 63);
            let m = self.levels[lvl][w] & (u64::MAX << b);
            if m != 0 {
                i = (w << 6) | m.trailing_zeros() as usize;
                break;
            }
            if lvl + 1 == self.levels.len() || (w + 1) >> 6 >= self.levels[lvl + 1].len() {
                return None;
            }
            i = w + 1;
            lvl += 1;
        }
        while lvl > 0 {
            lvl -= 1;
            i = (i << 6) | self.levels[lvl][i].trailing_zeros() as usize;
        }
        Some(i)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{RngExt, SeedableRng};
    use rand_pcg::Pcg64Mcg;
    use std::collections::BTreeSet;

    #[test]
    fn flag_tree_finds_neighbours_as_a_sorted_set() {
        let mut rng = Pcg64Mcg::seed_from_u64(2);
        let mut flags = FlagTree::default();
        let mut reference = BTreeSet::new();
        for step in 0..300_000usize {
            if rng.random_range(0..3) > 0 || reference.is_empty() {
                reference.insert(flags.len);
                flags.push_set();
            } else {
                // clear mostly long runs, so whole words and levels empty
                let i = rng.random_range(0..flags.len);
                for j in i..(i + rng.random_range(1..5000)).min(flags.len) {
                    reference.remove(&j);
                    flags.clear(j);
                }
            }
            if step % 7 == 0 {
                let i = rng.random_range(0..flags.len + 3);
                assert_eq!(flags.pred(i), reference.range(..=i).next_back().copied());
                assert_eq!(flags.succ(i), reference.range(i..).next().copied());
            }
        }
    }

    #[test]
    fn short_histories_on_large_spaces_keep_a_map() {
        // many streams of a few requests each must not hold a table of the whole space
        assert!(matches!(
            History::new(1000, 1000, 64 << 30).last,
            LastSeen::Map(_)
        ));
        assert!(matches!(
            History::new(1 << 20, 1 << 20, 1 << 30).last,
            LastSeen::Table(_)
        ));
        for n in [1000, 1 << 20] {
            let mut h = History::new(n, n as u64, 1 << 30);
            for (i, off) in [0u64, 8192, 4096 * 7, 100, 8192 + 4095]
                .into_iter()
                .enumerate()
            {
                assert_eq!(h.seen(off, 1), [false, false, false, true, true][i]);
                h.touch(off, 1, off / 10_000);
            }
            assert_eq!(h.latest.total(), 3);
        }
    }

    #[test]
    fn requests_weigh_the_blocks_whose_latest_touch_they_are() {
        let mut h = History::new(10, 40, 1 << 30);
        h.touch(0, 16384, 0); // blocks 0-3
        h.touch(8192, 4096, 0); // block 2 again
        h.touch(40960, 4096, 1); // block 10
        assert_eq!(h.latest.total(), 5);
        assert!(h.seen(12288, 4096) && !h.seen(16384, 4096));
        // a misaligned request is judged by the block that starts inside it (4, untouched)
        assert!(!h.seen(12288 + 3584, 4096));
        // blocks 2 and 10 were touched since the first request's others: at distance 2 it is
        // re-issued whole, from its start
        assert_eq!(h.at_distance(0, 2, 0, 0), Some(0));
        // all of its blocks touched again: it and the second request hold none latest, and
        // leaf 0 has nothing to re-issue
        h.touch(0, 16384, 1);
        assert_eq!(h.latest.total(), 5);
        assert_eq!(h.at_distance(0, 4, 1024, 0), None);
        assert_eq!(h.at_distance(1, 4, 0, 0), Some(40960));
    }

    #[test]
    fn followed_picks_prefer_a_request_with_old_data_after_it() {
        let mut h = History::new(10, 10, 1 << 30);
        h.touch(0, 4096, 0); // A, in leaf 0; the block after it is touched next
        h.touch(4096, 4096, 1);
        h.touch(1 << 20, 4096, 0); // B, in leaf 0, followed by nothing touched
        h.touch(8 << 20, 4096, 2);
        // at distance 0 (leaf 2), leaf 0's nearest is B (1 block away), then A (3)
        assert_eq!(h.at_distance(0, 0, 10, 0), Some(1 << 20));
        assert_eq!(h.at_distance(0, 0, 10, 4), Some(0));
        // A lies past the search: the nearest of all
        assert_eq!(h.at_distance(0, 0, 2, 4), Some(1 << 20));
        // one candidate a side: B older, none younger, so B
        assert_eq!(h.at_distance(0, 0, 10, 1), Some(1 << 20));
    }

    #[test]
    fn leaf_lists_find_live_neighbours() {
        let mut list = LeafList::default();
        let positions: Vec<u32> = (0..500).map(|i| i * 3 + 1).collect();
        for &p in &positions {
            list.push(p);
        }
        for slot in 100..400 {
            list.live.clear(slot); // positions 301..1198 dead
        }
        assert_eq!(list.neighbours(0), [None, Some(1)]);
        assert_eq!(list.neighbours(1), [Some(1), Some(1)]);
        assert_eq!(list.neighbours(700), [Some(298), Some(1201)]);
        assert_eq!(list.neighbours(1201), [Some(1201), Some(1201)]);
        assert_eq!(list.neighbours(1202), [Some(1201), Some(1204)]);
        assert_eq!(list.neighbours(5000), [Some(1498), None]);
    }
}
