//! FIFO: blocks leave in insertion order whatever their hits; a ring of slots whose hand
//! points at the oldest block once the cache is full.

use super::ring::Ring;
use super::CachePolicy;

pub struct Fifo {
    ring: Ring,
}

impl Fifo {
    pub fn new(capacity: usize) -> Self {
        Fifo {
            ring: Ring::new(capacity),
        }
    }
}

impl CachePolicy for Fifo {
    fn prefetch(&self, block: u64) {
        self.ring.prefetch(block);
    }

    fn access(&mut self, block: u64, evicted: &mut Vec<u64>) -> bool {
        if self.ring.slot(block).is_some() {
            return true;
        }
        self.ring.insert(block, evicted, |_| false);
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
