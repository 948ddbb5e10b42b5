//! The primary Linux backend: io_uring (the `io-uring` crate). One submission system call
//! per request, so the issue time is the moment the kernel gets it; waits for completions
//! with a timeout (IORING_ENTER_EXT_ARG) so pacing and reaping share one wait.

use super::{Backend, Done, DIRECT_ALIGN};
use io_uring::{opcode, types, IoUring};
use std::fs::File;
use std::io;
use std::os::unix::io::AsRawFd;
use std::time::Duration;

/// A heap buffer aligned for O_DIRECT, filled with a non-zero pattern (what writes write).
pub struct AlignedBuf {
    ptr: *mut u8,
    len: usize,
}

// SAFETY: the buffer is plain owned memory; only one user touches it at a time.
unsafe impl Send for AlignedBuf {}

impl AlignedBuf {
    pub fn new(len: usize) -> AlignedBuf {
        let mut b = AlignedBuf {
            ptr: std::ptr::null_mut(),
            len: 0,
        };
        b.ensure(len);
        b
    }

    fn layout(len: usize) -> std::alloc::Layout {
        std::alloc::Layout::from_size_align(len.max(1), DIRECT_ALIGN as usize)
            .expect("valid buffer layout")
    }

    /// Grows the buffer to at least `len` bytes (contents: the pattern).
    pub fn ensure(&mut self, len: usize) {
        if len <= self.len && !self.ptr.is_null() {
            return;
        }
        let len = len.max(DIRECT_ALIGN as usize).next_power_of_two();
        self.free();
        // SAFETY: the layout has a non-zero size.
        let ptr = unsafe { std::alloc::alloc(Self::layout(len)) };
        if ptr.is_null() {
            std::alloc::handle_alloc_error(Self::layout(len));
        }
        // SAFETY: ptr points to len writable bytes.
        let s = unsafe { std::slice::from_raw_parts_mut(ptr, len) };
        for (i, b) in s.iter_mut().enumerate() {
            *b = (i as u8).wrapping_mul(31).wrapping_add(0x5A) | 1;
        }
        self.ptr = ptr;
        self.len = len;
    }

    /// The whole buffer, as the kernel registers it (its address and length).
    fn iovec(&self) -> libc::iovec {
        libc::iovec {
            iov_base: self.ptr.cast(),
            iov_len: self.len,
        }
    }

    pub fn slice_mut(&mut self, len: usize) -> &mut [u8] {
        assert!(len <= self.len);
        // SAFETY: ptr points to self.len initialised bytes.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, len) }
    }

    fn free(&mut self) {
        if !self.ptr.is_null() {
            // SAFETY: allocated with this layout in `ensure`.
            unsafe { std::alloc::dealloc(self.ptr, Self::layout(self.len)) };
            self.ptr = std::ptr::null_mut();
            self.len = 0;
        }
    }
}

impl Drop for AlignedBuf {
    fn drop(&mut self) {
        self.free();
    }
}

pub struct Uring {
    ring: IoUring,
    files: Vec<File>,
    bufs: Vec<AlignedBuf>,
    /// The files are registered with the ring (requests name them by index).
    fixed_files: bool,
    /// Each slot's buffer as the ring has it registered (`None`: not registered, or none
    /// can be: the slot's requests then pass their buffer as an address).
    registered: Option<Vec<libc::iovec>>,
    inflight: usize,
    /// Flags every request IOSQE_ASYNC (see `new`).
    sqe_flags: io_uring::squeue::Flags,
    /// Polls for completions before sleeping (see `new`).
    poll: bool,
}

/// How long a reap polls for a completion before it sleeps: a page-cache copy takes about a
/// microsecond, a device read that misses the cache far longer than this.
const POLL_NS: u64 = 50_000;
const EMPTY_IOVEC: libc::iovec = libc::iovec {
    iov_base: std::ptr::null_mut(),
    iov_len: 0,
};
/// IORING_ENTER_GETEVENTS (linux/io_uring.h; the crate keeps its constants private).
const ENTER_GETEVENTS: u32 = 1;

impl Uring {
    /// `batched`: the caller enters the kernel for every batch (closed loop), so completion
    /// work may wait for it: COOP_TASKRUN + SINGLE_ISSUER (5.19+) post completions without
    /// inter-processor interrupts (0.55x -> 0.9x fio's buffered IOPS), and DEFER_TASKRUN
    /// (6.1+) runs them only when the engine asks for completions, so a page-cache read
    /// finished by an io-wq worker no longer wakes the engine one by one. Older kernels get
    /// the strongest set they take. The open loop spins in user space between deadlines and
    /// needs completions posted at once, so it keeps a plain ring.
    ///
    /// `force_async` hands every request straight to io-wq workers (IOSQE_ASYNC, fio's
    /// `force_async`), for closed-loop page-cache I/O: the submitting thread no longer tries
    /// each read itself first.
    ///
    /// `copiers`: the CPUs (all but the engine's) where those workers run, one worker per CPU,
    /// while the engine polls for completions for up to `POLL_NS` instead of sleeping until
    /// one arrives. Left to itself io-wq starts a worker per queued request, and on two cores
    /// the workers took turns with the engine: a context switch every seven requests and a
    /// quarter of the CPU idle.
    ///
    /// `direct`: the files are open with O_DIRECT; the ring then has them and the slots'
    /// buffers registered (`register_buffer`), which spares the kernel looking up the file
    /// and pinning the buffer's pages on every request (bench/engine's O_DIRECT reads:
    /// 200k -> 207k IOPS). Page-cache reads lost with them: on tmpfs, where io-wq workers
    /// do every copy, 1,017k IOPS fell to 940k with registered files and 680k with
    /// registered buffers.
    pub fn new(
        files: Vec<File>,
        slots: usize,
        batched: bool,
        force_async: bool,
        direct: bool,
        copiers: Option<&[usize]>,
    ) -> io::Result<Uring> {
        let entries = (slots.max(1) as u32).next_power_of_two().min(32768);
        let plain = || IoUring::builder().setup_cqsize(entries * 2).build(entries);
        let ring = if batched {
            let coop = || {
                IoUring::builder()
                    .setup_cqsize(entries * 2)
                    .setup_coop_taskrun()
                    .setup_single_issuer()
                    .build(entries)
            };
            IoUring::builder()
                .setup_cqsize(entries * 2)
                .setup_single_issuer()
                .setup_defer_taskrun()
                .build(entries)
                .or_else(|_| coop())
                .or_else(|_| plain())?
        } else {
            plain()?
        };
        if !ring.params().is_feature_ext_arg() {
            return Err(io::Error::other(
                "the kernel lacks IORING_FEAT_EXT_ARG (5.11+)",
            ));
        }
        // kernels before 5.14 cannot place or count io-wq workers: they keep io-wq's defaults
        let copiers = copiers.filter(|cpus| {
            // [bounded (regular files), unbounded]; 0 leaves a limit as it is
            let mut max = [cpus.len() as u32, 0];
            let s = ring.submitter();
            s.register_iowq_aff(&super::cpus::set_of(cpus)).is_ok()
                && s.register_iowq_max_workers(&mut max).is_ok()
        });
        // where the kernel refuses (before 5.13, or locked memory used up) requests pass
        // their file and buffer plainly
        let fds: Vec<_> = files.iter().map(|f| f.as_raw_fd()).collect();
        let fixed_files = direct && ring.submitter().register_files(&fds).is_ok();
        let registered = (direct && slots <= u16::MAX as usize)
            .then(|| ring.submitter().register_buffers_sparse(slots as u32).ok())
            .flatten()
            .map(|()| vec![EMPTY_IOVEC; slots]);
        Ok(Uring {
            ring,
            files,
            bufs: (0..slots).map(|_| AlignedBuf::new(0)).collect(),
            fixed_files,
            registered,
            inflight: 0,
            sqe_flags: if force_async {
                io_uring::squeue::Flags::ASYNC
            } else {
                io_uring::squeue::Flags::empty()
            },
            poll: copiers.is_some(),
        })
    }

    /// The index of `slot`'s registered buffer, registering it anew where it was (re)allocated
    /// since; None where buffers cannot be registered. Only a free slot's buffer changes.
    fn register_buffer(&mut self, slot: usize) -> Option<u16> {
        let table = self.registered.as_mut()?;
        let iov = self.bufs[slot].iovec();
        let known = &mut table[slot];
        if (known.iov_base, known.iov_len) != (iov.iov_base, iov.iov_len) {
            // SAFETY: the buffer stays allocated until it is replaced here or the ring is
            // dropped (`bufs` is dropped after `ring`, and a replaced buffer's slot was free)
            let update = unsafe {
                self.ring
                    .submitter()
                    .register_buffers_update(slot as u32, &[iov], None)
            };
            if update.is_err() {
                // locked memory used up: every slot passes its buffer plainly from now on,
                // rather than asking the kernel again on each request
                self.registered = None;
                return None;
            }
            *known = iov;
        }
        Some(slot as u16)
    }

    /// Runs the ring's deferred completion work until a completion is posted or `POLL_NS`
    /// (at most `wait`) passed; returns what is left of `wait` when none was.
    fn poll_completions(&mut self, wait: Duration) -> io::Result<Option<Duration>> {
        let limit = wait.min(Duration::from_nanos(POLL_NS));
        let start = std::time::Instant::now();
        while self.ring.completion().is_empty() && self.inflight > 0 {
            if start.elapsed() >= limit {
                return Ok(Some(wait.saturating_sub(limit)));
            }
            // SAFETY: no submissions and no argument: only IORING_ENTER_GETEVENTS, which runs
            // the deferred completions without waiting (min_complete 0).
            match unsafe {
                self.ring
                    .submitter()
                    .enter::<libc::sigset_t>(0, 0, ENTER_GETEVENTS, None)
            } {
                Ok(_) => {}
                Err(e) if e.raw_os_error() == Some(libc::EINTR) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(None)
    }
}

impl Backend for Uring {
    fn submit(
        &mut self,
        slot: usize,
        file: usize,
        op: u8,
        offset: u64,
        size: u32,
    ) -> io::Result<()> {
        self.bufs[slot].ensure(size as usize);
        let fixed_buf = self.register_buffer(slot);
        let ptr = self.bufs[slot].slice_mut(size as usize).as_mut_ptr();
        // one request's entry, naming its file by index where the files are registered
        macro_rules! entry {
            ($fd:expr) => {
                match (op, fixed_buf) {
                    (0, Some(i)) => opcode::ReadFixed::new($fd, ptr, size, i)
                        .offset(offset)
                        .build(),
                    (0, None) => opcode::Read::new($fd, ptr, size).offset(offset).build(),
                    (1, Some(i)) => opcode::WriteFixed::new($fd, ptr, size, i)
                        .offset(offset)
                        .build(),
                    (1, None) => opcode::Write::new($fd, ptr, size).offset(offset).build(),
                    _ => opcode::Fsync::new($fd)
                        .flags(types::FsyncFlags::DATASYNC)
                        .build(),
                }
            };
        }
        let sqe = if self.fixed_files {
            entry!(types::Fixed(file as u32))
        } else {
            entry!(types::Fd(self.files[file].as_raw_fd()))
        }
        .user_data(slot as u64)
        .flags(self.sqe_flags);
        // SAFETY: the buffer lives in self.bufs[slot] and is not touched again until the
        // slot's completion is reaped (the engine frees a slot only then).
        unsafe {
            while self.ring.submission().push(&sqe).is_err() {
                self.flush()?;
            }
        }
        self.inflight += 1;
        Ok(())
    }

    fn flush(&mut self) -> io::Result<()> {
        while !self.ring.submission().is_empty() {
            match self.ring.submit() {
                Ok(_) => {}
                Err(e) if e.raw_os_error() == Some(libc::EINTR) => {}
                Err(e) if e.raw_os_error() == Some(libc::EBUSY) => std::thread::yield_now(),
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    fn reap(&mut self, wait: Option<Duration>, out: &mut Vec<Done>) -> io::Result<()> {
        let mut wait = wait;
        if let (Some(w), true) = (wait, self.poll) {
            wait = self.poll_completions(w)?;
        }
        if let Some(w) = wait {
            if self.ring.completion().is_empty() && self.inflight > 0 {
                let ts = types::Timespec::from(w);
                let args = types::SubmitArgs::new().timespec(&ts);
                match self.ring.submitter().submit_with_args(1, &args) {
                    Ok(_) => {}
                    Err(e) if matches!(e.raw_os_error(), Some(libc::ETIME) | Some(libc::EINTR)) => {
                    }
                    Err(e) => return Err(e),
                }
            }
        }
        for cqe in self.ring.completion() {
            self.inflight -= 1;
            out.push(Done {
                slot: cqe.user_data() as usize,
                res: cqe.result() as i64,
                issue_ns: None,
                done_ns: None,
            });
        }
        Ok(())
    }
}

impl Drop for Uring {
    fn drop(&mut self) {
        // buffers must outlive the kernel's use of them
        while self.inflight > 0 {
            let mut v = Vec::new();
            if self.reap(Some(Duration::from_millis(100)), &mut v).is_err() {
                break;
            }
        }
    }
}
