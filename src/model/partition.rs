//! Fitting a trace stored in partitions (a Parquet dataset split by stream and time), on one
//! machine or on a cluster: each partition's statistics become bytes a worker sends back,
//! neighbours merge exactly (`Fitter::merge_detached`) and finalisation runs once.
//!
//! The bytes are a compact little-endian encoding of a `Fitter` (its statistics, each stream's
//! first and last request), so a worker's result crosses processes and machines unchanged.

use super::hist::Hist;
use super::stats::{
    sample_threshold, Batch, Category, FitConfig, Fitter, IatStats, Last, RecentEnds, Request,
    StackTracker, StreamStats, TransStats, WindowStats,
};
use super::tree::{TransKey, Tree};
use crate::codec::{put_i64, put_u128, put_u32, put_u64, Reader};
use rustc_hash::FxHashMap;

/// Version 2 added resumed runs (each stream's lag histogram, each head's lag), version 3
/// in-leaf jumps (each stream's `jumps_ahead` and `jumps_behind`), version 4 each stream's
/// `extent`, version 5 resumed re-scans' `resume_reuse`, version 6 each stream's 4 KiB `phase`,
/// version 7 distances over every block a request overlaps (same layout, other counts),
/// version 8 each window's first and last request (`WindowStats`), version 9 the writes'
/// distances (`reuse_write`, `resume_reuse_write`), version 10 each window's reads.
const MAGIC: &[u8; 8] = b"IOTWFI10";

/// A fitter fed partition after partition of the same streams, in time order.
///
/// With the re-reference extension, each stream's LRU stack distances continue across the
/// partitions (`StackTracker`), sampled as one pass would for a stream of its total length.
#[derive(Debug, Clone)]
pub struct PartitionFitter {
    pub fitter: Fitter,
    trackers: FxHashMap<u32, StackTracker>,
    /// Each stream's latest request ends, for resumed runs (`resume_lags`).
    recent: FxHashMap<u32, RecentEnds>,
    /// Requests of each stream in the whole trace (needed only with re-references).
    lengths: FxHashMap<u32, u64>,
}

impl PartitionFitter {
    pub fn new(config: FitConfig, lengths: FxHashMap<u32, u64>) -> PartitionFitter {
        PartitionFitter {
            fitter: Fitter::new(config),
            trackers: FxHashMap::default(),
            recent: FxHashMap::default(),
            lengths,
        }
    }

    /// Adds the next partition's requests (time-ordered).
    pub fn update(
        &mut self,
        ts: &[i64],
        stream: &[u32],
        op: &[u8],
        offset: &[u64],
        size: &[u32],
    ) -> Result<(), String> {
        let n = ts.len();
        if [stream.len(), op.len(), offset.len(), size.len()] != [n; 4] {
            return Err("columns of different lengths".into());
        }
        let (reuse, resume) = if self.fitter.config.reref {
            (
                Some(self.distances(stream, offset, size)?),
                Some(self.lags(stream, offset, size)),
            )
        } else {
            (None, None)
        };
        let (reuse, resume) = (reuse.as_deref(), resume.as_deref());
        let batch = Batch::new(ts, stream, op, offset, size);
        self.fitter
            .update(batch.with_reuse(reuse).with_resume(resume));
        Ok(())
    }

    fn lags(&mut self, stream: &[u32], offset: &[u64], size: &[u32]) -> Vec<u8> {
        let it = stream.iter().zip(offset.iter().zip(size));
        it.map(|(s, (&o, &n))| self.recent.entry(*s).or_default().next(o, n))
            .collect()
    }

    fn distances(
        &mut self,
        stream: &[u32],
        offset: &[u64],
        size: &[u32],
    ) -> Result<Vec<u32>, String> {
        let mut out = Vec::with_capacity(stream.len());
        for (&s, (&o, &n)) in stream.iter().zip(offset.iter().zip(size)) {
            let tracker = match self.trackers.get_mut(&s) {
                Some(t) => t,
                None => {
                    let total = *self.lengths.get(&s).ok_or_else(|| {
                        format!("stream {s}: its request count is not in the dataset's manifest")
                    })?;
                    let t = StackTracker::new(total as usize, sample_threshold(total));
                    self.trackers.entry(s).or_insert(t)
                }
            };
            out.push(tracker.next(o, n, 4096));
        }
        Ok(out)
    }
}

/// Merges partitions' statistics given in order (by stream, then time): the statistics of
/// one pass over all of them.
pub fn merge_ordered(parts: &[Fitter]) -> Option<Fitter> {
    let mut it = parts.iter();
    let mut whole = it.next()?.clone();
    for later in it {
        whole.merge_detached(later);
    }
    Some(whole)
}

// -- encoding --------------------------------------------------------------------------------

/// The fitter as bytes (see `decode`).
pub fn encode(f: &Fitter) -> Vec<u8> {
    let mut w = Vec::with_capacity(1 << 12);
    w.extend_from_slice(MAGIC);
    let c = f.config;
    put_u32(&mut w, c.tree.levels);
    put_u32(&mut w, c.tree.fanout);
    put_u64(&mut w, c.tree.capacity);
    w.push(c.flat as u8);
    put_i64(&mut w, c.window_ns);
    w.push(c.reref as u8);
    put_u64(&mut w, f.streams.len() as u64);
    for (&id, s) in &f.streams {
        put_u32(&mut w, id);
        put_stream(&mut w, s);
    }
    put_u64(&mut w, f.lasts.len() as u64);
    for (&id, l) in &f.lasts {
        put_u32(&mut w, id);
        put_u64(&mut w, l.leaf);
        put_u64(&mut w, l.end);
        put_i64(&mut w, l.ts);
    }
    put_u64(&mut w, f.heads.len() as u64);
    for (&id, h) in &f.heads {
        put_u32(&mut w, id);
        put_i64(&mut w, h.ts);
        put_u32(&mut w, h.stream);
        put_u32(&mut w, h.key);
        w.push(h.op);
        put_u64(&mut w, h.offset);
        put_u32(&mut w, h.size);
        put_u32(&mut w, h.reuse);
        w.push(h.resume);
    }
    w
}

/// The fitter `encode` wrote; an error names what is wrong with the bytes.
pub fn decode(bytes: &[u8]) -> Result<Fitter, String> {
    let mut r = Reader::new(bytes);
    if r.take(MAGIC.len())? != MAGIC {
        return Err("not iotwin partition statistics (bad magic)".into());
    }
    let (levels, fanout, capacity) = (r.u32()?, r.u32()?, r.u64()?);
    let config = FitConfig {
        tree: Tree::new(levels, fanout, capacity),
        flat: r.u8()? != 0,
        window_ns: r.i64()?,
        reref: r.u8()? != 0,
    };
    let mut f = Fitter::new(config);
    for _ in 0..r.len(1)? {
        let id = r.u32()?;
        f.streams.insert(id, r.stream()?);
    }
    for _ in 0..r.len(1)? {
        let id = r.u32()?;
        let last = Last {
            leaf: r.u64()?,
            end: r.u64()?,
            ts: r.i64()?,
        };
        f.lasts.insert(id, last);
    }
    for _ in 0..r.len(1)? {
        let id = r.u32()?;
        let head = Request {
            ts: r.i64()?,
            stream: r.u32()?,
            key: r.u32()?,
            op: r.u8()?,
            offset: r.u64()?,
            size: r.u32()?,
            reuse: r.u32()?,
            resume: r.u8()?,
        };
        f.heads.insert(id, head);
    }
    if r.at != bytes.len() {
        return Err(format!("{} trailing bytes", bytes.len() - r.at));
    }
    Ok(f)
}

fn put_category(w: &mut Vec<u8>, c: &Category) {
    w.push(c.op);
    put_u32(w, c.size);
    w.push(c.kind);
}

fn put_hist(w: &mut Vec<u8>, h: &Hist) {
    put_u64(w, h.counts.len() as u64);
    for (&b, &c) in &h.counts {
        w.extend_from_slice(&b.to_le_bytes());
        put_u64(w, c);
    }
}

fn put_stream(w: &mut Vec<u8>, s: &StreamStats) {
    put_u64(w, s.requests);
    match s.first_ts {
        Some(t) => {
            w.push(1);
            put_i64(w, t);
        }
        None => w.push(0),
    }
    match &s.first {
        Some((leaf, c)) => {
            w.push(1);
            put_u64(w, *leaf);
            put_category(w, c);
        }
        None => w.push(0),
    }
    put_u64(w, s.members);
    put_u64(w, s.transitions.len() as u64);
    for (k, t) in &s.transitions {
        put_u32(w, k.depth);
        put_u64(w, k.prefix);
        put_u32(w, k.from);
        put_u32(w, k.to);
        put_u64(w, t.count);
        put_u64(w, t.categories.len() as u64);
        for (c, iat) in &t.categories {
            put_category(w, c);
            put_u64(w, iat.count);
            put_u128(w, iat.sum);
            put_u128(w, iat.sum_sq);
            put_u128(w, iat.sum_log_fx as u128);
            put_u64(w, iat.positive);
            put_hist(w, &iat.hist);
        }
    }
    put_u64(w, s.entries.len() as u64);
    for (&(d, leaf), &c) in &s.entries {
        put_u32(w, d);
        put_u64(w, leaf);
        put_u64(w, c);
    }
    put_u64(w, s.leaf_visits.len() as u64);
    for (&leaf, &c) in &s.leaf_visits {
        put_u64(w, leaf);
        put_u64(w, c);
    }
    put_u64(w, s.windows.len() as u64);
    for (&win, x) in &s.windows {
        put_i64(w, win);
        put_u64(w, x.count);
        put_u64(w, x.reads);
        put_i64(w, x.first);
        put_i64(w, x.last);
    }
    put_u32(w, s.alignment_bits);
    for &c in &s.phase {
        put_u64(w, c);
    }
    put_hist(w, &s.reuse);
    put_hist(w, &s.resume);
    put_hist(w, &s.resume_reuse);
    put_hist(w, &s.reuse_write);
    put_hist(w, &s.resume_reuse_write);
    put_hist(w, &s.jumps_ahead);
    put_hist(w, &s.jumps_behind);
    put_u64(w, s.bytes);
    let (lo, hi) = s.extent.unwrap_or((u64::MAX, 0)); // lo > hi: none
    put_u64(w, lo);
    put_u64(w, hi);
}

/// The fit statistics' own items, read with the shared reader.
trait FitReader {
    fn category(&mut self) -> Result<Category, String>;
    fn hist(&mut self) -> Result<Hist, String>;
    fn stream(&mut self) -> Result<StreamStats, String>;
}

impl FitReader for Reader<'_> {
    fn category(&mut self) -> Result<Category, String> {
        Ok(Category {
            op: self.u8()?,
            size: self.u32()?,
            kind: self.u8()?,
        })
    }
    fn hist(&mut self) -> Result<Hist, String> {
        let mut h = Hist::default();
        for _ in 0..self.len(1)? {
            let b = self.u16()?;
            h.counts.insert(b, self.u64()?);
        }
        Ok(h)
    }
    fn stream(&mut self) -> Result<StreamStats, String> {
        let mut s = StreamStats {
            requests: self.u64()?,
            ..Default::default()
        };
        if self.flag()? {
            s.first_ts = Some(self.i64()?);
        }
        if self.flag()? {
            let leaf = self.u64()?;
            s.first = Some((leaf, self.category()?));
        }
        s.members = self.u64()?;
        for _ in 0..self.len(1)? {
            let key = TransKey {
                depth: self.u32()?,
                prefix: self.u64()?,
                from: self.u32()?,
                to: self.u32()?,
            };
            let mut t = TransStats {
                count: self.u64()?,
                ..Default::default()
            };
            for _ in 0..self.len(1)? {
                let c = self.category()?;
                let iat = IatStats {
                    count: self.u64()?,
                    sum: self.u128()?,
                    sum_sq: self.u128()?,
                    sum_log_fx: self.u128()? as i128,
                    positive: self.u64()?,
                    hist: self.hist()?,
                };
                t.categories.insert(c, iat);
            }
            s.transitions.insert(key, t);
        }
        for _ in 0..self.len(1)? {
            let key = (self.u32()?, self.u64()?);
            s.entries.insert(key, self.u64()?);
        }
        for _ in 0..self.len(1)? {
            let leaf = self.u64()?;
            s.leaf_visits.insert(leaf, self.u64()?);
        }
        for _ in 0..self.len(1)? {
            let win = self.i64()?;
            let (count, reads) = (self.u64()?, self.u64()?);
            let (first, last) = (self.i64()?, self.i64()?);
            let x = WindowStats {
                count,
                reads,
                first,
                last,
            };
            s.windows.insert(win, x);
        }
        s.alignment_bits = self.u32()?;
        for c in &mut s.phase {
            *c = self.u64()?;
        }
        s.reuse = self.hist()?;
        s.resume = self.hist()?;
        s.resume_reuse = self.hist()?;
        s.reuse_write = self.hist()?;
        s.resume_reuse_write = self.hist()?;
        s.jumps_ahead = self.hist()?;
        s.jumps_behind = self.hist()?;
        s.bytes = self.u64()?;
        let (lo, hi) = (self.u64()?, self.u64()?);
        s.extent = (lo <= hi).then_some((lo, hi));
        Ok(s)
    }
}

#[cfg(test)]
mod tests {
    use super::super::stats::{resume_lags, stack_distances};
    use super::*;

    fn config(reref: bool) -> FitConfig {
        FitConfig {
            tree: Tree::new(2, 4, 1 << 20),
            flat: false,
            window_ns: 100,
            reref,
        }
    }

    /// Two streams, re-references, sequential and resumed runs, cut at every position.
    #[test]
    fn partitions_by_stream_and_time_merge_to_one_pass() {
        let ts: Vec<i64> = (0..40).map(|i| i * 7).collect();
        let st: Vec<u32> = (0..40).map(|i| (i % 3 == 0) as u32).collect();
        let op: Vec<u8> = (0..40).map(|i| (i % 5 == 0) as u8).collect();
        let sz: Vec<u32> = (0..40).map(|i| 4096 << (i % 2)).collect();
        let off: Vec<u64> = (0..40u64).map(|i| ((i * 37) % 11) * 4096).collect();
        let reuse = stack_distances(&st, &off, &sz, 4096);
        let resume = resume_lags(&st, &off, &sz);
        assert!(resume.iter().filter(|&&l| l > 1).count() > 5); // resumed runs across the cuts
        let mut one = Fitter::new(config(true));
        one.update(
            Batch::new(&ts, &st, &op, &off, &sz)
                .with_reuse(Some(&reuse))
                .with_resume(Some(&resume)),
        );
        let lengths: FxHashMap<u32, u64> = [(0, 26), (1, 14)].into_iter().collect();
        for cut in [1usize, 5, 13] {
            // each stream alone, split into time partitions [..cut), [cut..)
            let mut parts = Vec::new();
            for s in [0u32, 1] {
                let rows: Vec<usize> = (0..40).filter(|&i| st[i] == s).collect();
                let mut pf = PartitionFitter::new(config(true), lengths.clone());
                for chunk in [&rows[..cut.min(rows.len())], &rows[cut.min(rows.len())..]] {
                    let pick = |v: &[i64]| chunk.iter().map(|&i| v[i]).collect::<Vec<_>>();
                    let ts_c = pick(&ts);
                    let st_c: Vec<u32> = chunk.iter().map(|&i| st[i]).collect();
                    let op_c: Vec<u8> = chunk.iter().map(|&i| op[i]).collect();
                    let off_c: Vec<u64> = chunk.iter().map(|&i| off[i]).collect();
                    let sz_c: Vec<u32> = chunk.iter().map(|&i| sz[i]).collect();
                    pf.update(&ts_c, &st_c, &op_c, &off_c, &sz_c).unwrap();
                }
                parts.push(decode(&encode(&pf.fitter)).unwrap());
            }
            let merged = merge_ordered(&parts).unwrap();
            assert_eq!(merged.streams, one.streams, "cut {cut}");
            assert_eq!(merged.lasts, one.lasts);
        }
    }

    /// A stream longer than EXACT_REQUESTS gets sampled distances: fed in three partitions,
    /// the tracker gives the very distances `stack_distances` gives the whole stream.
    #[test]
    fn sampled_distances_continue_across_partitions() {
        use super::super::stats::EXACT_REQUESTS;
        let n = EXACT_REQUESTS + 100_003;
        let off: Vec<u64> = (0..n as u64)
            .map(|i| (i.wrapping_mul(2_654_435_761) % 50_000) * 4096)
            .collect();
        let sz: Vec<u32> = (0..n as u32).map(|i| 4096 * (1 + i % 3)).collect();
        let st = vec![0u32; n];
        let whole = stack_distances(&st, &off, &sz, 4096);
        let mut tracker = StackTracker::new(n, sample_threshold(n as u64));
        let fed: Vec<u32> = [(0, 1000), (1000, n / 2), (n / 2, n)]
            .iter()
            .flat_map(|&(a, b)| a..b)
            .map(|i| tracker.next(off[i], sz[i], 4096))
            .collect();
        assert_eq!(fed, whole);
        assert!(whole.contains(&super::super::stats::REUSE_UNSAMPLED)); // it did sample
    }

    #[test]
    fn detached_time_partitions_round_trip_and_merge() {
        let ts: Vec<i64> = (0..30).map(|i| i * 3).collect();
        let st: Vec<u32> = (0..30).map(|i| (i % 2) as u32).collect();
        let op = vec![0u8; 30];
        let sz = vec![512u32; 30];
        let off: Vec<u64> = (0..30u64)
            .map(|i| (i / 2) * 512 + (i % 2) * 65536)
            .collect();
        let mut one = Fitter::new(config(false));
        one.update(Batch::new(&ts, &st, &op, &off, &sz));
        let parts: Vec<Fitter> = [(0, 11), (11, 12), (12, 30)]
            .iter()
            .map(|&(a, b)| {
                let mut pf = PartitionFitter::new(config(false), FxHashMap::default());
                pf.update(&ts[a..b], &st[a..b], &op[a..b], &off[a..b], &sz[a..b])
                    .unwrap();
                decode(&encode(&pf.fitter)).unwrap()
            })
            .collect();
        let merged = merge_ordered(&parts).unwrap();
        assert_eq!(merged.streams, one.streams);
        assert_eq!(merged.lasts, one.lasts);
    }

    #[test]
    fn bad_bytes_are_refused() {
        let mut pf = PartitionFitter::new(config(false), FxHashMap::default());
        pf.update(&[0, 1], &[0, 0], &[0, 1], &[0, 512], &[512, 512])
            .unwrap();
        let bytes = encode(&pf.fitter);
        assert!(decode(&bytes[..bytes.len() - 3]).is_err());
        assert!(decode(b"nonsense").is_err());
        let mut longer = bytes.clone();
        longer.push(0);
        assert!(decode(&longer).unwrap_err().contains("trailing"));
    }

    #[test]
    fn reref_needs_stream_lengths() {
        let mut pf = PartitionFitter::new(config(true), FxHashMap::default());
        let err = pf.update(&[0], &[7], &[0], &[0], &[512]).unwrap_err();
        assert!(err.contains("stream 7"), "{err}");
    }
}
