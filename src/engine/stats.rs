//! What a run measured: per stream and overall HdrHistograms of lateness, service latency
//! and response time, a per-second timeline, and (for `--record`) every request's times.

use hdrhistogram::Histogram;
use std::collections::BTreeMap;

/// Times of one request, nanoseconds since the run's start.
#[derive(Debug, Clone, Copy)]
pub struct Timed {
    pub sched_ns: i64,
    pub issue_ns: i64,
    pub done_ns: i64,
    pub stream: u32,
    pub op: u8,
    /// Where the request went on the target: file (index into the target's files), offset.
    pub file: u32,
    pub offset: u64,
    pub size: u32,
    pub res: i64,
    /// The request as the source (model or trace) gave it, before mapping onto the target.
    pub model_offset: u64,
    pub model_size: u32,
}

fn histogram() -> Histogram<u64> {
    // 3 significant digits, auto-resizing: nanoseconds up to hours
    Histogram::new(3).expect("valid histogram precision")
}

/// One stream's (or the whole run's) counts and histograms.
#[derive(Debug, Clone)]
pub struct StreamStats {
    pub requests: u64,
    pub reads: u64,
    pub writes: u64,
    pub bytes: u64,
    pub errors: u64,
    pub lateness: Histogram<u64>,
    pub service: Histogram<u64>,
    pub response: Histogram<u64>,
}

impl Default for StreamStats {
    fn default() -> Self {
        StreamStats {
            requests: 0,
            reads: 0,
            writes: 0,
            bytes: 0,
            errors: 0,
            lateness: histogram(),
            service: histogram(),
            response: histogram(),
        }
    }
}

impl StreamStats {
    fn add(&mut self, t: &Timed, ok: bool) {
        self.requests += 1;
        match t.op {
            0 => self.reads += 1,
            1 => self.writes += 1,
            _ => {}
        }
        if !ok {
            self.errors += 1;
            return;
        }
        self.bytes += t.size as u64;
        // `record` grows the histogram (saturating_record would clamp to its initial range)
        let late = (t.issue_ns - t.sched_ns).max(0) as u64;
        let _ = self.lateness.record(late);
        let _ = self.service.record((t.done_ns - t.issue_ns).max(0) as u64);
        let _ = self.response.record((t.done_ns - t.sched_ns).max(0) as u64);
    }
}

/// One second of the run (by completion time).
#[derive(Debug, Clone, Copy, Default)]
pub struct Second {
    pub requests: u64,
    pub reads: u64,
    pub writes: u64,
    pub bytes: u64,
}

/// Every request's times, for `--record` (columns): the source's address and size, and
/// where it went on the target.
#[derive(Debug, Clone, Default)]
pub struct Record {
    pub sched_ns: Vec<i64>,
    pub issue_ns: Vec<i64>,
    pub done_ns: Vec<i64>,
    pub stream: Vec<u32>,
    pub op: Vec<u8>,
    pub offset: Vec<u64>,
    pub size: Vec<u32>,
    pub file: Vec<u32>,
    pub target_offset: Vec<u64>,
    pub target_size: Vec<u32>,
}

/// The result of a run.
#[derive(Debug, Clone, Default)]
pub struct RunResult {
    pub total: StreamStats,
    pub streams: BTreeMap<u32, StreamStats>,
    pub timeline: Vec<Second>,
    /// From the start to the last completion.
    pub elapsed_ns: i64,
    /// Stopped early (signal): what was issued was drained and measured.
    pub partial: bool,
    pub first_error: Option<String>,
    /// Requests the engine does not issue (trim, or aimed at an empty replica file).
    pub skipped: u64,
    /// Replica files: requests folded from a file's padding into it, and cut at its end.
    pub folded: u64,
    pub clamped: u64,
    pub max_inflight_seen: usize,
    /// The schedule's start on the clock: the timeline counts seconds from it.
    pub origin_ns: i64,
    pub record: Option<Record>,
}

impl RunResult {
    /// Sums the streams into `total` (histograms merged exactly).
    pub fn finish(&mut self) {
        let mut total = StreamStats::default();
        for s in self.streams.values() {
            total.requests += s.requests;
            total.reads += s.reads;
            total.writes += s.writes;
            total.bytes += s.bytes;
            total.errors += s.errors;
            for (sum, part) in [
                (&mut total.lateness, &s.lateness),
                (&mut total.service, &s.service),
                (&mut total.response, &s.response),
            ] {
                sum.add(part).expect("auto-resizing histograms merge");
            }
        }
        self.total = total;
    }

    pub fn new(record: bool) -> RunResult {
        RunResult {
            record: record.then(Record::default),
            ..Default::default()
        }
    }

    pub fn add(&mut self, t: &Timed) {
        let ok = t.res >= 0 && (t.op > 1 || t.res as u64 == t.size as u64);
        if !ok && self.first_error.is_none() {
            self.first_error = Some(if t.res < 0 {
                format!(
                    "{} at offset {}: {}",
                    if t.op == 1 { "write" } else { "read" },
                    t.offset,
                    std::io::Error::from_raw_os_error((-t.res) as i32)
                )
            } else {
                format!(
                    "short transfer at offset {}: {} of {} bytes",
                    t.offset, t.res, t.size
                )
            });
        }
        // the whole run's figures are the streams' merged once at the end (`finish`): half
        // the histogram work per request
        self.streams.entry(t.stream).or_default().add(t, ok);
        if ok {
            let sec = ((t.done_ns - self.origin_ns).max(0) / 1_000_000_000) as usize;
            if self.timeline.len() <= sec {
                self.timeline.resize(sec + 1, Second::default());
            }
            let s = &mut self.timeline[sec];
            s.requests += 1;
            s.bytes += t.size as u64;
            match t.op {
                0 => s.reads += 1,
                1 => s.writes += 1,
                _ => {}
            }
        }
        self.elapsed_ns = self.elapsed_ns.max(t.done_ns);
        if let Some(r) = self.record.as_mut() {
            r.sched_ns.push(t.sched_ns);
            r.issue_ns.push(t.issue_ns);
            r.done_ns.push(t.done_ns);
            r.stream.push(t.stream);
            r.op.push(t.op);
            r.offset.push(t.model_offset);
            r.size.push(t.model_size);
            r.file.push(t.file);
            r.target_offset.push(t.offset);
            r.target_size.push(t.size);
        }
    }
}
