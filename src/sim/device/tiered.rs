//! An SSD cache of 4 KiB blocks over an HDD. Reads: hit blocks come from the SSD, missed
//! blocks from the HDD (one access spanning them) and are then written into the SSD in the
//! background. Writes: write-back puts them in the SSD and marks them dirty; write-through
//! writes both and completes with the slower. The request completes when all its parts have.
//!
//! Dirty blocks the policy evicts wait for write-back as a flusher would do it: while the
//! HDD is idle, in address order from the head (an elevator), contiguous blocks coalesced
//! into one write of up to 1 MiB. Only when more than `FLUSH_LIMIT` of the cache awaits
//! write-back do flushes go ahead of the requests that follow.

use super::hdd::{Hdd, HddParams};
use super::ssd::{Ssd, SsdParams, PAGE};
use super::{number, Device, DeviceReport, SimRequest};
use crate::sim::cache::{make_policy, CachePolicy};
use rustc_hash::FxHashSet;
use std::collections::BTreeSet;

/// Blocks coalesced into one write-back at most (1 MiB).
const FLUSH_RUN: u64 = 256;
/// Share of the cache's blocks that may await write-back before flushing is forced.
const FLUSH_LIMIT: f64 = 0.1;
use serde_json::Value;

pub struct Tiered {
    ssd: Ssd,
    hdd: Hdd,
    policy: Box<dyn CachePolicy>,
    write_back: bool,
    dirty: FxHashSet<u64>,
    /// Evicted dirty blocks awaiting write-back to the HDD.
    pending: BTreeSet<u64>,
    pending_limit: usize,
    evicted: Vec<u64>,
    missed: Vec<u64>,
    hits: u64,
    misses: u64,
    writebacks: u64,
}

pub fn build(spec: &Value, seed: u64) -> Result<Box<dyn Device>, String> {
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
    Ok(Box::new(Tiered {
        ssd: Ssd::new(ssd),
        hdd: Hdd::new(hdd, seed),
        policy: make_policy(policy_name, (cache_bytes / PAGE) as usize)?,
        write_back,
        dirty: FxHashSet::default(),
        pending: BTreeSet::new(),
        pending_limit: ((cache_bytes / PAGE) as f64 * FLUSH_LIMIT).max(FLUSH_RUN as f64) as usize,
        evicted: Vec::new(),
        missed: Vec::new(),
        hits: 0,
        misses: 0,
        writebacks: 0,
    }))
}

impl Tiered {
    /// Runs every block of `r` through the policy; missed blocks go to `self.missed`.
    fn lookup(&mut self, r: &SimRequest) {
        self.missed.clear();
        self.evicted.clear();
        let first = r.offset / PAGE;
        let last = (r.offset + r.size as u64 - 1) / PAGE;
        for block in first..=last {
            if self.policy.access(block, &mut self.evicted) {
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
        for i in 0..self.evicted.len() {
            let block = self.evicted[i];
            if self.dirty.remove(&block) {
                self.pending.insert(block);
            }
        }
        while self.pending.len() > self.pending_limit {
            self.flush_one(now);
        }
    }

    /// Writes back the run of contiguous pending blocks next from the head (elevator order).
    fn flush_one(&mut self, at: u64) {
        let head = self.hdd.head() / PAGE;
        let Some(&first) = self.pending.range(head..).next().or(self.pending.first()) else {
            return;
        };
        let mut last = first;
        while last + 1 - first < FLUSH_RUN && self.pending.remove(&(last + 1)) {
            last += 1;
        }
        self.pending.remove(&first);
        let blocks = last + 1 - first;
        self.writebacks += blocks;
        let size = (blocks * PAGE) as u32;
        let w = SimRequest {
            arrival_ns: at,
            op: 1,
            offset: first * PAGE,
            size,
        };
        self.hdd.submit(&w);
    }

    /// Flushes while the HDD would otherwise sit idle before `until`.
    fn flush_idle(&mut self, until: u64) {
        while !self.pending.is_empty() && self.hdd.free_at() < until {
            self.flush_one(self.hdd.free_at());
        }
    }

    fn read(&mut self, r: &SimRequest) -> u64 {
        self.lookup(r);
        let hit_pages = super::ssd::pages(r.offset, r.size) - self.missed.len() as u64;
        let mut done = self.ssd.serve_pages(r.arrival_ns, 0, hit_pages);
        if let (Some(&lo), Some(&hi)) = (self.missed.first(), self.missed.last()) {
            let start = (lo * PAGE).max(r.offset);
            let end = ((hi + 1) * PAGE).min(r.offset + r.size as u64);
            let fetch = SimRequest {
                arrival_ns: r.arrival_ns,
                op: 0,
                offset: start,
                size: (end - start) as u32,
            };
            let fetched = self.hdd.submit(&fetch);
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
        if self.write_back {
            let first = r.offset / PAGE;
            self.dirty.extend(first..first + pages);
        } else {
            done = done.max(self.hdd.submit(r));
        }
        self.queue_evicted(r.arrival_ns);
        done
    }
}

impl Device for Tiered {
    fn submit(&mut self, r: &SimRequest) -> u64 {
        if self.policy.capacity() == 0 {
            return self.hdd.submit(r); // no cache: the bare HDD
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
}
