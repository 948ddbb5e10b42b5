//! An SSD cache of 4 KiB blocks over an HDD. Reads: hit blocks come from the SSD, missed
//! blocks from the HDD (one access spanning them) and are then written into the SSD in the
//! background. Writes: write-back puts them in the SSD and marks them dirty; write-through
//! writes both and completes with the slower. The request completes when all its parts have.
//!
//! Dirty blocks the policy evicts wait for write-back as a flusher would do it: while the
//! HDD is idle, in address order from the head (an elevator), contiguous blocks coalesced
//! into one write of up to 1 MiB. Only when more than `FLUSH_LIMIT` of the cache awaits
//! write-back do flushes go ahead of the requests that follow. Dirty blocks still cached
//! are cleaned the same way while the HDD idles (after the evicted ones), as long as more
//! than `dirty_target` of the cache is dirty (50% by default, dm-writecache's high
//! watermark): then a burst that follows evicts clean blocks, not dirty ones that it would
//! have to wait for.

use super::hdd::{Hdd, HddParams};
use super::ssd::{Ssd, SsdParams, PAGE};
use super::writeback::Pending;
use super::{number, Device, DeviceReport, SimRequest};
use crate::sim::cache::{make_policy, CachePolicy};
use rustc_hash::FxHashSet;

/// Blocks coalesced into one write-back at most (1 MiB).
const FLUSH_RUN: u64 = 256;
/// Blocks of a request whose lookups `prefetch` fetches at most (1 MiB: past that, the first
/// lookups' own time covers the rest).
const PREFETCH_BLOCKS: usize = 256;
/// Share of the cache's blocks that may await write-back before flushing is forced.
const FLUSH_LIMIT: f64 = 0.1;
/// Share of the cache's blocks that may stay dirty while the HDD idles (dm-writecache's
/// default high watermark, 50%; bcache's writeback_percent is 10%). Without cleaning, a read
/// burst after a write phase evicted dirty blocks and waited for their write-back: on
/// msr_hm0 a cache of 1/4 to 3/8 of the footprint was 0.55x-0.87x as fast as no cache, and
/// 3.3x at 1/8 and at the whole footprint.
const DIRTY_TARGET: f64 = 0.5;
use serde_json::Value;

pub struct Tiered {
    ssd: Ssd,
    hdd: Hdd,
    policy: Box<dyn CachePolicy>,
    write_back: bool,
    dirty: FxHashSet<u64>,
    /// Evicted dirty blocks awaiting write-back to the HDD.
    pending: Pending,
    /// Dirty blocks still cached, in address order (for cleaning while the HDD idles).
    cached_dirty: Pending,
    /// Dirty cached blocks the cleaner leaves alone (`dirty_target` of the cache).
    dirty_target: usize,
    pending_limit: usize,
    evicted: Vec<u64>,
    /// The policy's dirty flags of `evicted`, when it keeps them (`tracks_dirty`).
    evicted_dirty: Vec<bool>,
    tracked: bool,
    missed: Vec<u64>,
    /// A write's blocks that stay cached, when it evicted some of its own (reused buffer).
    still_cached: Vec<u64>,
    hits: u64,
    misses: u64,
    writebacks: u64,
    /// The address space of the HDD's latest request: the elevator goes on from the head
    /// within it.
    head_space: u32,
}

// A block's key holds its address space above its block number: volumes sharing the device
// keep their data apart in the cache, while the head sees their offsets as they are.
use super::SPACE_SHIFT;
const BLOCK_BITS: u64 = (1 << SPACE_SHIFT) - 1;

/// The key of block 0 of address space `space` (below `super::SPACES`).
fn space_base(space: u32) -> u64 {
    (space as u64) << SPACE_SHIFT
}

/// The keys of the 4 KiB blocks `size` bytes at `offset` of `space` touch (none for 0 bytes).
fn blocks_of(space: u32, offset: u64, size: u32) -> std::ops::Range<u64> {
    let first = space_base(space) + offset / PAGE;
    first..first + super::ssd::pages(offset, size)
}

pub fn build(spec: &Value, seed: u64) -> Result<Box<dyn Device>, String> {
    Ok(Box::new(Tiered::from_spec(spec, seed)?))
}

impl Tiered {
    fn from_spec(spec: &Value, seed: u64) -> Result<Tiered, String> {
        let part = |name: &str| {
            spec.get(name)
                .ok_or(format!("tiered device lacks its {name:?} part"))
        };
        let ssd = SsdParams::from_spec(part("ssd")?)?;
        let hdd = HddParams::from_spec(part("hdd")?)?;
        let cache_bytes = number(spec, "cache_bytes")? as u64;
        if cache_bytes > ssd.capacity {
            return Err(format!(
                "cache_bytes {cache_bytes} exceeds the SSD's capacity {}",
                ssd.capacity
            ));
        }
        let policy_name = spec.get("policy").and_then(Value::as_str).unwrap_or("lru");
        let write_back = match spec
            .get("write_policy")
            .and_then(Value::as_str)
            .unwrap_or("back")
        {
            "back" => true,
            "through" => false,
            other => {
                return Err(format!(
                    "write_policy must be \"back\" or \"through\", got {other:?}"
                ))
            }
        };
        let dirty_share = match spec.get("dirty_target") {
            None => DIRTY_TARGET,
            Some(v) => v
                .as_f64()
                .filter(|x| (0.0..=1.0).contains(x))
                .ok_or(format!(
                    "dirty_target must be a share of the cache from 0 to 1, got {v}"
                ))?,
        };
        let policy = make_policy(policy_name, (cache_bytes / PAGE) as usize)?;
        Ok(Tiered {
            tracked: policy.tracks_dirty(),
            ssd: Ssd::new(ssd),
            hdd: Hdd::new(hdd, seed),
            policy,
            write_back,
            dirty: FxHashSet::default(),
            pending: Pending::default(),
            cached_dirty: Pending::default(),
            dirty_target: ((cache_bytes / PAGE) as f64 * dirty_share) as usize,
            pending_limit: ((cache_bytes / PAGE) as f64 * FLUSH_LIMIT).max(FLUSH_RUN as f64)
                as usize,
            evicted: Vec::new(),
            evicted_dirty: Vec::new(),
            missed: Vec::new(),
            still_cached: Vec::new(),
            hits: 0,
            misses: 0,
            writebacks: 0,
            head_space: 0,
        })
    }

    /// Runs every block of `r` through the policy (marking them dirty for a write-back
    /// write, where the policy keeps the flags); missed blocks go to `self.missed`.
    fn lookup(&mut self, r: &SimRequest) {
        self.missed.clear();
        self.evicted.clear();
        self.evicted_dirty.clear();
        let dirtying = r.op == 1 && self.write_back;
        for block in blocks_of(r.space, r.offset, r.size) {
            let hit = if self.tracked {
                let (ev, flags) = (&mut self.evicted, &mut self.evicted_dirty);
                self.policy.access_tracked(block, dirtying, ev, flags)
            } else {
                self.policy.access(block, &mut self.evicted)
            };
            if hit {
                self.hits += 1;
            } else {
                self.misses += 1;
                self.missed.push(block);
            }
        }
    }

    /// Dirty blocks the policy pushed out join the write-back queue; past the limit, flushes
    /// start now, ahead of what follows.
    fn queue_evicted(&mut self, now: u64) {
        let mut dirty = std::mem::take(&mut self.evicted);
        let mut kept = 0;
        for i in 0..dirty.len() {
            let block = dirty[i];
            let is_dirty = if self.tracked {
                self.evicted_dirty[i]
            } else {
                self.dirty.remove(&block)
            };
            if is_dirty {
                self.cached_dirty.remove(block); // no longer cached (clean ones never were)
                dirty[kept] = block;
                kept += 1;
            }
        }
        self.pending.insert_all(&mut dirty[..kept]);
        self.evicted = dirty;
        while self.pending.len() > self.pending_limit {
            self.flush_one(now);
        }
    }

    /// Writes back the run of contiguous pending blocks next from the head (elevator order).
    fn flush_one(&mut self, at: u64) {
        let head = self.head_key();
        if let Some((first, blocks)) = self.pending.pop_next(head, FLUSH_RUN) {
            self.write_back_run(at, first, blocks);
        }
    }

    /// The key of the block under the HDD's head, in the space it last served.
    fn head_key(&self) -> u64 {
        space_base(self.head_space) + self.hdd.head() / PAGE
    }

    /// Serves `r` on the HDD; returns its completion time.
    fn on_hdd(&mut self, r: &SimRequest) -> u64 {
        self.head_space = r.space;
        self.hdd.submit(r)
    }

    /// One write of `blocks` contiguous blocks from key `first` to the HDD, issued at `at`
    /// (a run of keys never leaves its space: no device holds 2^44 blocks).
    fn write_back_run(&mut self, at: u64, first: u64, blocks: u64) {
        self.writebacks += blocks;
        let w = SimRequest {
            arrival_ns: at,
            op: 1,
            offset: (first & BLOCK_BITS) * PAGE,
            size: (blocks * PAGE) as u32,
            space: (first >> SPACE_SHIFT) as u32,
        };
        self.on_hdd(&w);
    }

    /// Flushes while the HDD would otherwise sit idle before `until`.
    fn flush_idle(&mut self, until: u64) {
        while !self.pending.is_empty() && self.hdd.free_at() < until {
            self.flush_one(self.hdd.free_at());
        }
        while self.cached_dirty.len() > self.dirty_target && self.hdd.free_at() < until {
            self.clean_one(self.hdd.free_at());
        }
    }

    /// Writes back the run of contiguous dirty cached blocks next from the head; they stay
    /// cached, clean.
    fn clean_one(&mut self, at: u64) {
        let head = self.head_key();
        let Some((first, blocks)) = self.cached_dirty.pop_next(head, FLUSH_RUN) else {
            return;
        };
        for block in first..first + blocks {
            if self.tracked {
                self.policy.clean(block);
            } else {
                self.dirty.remove(&block);
            }
        }
        self.write_back_run(at, first, blocks);
    }

    fn read(&mut self, r: &SimRequest) -> u64 {
        self.lookup(r);
        let hit_pages = super::ssd::pages(r.offset, r.size) - self.missed.len() as u64;
        let mut done = self.ssd.serve_pages(r.arrival_ns, 0, hit_pages);
        if let (Some(&lo), Some(&hi)) = (self.missed.first(), self.missed.last()) {
            let start = ((lo & BLOCK_BITS) * PAGE).max(r.offset);
            let end = (((hi & BLOCK_BITS) + 1) * PAGE).min(r.offset + r.size as u64);
            let fetch = SimRequest {
                arrival_ns: r.arrival_ns,
                op: 0,
                offset: start,
                size: (end - start) as u32,
                space: r.space,
            };
            let fetched = self.on_hdd(&fetch);
            self.ssd.serve_pages(fetched, 1, self.missed.len() as u64);
            done = done.max(fetched);
        }
        self.queue_evicted(r.arrival_ns);
        done
    }

    fn write(&mut self, r: &SimRequest) -> u64 {
        self.lookup(r);
        let pages = super::ssd::pages(r.offset, r.size);
        let mut done = self.ssd.serve_pages(r.arrival_ns, 1, pages);
        if !self.write_back {
            done = done.max(self.on_hdd(r));
        }
        let first = space_base(r.space) + r.offset / PAGE;
        // the request's blocks that its own misses pushed out (a cache smaller than the
        // request) are not cached any more
        let own_evicted = self
            .evicted
            .iter()
            .any(|b| (first..first + pages).contains(b));
        let mut still_cached = std::mem::take(&mut self.still_cached);
        if self.write_back && own_evicted {
            still_cached.clear();
            still_cached.extend((first..first + pages).filter(|b| !self.evicted.contains(b)));
        }
        // evictions first: a block of this request evicted and re-inserted by it was clean
        // when it left (measured: marking first wrote such blocks back and lost their flag)
        self.queue_evicted(r.arrival_ns);
        if self.write_back {
            if !self.tracked {
                self.dirty.extend(first..first + pages);
            }
            if own_evicted {
                self.cached_dirty.insert_all(&mut still_cached);
            } else {
                self.cached_dirty.insert(first, first + pages);
            }
        }
        self.still_cached = still_cached;
        done
    }
}

impl Device for Tiered {
    fn submit(&mut self, r: &SimRequest) -> u64 {
        if self.policy.capacity() == 0 {
            return self.on_hdd(r); // no cache: the bare HDD
        }
        self.flush_idle(r.arrival_ns);
        match r.op {
            0 if r.size > 0 => self.read(r),
            1 if r.size > 0 => self.write(r),
            _ => r.arrival_ns,
        }
    }

    fn busy_ns(&self) -> u64 {
        self.hdd.busy_ns()
    }

    fn report(&self) -> DeviceReport {
        let hdd = self.hdd.report();
        DeviceReport {
            busy_ns: hdd.busy_ns,
            servers: 1,
            cache_hits: self.hits,
            cache_misses: self.misses,
            writebacks: self.writebacks,
            parts: vec![("ssd".into(), self.ssd.report()), ("hdd".into(), hdd)],
        }
    }

    fn capacity(&self) -> u64 {
        self.hdd.capacity()
    }

    fn prefetch(&self, space: u32, offset: u64, size: u32) {
        // every block: the map scatters neighbouring blocks
        for block in blocks_of(space, offset, size).take(PREFETCH_BLOCKS) {
            self.policy.prefetch(block);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::cache::CachePolicy;
    use serde_json::json;

    /// LRU with its dirty flags hidden: the tiered device then keeps its own dirty set.
    struct Untracked(Box<dyn CachePolicy>);

    impl CachePolicy for Untracked {
        fn access(&mut self, block: u64, evicted: &mut Vec<u64>) -> bool {
            self.0.access(block, evicted)
        }
        fn len(&self) -> usize {
            self.0.len()
        }
        fn capacity(&self) -> usize {
            self.0.capacity()
        }
    }

    fn spec() -> Value {
        let hdd = json!({"kind": "hdd", "rpm": 7200, "average_seek_ms": 8.5,
            "track_to_track_ms": 1.0, "full_stroke_ms": 18.0, "media_mb_per_s": 175,
            "interface_mb_per_s": 600, "read_ahead_kib": 1024, "capacity_bytes": 1u64 << 36});
        let ssd = json!({"kind": "ssd", "channels": 8, "read_us": 80, "write_us": 90,
            "capacity_bytes": 1u64 << 34});
        json!({"kind": "tiered", "cache_bytes": 64 * 4096, "policy": "lru",
            "write_policy": "back", "ssd": ssd, "hdd": hdd})
    }

    #[test]
    fn spaces_keep_equal_offsets_apart_in_the_cache_not_at_the_head() {
        let mut sp = spec();
        sp["dirty_target"] = json!(1.0); // no cleaning: only evictions write back
        let mut dev = Tiered::from_spec(&sp, 7).unwrap();
        let write = |space: u32, i: u64| SimRequest {
            arrival_ns: i * 50_000_000,
            op: 1,
            offset: 8 * 4096,
            size: 4096,
            space,
        };
        // one block of each of 65 spaces: the 64-block cache evicts space 0's dirty block
        for space in 0..65 {
            dev.submit(&write(space, space as u64));
        }
        let r = dev.report();
        assert_eq!((r.cache_hits, r.cache_misses, r.writebacks), (0, 65, 0));
        // the same offset in a space still cached is a hit; before it, while the disk
        // idled, the evicted block was written back at its offset in its space
        dev.submit(&write(64, 100));
        let r = dev.report();
        assert_eq!((r.cache_hits, r.writebacks), (1, 1));
        assert_eq!((dev.hdd.head(), dev.head_space), (9 * 4096, 0));
    }

    #[test]
    fn policy_dirty_flags_give_the_same_run_as_the_devices_own_set() {
        let mut tracked = Tiered::from_spec(&spec(), 7).unwrap();
        let mut own = Tiered::from_spec(&spec(), 7).unwrap();
        own.policy = Box::new(Untracked(make_policy("lru", 64).unwrap()));
        own.tracked = false;
        assert!(tracked.tracked);
        let mut x = 12345u64;
        for i in 0..20_000u64 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let r = SimRequest {
                arrival_ns: i * 2_000_000,
                op: x.is_multiple_of(3) as u8,
                offset: (x % 300) * 4096,
                size: 4096 * (1 + (x >> 20) % 4) as u32,
                space: 0,
            };
            assert_eq!(tracked.submit(&r), own.submit(&r), "request {i}");
            assert_eq!(tracked.pending, own.pending, "request {i}");
        }
        let (a, b) = (tracked.report(), own.report());
        assert_eq!(
            (a.cache_hits, a.cache_misses, a.writebacks),
            (b.cache_hits, b.cache_misses, b.writebacks)
        );
        assert!(a.writebacks > 0);
    }
}
