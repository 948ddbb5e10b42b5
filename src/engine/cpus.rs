//! Thread placement for the closed loop on cached data: the engine thread keeps the core it
//! runs on and io_uring's worker threads, which do the page-cache copies, get the others
//! (`Uring::new`). On two cores, letting the scheduler mix them cost a context switch every
//! seven requests and left a quarter of the CPU idle.

use std::io;

/// The CPUs a thread may use, split between the engine and the copying workers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Split {
    pub engine: usize,
    pub workers: Vec<usize>,
}

/// Splits the calling thread's CPUs: the one it runs on for the engine, the rest for the
/// workers. None when it may use only one CPU (nothing to split).
pub fn split() -> Option<Split> {
    let allowed = allowed().ok()?;
    // SAFETY: sched_getcpu has no preconditions.
    let here = unsafe { libc::sched_getcpu() };
    let engine = usize::try_from(here)
        .ok()
        .filter(|c| allowed.contains(c))
        .or_else(|| allowed.first().copied())?;
    let workers: Vec<usize> = allowed.into_iter().filter(|&c| c != engine).collect();
    (!workers.is_empty()).then_some(Split { engine, workers })
}

/// A cpu_set_t holding `cpus`.
pub fn set_of(cpus: &[usize]) -> libc::cpu_set_t {
    // SAFETY: cpu_set_t is plain bits; all zeros is the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    for &c in cpus {
        // SAFETY: CPU_SET ignores CPUs beyond the set's size.
        unsafe { libc::CPU_SET(c, &mut set) };
    }
    set
}

/// Restricts the calling thread to `cpus`.
pub fn pin(cpus: &[usize]) -> io::Result<()> {
    let set = set_of(cpus);
    // SAFETY: pid 0 is the calling thread; the set is a valid cpu_set_t of the given size.
    let rc = unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// The CPUs the calling thread may use.
fn allowed() -> io::Result<Vec<usize>> {
    // SAFETY: all zeros is a valid empty cpu_set_t, filled by the call.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: pid 0 is the calling thread; the size matches the set.
    let rc =
        unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: CPU_ISSET reads bits of a valid set.
    Ok((0..libc::CPU_SETSIZE as usize)
        .filter(|&c| unsafe { libc::CPU_ISSET(c, &set) })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_keeps_the_current_cpu_for_the_engine() {
        let allowed = allowed().unwrap();
        match split() {
            None => assert_eq!(allowed.len(), 1),
            Some(s) => {
                assert!(allowed.contains(&s.engine));
                assert!(!s.workers.contains(&s.engine));
                assert_eq!(s.workers.len() + 1, allowed.len());
            }
        }
    }

    #[test]
    fn pinning_a_thread_restricts_it() {
        let first = allowed().unwrap()[0];
        std::thread::spawn(move || {
            pin(&[first]).unwrap();
            assert_eq!(allowed().unwrap(), vec![first]);
        })
        .join()
        .unwrap();
    }
}
