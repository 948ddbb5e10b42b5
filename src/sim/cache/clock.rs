//! CLOCK: a ring of slots, each with a reference bit set by a hit. On a miss the hand clears
//! set bits and passes them (their second chance) until it finds a clear one, whose block is
//! replaced. It is FIFO-with-reinsertion with a one-bit counter, as libCacheSim's `Clock`.

use super::{block_map, CachePolicy};
use rustc_hash::FxHashMap;

pub struct Clock {
    capacity: usize,
    map: FxHashMap<u64, u32>,
    ring: Vec<u64>,
    referenced: Vec<bool>,
    hand: usize,
}

impl Clock {
    pub fn new(capacity: usize) -> Self {
        Clock {
            capacity,
            map: block_map(capacity),
            ring: Vec::with_capacity(capacity),
            referenced: Vec::with_capacity(capacity),
            hand: 0,
        }
    }
}

impl CachePolicy for Clock {
    fn access(&mut self, block: u64, evicted: &mut Vec<u64>) -> bool {
        if let Some(&slot) = self.map.get(&block) {
            self.referenced[slot as usize] = true;
            return true;
        }
        if self.capacity == 0 {
            return false;
        }
        let slot = if self.ring.len() < self.capacity {
            self.ring.push(block);
            self.referenced.push(false);
            self.ring.len() - 1
        } else {
            while self.referenced[self.hand] {
                self.referenced[self.hand] = false;
                self.hand = (self.hand + 1) % self.capacity;
            }
            let slot = self.hand;
            let old = std::mem::replace(&mut self.ring[slot], block);
            self.map.remove(&old);
            evicted.push(old);
            self.hand = (self.hand + 1) % self.capacity;
            slot
        };
        self.map.insert(block, slot as u32);
        false
    }

    fn len(&self) -> usize {
        self.ring.len()
    }

    fn capacity(&self) -> usize {
        self.capacity
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::{check_invariants, pattern, play};
    use super::*;

    #[test]
    fn hand_computed() {
        // capacity 3: a b c, hit a; d: a has its bit -> cleared, passed; b evicted.
        // e: c evicted (a's bit is clear now but the hand is past it). f: a evicted.
        let mut p = Clock::new(3);
        let (hits, ev) = play(&mut p, &[1, 2, 3, 1, 4, 5, 6]);
        assert_eq!(hits, pattern("MMMHMMM"));
        assert_eq!(ev[4], vec![2]);
        assert_eq!(ev[5], vec![3]);
        assert_eq!(ev[6], vec![1]);
    }

    #[test]
    fn all_referenced_evicts_the_oldest_after_one_sweep() {
        let mut p = Clock::new(2);
        let (hits, ev) = play(&mut p, &[1, 2, 1, 2, 3]);
        assert_eq!(hits, pattern("MMHHM"));
        assert_eq!(ev[4], vec![1]);
    }

    #[test]
    fn invariants() {
        check_invariants("clock");
    }
}
