//! S3-FIFO (Yang et al., "FIFO queues are all you need for cache eviction", SOSP'23): a small
//! FIFO S (10% of the cache) takes new blocks, a main FIFO M (the rest) keeps those seen again,
//! a ghost FIFO G remembers (without data) as many blocks as M holds that left S unseen.
//!
//! - A hit adds one to the block's frequency, capped at 3 (two bits).
//! - A miss whose block is in G goes to M, any other miss to S.
//! - Eviction works on M when M is over its share (or S is empty), else on S.
//! - Evicting from S: its oldest block moves to M if it was hit at least twice (frequency
//!   reset), else leaves the cache into G; repeat until one has left.
//! - Evicting from M: its oldest block, if hit, is reinserted at M's head with frequency - 1,
//!   else it leaves; repeat until one has left.
//!
//! The details follow the authors' reference implementation, libCacheSim's `S3FIFO.c`, so
//! that the two agree access for access: S is floor(0.1 c) blocks, G floor(0.9 c) entries;
//! promotions from S let M run over its share, and the next eviction trims M (the paper's
//! Algorithm 1 evicts from M inline); before the first eviction, a new block goes to M once S
//! is full (libCacheSim's change of 2024 over the original S3FIFOv0). One difference, on
//! purpose: libCacheSim admits nothing into S when S is a single block (capacity 10 to 19) and
//! stops on a capacity below 10, while here S has at least one block so that tiny caches
//! still cache.

use super::blockmap::BlockMap;
use super::list::{List, Slab};
use super::CachePolicy;

#[derive(Clone, Copy, PartialEq)]
enum Queue {
    Small,
    Main,
    Ghost,
}

#[derive(Clone, Copy)]
struct Meta {
    queue: Queue,
    freq: u8,
}

const SMALL_RATIO: f64 = 0.1;
const GHOST_RATIO: f64 = 0.9;
const MOVE_TO_MAIN: u8 = 2;
const MAX_FREQ: u8 = 3;

pub struct S3Fifo {
    capacity: usize,
    small_cap: usize,
    main_cap: usize,
    ghost_cap: usize,
    map: BlockMap,
    slab: Slab,
    meta: Vec<Meta>,
    small: List,
    main: List,
    ghost: List,
    has_evicted: bool,
}

impl S3Fifo {
    pub fn new(capacity: usize) -> Self {
        let small_cap = ((capacity as f64 * SMALL_RATIO) as usize).clamp(1.min(capacity), capacity);
        let ghost_cap = (capacity as f64 * GHOST_RATIO) as usize;
        let nodes = capacity + ghost_cap + 1;
        S3Fifo {
            capacity,
            small_cap,
            main_cap: capacity - small_cap,
            ghost_cap,
            map: BlockMap::with_capacity(nodes),
            slab: Slab::with_capacity(nodes),
            meta: Vec::with_capacity(nodes),
            small: List::new(),
            main: List::new(),
            ghost: List::new(),
            has_evicted: false,
        }
    }

    fn set_meta(&mut self, i: u32, queue: Queue) {
        let m = Meta { queue, freq: 0 };
        let i = i as usize;
        if i == self.meta.len() {
            self.meta.push(m);
        } else {
            self.meta[i] = m;
        }
    }

    /// Makes room for one block.
    fn evict(&mut self, evicted: &mut Vec<u64>) {
        self.has_evicted = true;
        if self.main.len > self.main_cap || self.small.len == 0 {
            self.evict_main(evicted);
        } else {
            self.evict_small(evicted);
        }
    }

    fn evict_small(&mut self, evicted: &mut Vec<u64>) {
        while self.small.len > 0 {
            let i = self.slab.pop_tail(&mut self.small);
            if self.meta[i as usize].freq >= MOVE_TO_MAIN {
                self.slab.push_head(&mut self.main, i);
                self.meta[i as usize] = Meta {
                    queue: Queue::Main,
                    freq: 0,
                };
            } else {
                evicted.push(self.slab.block(i));
                self.remember_in_ghost(i);
                return;
            }
        }
    }

    fn evict_main(&mut self, evicted: &mut Vec<u64>) {
        while self.main.len > 0 {
            let i = self.slab.pop_tail(&mut self.main);
            let freq = self.meta[i as usize].freq;
            if freq >= 1 {
                self.slab.push_head(&mut self.main, i);
                self.meta[i as usize].freq = freq.min(MAX_FREQ) - 1;
            } else {
                let block = self.slab.block(i);
                self.map.remove(block);
                self.slab.release(i);
                evicted.push(block);
                return;
            }
        }
    }

    /// A block leaving S unseen is remembered in G (whose oldest entry goes when G is full).
    fn remember_in_ghost(&mut self, i: u32) {
        if self.ghost_cap == 0 {
            self.map.remove(self.slab.block(i));
            self.slab.release(i);
            return;
        }
        if self.ghost.len >= self.ghost_cap {
            let old = self.slab.pop_tail(&mut self.ghost);
            self.map.remove(self.slab.block(old));
            self.slab.release(old);
        }
        self.slab.push_head(&mut self.ghost, i);
        self.meta[i as usize].queue = Queue::Ghost;
    }

    /// A miss: evicts until there is room, then inserts `block` (already in the map as `i`
    /// when it came from G).
    fn insert(&mut self, block: u64, ghost_slot: Option<u32>, evicted: &mut Vec<u64>) {
        while self.small.len + self.main.len >= self.capacity {
            self.evict(evicted);
        }
        let (i, queue) = match ghost_slot {
            Some(i) => (i, Queue::Main),
            None => {
                let i = self.slab.alloc(block);
                self.map.insert(block, i);
                let small_full = self.small.len >= self.small_cap;
                let q = if !self.has_evicted && small_full {
                    Queue::Main
                } else {
                    Queue::Small
                };
                (i, q)
            }
        };
        self.set_meta(i, queue);
        let list = if queue == Queue::Main {
            &mut self.main
        } else {
            &mut self.small
        };
        self.slab.push_head(list, i);
    }
}

impl CachePolicy for S3Fifo {
    fn prefetch(&self, block: u64) {
        self.map.prefetch(block);
    }

    fn access(&mut self, block: u64, evicted: &mut Vec<u64>) -> bool {
        if self.capacity == 0 {
            return false;
        }
        match self.map.get(block) {
            Some(i) => {
                let m = &mut self.meta[i as usize];
                if m.queue != Queue::Ghost {
                    m.freq = (m.freq + 1).min(MAX_FREQ);
                    return true;
                }
                self.slab.unlink(&mut self.ghost, i);
                self.insert(block, Some(i), evicted);
                false
            }
            None => {
                self.insert(block, None, evicted);
                false
            }
        }
    }

    fn len(&self) -> usize {
        self.small.len + self.main.len
    }

    fn capacity(&self) -> usize {
        self.capacity
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::{check_invariants, pattern, play};
    use super::*;

    fn sizes(s: &S3Fifo) -> [usize; 3] {
        [s.small.len, s.main.len, s.ghost.len]
    }

    #[test]
    fn shares() {
        let s = S3Fifo::new(100);
        assert_eq!((s.small_cap, s.main_cap, s.ghost_cap), (10, 90, 90));
        let s = S3Fifo::new(32768);
        assert_eq!((s.small_cap, s.main_cap, s.ghost_cap), (3276, 29492, 29491));
        let s = S3Fifo::new(1);
        assert_eq!((s.small_cap, s.main_cap, s.ghost_cap), (1, 0, 0));
    }

    #[test]
    fn hand_computed() {
        // c = 20: S = 2, M = 18, G = 18.
        let mut s = S3Fifo::new(20);
        // 1 2 fill S; 3..=20 go to M (S full, nothing evicted yet). 1 is hit twice.
        let warm: Vec<u64> = (1..=20).chain([1, 1]).collect();
        let (hits, _) = play(&mut s, &warm);
        assert_eq!(hits.iter().filter(|&&h| h).count(), 2);
        assert_eq!(sizes(&s), [2, 18, 0]);
        // 21: full; M is within its share and S is not empty -> evict from S: 1 (freq 2)
        // moves to M, 2 (freq 0) leaves into G. 21 enters S.
        let (hits, ev) = play(&mut s, &[21]);
        assert_eq!((hits, ev), (pattern("M"), vec![vec![2]]));
        assert_eq!(sizes(&s), [1, 19, 1]);
        // 22: M (19) is over its share (18) -> evict from M: 3 is oldest, unseen -> leaves.
        let (_, ev) = play(&mut s, &[22]);
        assert_eq!(ev, vec![vec![3]]);
        // 2: a ghost hit -> inserted into M, after evicting from S (21 leaves into G).
        let (hits, ev) = play(&mut s, &[2]);
        assert_eq!((hits, ev), (pattern("M"), vec![vec![21]]));
        assert_eq!(sizes(&s), [1, 19, 1]);
        // 2 is held now; 1 (in M) and 22 (in S) too; 3 is gone.
        let (hits, _) = play(&mut s, &[2, 1, 22, 3]);
        assert_eq!(hits, pattern("HHHM"));
    }

    #[test]
    fn promotion_overfills_main_and_main_reinserts_with_one_less() {
        // c = 10: S = 1, M = 9. 1 enters S, 2..=10 go to M (S full before any eviction);
        // 2 is hit four times: frequency capped at 3.
        let mut s = S3Fifo::new(10);
        let warm: Vec<u64> = (1..=10).chain([2, 2, 2, 2]).collect();
        play(&mut s, &warm);
        // 11: S is evicted (1 leaves into G). 12: same for 11; then 12 is hit twice.
        let (_, ev) = play(&mut s, &[11, 12, 12, 12]);
        assert_eq!(ev, vec![vec![1], vec![11], vec![], vec![]]);
        // 13: evicting S promotes 12 (frequency 2) to M and empties S without freeing room,
        // so M (10 > 9) is evicted next: 2 (frequency 3) is reinserted with 2, 3 leaves.
        let (_, ev) = play(&mut s, &[13]);
        assert_eq!(ev, vec![vec![3]]);
        assert_eq!(sizes(&s), [1, 9, 2]);
        assert_eq!(s.meta[s.map.get(2).unwrap() as usize].freq, 2);
        assert_eq!(s.meta[s.map.get(12).unwrap() as usize].freq, 0);
    }

    #[test]
    fn invariants() {
        check_invariants("s3fifo");
    }
}
