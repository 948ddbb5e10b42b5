//! The storage simulator: trace-driven, discrete-event, open loop. Requests arrive at their
//! (intensity-scaled) trace times whatever is still queued; each device is a work-conserving
//! queue, so a response time is queueing plus service and saturation shows as growing queues.

pub mod cache;
pub mod device;

use device::{Device, DeviceReport, SimRequest};

/// How many requests ahead the simulator passes a device its prefetch hint: a device's
/// request takes a few times a bare cache access, so fewer than `cache::PREFETCH_AHEAD`
/// (measured on the 4 KiB block stream of bench/sim: 2, 4 and 8 alike, 16 and 32 slower).
const PREFETCH_AHEAD: usize = 4;

/// What one simulation measured.
#[derive(Debug, Clone)]
pub struct SimResult {
    pub requests: u64,
    /// First arrival to last arrival, and first arrival to last completion, ns.
    pub arrival_span_ns: u64,
    pub completion_span_ns: u64,
    /// Every request's response time (completion - arrival), ns, in trace order.
    pub response_ns: Vec<u64>,
    /// The busy time each request added to the device (per server), ns: its demand.
    pub demand_ns: Vec<u64>,
    pub device: DeviceReport,
}

impl SimResult {
    pub fn mean_response_ns(&self) -> f64 {
        if self.response_ns.is_empty() {
            return 0.0;
        }
        self.response_ns.iter().map(|&r| r as f64).sum::<f64>() / self.response_ns.len() as f64
    }
}

/// Scales trace times by 1/intensity (intensity 2 = requests arrive twice as fast), given
/// as `per_intensity` = 1 / intensity (a multiply per request, not a divide).
pub fn arrival_ns(ts_ns: i64, first_ns: i64, per_intensity: f64) -> u64 {
    round_ns((ts_ns - first_ns).max(0) as f64 * per_intensity)
}

/// `n as f64` for n < 2^63, through i64: one instruction (a u64 takes a branchless dozen on
/// x86-64 without AVX-512, and the device models convert on every request).
#[inline]
pub fn float(n: u64) -> f64 {
    n as i64 as f64
}

/// `v as u64` for 0 <= v < 2^63, through i64 (see `float`).
#[inline]
pub fn whole(v: f64) -> u64 {
    v as i64 as u64
}

/// `v.round() as u64` for 0 <= v < 2^53, inline: f64::round is a libm call on baseline
/// x86-64 (no SSE4.1) and was a twentieth of the tiered device's time. It converts through
/// i64, one instruction each way (u64 conversions take a dozen without AVX-512).
#[inline]
pub fn round_ns(v: f64) -> u64 {
    let whole = v as i64;
    // exact: v and its whole part are within 1 of each other
    (whole + i64::from(v - whole as f64 >= 0.5)) as u64
}

/// Runs the requests through `device` in order; `offset`s must fit its capacity.
pub fn simulate(
    device: &mut dyn Device,
    ts_ns: &[i64],
    op: &[u8],
    offset: &[u64],
    size: &[u32],
    intensity: f64,
) -> Result<SimResult, String> {
    let capacity = device.capacity();
    let first = ts_ns.first().copied().unwrap_or(0);
    let per_intensity = 1.0 / intensity;
    let mut response_ns = Vec::with_capacity(ts_ns.len());
    let mut demand_ns = Vec::with_capacity(ts_ns.len());
    let mut last_done = 0u64;
    let mut last_arrival = 0u64;
    for i in 0..ts_ns.len() {
        if let (Some(&ahead), Some(&bytes)) =
            (offset.get(i + PREFETCH_AHEAD), size.get(i + PREFETCH_AHEAD))
        {
            device.prefetch(ahead, bytes);
        }
        let end = offset[i] + size[i] as u64;
        if end > capacity {
            return Err(format!(
                "request {i} ends at byte {end}, past the device's capacity of {capacity} bytes"
            ));
        }
        let r = SimRequest {
            arrival_ns: arrival_ns(ts_ns[i], first, per_intensity),
            op: op[i],
            offset: offset[i],
            size: size[i],
        };
        let busy = device.busy_ns();
        let done = device.submit(&r);
        response_ns.push(done - r.arrival_ns);
        demand_ns.push(device.busy_ns() - busy);
        last_done = last_done.max(done);
        last_arrival = r.arrival_ns;
    }
    Ok(SimResult {
        requests: ts_ns.len() as u64,
        arrival_span_ns: last_arrival,
        completion_span_ns: last_done,
        response_ns,
        demand_ns,
        device: device.report(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_ns_equals_f64_round() {
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        let halves = [
            0.0,
            0.5,
            1.5,
            2.5,
            0.499_999_999_999_999_94,
            4_503_599_627_370_495.5,
        ];
        let randoms = (0..100_000).map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 11) as f64 / (1u64 << 53) as f64 * 10f64.powi((x % 16) as i32)
        });
        for v in halves.into_iter().chain(randoms) {
            assert_eq!(round_ns(v), v.round() as u64, "{v}");
        }
    }
}
