//! Cache replacement policies for the simulator's SSD cache: one file per policy behind one
//! small interface, and one registry (`POLICIES`) that lists them.
//!
//! Every policy keeps its state in flat arrays indexed by slot (no pointers, no allocation per
//! access) and finds blocks through a `BlockMap` sized for its capacity up front.

mod arc;
mod blockmap;
mod clock;
mod fifo;
mod list;
mod lru;
mod ring;
mod s3fifo;

/// A fixed-capacity cache of equal-sized blocks (4 KiB in the simulator).
pub trait CachePolicy: Send {
    /// Looks `block` up; on a miss inserts it. Returns true on a hit. Blocks pushed out
    /// to make room are appended to `evicted` (the tiered device writes back dirty ones).
    fn access(&mut self, block: u64, evicted: &mut Vec<u64>) -> bool;
    /// Blocks held now.
    fn len(&self) -> usize;
    /// Blocks.
    fn capacity(&self) -> usize;
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// A hint that `block` is accessed soon: its lookup's memory is fetched meanwhile.
    fn prefetch(&self, _block: u64) {}
    /// Whether the policy keeps a dirty flag per block (`access_tracked`); otherwise the
    /// tiered device keeps its own set of dirty blocks.
    fn tracks_dirty(&self) -> bool {
        false
    }
    /// Clears `block`'s dirty flag (it was written back and stays cached), where the policy
    /// keeps the flags (`tracks_dirty`).
    fn clean(&mut self, _block: u64) {}
    /// `access` that also marks the block dirty when `write`, and appends each evicted
    /// block's flag to `evicted_dirty` (one hash probe per access instead of three).
    fn access_tracked(
        &mut self,
        block: u64,
        _write: bool,
        evicted: &mut Vec<u64>,
        evicted_dirty: &mut Vec<bool>,
    ) -> bool {
        let before = evicted.len();
        let hit = self.access(block, evicted);
        evicted_dirty.resize(evicted_dirty.len() + evicted.len() - before, false);
        hit
    }
}

pub struct PolicyInfo {
    pub name: &'static str,
    pub about: &'static str,
    pub make: fn(usize) -> Box<dyn CachePolicy>,
}

/// The one registry of policies; a new policy is one file and one line here.
pub const POLICIES: &[PolicyInfo] = &[
    PolicyInfo {
        name: "lru",
        about: "least recently used",
        make: |c| Box::new(lru::Lru::new(c)),
    },
    PolicyInfo {
        name: "fifo",
        about: "first in, first out",
        make: |c| Box::new(fifo::Fifo::new(c)),
    },
    PolicyInfo {
        name: "clock",
        about: "CLOCK (FIFO with one reference bit, second chance)",
        make: |c| Box::new(clock::Clock::new(c)),
    },
    PolicyInfo {
        name: "arc",
        about: "ARC, adaptive replacement cache (Megiddo and Modha, FAST'03)",
        make: |c| Box::new(arc::Arc::new(c)),
    },
    PolicyInfo {
        name: "s3fifo",
        about: "S3-FIFO, small + main + ghost FIFO queues (Yang et al., SOSP'23)",
        make: |c| Box::new(s3fifo::S3Fifo::new(c)),
    },
];

/// The policy `name` holding `capacity_blocks` blocks (0: no cache, every access misses).
pub fn make_policy(name: &str, capacity_blocks: usize) -> Result<Box<dyn CachePolicy>, String> {
    POLICIES
        .iter()
        .find(|p| p.name == name)
        .map(|p| (p.make)(capacity_blocks))
        .ok_or_else(|| {
            let known: Vec<&str> = POLICIES.iter().map(|p| p.name).collect();
            format!(
                "unknown cache policy {name:?} (known: {})",
                known.join(", ")
            )
        })
}

/// How many accesses ahead the simulators prefetch a block's lookup: far enough for a
/// memory access to complete behind the accesses between.
pub const PREFETCH_AHEAD: usize = 16;

/// Runs every block of `blocks` through `policy`; returns (hits, misses).
pub fn simulate(policy: &mut dyn CachePolicy, blocks: &[u64]) -> (u64, u64) {
    let mut evicted = Vec::with_capacity(64);
    let mut hits = 0u64;
    for (i, &b) in blocks.iter().enumerate() {
        if let Some(&ahead) = blocks.get(i + PREFETCH_AHEAD) {
            policy.prefetch(ahead);
        }
        hits += policy.access(b, &mut evicted) as u64;
        evicted.clear();
    }
    (hits, blocks.len() as u64 - hits)
}

#[cfg(test)]
pub(crate) mod testing {
    use super::CachePolicy;

    /// Plays `blocks` and returns the hit (true) / miss pattern and every eviction list.
    pub fn play(p: &mut dyn CachePolicy, blocks: &[u64]) -> (Vec<bool>, Vec<Vec<u64>>) {
        let mut hits = Vec::new();
        let mut evictions = Vec::new();
        for &b in blocks {
            let mut ev = Vec::new();
            hits.push(p.access(b, &mut ev));
            assert!(p.len() <= p.capacity(), "over capacity after block {b}");
            evictions.push(ev);
        }
        (hits, evictions)
    }

    /// "HMM.." strings make expected patterns readable: H hit, M miss.
    pub fn pattern(s: &str) -> Vec<bool> {
        s.chars()
            .filter(|c| !c.is_whitespace())
            .map(|c| c == 'H')
            .collect()
    }

    /// A deterministic skewed stream (xorshift; a few hot blocks, many cold ones).
    pub fn stream(n: usize, universe: u64, seed: u64) -> Vec<u64> {
        let mut x = seed | 1;
        (0..n)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let r = x % universe;
                if x.is_multiple_of(3) {
                    r % (universe / 10 + 1)
                } else {
                    r
                }
            })
            .collect()
    }

    /// Every policy: capacity 0 caches nothing; the cache never exceeds its capacity, and
    /// the evicted blocks plus those held account for every distinct miss.
    pub fn check_invariants(name: &str) {
        let mut p = super::make_policy(name, 0).unwrap();
        let (h, _) = play(p.as_mut(), &[1, 1, 2, 1]);
        assert_eq!(h, vec![false; 4]);
        assert_eq!(p.len(), 0);
        for cap in [1usize, 2, 7, 64] {
            let mut p = super::make_policy(name, cap).unwrap();
            let s = stream(5_000, 300, cap as u64 + 11);
            let mut held = std::collections::HashSet::new();
            for &b in &s {
                let mut ev = Vec::new();
                let hit = p.access(b, &mut ev);
                assert_eq!(hit, held.contains(&b), "{name} cap {cap}: block {b}");
                for e in &ev {
                    assert!(held.remove(e), "{name}: evicted {e} was not held");
                }
                held.insert(b);
                assert_eq!(held.len(), p.len(), "{name} cap {cap}");
                assert!(p.len() <= cap);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registry_makes_every_policy_and_names_the_known_ones() {
        for p in POLICIES {
            let c = make_policy(p.name, 10).unwrap();
            assert_eq!((c.capacity(), c.len()), (10, 0));
        }
        let e = make_policy("lfu", 4).err().unwrap();
        assert!(
            e.contains("\"lfu\"") && e.contains("lru, fifo, clock, arc, s3fifo"),
            "{e}"
        );
    }

    #[test]
    fn simulate_counts_hits_and_misses() {
        let mut p = make_policy("lru", 2).unwrap();
        assert_eq!(simulate(p.as_mut(), &[1, 2, 1, 3, 2, 1]), (1, 5));
    }
}
