//! A rotating disk: FIFO queue, seek curve, rotational latency, media transfer, and a
//! read-ahead track buffer so that short forward jumps cost only the skipped media time
//! (seed 003 measured this on real arrays: near-sequential reads are almost as cheap as
//! sequential ones).
//!
//! Seek time for a distance `d` (fraction of the full stroke) is
//! `t(d) = track_to_track + (full_stroke - track_to_track) * d^p`, with `p` chosen so that the
//! mean over uniformly random start and end positions (density `2(1-d)`) is the datasheet's
//! average seek: `E[d^p] = 2 / ((p+1)(p+2))`.

use super::{number, transfer_ns, Device, DeviceReport, SimRequest, SlowRegions};
use crate::sim::{float, whole};
use rand::{RngExt, SeedableRng};
use rand_pcg::Pcg64Mcg;
use serde_json::Value;

#[derive(Debug, Clone)]
pub struct HddParams {
    pub rpm: f64,
    pub track_to_track_ms: f64,
    pub average_seek_ms: f64,
    pub full_stroke_ms: f64,
    /// Sustained media transfer rate, bytes/s.
    pub media_bytes_per_s: f64,
    /// Interface rate for data already in the drive's buffer, bytes/s.
    pub interface_bytes_per_s: f64,
    /// How far past the last read the drive keeps reading ahead, bytes.
    pub read_ahead_bytes: u64,
    pub capacity: u64,
    /// Address ranges whose requests take `factor` times their service time.
    pub slow: SlowRegions,
}

impl HddParams {
    pub fn from_spec(spec: &Value) -> Result<HddParams, String> {
        let capacity = number(spec, "capacity_bytes")? as u64;
        let p = HddParams {
            rpm: number(spec, "rpm")?,
            track_to_track_ms: number(spec, "track_to_track_ms")?,
            average_seek_ms: number(spec, "average_seek_ms")?,
            full_stroke_ms: number(spec, "full_stroke_ms")?,
            media_bytes_per_s: number(spec, "media_mb_per_s")? * 1e6,
            interface_bytes_per_s: number(spec, "interface_mb_per_s")? * 1e6,
            read_ahead_bytes: number(spec, "read_ahead_kib")? as u64 * 1024,
            capacity,
            slow: SlowRegions::from_spec(spec, capacity)?,
        };
        let ordered =
            p.track_to_track_ms < p.average_seek_ms && p.average_seek_ms < p.full_stroke_ms;
        if !ordered {
            return Err(
                "hdd seeks must satisfy track_to_track_ms < average_seek_ms < full_stroke_ms"
                    .into(),
            );
        }
        if p.rpm <= 0.0
            || p.media_bytes_per_s <= 0.0
            || p.interface_bytes_per_s <= 0.0
            || p.capacity == 0
        {
            return Err(
                "hdd rpm, media_mb_per_s, interface_mb_per_s and capacity_bytes must be positive"
                    .into(),
            );
        }
        Ok(p)
    }

    /// The exponent of the seek curve that gives the datasheet's average seek.
    pub fn seek_exponent(&self) -> f64 {
        let r = (self.average_seek_ms - self.track_to_track_ms)
            / (self.full_stroke_ms - self.track_to_track_ms);
        ((1.0 + 8.0 / r).sqrt() - 3.0) / 2.0
    }

    pub fn revolution_ns(&self) -> f64 {
        60e9 / self.rpm
    }
}

pub struct Hdd {
    p: HddParams,
    exponent: f64,
    revolution_ns: f64,
    /// 1 / capacity and the transfer rates, per ns and per byte (multiplied on every request,
    /// not divided).
    per_capacity: f64,
    media_ns_per_byte: f64,
    media_bytes_per_ns: f64,
    interface_ns_per_byte: f64,
    /// Bytes under the head in one revolution: a jump shorter than this needs no seek.
    track_bytes: u64,
    rng: Pcg64Mcg,
    free_at: u64,
    /// Byte just past the last media access; `None` before the first.
    head: Option<u64>,
    last_was_read: bool,
    busy_ns: u64,
}

pub fn build(spec: &Value, seed: u64) -> Result<Box<dyn Device>, String> {
    Ok(Box::new(Hdd::new(HddParams::from_spec(spec)?, seed)))
}

impl Hdd {
    pub fn new(p: HddParams, seed: u64) -> Hdd {
        let revolution_ns = p.revolution_ns();
        Hdd {
            exponent: p.seek_exponent(),
            track_bytes: (p.media_bytes_per_s * revolution_ns / 1e9) as u64,
            revolution_ns,
            per_capacity: 1.0 / p.capacity as f64,
            media_ns_per_byte: 1e9 / p.media_bytes_per_s,
            media_bytes_per_ns: p.media_bytes_per_s / 1e9,
            interface_ns_per_byte: 1e9 / p.interface_bytes_per_s,
            rng: Pcg64Mcg::seed_from_u64(seed ^ 0x4844_4400),
            free_at: 0,
            head: None,
            last_was_read: false,
            busy_ns: 0,
            p,
        }
    }

    fn seek_ns(&self, distance: u64) -> f64 {
        let d = (float(distance) * self.per_capacity).min(1.0);
        let span = self.p.full_stroke_ms - self.p.track_to_track_ms;
        (self.p.track_to_track_ms + span * d.powf(self.exponent)) * 1e6
    }

    /// Service time of `r` if it starts at `start`.
    fn service_ns(&mut self, r: &SimRequest, start: u64) -> u64 {
        if r.size == 0 || r.op > 1 {
            return 0; // flushes and trims move no data on this model
        }
        let size = r.size as u64;
        let end = r.offset + size;
        let Some(head) = self.head else {
            // first request: an average seek and a random rotational position
            let seek = self.seek_ns(self.p.capacity / 3) as u64;
            return seek + self.rotation_ns() + transfer_ns(size, self.media_ns_per_byte);
        };
        let forward = r.offset >= head && r.offset - head <= self.p.read_ahead_bytes;
        if r.op == 0 && forward && self.last_was_read {
            // the drive kept reading past `head` while idle: what it buffered comes at interface
            // speed; the media then streams on (skipped bytes pass under the head) up to `end`
            let idle = start.saturating_sub(self.free_at);
            let read_ahead = whole(float(idle) * self.media_bytes_per_ns);
            let buffered_to = head + read_ahead.min(self.p.read_ahead_bytes);
            let from_buffer = end.min(buffered_to).saturating_sub(r.offset);
            let from_media = end.saturating_sub(buffered_to);
            return transfer_ns(from_buffer, self.interface_ns_per_byte)
                + transfer_ns(from_media, self.media_ns_per_byte);
        }
        if r.offset == head {
            // continuing exactly where the last access ended: no positioning
            return transfer_ns(size, self.media_ns_per_byte);
        }
        let distance = head.abs_diff(r.offset);
        let seek = if distance < self.track_bytes {
            0
        } else {
            whole(self.seek_ns(distance))
        };
        seek + self.rotation_ns() + transfer_ns(size, self.media_ns_per_byte)
    }

    /// When the disk finishes what it has queued.
    pub fn free_at(&self) -> u64 {
        self.free_at
    }

    /// Byte just past the last media access.
    pub fn head(&self) -> u64 {
        self.head.unwrap_or(0)
    }

    fn rotation_ns(&mut self) -> u64 {
        whole(self.rng.random::<f64>() * self.revolution_ns)
    }
}

impl Device for Hdd {
    fn submit(&mut self, r: &SimRequest) -> u64 {
        let start = r.arrival_ns.max(self.free_at);
        let nominal = self.service_ns(r, start);
        let service = self.p.slow.scale(r.offset, nominal);
        self.free_at = start + service;
        self.busy_ns += service;
        if r.size > 0 && r.op <= 1 {
            self.head = Some(r.offset + r.size as u64);
            self.last_was_read = r.op == 0;
        }
        self.free_at
    }

    fn busy_ns(&self) -> u64 {
        self.busy_ns
    }

    fn report(&self) -> DeviceReport {
        DeviceReport {
            busy_ns: self.busy_ns,
            servers: 1,
            ..Default::default()
        }
    }

    fn capacity(&self) -> u64 {
        self.p.capacity
    }
}
