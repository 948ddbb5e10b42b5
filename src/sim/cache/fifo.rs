//! FIFO: blocks leave in insertion order whatever their hits; a ring of slots whose hand
//! points at the oldest block once the cache is full.

use super::{block_map, CachePolicy};
use rustc_hash::FxHashMap;

pub struct Fifo {
    capacity: usize,
    map: FxHashMap<u64, u32>,
    ring: Vec<u64>,
    hand: usize,
}

impl Fifo {
    pub fn new(capacity: usize) -> Self {
        Fifo {
            capacity,
            map: block_map(capacity),
            ring: Vec::with_capacity(capacity),
            hand: 0,
        }
    }
}

impl CachePolicy for Fifo {
    fn access(&mut self, block: u64, evicted: &mut Vec<u64>) -> bool {
        if self.map.contains_key(&block) {
            return true;
        }
        if self.capacity == 0 {
            return false;
        }
        if self.ring.len() < self.capacity {
            self.ring.push(block);
        } else {
            let old = std::mem::replace(&mut self.ring[self.hand], block);
            self.map.remove(&old);
            evicted.push(old);
            self.hand = (self.hand + 1) % self.capacity;
        }
        self.map.insert(block, 0);
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
        // capacity 3: a b c a d a -> d evicts a although a was just hit; a then misses
        let mut p = Fifo::new(3);
        let (hits, ev) = play(&mut p, &[1, 2, 3, 1, 4, 1, 2]);
        assert_eq!(hits, pattern("MMMHMMM"));
        assert_eq!(ev[4], vec![1]);
        assert_eq!(ev[5], vec![2]);
        assert_eq!(ev[6], vec![3]);
    }

    #[test]
    fn invariants() {
        check_invariants("fifo");
    }
}
