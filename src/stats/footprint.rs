//! Block footprints: 512-byte blocks requested, unique 512-byte and 4 KiB blocks touched, for
//! the whole trace and per stream.
//!
//! A request touches every block it overlaps; zero-size requests touch none. Requests become
//! ranges of 512-byte blocks (a stream's consecutive overlapping or touching ranges are merged
//! as they come, so sequential streams stay small), the ranges are radix-sorted by start, and
//! one scan merges them globally and per stream. A 4 KiB block is touched exactly when one of
//! its eight 512-byte blocks is, so the 4 KiB union is the same scan with ranges rounded out.

use super::characterize::Slots;

const SECTOR_SHIFT: u32 = 9;
const SECTORS_PER_PAGE_SHIFT: u32 = 3;

/// Block counts of one stream or of the whole trace.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BlockCounts {
    pub requested_512: u64,
    pub unique_512: u64,
    pub unique_4k: u64,
}

/// Whole-trace counts and per-stream counts, streams in order of first appearance.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Footprints {
    pub total: BlockCounts,
    pub streams: Vec<BlockCounts>,
}

/// Block ranges [start, end) in 512-byte blocks and the stream slot that touched each.
#[derive(Default)]
struct Ranges {
    starts: Vec<u64>,
    ends: Vec<u64>,
    owners: Vec<u32>,
}

pub fn footprints(stream: &[u32], offset: &[u64], size: &[u32], max_stream: u32) -> Footprints {
    let mut slots = Slots::new(max_stream);
    let mut last: Vec<usize> = Vec::new(); // each slot's latest range
    let mut streams: Vec<BlockCounts> = Vec::new();
    let mut r = Ranges::default();
    for i in 0..stream.len() {
        let slot = slots.get_or_insert(stream[i], last.len());
        if slot == last.len() {
            last.push(usize::MAX);
            streams.push(BlockCounts::default());
        }
        if size[i] == 0 {
            continue;
        }
        let first = offset[i] >> SECTOR_SHIFT;
        let end = ((offset[i].saturating_add(size[i] as u64) - 1) >> SECTOR_SHIFT) + 1;
        streams[slot].requested_512 += end - first;
        let k = last[slot];
        if k != usize::MAX && first >= r.starts[k] && first <= r.ends[k] {
            r.ends[k] = r.ends[k].max(end);
        } else {
            last[slot] = r.starts.len();
            r.starts.push(first);
            r.ends.push(end);
            r.owners.push(slot as u32);
        }
    }
    radix_sort_by_start(&mut r);
    let total = count_unions(&r, &mut streams);
    Footprints { total, streams }
}

/// Stable LSD radix sort on `starts`, one pass per byte that varies.
fn radix_sort_by_start(r: &mut Ranges) {
    let n = r.starts.len();
    let (all, any) = r
        .starts
        .iter()
        .fold((u64::MAX, 0u64), |(a, o), &s| (a & s, o | s));
    let varying = all ^ any;
    let mut tmp = Ranges {
        starts: vec![0; n],
        ends: vec![0; n],
        owners: vec![0; n],
    };
    for shift in (0..64).step_by(8) {
        if (varying >> shift) & 0xFF == 0 {
            continue;
        }
        let mut pos = [0usize; 256];
        for &s in &r.starts {
            pos[((s >> shift) & 0xFF) as usize] += 1;
        }
        let mut sum = 0;
        for p in pos.iter_mut() {
            (*p, sum) = (sum, sum + *p);
        }
        for i in 0..n {
            let s = r.starts[i];
            let d = &mut pos[((s >> shift) & 0xFF) as usize];
            tmp.starts[*d] = s;
            tmp.ends[*d] = r.ends[i];
            tmp.owners[*d] = r.owners[i];
            *d += 1;
        }
        std::mem::swap(r, &mut tmp);
    }
}

/// A union of ranges fed in order of start: the current merged range and the blocks before it.
#[derive(Clone, Copy, Default)]
struct Union {
    start: u64,
    end: u64,
    done: u64,
}

impl Union {
    fn add(&mut self, start: u64, end: u64) {
        if start > self.end {
            self.done += self.end - self.start;
            (self.start, self.end) = (start, end);
        } else {
            self.end = self.end.max(end);
        }
    }

    fn total(&self) -> u64 {
        self.done + self.end - self.start
    }
}

/// Merges the sorted ranges, globally and per stream, at 512-byte and 4 KiB granularity.
fn count_unions(r: &Ranges, streams: &mut [BlockCounts]) -> BlockCounts {
    let (mut all_512, mut all_4k) = (Union::default(), Union::default());
    let mut per_stream = vec![(Union::default(), Union::default()); streams.len()];
    for i in 0..r.starts.len() {
        let (s, e) = (r.starts[i], r.ends[i]);
        let (s4, e4) = (
            s >> SECTORS_PER_PAGE_SHIFT,
            e.div_ceil(1 << SECTORS_PER_PAGE_SHIFT),
        );
        all_512.add(s, e);
        all_4k.add(s4, e4);
        let (u512, u4k) = &mut per_stream[r.owners[i] as usize];
        u512.add(s, e);
        u4k.add(s4, e4);
    }
    for (counts, (u512, u4k)) in streams.iter_mut().zip(&per_stream) {
        counts.unique_512 = u512.total();
        counts.unique_4k = u4k.total();
    }
    BlockCounts {
        requested_512: streams.iter().map(|s| s.requested_512).sum(),
        unique_512: all_512.total(),
        unique_4k: all_4k.total(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rounds_sectors_to_pages() {
        // stream 0: bytes [3584, 4608) = sectors 7..8 (pages 0 and 1), [8192, 8704) = sector 16
        // (page 2); stream 1: [1536, 2560) = sectors 3..4 (page 0), and a zero-size request.
        let f = footprints(
            &[0, 0, 1, 1],
            &[3584, 8192, 1536, 0],
            &[1024, 512, 1024, 0],
            1,
        );
        assert_eq!(
            f.total,
            BlockCounts {
                requested_512: 5,
                unique_512: 5,
                unique_4k: 3
            }
        );
        assert_eq!((f.streams[0].unique_512, f.streams[0].unique_4k), (3, 3));
        assert_eq!((f.streams[1].unique_512, f.streams[1].unique_4k), (2, 1));
    }

    #[test]
    fn overlaps_count_once_and_unaligned_ends_round_up() {
        // [0, 4096) twice, then [4000, 4200) touching sectors 7..8 and pages 0..1.
        let f = footprints(&[5, 5, 5], &[0, 0, 4000], &[4096, 4096, 200], 5);
        assert_eq!(f.total.requested_512, 8 + 8 + 2);
        assert_eq!((f.total.unique_512, f.total.unique_4k), (9, 2));
        assert_eq!(f.streams.len(), 1);
    }

    #[test]
    fn radix_sort_agrees_with_sort() {
        let mut x: u64 = 12345;
        let mut r = Ranges::default();
        for i in 0..5000u32 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let s = (x >> 20) % (1 << 44);
            r.starts.push(s);
            r.ends.push(s + 1);
            r.owners.push(i);
        }
        let mut want: Vec<(u64, u32)> = r.starts.iter().copied().zip(r.owners.clone()).collect();
        want.sort(); // owners ascend in input order, so this is the stable order
        radix_sort_by_start(&mut r);
        let got: Vec<(u64, u32)> = r.starts.iter().copied().zip(r.owners.clone()).collect();
        assert_eq!(got, want);
    }
}
