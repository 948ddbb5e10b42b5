//! Log-linear histograms for non-negative integers (inter-arrival nanoseconds, reuse
//! distances): exact below 16, then 8 sub-buckets per power of two (at most 12.5% wide), as
//! HdrHistogram does with 3 significant bits. Sparse, so thousands of them stay small, and
//! mergeable by adding counts.

use rustc_hash::FxHashMap;

pub const SUB_BITS: u32 = 3;
const SUB: u64 = 1 << SUB_BITS;
const LINEAR: u64 = 2 * SUB; // values below this have their own bucket

/// Buckets in all: `bucket(u64::MAX) + 1`.
pub const BUCKETS: usize = (LINEAR + (63 - SUB_BITS as u64) * SUB) as usize;

/// The bucket of a value.
pub fn bucket(v: u64) -> u16 {
    if v < LINEAR {
        return v as u16;
    }
    let e = 63 - v.leading_zeros(); // v in [2^e, 2^(e+1)), e >= 4
    let sub = (v >> (e - SUB_BITS)) & (SUB - 1);
    (LINEAR + (e as u64 - (SUB_BITS as u64 + 1)) * SUB + sub) as u16
}

/// The values `[lo, hi)` a bucket covers.
pub fn bucket_range(b: u16) -> (u64, u64) {
    let b = b as u64;
    if b < LINEAR {
        return (b, b + 1);
    }
    let e = (b - LINEAR) / SUB + SUB_BITS as u64 + 1;
    let sub = (b - LINEAR) % SUB;
    let width = 1u64 << (e - SUB_BITS as u64);
    let lo = (1u64 << e) + sub * width;
    (lo, lo.saturating_add(width))
}

/// A sparse histogram of bucket -> count.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Hist {
    pub counts: FxHashMap<u16, u64>,
}

impl Hist {
    pub fn add(&mut self, v: u64) {
        *self.counts.entry(bucket(v)).or_insert(0) += 1;
    }

    pub fn merge(&mut self, other: &Hist) {
        for (&b, &c) in &other.counts {
            *self.counts.entry(b).or_insert(0) += c;
        }
    }

    /// (bucket, count) sorted by bucket.
    pub fn sorted(&self) -> Vec<(u16, u64)> {
        let mut v: Vec<(u16, u64)> = self.counts.iter().map(|(&b, &c)| (b, c)).collect();
        v.sort_unstable();
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_cover_values_without_gaps() {
        let mut expected_lo = 0;
        for b in 0..400u16 {
            let (lo, hi) = bucket_range(b);
            assert_eq!(lo, expected_lo, "bucket {b}");
            assert_eq!(bucket(lo), b);
            assert_eq!(bucket(hi - 1), b);
            expected_lo = hi;
        }
        assert_eq!(bucket(16), 16);
        assert_eq!(bucket_range(16), (16, 18));
        assert_eq!(bucket(1_000_000), bucket(1_000_001));
        assert_eq!(bucket(u64::MAX) as usize + 1, BUCKETS);
    }
}
