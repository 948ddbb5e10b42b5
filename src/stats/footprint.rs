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

/// Block ranges in 512-byte blocks packed as `start << len_bits | length` (so sorting the keys
/// sorts by start), and the stream slot that touched each (only kept with several streams).
struct Ranges {
    keys: Vec<u64>,
    owners: Vec<u32>,
    len_bits: u32,
}

impl Ranges {
    /// Lengths get 24 bits (8 GiB) unless the largest block number needs more than 40 bits;
    /// longer ranges are split, which changes no union.
    fn new(max_end_bytes: u64, capacity: usize) -> Ranges {
        let start_bits = 64 - (max_end_bytes >> SECTOR_SHIFT).leading_zeros();
        Ranges {
            keys: Vec::with_capacity(capacity),
            owners: Vec::new(),
            len_bits: 24.min(64 - start_bits).max(1),
        }
    }

    fn max_len(&self) -> u64 {
        (1 << self.len_bits) - 1
    }

    fn start(&self, key: u64) -> u64 {
        key >> self.len_bits
    }

    fn end(&self, key: u64) -> u64 {
        self.start(key) + (key & self.max_len())
    }

    fn key(&self, start: u64, end: u64) -> u64 {
        start << self.len_bits | (end - start)
    }
}

/// The footprints of a trace's requests; `max_stream` and `max_end` (the largest stream id and
/// offset + size) size the tables.
pub fn footprints(
    stream: &[u32],
    offset: &[u64],
    size: &[u32],
    max_stream: u32,
    max_end: u64,
) -> Footprints {
    let n = stream.len();
    let several = stream.iter().any(|&s| s != stream[0]);
    let mut r = Ranges::new(max_end, n);
    if several {
        r.owners.reserve(n);
    }
    let mut slots = Slots::new(max_stream);
    let mut last: Vec<usize> = Vec::new(); // each slot's latest range
    let mut streams: Vec<BlockCounts> = Vec::new();
    for i in 0..n {
        let slot = slots.get_or_insert(stream[i], last.len());
        if slot == last.len() {
            last.push(usize::MAX);
            streams.push(BlockCounts::default());
        }
        if size[i] == 0 {
            continue;
        }
        let mut first = offset[i] >> SECTOR_SHIFT;
        let end = ((offset[i].saturating_add(size[i] as u64) - 1) >> SECTOR_SHIFT) + 1;
        streams[slot].requested_512 += end - first;
        let k = last[slot];
        if k != usize::MAX {
            let (s, e) = (r.start(r.keys[k]), r.end(r.keys[k]));
            if first >= s && first <= e && end.max(e) - s <= r.max_len() {
                r.keys[k] = r.key(s, end.max(e));
                continue;
            }
        }
        while first < end {
            let piece_end = end.min(first + r.max_len());
            last[slot] = r.keys.len();
            r.keys.push(r.key(first, piece_end));
            if several {
                r.owners.push(slot as u32);
            }
            first = piece_end;
        }
    }
    radix_sort(&mut r);
    let total = count_unions(&r, &mut streams);
    Footprints { total, streams }
}

/// Stable LSD radix sort of the keys by their start bits (owners move along), one pass per
/// byte that varies; the histograms of all bytes come from one read.
fn radix_sort(r: &mut Ranges) {
    let n = r.keys.len();
    let (all, any) = r
        .keys
        .iter()
        .fold((u64::MAX, 0u64), |(a, o), &k| (a & k, o | k));
    let varying = (all ^ any) >> r.len_bits << r.len_bits; // lengths need no order
    let shifts: Vec<u32> = (0..64)
        .step_by(8)
        .filter(|&s| (varying >> s) & 0xFF != 0)
        .collect();
    let mut counts = vec![[0usize; 256]; shifts.len()];
    for &k in &r.keys {
        for (c, &s) in counts.iter_mut().zip(&shifts) {
            c[((k >> s) & 0xFF) as usize] += 1;
        }
    }
    let several = !r.owners.is_empty();
    let mut keys = vec![0u64; n];
    let mut owners = vec![0u32; if several { n } else { 0 }];
    for (pos, &shift) in counts.iter_mut().zip(&shifts) {
        let mut sum = 0;
        for p in pos.iter_mut() {
            (*p, sum) = (sum, sum + *p);
        }
        for i in 0..n {
            let k = r.keys[i];
            let d = &mut pos[((k >> shift) & 0xFF) as usize];
            keys[*d] = k;
            if several {
                owners[*d] = r.owners[i];
            }
            *d += 1;
        }
        std::mem::swap(&mut r.keys, &mut keys);
        std::mem::swap(&mut r.owners, &mut owners);
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
    for (i, &key) in r.keys.iter().enumerate() {
        let (s, e) = (r.start(key), r.end(key));
        let (s4, e4) = (
            s >> SECTORS_PER_PAGE_SHIFT,
            e.div_ceil(1 << SECTORS_PER_PAGE_SHIFT),
        );
        all_512.add(s, e);
        all_4k.add(s4, e4);
        let owner = r.owners.get(i).copied().unwrap_or(0) as usize;
        let (u512, u4k) = &mut per_stream[owner];
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
            9216,
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
        let f = footprints(&[5, 5, 5], &[0, 0, 4000], &[4096, 4096, 200], 5, 4200);
        assert_eq!(f.total.requested_512, 8 + 8 + 2);
        assert_eq!((f.total.unique_512, f.total.unique_4k), (9, 2));
        assert_eq!(f.streams.len(), 1);
    }

    #[test]
    fn radix_sort_agrees_with_sort() {
        let mut x: u64 = 12345;
        let mut r = Ranges::new(1 << 53, 5000);
        for i in 0..5000u32 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let s = (x >> 20) % (1 << 44);
            r.keys.push(r.key(s, s + 1 + (x % 7)));
            r.owners.push(i);
        }
        let mut want: Vec<(u64, u32)> = r
            .keys
            .iter()
            .map(|&k| r.start(k))
            .zip(r.owners.clone())
            .collect();
        want.sort(); // owners ascend in input order, so this is the stable order by start
        radix_sort(&mut r);
        let got: Vec<(u64, u32)> = r
            .keys
            .iter()
            .map(|&k| r.start(k))
            .zip(r.owners.clone())
            .collect();
        assert_eq!(got, want);
    }

    #[test]
    fn huge_offsets_split_long_ranges() {
        // offsets near 2^63 leave 64 - 54 = 10 bits for lengths: a 1 MiB request (2048
        // sectors) is split into pieces of at most 1023 sectors; the counts do not change.
        let base = 1u64 << 63;
        let f = footprints(
            &[0, 0],
            &[base, base + 4096],
            &[1 << 20, 4096],
            0,
            base + (1 << 20),
        );
        assert_eq!(f.total.requested_512, 2048 + 8);
        assert_eq!((f.total.unique_512, f.total.unique_4k), (2048, 256));
    }
}
