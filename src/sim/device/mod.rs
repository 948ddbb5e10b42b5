//! Device models of the simulator behind one small interface, and the registry that builds
//! them from a JSON spec (`{"kind": "hdd", ...}`; the Python side expands named presets).
//!
//! Every device is a work-conserving queue fed in arrival order (open loop): a request that
//! arrives while the device is busy waits, so response time = queueing + service.

pub mod hdd;
pub mod ssd;
pub mod tiered;
mod writeback;

use serde_json::Value;

/// One request as the simulator sees it: arrival time (already scaled by intensity).
#[derive(Debug, Clone, Copy)]
pub struct SimRequest {
    pub arrival_ns: u64,
    pub op: u8,
    pub offset: u64,
    pub size: u32,
    /// The request's address space (its volume, where several share the device; else 0):
    /// equal offsets of different spaces are different data to a cache, though the same
    /// place to the head.
    pub space: u32,
}

/// A block's key holds its address space above this many bits of block number (as
/// `cache.SPACE_SHIFT` does in Python: no device holds 2^44 blocks of 4 KiB).
pub const SPACE_SHIFT: u32 = 44;
/// Address spaces a simulation may hold: the space ids that fit above the block bits.
pub const SPACES: u64 = 1 << (64 - SPACE_SHIFT);

/// Counters a device reports after a run.
#[derive(Debug, Clone, Default)]
pub struct DeviceReport {
    /// Time the device (every channel summed, for SSDs) spent serving, ns.
    pub busy_ns: u64,
    /// Parallel servers (1 for an HDD, channels for an SSD): utilisation = busy / (servers * span).
    pub servers: u32,
    /// For tiered devices: 4 KiB block hits and misses, blocks written back, and the parts.
    pub cache_hits: u64,
    pub cache_misses: u64,
    pub writebacks: u64,
    pub parts: Vec<(String, DeviceReport)>,
}

pub trait Device: Send {
    /// Serves `r`, queued behind earlier requests; returns its completion time, ns.
    fn submit(&mut self, r: &SimRequest) -> u64;
    fn report(&self) -> DeviceReport;
    /// Busy time so far, ns, per server (the bottleneck tier's, for a tiered device).
    fn busy_ns(&self) -> u64;
    /// Bytes the device holds; requests must fall inside.
    fn capacity(&self) -> u64;
    /// A hint that a request for `size` bytes at `offset` of address space `space` comes
    /// soon (a cache fetches its lookups' memory).
    fn prefetch(&self, _space: u32, _offset: u64, _size: u32) {}
}

/// Builds a device from its JSON spec and a seed.
pub type Builder = fn(&Value, u64) -> Result<Box<dyn Device>, String>;

pub struct DeviceKind {
    pub name: &'static str,
    pub about: &'static str,
    pub build: Builder,
}

/// The one registry of device models.
pub const DEVICE_KINDS: &[DeviceKind] = &[
    DeviceKind {
        name: "hdd",
        about: "rotating disk: seek curve, rotation, media transfer, read-ahead track buffer",
        build: hdd::build,
    },
    DeviceKind {
        name: "ssd",
        about: "flash: 4 KiB page operations striped over parallel channels",
        build: ssd::build,
    },
    DeviceKind {
        name: "tiered",
        about: "an SSD cache of 4 KiB blocks over an HDD, pluggable policy, write-back or -through",
        build: tiered::build,
    },
];

/// Builds a device from its spec; `seed` drives its random parts (rotational position).
pub fn build(spec: &Value, seed: u64) -> Result<Box<dyn Device>, String> {
    let kind = spec
        .get("kind")
        .and_then(Value::as_str)
        .ok_or("device spec needs a \"kind\"")?;
    let entry = DEVICE_KINDS
        .iter()
        .find(|k| k.name == kind)
        .ok_or_else(|| {
            let known: Vec<_> = DEVICE_KINDS.iter().map(|k| k.name).collect();
            format!("unknown device kind {kind:?} (known: {})", known.join(", "))
        })?;
    (entry.build)(spec, seed)
}

/// A required positive number of a spec, with the field named in the error.
pub fn number(spec: &Value, field: &str) -> Result<f64, String> {
    match spec.get(field).and_then(Value::as_f64) {
        Some(v) if v.is_finite() && v >= 0.0 => Ok(v),
        Some(v) => Err(format!(
            "device field {field:?} must be a non-negative number, got {v}"
        )),
        None => Err(format!("device spec lacks the number {field:?}")),
    }
}

/// Service time of `bytes` at `ns_per_byte` (1e9 / bytes per second, kept by the device: a
/// multiply on every request, not a divide), ns.
pub fn transfer_ns(bytes: u64, ns_per_byte: f64) -> u64 {
    crate::sim::round_ns(crate::sim::float(bytes) * ns_per_byte)
}

/// Address ranges served slower by a factor (`"slow_regions": [[start, end, factor], ...]`),
/// for injecting a slow zone (a failing area, a remapped band) that a stress study must find.
#[derive(Debug, Clone, Default)]
pub struct SlowRegions(Vec<(u64, u64, f64)>);

impl SlowRegions {
    /// The optional `slow_regions` field of a spec, checked against the device's capacity.
    pub fn from_spec(spec: &Value, capacity: u64) -> Result<SlowRegions, String> {
        let Some(field) = spec.get("slow_regions") else {
            return Ok(SlowRegions::default());
        };
        let items = field.as_array().ok_or(
            "device field \"slow_regions\" must be a list of [start_byte, end_byte, factor]",
        )?;
        let mut regions = Vec::with_capacity(items.len());
        for (i, item) in items.iter().enumerate() {
            let bad = |why: &str| format!("device field \"slow_regions\" entry {i}: {why}");
            let parts = item
                .as_array()
                .filter(|a| a.len() == 3)
                .ok_or_else(|| bad("expected [start_byte, end_byte, factor]"))?;
            let start = parts[0]
                .as_u64()
                .ok_or_else(|| bad("start_byte must be a whole number"))?;
            let end = parts[1]
                .as_u64()
                .ok_or_else(|| bad("end_byte must be a whole number"))?;
            let factor = parts[2]
                .as_f64()
                .ok_or_else(|| bad("factor must be a number"))?;
            if start >= end {
                return Err(bad(&format!(
                    "start_byte {start} must be below end_byte {end}"
                )));
            }
            if end > capacity {
                return Err(bad(&format!(
                    "end_byte {end} is past the device's capacity of {capacity} bytes"
                )));
            }
            if !(factor.is_finite() && factor > 0.0) {
                return Err(bad(&format!(
                    "factor must be a positive number, got {factor}"
                )));
            }
            regions.push((start, end, factor));
        }
        Ok(SlowRegions(regions))
    }

    /// The factor for a request starting at `offset` (1 outside every region; the product
    /// where regions overlap).
    pub fn factor(&self, offset: u64) -> f64 {
        self.0
            .iter()
            .filter(|&&(start, end, _)| (start..end).contains(&offset))
            .map(|&(_, _, f)| f)
            .product()
    }

    /// `service_ns` scaled by the factor at `offset`.
    pub fn scale(&self, offset: u64, service_ns: u64) -> u64 {
        if self.0.is_empty() {
            return service_ns;
        }
        crate::sim::round_ns(service_ns as f64 * self.factor(offset))
    }
}
