//! The portable backend: a pool of threads doing blocking pread / pwrite / fdatasync.
//!
//! Each worker stamps its own issue and completion times around the system call, so a
//! request queued behind busy workers shows up as lateness, not as service time.

use super::io_uring::AlignedBuf;
use super::{Backend, Clock, Done};
use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::sync::mpsc::{channel, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

/// Workers at most: beyond this, more requests in flight queue for a worker.
pub const MAX_THREADS: usize = 256;

struct Job {
    slot: usize,
    file: usize,
    op: u8,
    offset: u64,
    size: u32,
}

pub struct Threads {
    jobs: Option<Sender<Job>>,
    done: Receiver<Done>,
    workers: Vec<JoinHandle<()>>,
}

impl Threads {
    pub fn new(files: Vec<File>, slots: usize, clock: Clock) -> Threads {
        let files = Arc::new(files);
        let (jobs, job_rx) = channel::<Job>();
        let job_rx = Arc::new(Mutex::new(job_rx));
        let (done_tx, done) = channel();
        let workers = (0..slots.clamp(1, MAX_THREADS))
            .map(|_| {
                let (files, rx, tx) = (files.clone(), job_rx.clone(), done_tx.clone());
                std::thread::spawn(move || worker(&files, &rx, &tx, clock))
            })
            .collect();
        Threads {
            jobs: Some(jobs),
            done,
            workers,
        }
    }
}

fn worker(files: &[File], jobs: &Mutex<Receiver<Job>>, done: &Sender<Done>, clock: Clock) {
    let mut buf = AlignedBuf::new(0);
    loop {
        let job = match jobs.lock() {
            Ok(rx) => match rx.recv() {
                Ok(j) => j,
                Err(_) => return,
            },
            Err(_) => return,
        };
        buf.ensure(job.size as usize);
        let file = &files[job.file];
        let issue = clock.now_ns();
        let r = match job.op {
            0 => file.read_at(buf.slice_mut(job.size as usize), job.offset),
            1 => file.write_at(buf.slice_mut(job.size as usize), job.offset),
            _ => file.sync_data().map(|_| 0),
        };
        let end = clock.now_ns();
        let res = match r {
            Ok(n) => n as i64,
            Err(e) => -(e.raw_os_error().unwrap_or(libc::EIO) as i64),
        };
        let d = Done {
            slot: job.slot,
            res,
            issue_ns: Some(issue),
            done_ns: Some(end),
        };
        if done.send(d).is_err() {
            return;
        }
    }
}

impl Backend for Threads {
    fn submit(
        &mut self,
        slot: usize,
        file: usize,
        op: u8,
        offset: u64,
        size: u32,
    ) -> io::Result<()> {
        let job = Job {
            slot,
            file,
            op,
            offset,
            size,
        };
        self.jobs
            .as_ref()
            .and_then(|j| j.send(job).ok())
            .ok_or_else(|| io::Error::other("the I/O threads are gone"))
    }

    fn reap(&mut self, wait: Option<Duration>, out: &mut Vec<Done>) -> io::Result<()> {
        let first = match wait {
            Some(w) => match self.done.recv_timeout(w) {
                Ok(d) => Some(d),
                Err(RecvTimeoutError::Timeout) => None,
                Err(RecvTimeoutError::Disconnected) => {
                    return Err(io::Error::other("the I/O threads are gone"))
                }
            },
            None => self.done.try_recv().ok(),
        };
        if let Some(d) = first {
            out.push(d);
            out.extend(self.done.try_iter());
        }
        Ok(())
    }
}

impl Drop for Threads {
    fn drop(&mut self) {
        self.jobs = None; // workers see the channel close and return
        for w in self.workers.drain(..) {
            let _ = w.join();
        }
    }
}
