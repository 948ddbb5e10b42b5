//! ARC (Megiddo and Modha, "ARC: A Self-Tuning, Low Overhead Replacement Cache", FAST'03,
//! Fig. 4). T1 holds blocks seen once recently, T2 blocks seen at least twice; the ghost lists
//! B1 and B2 remember the blocks recently pushed out of T1 and T2 (no data). A ghost hit in B1
//! grows the target size `p` of T1, one in B2 shrinks it; REPLACE evicts from T1 when T1 is
//! larger than `p`, else from T2. `p` is real-valued and moves by the paper's ratios
//! (delta1 = max(|B2| / |B1|, 1), delta2 = max(|B1| / |B2|, 1)), in f64 as libCacheSim's ARC,
//! which this matches access for access (an integer `p`, as in libCacheSim before 2024,
//! changes the hit counts by up to a few percent).

use super::blockmap::BlockMap;
use super::list::{List, Slab};
use super::CachePolicy;

#[derive(Clone, Copy, PartialEq)]
enum Where {
    T1,
    T2,
    B1,
    B2,
}

pub struct Arc {
    capacity: usize,
    map: BlockMap,
    slab: Slab,
    place: Vec<Where>,
    t1: List,
    t2: List,
    b1: List,
    b2: List,
    p: f64,
}

impl Arc {
    pub fn new(capacity: usize) -> Self {
        Arc {
            capacity,
            map: BlockMap::with_capacity(2 * capacity),
            slab: Slab::with_capacity(2 * capacity),
            place: Vec::with_capacity(2 * capacity),
            t1: List::new(),
            t2: List::new(),
            b1: List::new(),
            b2: List::new(),
            p: 0.0,
        }
    }

    fn set_place(&mut self, i: u32, w: Where) {
        let i = i as usize;
        if i == self.place.len() {
            self.place.push(w);
        } else {
            self.place[i] = w;
        }
    }

    /// REPLACE(x, p): moves the LRU block of T1 (when T1 exceeds its target, or equals it and
    /// the request hit B2, or T2 is empty) or else of T2 to the head of its ghost list.
    fn replace(&mut self, hit_b2: bool, evicted: &mut Vec<u64>) {
        let t1 = self.t1.len as f64;
        let from_t1 = (t1 > 0.0 && (t1 > self.p || (t1 == self.p && hit_b2))) || self.t2.len == 0;
        let (data, ghost, w) = if from_t1 {
            (&mut self.t1, &mut self.b1, Where::B1)
        } else {
            (&mut self.t2, &mut self.b2, Where::B2)
        };
        let i = self.slab.pop_tail(data);
        self.slab.push_head(ghost, i);
        self.place[i as usize] = w;
        evicted.push(self.slab.block(i));
    }

    /// Forgets the oldest entry of a list (a ghost, or T1's LRU block when T1 fills the cache).
    fn drop_tail(&mut self, which: Where, evicted: &mut Vec<u64>) {
        let list = match which {
            Where::T1 => &mut self.t1,
            Where::T2 => &mut self.t2,
            Where::B1 => &mut self.b1,
            Where::B2 => &mut self.b2,
        };
        let i = self.slab.pop_tail(list);
        let block = self.slab.block(i);
        self.map.remove(block);
        self.slab.release(i);
        if matches!(which, Where::T1 | Where::T2) {
            evicted.push(block);
        }
    }

    /// A ghost hit: adapts `p`, makes room, and moves the block to the head of T2.
    fn ghost_hit(&mut self, i: u32, in_b1: bool, evicted: &mut Vec<u64>) {
        let (b1, b2) = (self.b1.len as f64, self.b2.len as f64);
        if in_b1 {
            self.p = (self.p + (b2 / b1).max(1.0)).min(self.capacity as f64);
        } else {
            self.p = (self.p - (b1 / b2).max(1.0)).max(0.0);
        }
        if self.t1.len + self.t2.len == self.capacity {
            self.replace(!in_b1, evicted);
        }
        let ghost = if in_b1 { &mut self.b1 } else { &mut self.b2 };
        self.slab.unlink(ghost, i);
        self.slab.push_head(&mut self.t2, i);
        self.place[i as usize] = Where::T2;
    }

    /// A block seen in no list: makes room when the cache is full, then inserts it in T1.
    fn cold_miss(&mut self, block: u64, evicted: &mut Vec<u64>) {
        let c = self.capacity;
        if self.t1.len + self.t2.len == c {
            if self.t1.len + self.b1.len >= c {
                if self.t1.len < c {
                    self.drop_tail(Where::B1, evicted);
                    self.replace(false, evicted);
                } else {
                    self.drop_tail(Where::T1, evicted);
                }
            } else {
                if self.t1.len + self.t2.len + self.b1.len + self.b2.len >= 2 * c {
                    self.drop_tail(Where::B2, evicted);
                }
                self.replace(false, evicted);
            }
        }
        let i = self.slab.alloc(block);
        self.set_place(i, Where::T1);
        self.slab.push_head(&mut self.t1, i);
        self.map.insert(block, i);
    }
}

impl CachePolicy for Arc {
    fn prefetch(&self, block: u64) {
        self.map.prefetch(block);
    }

    fn access(&mut self, block: u64, evicted: &mut Vec<u64>) -> bool {
        if self.capacity == 0 {
            return false;
        }
        match self.map.get(block) {
            Some(i) => match self.place[i as usize] {
                Where::T1 => {
                    self.slab.unlink(&mut self.t1, i);
                    self.slab.push_head(&mut self.t2, i);
                    self.place[i as usize] = Where::T2;
                    true
                }
                Where::T2 => {
                    self.slab.move_to_head(&mut self.t2, i);
                    true
                }
                Where::B1 => {
                    self.ghost_hit(i, true, evicted);
                    false
                }
                Where::B2 => {
                    self.ghost_hit(i, false, evicted);
                    false
                }
            },
            None => {
                self.cold_miss(block, evicted);
                false
            }
        }
    }

    fn len(&self) -> usize {
        self.t1.len + self.t2.len
    }

    fn capacity(&self) -> usize {
        self.capacity
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::{check_invariants, pattern, play};
    use super::*;

    fn lists(a: &Arc) -> [usize; 5] {
        [a.t1.len, a.t2.len, a.b1.len, a.b2.len, a.p as usize]
    }

    #[test]
    fn hand_computed() {
        // c = 2. 1 2: T1 = [2 1]. 1 hit -> T2 = [1], T1 = [2].
        // 3: full, |T1|+|B1| = 1 < 2, total 2 < 4 -> REPLACE: |T1| = 1 > p = 0 -> 2 to B1.
        // 2: ghost hit in B1: p = 0 + max(0/1, 1) = 1; REPLACE: |T1| = 1 = p, not a B2 hit
        //    -> T2's LRU (1) to B2; 2 to T2. Lists: T1 [3], T2 [2], B1 [], B2 [1], p 1.
        // 1: ghost hit in B2: p = 1 - max(0/1, 1) = 0; REPLACE: |T1| = 1 > 0 -> 3 to B1.
        let mut a = Arc::new(2);
        let (hits, ev) = play(&mut a, &[1, 2, 1, 3, 2, 1]);
        assert_eq!(hits, pattern("MMHMMM"));
        assert_eq!(ev[3], vec![2]);
        assert_eq!(ev[4], vec![1]);
        assert_eq!(ev[5], vec![3]);
        assert_eq!(lists(&a), [0, 2, 1, 0, 0]);
        // 1 and 2 are in T2 now; both hit.
        let (hits, _) = play(&mut a, &[1, 2]);
        assert_eq!(hits, pattern("HH"));
    }

    #[test]
    fn t1_filling_the_cache_drops_its_lru_without_a_ghost() {
        // c = 2, a scan 1 2 3: at 3 T1 holds 2 = c blocks, so 1 is dropped (not kept in B1).
        let mut a = Arc::new(2);
        let (_, ev) = play(&mut a, &[1, 2, 3]);
        assert_eq!(ev[2], vec![1]);
        assert_eq!(lists(&a), [2, 0, 0, 0, 0]);
        let (hits, _) = play(&mut a, &[1]);
        assert_eq!(hits, pattern("M"));
    }

    #[test]
    fn scan_resistance() {
        // A hot pair survives a long scan in T2 (LRU of the same size would lose it).
        let mut a = Arc::new(4);
        play(&mut a, &[100, 101, 100, 101]);
        let scan: Vec<u64> = (0..50).collect();
        play(&mut a, &scan);
        let (hits, _) = play(&mut a, &[100, 101]);
        assert_eq!(hits, pattern("HH"));
    }

    #[test]
    fn ghost_lists_stay_within_c() {
        let mut a = Arc::new(16);
        for b in super::super::testing::stream(20_000, 200, 5) {
            a.access(b, &mut Vec::new());
            let [t1, t2, b1, b2, _] = lists(&a);
            assert!(t1 + t2 <= 16 && t1 + b1 <= 16 && t1 + t2 + b1 + b2 <= 32);
            assert!((0.0..=16.0).contains(&a.p));
        }
    }

    #[test]
    fn invariants() {
        check_invariants("arc");
    }
}
