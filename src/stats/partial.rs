//! Characterizing a partitioned trace: each part (some streams, each whole and in time order)
//! is counted on its own with the whole trace's time origin, windows and capacity
//! (`PartialCounter`), sent back as bytes, merged with the others and finished once, to the very
//! summary `characterize` gives the whole trace.
//!
//! Two figures need more than a stream's own requests: interference and global runs depend on
//! the whole trace's order, so the part's columns carry each request's row in the trace
//! (`seq`) and whether it continues the request before it (`run_start`); the whole trace's
//! footprint is a union over streams, so each part keeps its streams' block ranges (merged,
//! in 512-byte blocks) until the end.

use super::characterize::{
    window_grid, Counts, Params, PartCounter, StreamStats, Summary, TraceColumns, Whole,
};
use super::footprint::{blocks, BlockCounts, Footprints, Union};
use crate::codec::{put_u64, Reader};
use rustc_hash::FxHashMap;

const MAGIC: &[u8; 8] = b"IOTWCHR1";

/// A part's counts, its streams' merged block ranges and what finishing needs.
#[derive(Debug, Clone, PartialEq)]
pub struct Partial {
    pub counts: Counts,
    /// Per stream of `counts.streams`: requested 512-byte blocks, and the merged ranges.
    pub requested: Vec<u64>,
    pub ranges: Vec<Vec<(u64, u64)>>,
    pub span: u64,
    pub window_ns: i64,
}

/// Counts a part (some streams) a piece at a time: `cols.seq` and `cols.run_start` place each
/// piece in the whole trace. Memory: the counters and the streams' block ranges, merged as
/// they grow (sequential runs collapse to one range).
pub struct PartialCounter {
    counter: PartCounter,
    span: u64,
    window_ns: i64,
    blocks: FxHashMap<u32, StreamBlocks>,
}

/// A stream's requested 512-byte blocks, its block ranges, and how many of them are merged.
#[derive(Debug, Default)]
struct StreamBlocks {
    requested: u64,
    ranges: Vec<(u64, u64)>,
    merged: usize,
}

impl PartialCounter {
    pub fn new(params: &Params, whole: &Whole) -> Result<PartialCounter, String> {
        Ok(PartialCounter {
            counter: PartCounter::new(params, whole)?,
            span: (whole.last_ts as i128 - whole.first_ts as i128).max(0) as u64,
            window_ns: params.window_ns,
            blocks: FxHashMap::default(),
        })
    }

    pub fn update(&mut self, cols: &TraceColumns) -> Result<(), String> {
        if cols.seq.is_none() || cols.run_start.is_none() {
            return Err("a part needs its seq and run_start columns".into());
        }
        self.counter.update(cols)?;
        for i in 0..cols.stream.len() {
            if cols.size[i] == 0 {
                continue; // touches no block
            }
            let (first, end) = blocks(cols.offset[i], cols.size[i]);
            let b = self.blocks.entry(cols.stream[i]).or_default();
            b.requested += end - first;
            b.ranges.push((first, end));
        }
        for b in self.blocks.values_mut() {
            if b.ranges.len() > 2 * b.merged + 4096 {
                b.ranges = merged(std::mem::take(&mut b.ranges));
                b.merged = b.ranges.len();
            }
        }
        Ok(())
    }

    pub fn finish(mut self) -> Partial {
        let (counts, _) = self.counter.finish();
        let (mut requested, mut ranges) = (Vec::new(), Vec::new());
        for (s, _) in &counts.streams {
            let b = self.blocks.remove(&s.stream).unwrap_or_default();
            requested.push(b.requested);
            ranges.push(merged(b.ranges));
        }
        Partial {
            counts,
            requested,
            ranges,
            span: self.span,
            window_ns: self.window_ns,
        }
    }
}

/// Sorted, non-overlapping, non-touching ranges covering the same blocks.
fn merged(mut r: Vec<(u64, u64)>) -> Vec<(u64, u64)> {
    r.sort_unstable();
    let mut out: Vec<(u64, u64)> = Vec::with_capacity(r.len());
    for (s, e) in r {
        match out.last_mut() {
            Some(last) if s <= last.1 => last.1 = last.1.max(e),
            _ => out.push((s, e)),
        }
    }
    out
}

/// Blocks in sorted ranges, at 512-byte and 4 KiB granularity.
fn unique(ranges: &[(u64, u64)]) -> (u64, u64) {
    let (mut u512, mut u4k) = (Union::default(), Union::default());
    for &(s, e) in ranges {
        u512.add(s, e);
        u4k.add(s >> 3, e.div_ceil(8));
    }
    (u512.total(), u4k.total())
}

/// Merges parts whose streams are disjoint (a stream is never split between parts).
pub fn merge(parts: Vec<Partial>) -> Result<Partial, String> {
    let mut it = parts.into_iter();
    let mut whole = it.next().ok_or("no parts to merge")?;
    let mut seen: FxHashMap<u32, ()> = whole
        .counts
        .streams
        .iter()
        .map(|s| (s.0.stream, ()))
        .collect();
    for p in it {
        let (a, b) = (&mut whole.counts, &p.counts);
        if (a.capacity, a.leaves, whole.span, whole.window_ns)
            != (b.capacity, b.leaves, p.span, p.window_ns)
            || a.window_counts.len() != b.window_counts.len()
        {
            return Err("parts counted with different settings".into());
        }
        for (s, _) in &b.streams {
            if seen.insert(s.stream, ()).is_some() {
                return Err(format!("stream {} is in two parts", s.stream));
            }
        }
        add(&mut a.window_counts, &b.window_counts);
        add(&mut a.size_log2, &b.size_log2);
        add(&mut a.jump_log2, &b.jump_log2);
        for (&size, &n) in &b.size_counts {
            *a.size_counts.entry(size).or_insert(0) += n;
        }
        a.streams.extend(p.counts.streams);
        whole.requested.extend(p.requested);
        whole.ranges.extend(p.ranges);
    }
    Ok(whole)
}

fn add(into: &mut [u64], from: &[u64]) {
    for (a, b) in into.iter_mut().zip(from) {
        *a += b;
    }
}

/// The summary of all parts (merged).
pub fn finish(p: Partial) -> Result<Summary, String> {
    let grid = window_grid(p.span, p.window_ns)?;
    let streams: Vec<BlockCounts> = p
        .ranges
        .iter()
        .zip(&p.requested)
        .map(|(r, &requested_512)| {
            let (unique_512, unique_4k) = unique(r);
            BlockCounts {
                requested_512,
                unique_512,
                unique_4k,
            }
        })
        .collect();
    let all = merged(p.ranges.into_iter().flatten().collect());
    let (unique_512, unique_4k) = unique(&all);
    let blocks = Footprints {
        total: BlockCounts {
            requested_512: p.requested.iter().sum(),
            unique_512,
            unique_4k,
        },
        streams,
    };
    Ok(p.counts.finish(grid.as_ref(), blocks))
}

// -- encoding --------------------------------------------------------------------------------

pub fn encode(p: &Partial) -> Vec<u8> {
    let mut w = Vec::with_capacity(1 << 12);
    w.extend_from_slice(MAGIC);
    let c = &p.counts;
    put_u64(&mut w, c.capacity);
    put_u64(&mut w, c.leaves as u64);
    put_u64(&mut w, p.span);
    put_u64(&mut w, p.window_ns as u64);
    put_vec(&mut w, &c.window_counts);
    put_vec(&mut w, &c.size_log2);
    put_vec(&mut w, &c.jump_log2);
    put_u64(&mut w, c.size_counts.len() as u64);
    for (&size, &n) in &c.size_counts {
        put_u64(&mut w, size as u64);
        put_u64(&mut w, n);
    }
    put_u64(&mut w, c.streams.len() as u64);
    for (((s, windows), &requested), ranges) in c.streams.iter().zip(&p.requested).zip(&p.ranges) {
        put_stream(&mut w, s);
        put_u64(&mut w, windows.len() as u64);
        for &(win, n) in windows {
            put_u64(&mut w, win);
            put_u64(&mut w, n);
        }
        put_u64(&mut w, requested);
        put_u64(&mut w, ranges.len() as u64);
        for &(s, e) in ranges {
            put_u64(&mut w, s);
            put_u64(&mut w, e);
        }
    }
    w
}

fn put_vec(w: &mut Vec<u8>, v: &[u64]) {
    put_u64(w, v.len() as u64);
    for &x in v {
        put_u64(w, x);
    }
}

fn put_stream(w: &mut Vec<u8>, s: &StreamStats) {
    put_u64(w, s.stream as u64);
    for v in [s.requests, s.reads, s.writes] {
        put_u64(w, v);
    }
    w.extend_from_slice(&s.size_sum.to_le_bytes());
    w.extend_from_slice(&s.latency_sum.to_le_bytes());
    put_u64(w, s.first_ts as u64);
    put_u64(w, s.last_ts as u64);
    for v in [
        s.backward,
        s.sequential,
        s.forward,
        s.interference_sum,
        s.pairs,
        s.global_runs,
        s.detangled_runs,
        s.relaxed_runs,
    ] {
        put_u64(w, v);
    }
    put_vec(w, &s.locality);
}

pub fn decode(bytes: &[u8]) -> Result<Partial, String> {
    let mut r = Reader::new(bytes);
    if r.take(MAGIC.len())? != MAGIC {
        return Err("not iotwin characterization counts (bad magic)".into());
    }
    let capacity = r.u64()?;
    let leaves = r.u64()? as usize;
    let span = r.u64()?;
    let window_ns = r.u64()? as i64;
    let window_counts = r.vec()?;
    let size_log2 = r.vec()?;
    let jump_log2 = r.vec()?;
    let mut size_counts = FxHashMap::default();
    for _ in 0..r.len(16)? {
        let size = r.u64()? as u32;
        size_counts.insert(size, r.u64()?);
    }
    let n = r.len(8)?;
    let (mut streams, mut requested, mut ranges) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..n {
        let s = r.stream()?;
        let windows = (0..r.len(16)?)
            .map(|_| Ok((r.u64()?, r.u64()?)))
            .collect::<Result<Vec<_>, String>>()?;
        streams.push((s, windows));
        requested.push(r.u64()?);
        let rs = (0..r.len(16)?)
            .map(|_| Ok((r.u64()?, r.u64()?)))
            .collect::<Result<Vec<_>, String>>()?;
        ranges.push(rs);
    }
    if r.at != bytes.len() {
        return Err(format!("{} trailing bytes", bytes.len() - r.at));
    }
    Ok(Partial {
        counts: Counts {
            capacity,
            leaves,
            streams,
            window_counts,
            size_counts,
            size_log2,
            jump_log2,
        },
        requested,
        ranges,
        span,
        window_ns,
    })
}

/// The characterize parts' own items, read with the shared reader.
trait PartialReader {
    fn vec(&mut self) -> Result<Vec<u64>, String>;
    fn stream(&mut self) -> Result<StreamStats, String>;
}

impl PartialReader for Reader<'_> {
    fn vec(&mut self) -> Result<Vec<u64>, String> {
        (0..self.len(8)?).map(|_| self.u64()).collect()
    }
    fn stream(&mut self) -> Result<StreamStats, String> {
        let mut s = StreamStats {
            stream: self.u64()? as u32,
            requests: self.u64()?,
            reads: self.u64()?,
            writes: self.u64()?,
            size_sum: self.u128()?,
            latency_sum: self.u128()? as i128,
            first_ts: self.u64()? as i64,
            last_ts: self.u64()? as i64,
            ..StreamStats::default()
        };
        s.backward = self.u64()?;
        s.sequential = self.u64()?;
        s.forward = self.u64()?;
        s.interference_sum = self.u64()?;
        s.pairs = self.u64()?;
        s.global_runs = self.u64()?;
        s.detangled_runs = self.u64()?;
        s.relaxed_runs = self.u64()?;
        s.locality = self.vec()?;
        Ok(s)
    }
}

#[cfg(test)]
mod tests {
    use super::super::characterize::characterize;
    use super::*;

    /// Three interleaved streams cut into two parts (streams {0, 2} and {1}): the merged parts
    /// give the whole trace's summary, footprints and global runs included.
    #[test]
    fn parts_merge_to_the_whole_summary() {
        let n = 60usize;
        let ts: Vec<i64> = (0..n as i64).map(|i| i * 1_000_000_007).collect();
        let st: Vec<u32> = (0..n).map(|i| (i * 7 % 3) as u32).collect();
        let op: Vec<u8> = (0..n).map(|i| (i % 4 == 0) as u8).collect();
        let sz: Vec<u32> = (0..n).map(|i| [512, 4096, 1024, 0][i % 4]).collect();
        let mut off = vec![0u64; n];
        for i in 1..n {
            off[i] = if i % 3 == 0 {
                off[i - 1] + sz[i - 1] as u64 // continues the previous request (any stream)
            } else {
                (i as u64 * 7919 % 97) * 512
            };
        }
        let params = Params {
            leaves: 4,
            capacity: 0,
            window_ns: 5_000_000_000,
            relaxed_threshold: 4096,
        };
        let all = TraceColumns::new(&ts, &st, &op, &off, &sz);
        let expected = characterize(&all, &params).unwrap();
        let run_start: Vec<u8> = (0..n)
            .map(|i| (i == 0 || off[i] != off[i - 1] + sz[i - 1] as u64) as u8)
            .collect();
        let whole = Whole {
            first_ts: ts[0],
            last_ts: ts[n - 1],
            max_end: (0..n).map(|i| off[i] + sz[i] as u64).max().unwrap(),
            max_stream: 2,
        };
        let part = |keep: &[u32]| {
            let rows: Vec<usize> = (0..n).filter(|&i| keep.contains(&st[i])).collect();
            let t: Vec<i64> = rows.iter().map(|&i| ts[i]).collect();
            let s: Vec<u32> = rows.iter().map(|&i| st[i]).collect();
            let o: Vec<u8> = rows.iter().map(|&i| op[i]).collect();
            let f: Vec<u64> = rows.iter().map(|&i| off[i]).collect();
            let z: Vec<u32> = rows.iter().map(|&i| sz[i]).collect();
            let q: Vec<u64> = rows.iter().map(|&i| i as u64).collect();
            let r: Vec<u8> = rows.iter().map(|&i| run_start[i]).collect();
            // fed in two pieces, as a task reads a stream's time partitions
            let mut counter = PartialCounter::new(&params, &whole).unwrap();
            let cut = rows.len() / 3;
            for (a, b) in [(0, cut), (cut, rows.len())] {
                let piece = TraceColumns {
                    ts_ns: &t[a..b],
                    stream: &s[a..b],
                    op: &o[a..b],
                    offset: &f[a..b],
                    size: &z[a..b],
                    latency_ns: None,
                    seq: Some(&q[a..b]),
                    run_start: Some(&r[a..b]),
                };
                counter.update(&piece).unwrap();
            }
            decode(&encode(&counter.finish())).unwrap()
        };
        let merged = merge(vec![part(&[0, 2]), part(&[1])]).unwrap();
        assert_eq!(finish(merged).unwrap(), expected);
        let err = merge(vec![part(&[0]), part(&[0, 1])]).unwrap_err();
        assert!(err.contains("stream 0 is in two parts"), "{err}");
        assert!(decode(b"IOTWCHR1").is_err());
    }
}
