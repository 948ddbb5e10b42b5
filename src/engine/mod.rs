//! The I/O engine (design.md "The engine"): timed I/O on a file or block device.
//!
//! Open loop by default: every request has an absolute scheduled issue time and is issued
//! then, whatever is still in flight; completions never pace the issuing. Each request's
//! lateness (issue − scheduled), service latency (completion − issue) and response time
//! (completion − scheduled) go into HdrHistograms, so queueing is never hidden. A closed loop
//! with a fixed number of requests in flight exists only to compare with tools that work that
//! way.
//!
//! One file per I/O backend behind the small `Backend` trait (`io_uring.rs`, `threads.rs`),
//! pacing in `schedule.rs`, statistics in `stats.rs`. The engine is free of Python: the
//! binding runs it on its own thread and polls `Progress`.

pub mod cpus;
pub mod io_uring;
pub mod schedule;
pub mod stats;
pub mod threads;

use crate::columns::Columns;
use crate::model::sample::{Synth, Synthesized};
use std::io;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

pub use stats::RunResult;

/// The alignment O_DIRECT needs (the logical block of every device we target).
pub const DIRECT_ALIGN: u64 = 4096;

/// One finished request as a backend reports it. A backend that knows the exact moments
/// (a worker thread around its pread) fills `issue_ns` / `done_ns`; otherwise the engine
/// stamps them when it submits and reaps.
#[derive(Debug, Clone, Copy)]
pub struct Done {
    pub slot: usize,
    /// Bytes transferred, or a negative errno.
    pub res: i64,
    pub issue_ns: Option<i64>,
    pub done_ns: Option<i64>,
}

/// An I/O backend: submits requests into slots and reports their completions.
pub trait Backend {
    /// Queues one request (op 0 read, 1 write, 2 flush) on target file `file` using slot
    /// `slot`'s buffer; it is issued at the latest by the next `flush`.
    fn submit(
        &mut self,
        slot: usize,
        file: usize,
        op: u8,
        offset: u64,
        size: u32,
    ) -> io::Result<()>;
    /// Appends finished requests to `out`; waits up to `wait` for the first one when none is
    /// ready (None: never waits).
    fn reap(&mut self, wait: Option<std::time::Duration>, out: &mut Vec<Done>) -> io::Result<()>;
    /// Issues every queued request (one system call for many, where the backend can).
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Which backend runs the I/O.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    IoUring,
    Threads,
}

/// Nanoseconds since the run's start, shared with worker threads.
#[derive(Debug, Clone, Copy)]
pub struct Clock {
    start: Instant,
}

impl Clock {
    pub fn new() -> Clock {
        Clock {
            start: Instant::now(),
        }
    }

    pub fn now_ns(&self) -> i64 {
        self.start.elapsed().as_nanos() as i64
    }

    pub fn at(&self, ns: i64) -> Instant {
        self.start + std::time::Duration::from_nanos(ns.max(0) as u64)
    }
}

impl Default for Clock {
    fn default() -> Self {
        Clock::new()
    }
}

/// Where requests come from: a model synthesized on the fly, or a trace's own requests.
pub enum Source {
    Synth(Box<Synth>),
    Trace { cols: Columns, pos: usize },
}

impl Iterator for Source {
    type Item = Synthesized;

    fn next(&mut self) -> Option<Synthesized> {
        match self {
            Source::Synth(s) => s.next(),
            Source::Trace { cols, pos } => {
                let i = *pos;
                if i >= cols.len() {
                    return None;
                }
                *pos += 1;
                Some(Synthesized {
                    ts_ns: cols.ts_ns[i] - cols.ts_ns[0],
                    stream: cols.stream[i],
                    op: cols.op[i],
                    offset: cols.offset[i],
                    size: cols.size[i],
                })
            }
        }
    }
}

/// Maps the model's address space `[0, capacity)` proportionally onto the target
/// `[0, target)`, aligned, so that no request reaches outside the target.
#[derive(Debug, Clone, Copy)]
pub struct Mapper {
    pub capacity: u64,
    pub target: u64,
    pub align: u64,
}

impl Mapper {
    /// The usable target size: whole aligned blocks only.
    fn usable(&self) -> u64 {
        self.target / self.align.max(1) * self.align.max(1)
    }

    /// (offset, size) on the target; None when the target cannot hold one aligned block.
    pub fn map(&self, offset: u64, size: u32) -> Option<(u64, u32)> {
        let a = self.align.max(1);
        let usable = self.usable();
        if usable == 0 {
            return None;
        }
        let mut size = (size.max(1) as u64).div_ceil(a) * a;
        size = size.min(usable).min(u32::MAX as u64 / a * a);
        let scaled = if self.capacity == self.target || self.capacity == 0 {
            offset
        } else {
            (offset as u128 * self.target as u128 / self.capacity as u128) as u64
        };
        let mut off = scaled / a * a;
        if off + size > usable {
            off = (usable - size) / a * a;
        }
        Some((off, size as u32))
    }
}

/// One replica file's place on the model's virtual device (`layout.py`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Extent {
    pub base: u64,
    pub size: u64,
}

/// Where a request goes on the target.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Placed {
    pub file: u32,
    pub offset: u64,
    pub size: u32,
    /// Started in the padding after its file and was folded back into it.
    pub folded: bool,
    /// Crossed its file's end and was cut there.
    pub clamped: bool,
}

/// How the source's address space lands on the target.
#[derive(Debug, Clone)]
pub enum Layout {
    /// One file or device, proportionally.
    Proportional(Mapper),
    /// Replica files of a file-level model, sorted by base: a request inside a file keeps its
    /// offset there. The model places random requests anywhere in a leaf, including the
    /// padding that aligns each file's base, so one starting in the padding after a file
    /// folds back into that file (offset modulo its size) rather than being dropped, which
    /// would lower the rate; one crossing the file's end is cut at it.
    Files(Vec<Extent>),
}

impl Layout {
    /// The request's place; None when it cannot be placed (the target is smaller than one
    /// block, or its file is empty).
    pub fn place(&self, offset: u64, size: u32) -> Option<Placed> {
        match self {
            Layout::Proportional(m) => m.map(offset, size).map(|(offset, size)| Placed {
                file: 0,
                offset,
                size,
                folded: false,
                clamped: false,
            }),
            Layout::Files(files) => place_in_files(files, offset, size),
        }
    }
}

fn place_in_files(files: &[Extent], offset: u64, size: u32) -> Option<Placed> {
    let i = files.partition_point(|e| e.base <= offset).checked_sub(1)?;
    let e = files[i];
    if e.size == 0 {
        return None;
    }
    let rel = offset - e.base;
    let folded = rel >= e.size;
    let rel = rel % e.size;
    let end = (rel + size as u64).min(e.size);
    Some(Placed {
        file: i as u32,
        offset: rel,
        size: (end - rel) as u32,
        folded,
        clamped: end - rel < size as u64,
    })
}

/// Open or closed loop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Open,
    Closed { iodepth: usize },
}

/// What to run.
#[derive(Debug, Clone)]
pub struct Config {
    /// The target: one file or device, or the replica files `layout` places requests in.
    pub paths: Vec<PathBuf>,
    pub direct: bool,
    /// Open the target for writing (the workload has writes).
    pub write: bool,
    pub kind: Kind,
    pub mode: Mode,
    /// Open loop: requests in flight at most (a request due while all slots are busy waits,
    /// and its lateness shows it).
    pub max_inflight: usize,
    /// Wall-clock limit (closed mode, which ignores the schedule).
    pub duration_ns: Option<i64>,
    pub layout: Layout,
    /// Keep every request's times for `--record`.
    pub record: bool,
}

/// Live counters the caller polls while the engine runs.
#[derive(Debug, Default)]
pub struct Progress {
    pub issued: AtomicU64,
    pub completed: AtomicU64,
    pub bytes: AtomicU64,
    pub errors: AtomicU64,
    pub elapsed_ns: AtomicI64,
    /// Largest lateness since the last poll that reset it.
    pub max_late_ns: AtomicI64,
    pub stop: AtomicBool,
}

impl Progress {
    pub fn request_stop(&self) {
        self.stop.store(true, Ordering::Relaxed);
    }

    pub fn stopping(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }
}

/// Opens every target file as configured.
pub fn open_targets(cfg: &Config) -> Result<Vec<std::fs::File>, String> {
    use std::os::unix::fs::OpenOptionsExt;
    let mut o = std::fs::OpenOptions::new();
    o.read(true).write(cfg.write);
    if cfg.direct {
        o.custom_flags(libc::O_DIRECT);
    }
    let open = |path: &PathBuf| {
        o.open(path).map_err(|e| {
            if cfg.direct && e.raw_os_error() == Some(libc::EINVAL) {
                format!(
                    "{}: the filesystem does not support O_DIRECT (use --buffered)",
                    path.display()
                )
            } else {
                format!("{}: cannot open: {e}", path.display())
            }
        })
    };
    cfg.paths.iter().map(open).collect()
}

/// Runs the whole workload; returns the statistics (partial when stopped early). A closed
/// loop on cached data pins the calling thread to one CPU (`cpus`): call it on a thread of
/// its own.
pub fn run(cfg: &Config, source: Source, progress: Arc<Progress>) -> Result<RunResult, String> {
    let files = open_targets(cfg)?;
    let slots = match cfg.mode {
        Mode::Open => cfg.max_inflight.max(1),
        Mode::Closed { iodepth } => iodepth.max(1),
    };
    // the kernel may stretch a sleep by the thread's timer slack (50 µs by default), which
    // would eat the busy-wait margin: ask for 1 ns
    // SAFETY: prctl with PR_SET_TIMERSLACK only changes this thread's timer slack.
    unsafe {
        libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong, 0, 0, 0);
    }
    let clock = Clock::new();
    let closed = matches!(cfg.mode, Mode::Closed { .. });
    // closed-loop page-cache I/O: the engine keeps its core, the copies run on the others
    let split = (closed && !cfg.direct && cfg.kind == Kind::IoUring)
        .then(cpus::split)
        .flatten();
    let mut backend: Box<dyn Backend> = match cfg.kind {
        Kind::IoUring => Box::new(
            io_uring::Uring::new(
                files,
                slots,
                closed,
                closed && !cfg.direct,
                cfg.direct,
                split.as_ref().map(|s| &s.workers[..]),
            )
            .map_err(|e| format!("io_uring is not available here: {e} (use --engine threads)"))?,
        ),
        Kind::Threads => Box::new(threads::Threads::new(files, slots, clock)),
    };
    if let Some(s) = &split {
        // the engine thread samples too: it waits for the copying worker anyway, while a
        // producer thread took CPU from that worker or from the engine (bench/engine: median
        // 0.82x fio's IOPS with a producer, 0.98x without)
        // best effort: unpinned, the run is only slower
        let _ = cpus::pin(&[s.engine]);
        return schedule::drive(cfg, source, backend.as_mut(), clock, &progress);
    }
    // requests are synthesized on a producer thread, ahead of the schedule: generating a
    // fluctuation window inline stalled issuing (p99 lateness 645 µs at 50k/s in bench/engine)
    std::thread::scope(|scope| {
        let (tx, rx) = std::sync::mpsc::sync_channel::<Vec<Synthesized>>(AHEAD_BATCHES);
        scope.spawn(move || produce(source, tx));
        let ahead = rx.into_iter().flatten();
        schedule::drive(cfg, ahead, backend.as_mut(), clock, &progress)
    })
}

/// Requests per batch handed from the producer thread to the engine, and batches in flight.
const AHEAD_BATCH: usize = 4096;
const AHEAD_BATCHES: usize = 16;

/// Sends the source's requests in batches until it ends or the engine stops listening.
fn produce(source: Source, tx: std::sync::mpsc::SyncSender<Vec<Synthesized>>) {
    let mut batch = Vec::with_capacity(AHEAD_BATCH);
    for r in source {
        batch.push(r);
        let full = batch.len() == AHEAD_BATCH;
        if full
            && tx
                .send(std::mem::replace(
                    &mut batch,
                    Vec::with_capacity(AHEAD_BATCH),
                ))
                .is_err()
        {
            return; // the engine stopped
        }
    }
    if !batch.is_empty() {
        let _ = tx.send(batch);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mapping_stays_inside_and_aligned() {
        let m = Mapper {
            capacity: 1 << 30,
            target: 10 << 20,
            align: 4096,
        };
        for (off, size) in [
            (0u64, 512u32),
            ((1 << 30) - 512, 512),
            (12345, 70000),
            (1 << 29, 4096),
        ] {
            let (o, s) = m.map(off, size).unwrap();
            assert_eq!(o % 4096, 0);
            assert_eq!(s % 4096, 0);
            assert!(o + s as u64 <= 10 << 20);
        }
        assert_eq!(m.map(1 << 29, 4096), Some((5 << 20, 4096)));
        let same = Mapper {
            capacity: 1000,
            target: 1000,
            align: 1,
        };
        assert_eq!(same.map(996, 8), Some((992, 8)));
        assert_eq!(same.map(10, 8), Some((10, 8)));
    }

    #[test]
    fn files_keep_offsets_fold_padding_and_cut_at_the_end() {
        let files = Layout::Files(vec![
            Extent {
                base: 0,
                size: 1000,
            },
            Extent {
                base: 1 << 20,
                size: 0,
            },
            Extent {
                base: 2 << 20,
                size: 5000,
            },
        ]);
        let at = |o, s| {
            files
                .place(o, s)
                .map(|p| (p.file, p.offset, p.size, p.folded, p.clamped))
        };
        assert_eq!(at(100, 200), Some((0, 100, 200, false, false)));
        assert_eq!(at(900, 200), Some((0, 900, 100, false, true)));
        assert_eq!(at(2500, 100), Some((0, 500, 100, true, false)));
        assert_eq!(at((1 << 20) + 7, 100), None); // an empty file
        assert_eq!(at((2 << 20) + 4999, 1), Some((2, 4999, 1, false, false)));
        assert_eq!(at((2 << 20) + 4999, 2), Some((2, 4999, 1, false, true)));
    }
}
