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

/// A trace's requests, column by column (equal lengths).
pub struct Requests<'a> {
    pub ts_ns: &'a [i64],
    pub op: &'a [u8],
    pub offset: &'a [u64],
    pub size: &'a [u32],
    /// Each request's address space (`SimRequest::space`); None: one space.
    pub space: Option<&'a [u32]>,
}

/// What `simulate` writes per request, in trace order, into the caller's arrays (Python's:
/// no copy of two arrays the size of the trace).
pub struct PerRequest<'a> {
    /// Response time (completion - arrival), ns.
    pub response_ns: &'a mut [u64],
    /// The busy time the request added to the device (per server), ns: its demand.
    pub demand_ns: &'a mut [u64],
}

/// What one simulation measured besides `PerRequest`.
#[derive(Debug, Clone)]
pub struct SimResult {
    pub requests: u64,
    /// First arrival to last arrival, and first arrival to last completion, ns.
    pub arrival_span_ns: u64,
    pub completion_span_ns: u64,
    pub device: DeviceReport,
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
/// x86-64 (no SSE4.1) and was a twentieth of the tiered device's time (conversions as
/// `float` and `whole`).
#[inline]
pub fn round_ns(v: f64) -> u64 {
    let w = whole(v);
    // exact: v and its whole part are within 1 of each other
    w + u64::from(v - float(w) >= 0.5)
}

/// Runs the requests through `device` in order, filling `out`; `offset`s must fit its
/// capacity and `out` must hold one entry per request.
pub fn simulate(
    device: &mut dyn Device,
    req: &Requests,
    intensity: f64,
    out: PerRequest,
) -> Result<SimResult, String> {
    let Requests {
        ts_ns,
        op,
        offset,
        size,
        space,
    } = *req;
    let n = ts_ns.len();
    let space_of = |i: usize| space.map_or(0, |s| s[i]);
    if [
        op.len(),
        space.map_or(n, <[u32]>::len),
        offset.len(),
        size.len(),
        out.response_ns.len(),
        out.demand_ns.len(),
    ]
    .iter()
    .any(|&len| len != n)
    {
        return Err(format!("every column and output must hold {n} requests"));
    }
    if let Some(i) = space.and_then(|s| s.iter().position(|&x| x as u64 >= device::SPACES)) {
        return Err(format!(
            "request {i} is in address space {}, past the {} a simulation holds",
            space_of(i),
            device::SPACES
        ));
    }
    let capacity = device.capacity();
    let first = ts_ns.first().copied().unwrap_or(0);
    let per_intensity = 1.0 / intensity;
    let mut last_done = 0u64;
    let mut last_arrival = 0u64;
    let mut busy = device.busy_ns(); // only `submit` adds to it
    for i in 0..n {
        if let (Some(&ahead), Some(&bytes)) =
            (offset.get(i + PREFETCH_AHEAD), size.get(i + PREFETCH_AHEAD))
        {
            device.prefetch(space_of(i + PREFETCH_AHEAD), ahead, bytes);
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
            space: space_of(i),
        };
        let done = device.submit(&r);
        let busy_after = device.busy_ns();
        out.response_ns[i] = done - r.arrival_ns;
        out.demand_ns[i] = busy_after - busy;
        busy = busy_after;
        last_done = last_done.max(done);
        last_arrival = r.arrival_ns;
    }
    Ok(SimResult {
        requests: n as u64,
        arrival_span_ns: last_arrival,
        completion_span_ns: last_done,
        device: device.report(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_a_space_past_the_keys() {
        let spec = serde_json::json!({"kind": "hdd", "rpm": 7200, "average_seek_ms": 8.5,
            "track_to_track_ms": 1.0, "full_stroke_ms": 18.0, "media_mb_per_s": 175,
            "interface_mb_per_s": 600, "read_ahead_kib": 1024, "capacity_bytes": 1u64 << 36});
        let mut dev = device::build(&spec, 1).unwrap();
        let space = [0, device::SPACES as u32];
        let req = Requests {
            ts_ns: &[0, 1_000_000],
            op: &[0, 0],
            offset: &[0, 4096],
            size: &[4096, 4096],
            space: Some(&space),
        };
        let (mut resp, mut demand) = ([0u64; 2], [0u64; 2]);
        let out = PerRequest {
            response_ns: &mut resp,
            demand_ns: &mut demand,
        };
        let err = simulate(dev.as_mut(), &req, 1.0, out).unwrap_err();
        assert!(
            err.starts_with("request 1 is in address space 1048576"),
            "{err}"
        );
    }

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
