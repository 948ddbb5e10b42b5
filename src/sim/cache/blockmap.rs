//! Block -> slot index of the cache policies: open addressing with linear probing in one
//! array of (block, slot) pairs, sized once for the policy's capacity (at most half full).
//!
//! It exists for `prefetch`: the simulators know the blocks to come, and asking the memory
//! for a block's bucket some accesses ahead hides the cache miss a large cache's lookup
//! costs (std's map does not say where a key's bucket is). Deletion shifts the probe run
//! back, so there are no tombstones and a lookup stops at the first empty bucket.

use crate::prefetch::prefetch;

/// The slot of an empty bucket (policies hold fewer blocks than this; any block, up to
/// u64::MAX, may be a key).
const EMPTY: u32 = u32::MAX;

#[derive(Clone, Copy)]
struct Bucket {
    block: u64,
    slot: u32,
}

pub struct BlockMap {
    buckets: Vec<Bucket>,
    /// Buckets - 1 (a power of two less one), and 64 - log2(buckets) for the hash.
    mask: usize,
    shift: u32,
    /// Blocks mapped: always below the buckets, so every probe meets an empty one.
    len: usize,
}

/// Where a probe for a block ended: its bucket, or the empty one it would take.
pub enum Probe {
    Found(usize),
    Vacant(usize),
}

impl BlockMap {
    /// Room for `n` blocks at no more than half the buckets.
    pub fn with_capacity(n: usize) -> Self {
        let buckets = (2 * n).next_power_of_two().max(16);
        BlockMap {
            buckets: vec![
                Bucket {
                    block: 0,
                    slot: EMPTY
                };
                buckets
            ],
            mask: buckets - 1,
            shift: 64 - buckets.trailing_zeros(),
            len: 0,
        }
    }

    /// Fibonacci hashing: neighbouring blocks land far apart.
    #[inline]
    fn home(&self, block: u64) -> usize {
        (block.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> self.shift) as usize
    }

    #[inline]
    pub fn probe(&self, block: u64) -> Probe {
        let mut i = self.home(block);
        loop {
            let b = self.buckets[i];
            if b.slot == EMPTY {
                return Probe::Vacant(i);
            }
            if b.block == block {
                return Probe::Found(i);
            }
            i = (i + 1) & self.mask;
        }
    }

    /// The slot in bucket `i` (from `Probe::Found`).
    #[inline]
    pub fn slot_at(&self, i: usize) -> u32 {
        self.buckets[i].slot
    }

    /// Fills bucket `i` (from `Probe::Vacant`, with no change to the map since).
    #[inline]
    pub fn fill(&mut self, i: usize, block: u64, slot: u32) {
        debug_assert!(slot != EMPTY);
        self.len += 1;
        assert!(self.len < self.buckets.len(), "block map over its capacity");
        self.buckets[i] = Bucket { block, slot };
    }

    #[inline]
    pub fn get(&self, block: u64) -> Option<u32> {
        match self.probe(block) {
            Probe::Found(i) => Some(self.buckets[i].slot),
            Probe::Vacant(_) => None,
        }
    }

    /// Maps `block` to `slot`, replacing what it mapped to.
    pub fn insert(&mut self, block: u64, slot: u32) {
        match self.probe(block) {
            Probe::Found(i) => self.buckets[i].slot = slot,
            Probe::Vacant(i) => self.fill(i, block, slot),
        }
    }

    /// Unmaps `block` (if mapped): later buckets of its probe run move back over the hole
    /// when the hole lies on their way from their home bucket.
    pub fn remove(&mut self, block: u64) {
        let Probe::Found(mut hole) = self.probe(block) else {
            return;
        };
        let mut i = hole;
        loop {
            i = (i + 1) & self.mask;
            let b = self.buckets[i];
            if b.slot == EMPTY {
                break;
            }
            // distance from its home to i, and from the hole to i: it may move back only
            // if its home is not between the hole and it
            let from_home = i.wrapping_sub(self.home(b.block)) & self.mask;
            let from_hole = i.wrapping_sub(hole) & self.mask;
            if from_home >= from_hole {
                self.buckets[hole] = self.buckets[i];
                hole = i;
            }
        }
        self.buckets[hole].slot = EMPTY;
        self.len -= 1;
    }

    /// Asks the memory for `block`'s home bucket; no effect on the map.
    #[inline]
    pub fn prefetch(&self, block: u64) {
        prefetch(&self.buckets[self.home(block)]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rustc_hash::FxHashMap;

    #[test]
    fn agrees_with_a_hash_map_through_inserts_and_removals() {
        // a small table, so probe runs wrap around its end and removals shift them back
        let mut map = BlockMap::with_capacity(40);
        let mut reference: FxHashMap<u64, u32> = FxHashMap::default();
        let mut x = 0x2545_F491_4F6C_DD1Du64;
        for step in 0..200_000u32 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let block = x % 97 + (x >> 40) % 3 * 1_000_003;
            if x.is_multiple_of(3) || reference.len() >= 40 {
                map.remove(block);
                reference.remove(&block);
            } else {
                map.insert(block, step);
                reference.insert(block, step);
            }
            assert_eq!(
                map.get(block),
                reference.get(&block).copied(),
                "step {step}"
            );
        }
        for block in 0..3_000_100u64 {
            assert_eq!(map.get(block), reference.get(&block).copied(), "{block}");
        }
    }

    #[test]
    fn every_u64_is_a_key() {
        let mut map = BlockMap::with_capacity(4);
        for (slot, block) in [0, 1, u64::MAX, u64::MAX - 1].into_iter().enumerate() {
            assert_eq!(map.get(block), None);
            map.insert(block, slot as u32);
        }
        assert_eq!(map.get(u64::MAX), Some(2));
        map.remove(u64::MAX);
        assert_eq!((map.get(u64::MAX), map.get(u64::MAX - 1)), (None, Some(3)));
    }

    #[test]
    fn probe_finds_or_gives_the_bucket_to_fill() {
        let mut map = BlockMap::with_capacity(4);
        let Probe::Vacant(i) = map.probe(7) else {
            panic!("empty map found 7")
        };
        map.fill(i, 7, 3);
        let Probe::Found(j) = map.probe(7) else {
            panic!("7 not found")
        };
        assert_eq!((i, map.slot_at(j)), (j, 3));
        map.prefetch(7);
        map.prefetch(8);
    }
}
