//! CLOCK: a ring of slots, each with a reference bit set by a hit. On a miss the hand clears
//! set bits and passes them (their second chance) until it finds a clear one, whose block is
//! replaced. It is FIFO-with-reinsertion with a one-bit counter, as libCacheSim's `Clock`.

use super::ring::Ring;
use super::CachePolicy;

pub struct Clock {
    ring: Ring,
    /// Per slot.
    referenced: Vec<bool>,
}

impl Clock {
    pub fn new(capacity: usize) -> Self {
        Clock {
            ring: Ring::new(capacity),
            referenced: vec![false; capacity],
        }
    }
}

impl CachePolicy for Clock {
    fn prefetch(&self, block: u64) {
        self.ring.prefetch(block);
    }

    fn access(&mut self, block: u64, evicted: &mut Vec<u64>) -> bool {
        if let Some(slot) = self.ring.slot(block) {
            self.referenced[slot] = true;
            return true;
        }
        // a new block's bit is clear: fresh slots start clear, and the hand stops only at a
        // slot whose bit it found clear
        let referenced = &mut self.referenced;
        let second_chance = |slot: usize| std::mem::replace(&mut referenced[slot], false);
        self.ring.insert(block, evicted, second_chance);
        false
    }

    fn len(&self) -> usize {
        self.ring.len()
    }

    fn capacity(&self) -> usize {
        self.ring.capacity()
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
