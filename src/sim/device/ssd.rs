//! Flash: a request is split into 4 KiB page operations, each served by the channel that
//! frees first (the controller stripes pages over channels); the request completes with its
//! last page. Random 4 KiB IOPS at depth = channels / page latency; sequential bandwidth =
//! channels * 4 KiB / page latency.

use super::{number, Device, DeviceReport, SimRequest, SlowRegions};
use serde_json::Value;

pub const PAGE: u64 = 4096;

#[derive(Debug, Clone)]
pub struct SsdParams {
    pub channels: usize,
    pub read_ns: u64,
    pub write_ns: u64,
    pub capacity: u64,
    /// Address ranges whose page operations take `factor` times as long.
    pub slow: SlowRegions,
}

pub struct Ssd {
    p: SsdParams,
    /// When each channel is next free, ns.
    channel_free: Vec<u64>,
    /// The latest of `channel_free`: when every channel is idle at an arrival, pages split
    /// evenly without searching.
    all_free_at: u64,
    busy_ns: u64,
}

pub fn build(spec: &Value, _seed: u64) -> Result<Box<dyn Device>, String> {
    Ok(Box::new(Ssd::new(SsdParams::from_spec(spec)?)))
}

impl SsdParams {
    pub fn from_spec(spec: &Value) -> Result<SsdParams, String> {
        let capacity = number(spec, "capacity_bytes")? as u64;
        let p = SsdParams {
            channels: number(spec, "channels")? as usize,
            read_ns: (number(spec, "read_us")? * 1e3) as u64,
            write_ns: (number(spec, "write_us")? * 1e3) as u64,
            capacity,
            slow: SlowRegions::from_spec(spec, capacity)?,
        };
        if p.channels == 0 || p.read_ns == 0 || p.write_ns == 0 || p.capacity == 0 {
            return Err(
                "ssd channels, read_us, write_us and capacity_bytes must be positive".into(),
            );
        }
        Ok(p)
    }
}

impl Ssd {
    pub fn new(p: SsdParams) -> Ssd {
        Ssd {
            channel_free: vec![0; p.channels],
            all_free_at: 0,
            busy_ns: 0,
            p,
        }
    }

    /// Serves `pages` page operations of `op` arriving at `arrival`; returns the completion.
    pub fn serve_pages(&mut self, arrival: u64, op: u8, pages: u64) -> u64 {
        self.serve(arrival, pages, self.page_ns(op))
    }

    fn page_ns(&self, op: u8) -> u64 {
        if op == 0 {
            self.p.read_ns
        } else {
            self.p.write_ns
        }
    }

    /// `serve_pages` with every page operation `factor` times as long (a slow region).
    fn serve_pages_scaled(&mut self, arrival: u64, op: u8, pages: u64, factor: f64) -> u64 {
        let per_page = crate::sim::round_ns(self.page_ns(op) as f64 * factor);
        self.serve(arrival, pages, per_page)
    }

    /// `pages` page operations of `per_page` ns each arriving at `arrival`.
    fn serve(&mut self, arrival: u64, pages: u64, per_page: u64) -> u64 {
        self.busy_ns += pages * per_page;
        if pages == 0 {
            return arrival;
        }
        if self.all_free_at <= arrival {
            return self.serve_idle(arrival, pages, per_page);
        }
        let mut done = arrival;
        for _ in 0..pages {
            let (i, free) = self
                .channel_free
                .iter()
                .copied()
                .enumerate()
                .min_by_key(|&(_, f)| f)
                .expect("at least one channel");
            let end = free.max(arrival) + per_page;
            self.channel_free[i] = end;
            done = done.max(end);
            self.all_free_at = self.all_free_at.max(end);
        }
        done
    }

    /// Every channel idle at `arrival`: the first `pages % channels` channels take one page
    /// more than the others (the earliest-free rule spreads pages round-robin).
    fn serve_idle(&mut self, arrival: u64, pages: u64, per_page: u64) -> u64 {
        let c = self.p.channels as u64;
        let (each, extra) = (pages / c, pages % c);
        for (i, free) in self.channel_free.iter_mut().enumerate() {
            let n = each + u64::from((i as u64) < extra);
            if n > 0 {
                *free = arrival + n * per_page;
            }
        }
        let done = arrival + (each + u64::from(extra > 0)) * per_page;
        self.all_free_at = done;
        done
    }
}

/// 4 KiB pages a request of `size` bytes at `offset` touches.
pub fn pages(offset: u64, size: u32) -> u64 {
    if size == 0 {
        return 0;
    }
    (offset + size as u64 - 1) / PAGE - offset / PAGE + 1
}

impl Device for Ssd {
    fn submit(&mut self, r: &SimRequest) -> u64 {
        if r.op > 1 {
            return r.arrival_ns;
        }
        let factor = self.p.slow.factor(r.offset);
        self.serve_pages_scaled(r.arrival_ns, r.op, pages(r.offset, r.size), factor)
    }

    fn busy_ns(&self) -> u64 {
        self.busy_ns / self.p.channels as u64
    }

    fn report(&self) -> DeviceReport {
        DeviceReport {
            busy_ns: self.busy_ns,
            servers: self.p.channels as u32,
            ..Default::default()
        }
    }

    fn capacity(&self) -> u64 {
        self.p.capacity
    }
}
