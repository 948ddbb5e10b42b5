//! A hint to the memory system, for loops that know which cache line they will need a few
//! iterations ahead (the cache simulators' lookups, the fit's table of last touches).

/// Asks the memory for the cache line holding `value` (a hint: it changes nothing).
#[inline]
pub fn prefetch<T>(value: &T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch reads nothing into the program and cannot fault
    unsafe {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        _mm_prefetch(value as *const T as *const i8, _MM_HINT_T0);
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = value;
}
