//! Pacing: requests leave at absolute deadlines (start + scheduled time), never relative to
//! the previous one, so a late request does not shift the ones after it. Waiting is a coarse
//! wait on the backend's completions (which are reaped meanwhile) until `SPIN_NS` before the
//! deadline, then a busy-wait, so lateness stays in microseconds.

use super::stats::{RunResult, Timed};
use super::{Backend, Clock, Config, Done, Mode, Placed, Progress};
use crate::model::sample::Synthesized;
use std::sync::atomic::Ordering;
use std::time::Duration;

/// The last stretch before a deadline is busy-waited.
pub const SPIN_NS: i64 = 50_000;
/// How long one wait for completions lasts at most (the stop flag is checked in between).
const MAX_WAIT_NS: i64 = 20_000_000;

/// A request in flight.
#[derive(Debug, Clone, Copy)]
struct Slot {
    sched_ns: i64,
    issue_ns: i64,
    /// The source's request, before mapping.
    req: Synthesized,
    /// Where it goes on the target.
    at: Placed,
}

struct Driver<'a> {
    backend: &'a mut dyn Backend,
    clock: Clock,
    progress: &'a Progress,
    slots: Vec<Option<Slot>>,
    free: Vec<usize>,
    done: Vec<Done>,
    result: RunResult,
    /// Requests issued so far (published to `progress` at each reap).
    issued: u64,
}

impl Driver<'_> {
    fn inflight(&self) -> usize {
        self.slots.len() - self.free.len()
    }

    /// Reaps completions, waiting up to `wait` for the first.
    fn reap(&mut self, wait: Option<Duration>) -> Result<(), String> {
        self.done.clear();
        let mut done = std::mem::take(&mut self.done);
        self.backend
            .reap(wait, &mut done)
            .map_err(|e| format!("waiting for completions: {e}"))?;
        let now = self.clock.now_ns();
        // progress counters are updated once per batch: atomic read-modify-writes per
        // request cost the closed loop measurable IOPS
        let (mut bytes, mut errors, mut max_late) = (0u64, 0u64, i64::MIN);
        for d in &done {
            let Some(s) = self.slots[d.slot].take() else {
                continue;
            };
            self.free.push(d.slot);
            let t = Timed {
                sched_ns: s.sched_ns,
                issue_ns: d.issue_ns.unwrap_or(s.issue_ns),
                done_ns: d.done_ns.unwrap_or(now),
                stream: s.req.stream,
                op: s.req.op,
                file: s.at.file,
                offset: s.at.offset,
                size: s.at.size,
                res: d.res,
                model_offset: s.req.offset,
                model_size: s.req.size,
            };
            self.result.add(&t);
            if d.res >= 0 {
                bytes += s.at.size as u64;
            } else {
                errors += 1;
            }
            max_late = max_late.max(t.issue_ns - t.sched_ns);
        }
        let p = self.progress;
        p.completed.fetch_add(done.len() as u64, Ordering::Relaxed);
        p.bytes.fetch_add(bytes, Ordering::Relaxed);
        if errors > 0 {
            p.errors.fetch_add(errors, Ordering::Relaxed);
        }
        p.max_late_ns.fetch_max(max_late, Ordering::Relaxed);
        p.issued.store(self.issued, Ordering::Relaxed);
        p.elapsed_ns.store(now, Ordering::Relaxed);
        self.done = done;
        Ok(())
    }

    /// Waits until `deadline` (ns since start), reaping completions meanwhile. Returns
    /// false when asked to stop.
    fn wait_until(&mut self, deadline: i64) -> Result<bool, String> {
        loop {
            if self.progress.stopping() {
                return Ok(false);
            }
            let left = deadline - self.clock.now_ns();
            if left <= 0 {
                return Ok(true);
            }
            if left > SPIN_NS {
                let wait = (left - SPIN_NS).min(MAX_WAIT_NS);
                if self.inflight() > 0 {
                    self.reap(Some(Duration::from_nanos(wait as u64)))?;
                } else {
                    std::thread::sleep(Duration::from_nanos(wait as u64));
                }
            } else {
                if self.inflight() > 0 {
                    self.reap(None)?;
                }
                std::hint::spin_loop();
            }
        }
    }

    /// Submits what is queued.
    fn flush(&mut self) -> Result<(), String> {
        self.backend
            .flush()
            .map_err(|e| format!("submitting I/O: {e}"))
    }

    /// Waits for a free slot. Returns false when asked to stop.
    fn wait_slot(&mut self) -> Result<bool, String> {
        if self.free.is_empty() {
            self.flush()?;
        }
        while self.free.is_empty() {
            if self.progress.stopping() {
                return Ok(false);
            }
            self.reap(Some(Duration::from_nanos(MAX_WAIT_NS as u64)))?;
        }
        Ok(true)
    }

    /// Issues the source's request `req` at its place `at` on the target.
    /// `issue_ns`: the clock read just before (the closed loop's schedule is that moment).
    fn issue(
        &mut self,
        req: &Synthesized,
        at: Placed,
        sched_ns: i64,
        issue_ns: i64,
    ) -> Result<(), String> {
        let slot = self.free.pop().expect("a free slot");
        self.slots[slot] = Some(Slot {
            sched_ns,
            issue_ns,
            req: *req,
            at,
        });
        self.backend
            .submit(slot, at.file as usize, req.op, at.offset, at.size)
            .map_err(|e| format!("submitting I/O: {e}"))?;
        self.issued += 1;
        self.result.max_inflight_seen = self.result.max_inflight_seen.max(self.inflight());
        Ok(())
    }

    fn drain(&mut self) -> Result<(), String> {
        self.flush()?;
        while self.inflight() > 0 {
            self.reap(Some(Duration::from_nanos(MAX_WAIT_NS as u64)))?;
        }
        Ok(())
    }
}

/// Runs `source` against the backend in the configured mode.
pub fn drive(
    cfg: &Config,
    source: impl Iterator<Item = Synthesized>,
    backend: &mut dyn Backend,
    clock: Clock,
    progress: &Progress,
) -> Result<RunResult, String> {
    let n = match cfg.mode {
        Mode::Open => cfg.max_inflight.max(1),
        Mode::Closed { iodepth } => iodepth.max(1),
    };
    let mut d = Driver {
        backend,
        clock,
        progress,
        slots: vec![None; n],
        free: (0..n).rev().collect(),
        done: Vec::new(),
        result: RunResult::new(cfg.record),
        issued: 0,
    };
    // the schedule starts a moment after the engine is ready, so the first requests are not
    // late because of setup
    let start = clock.now_ns() + 1_000_000;
    d.result.origin_ns = start;
    let mut stopped = false;
    for r in source {
        if r.op == 3 {
            d.result.skipped += 1; // trim: not issued
            continue;
        }
        let Some(mut at) = cfg.layout.place(r.offset, r.size) else {
            if matches!(cfg.layout, super::Layout::Files(_)) {
                d.result.skipped += 1; // an empty replica file
                continue;
            }
            return Err("the target is smaller than one block".into());
        };
        d.result.folded += at.folded as u64;
        d.result.clamped += at.clamped as u64;
        if r.op == 2 {
            at.size = 0;
        }
        let (sched, now) = match cfg.mode {
            Mode::Open => {
                let sched = start + r.ts_ns;
                if !d.wait_until(sched)? || !d.wait_slot()? {
                    stopped = true;
                    break;
                }
                (sched, d.clock.now_ns())
            }
            Mode::Closed { .. } => {
                if !d.wait_slot()? {
                    stopped = true;
                    break;
                }
                let now = d.clock.now_ns();
                if cfg.duration_ns.is_some_and(|limit| now - start >= limit) {
                    break;
                }
                (now, now)
            }
        };
        d.issue(&r, at, sched, now)?;
        // each request goes out when it is issued: on time in the open loop; in the closed
        // loop with O_DIRECT a freed slot is refilled at once, as fio does (batching the
        // refills until every slot was free let the device queue drain: 16 completions per
        // wake-up, 0.75x fio's IOPS; refilling at once: 0.95x). Buffered reads of cached data
        // complete inside the submitting call, so there a batch per wait saves system calls
        // (measured 5% more IOPS than refilling at once).
        if cfg.direct || matches!(cfg.mode, Mode::Open) {
            d.flush()?;
        }
        if matches!(cfg.mode, Mode::Open) && d.inflight() > 0 {
            d.reap(None)?;
        }
    }
    d.drain()?;
    d.progress.issued.store(d.issued, Ordering::Relaxed);
    let mut result = d.result;
    result.finish();
    result.partial = stopped || progress.stopping();
    // times from the schedule's start
    shift(&mut result, start);
    Ok(result)
}

/// Makes every time relative to the schedule's start.
fn shift(r: &mut RunResult, start: i64) {
    r.elapsed_ns = (r.elapsed_ns - start).max(0);
    if let Some(rec) = r.record.as_mut() {
        for v in [&mut rec.sched_ns, &mut rec.issue_ns, &mut rec.done_ns] {
            for t in v.iter_mut() {
                *t -= start;
            }
        }
    }
}
