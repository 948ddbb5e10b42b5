//! Sufficient statistics of the model: counts, sums and histograms per stream, transition and
//! I/O category. Statistics of two partitions merge exactly (`merge`), so one machine or a
//! cluster produce the same model; finalisation (`finalize.rs`) turns them into probabilities
//! and fitted distributions.

use super::hist::{bucket, Hist, BUCKETS};
use super::history::BLOCK;
use super::lastseen::LastSeen;
use super::tree::{TransKey, Tree};
use crate::columns::OP_WRITE;
use crate::rankset::{Retouched, WeightedSet};
use rustc_hash::FxHashMap;

/// How a request relates to the stream's previous ones.
pub const KIND_RANDOM: u8 = 0;
pub const KIND_SEQUENTIAL: u8 = 1;
/// A non-sequential request to a block the stream touched before (the re-reference
/// extension; `reuse` holds its LRU stack distance in distinct blocks).
pub const KIND_REREF: u8 = 2;

/// A sequential request over a block the stream touched before (a re-scan).
pub const KIND_SEQ_REREF: u8 = 3;
/// A non-sequential request that starts where one of the stream's last RESUME_WINDOW requests
/// ended: an interleaved sequential run picked up again (`resume` holds how many requests
/// back). Part of the re-reference extension: such requests continue old runs, so new data
/// lands next to data touched before instead of on fresh blocks.
pub const KIND_RESUME: u8 = 4;
/// A resumed run over blocks the stream touched before (an interleaved re-scan picked up
/// again; `resume_reuse` holds its LRU stack distance): where the twin has no such run
/// open, the request re-reads old data at that distance instead of landing on fresh blocks.
pub const KIND_RESUME_REREF: u8 = 5;
/// A cold request that starts within NEAR_BYTES of the stream's previous end, in its leaf,
/// without continuing it: a short seek (`jumps_ahead`, `jumps_behind` below NEAR_BYTES hold
/// how far). Split from the random ones so that its category keeps its own inter-arrival
/// times: msr_hm0's reads that follow a read within 0.1 ms land within 1 MiB of it 52% of
/// the time; re-placed uniformly in their 53 MiB leaves, its cache speedup at 1/8 of the
/// footprint falls from 3.35 to 1.42 (docs/model.md). Part of the re-reference extension.
pub const KIND_NEAR: u8 = 6;
/// How far from its stream's previous end a cold request is near (`KIND_NEAR`): a power of
/// two, so a bucket edge of the jump histograms.
pub const NEAR_BYTES: u64 = 1 << 20;

/// Whether a request of this kind starts where the stream's previous one ended.
pub fn is_continuation(kind: u8) -> bool {
    kind == KIND_SEQUENTIAL || kind == KIND_SEQ_REREF
}
/// How many of a stream's latest request ends a resumed run may start at. Measured (sum of
/// the MRC deviations over the shared traces, docs/model.md): 8, 12, 16, 24, 32, 64 gave
/// .68, .63, .66, .71, .69, .72; wider windows resume more runs on cloudPhysics, whose twin
/// then hits more in small caches than the original.
pub const RESUME_WINDOW: usize = 12;

/// Marks a flat-model transition (`prefix` = from-leaf, `to` = to-leaf).
pub const FLAT_DEPTH: u32 = u32::MAX;

/// The I/O category of a request on a transition.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Category {
    pub op: u8,
    pub size: u32,
    pub kind: u8,
}

/// Fixed-point scale of `IatStats::sum_log`: integer sums merge exactly in any order, so
/// partitions fitted apart (threads, a Dask cluster) give the very model one pass gives.
const LOG_SCALE: f64 = (1u64 << 40) as f64;

/// ln(iat) in fixed point (`LOG_SCALE`), rounded to the nearest integer (iat >= 1). ln(iat)
/// < 44.4, so the value fits an i64 (converting through it avoids the slow float -> i128
/// conversion); and it is 0 or above 2^39, where adding a half and truncating rounds as
/// `f64::round` does, without its call into libm (5% of a fit's time).
#[inline]
fn log_fx(iat: u64) -> i64 {
    ((iat as f64).ln() * LOG_SCALE + 0.5) as i64
}

/// Inter-arrival times seen on one category of one transition (nanoseconds).
#[derive(Debug, Default, Clone, PartialEq)]
pub struct IatStats {
    pub count: u64,
    pub sum: u128,
    pub sum_sq: u128,
    /// Sum of ln(iat) over positive iats in fixed point (LOG_SCALE), and how many were
    /// positive (gamma's MLE needs it).
    pub sum_log_fx: i128,
    pub positive: u64,
    pub hist: Hist,
}

impl IatStats {
    pub fn add(&mut self, iat: u64) {
        self.count += 1;
        self.sum += iat as u128;
        self.sum_sq += iat as u128 * iat as u128;
        if iat > 0 {
            self.sum_log_fx += log_fx(iat) as i128;
            self.positive += 1;
        }
        self.hist.add(iat);
    }

    /// `add` of every value, with the histogram's buckets counted in `scratch` (all zero,
    /// and left so) and added to its map once per bucket: the same statistics, with a hash
    /// lookup per bucket instead of per value (a fit's heavy categories take thousands).
    pub fn add_all(&mut self, values: &[u64], scratch: &mut [u32; BUCKETS]) {
        let (mut sum, mut sum_sq, mut sum_log, mut positive) = (0u128, 0u128, 0i128, 0u64);
        let mut touched: Vec<u16> = Vec::new();
        for &iat in values {
            sum += iat as u128;
            sum_sq += iat as u128 * iat as u128;
            if iat > 0 {
                sum_log += log_fx(iat) as i128;
                positive += 1;
            }
            let b = bucket(iat);
            let cell = &mut scratch[b as usize];
            if *cell == 0 {
                touched.push(b);
            }
            *cell += 1;
        }
        self.count += values.len() as u64;
        self.sum += sum;
        self.sum_sq += sum_sq;
        self.sum_log_fx += sum_log;
        self.positive += positive;
        for b in touched {
            let cell = &mut scratch[b as usize];
            *self.hist.counts.entry(b).or_insert(0) += *cell as u64;
            *cell = 0;
        }
    }

    /// Sum of ln(iat) over the positive inter-arrival times.
    pub fn sum_log(&self) -> f64 {
        self.sum_log_fx as f64 / LOG_SCALE
    }

    pub fn merge(&mut self, o: &IatStats) {
        self.count += o.count;
        self.sum += o.sum;
        self.sum_sq += o.sum_sq;
        self.sum_log_fx += o.sum_log_fx;
        self.positive += o.positive;
        self.hist.merge(&o.hist);
    }
}

/// What the model keeps of one transition.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct TransStats {
    pub count: u64,
    pub categories: FxHashMap<Category, IatStats>,
}

/// The last request of a stream, carried across partitions so no transition is lost.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Last {
    pub leaf: u64,
    pub end: u64,
    pub ts: i64,
}

/// Everything the model learns about one stream.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct StreamStats {
    pub requests: u64,
    pub first_ts: Option<i64>,
    pub first: Option<(u64, Category)>,
    /// How many streams were fitted into these statistics (one, or a stream type's members).
    pub members: u64,
    pub transitions: FxHashMap<TransKey, TransStats>,
    /// (depth of the transition that entered, landing leaf) -> count: entry distributions.
    pub entries: FxHashMap<(u32, u64), u64>,
    pub leaf_visits: FxHashMap<u64, u64>,
    /// Per fluctuation window (index from the trace's first request): its requests and
    /// when the first and last came.
    pub windows: FxHashMap<i64, WindowStats>,
    /// Largest power of two (up to 1 MiB) dividing every offset: random offsets keep it.
    pub alignment_bits: u32,
    /// Where the random requests start inside their 4 KiB block, in 512-byte steps
    /// (`phase_of`): the twin's random requests keep it, so they cover as many blocks.
    pub phase: [u64; PHASES],
    pub reuse: Hist,
    /// How many requests back each resumed run's request ended (KIND_RESUME and
    /// KIND_RESUME_REREF).
    pub resume: Hist,
    /// LRU stack distances of the resumed requests over old data (KIND_RESUME_REREF).
    pub resume_reuse: Hist,
    /// The writes' share of `reuse` and `resume_reuse` (the reads' is the rest): a stream's
    /// writes re-reference recent blocks, its reads older ones (cloudPhysics: 42% against 11%
    /// of their old blocks hit a cache of 1% of the footprint), so one histogram for both
    /// gave the twin's reads the writes' short distances.
    pub reuse_write: Hist,
    pub resume_reuse_write: Hist,
    /// How far a random request landed past (ahead) or before (behind) the end of the
    /// stream's previous request, when both start in one leaf (`leaf_jump`).
    pub jumps_ahead: Hist,
    pub jumps_behind: Hist,
    pub bytes: u64,
    /// The stream's smallest offset and largest end (`extent`).
    pub extent: Option<(u64, u64)>,
}

/// A stream's requests in one fluctuation window, and the times of its first and last:
/// the twin keeps each window's count and its stream's active stretch of the window (a
/// process that works only at a window's end does not interleave with the others).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WindowStats {
    pub count: u64,
    /// Of them reads: a stream's operations need not fluctuate together (cloudPhysics reads
    /// almost only in its two busy windows, and writes in every one).
    pub reads: u64,
    pub first: i64,
    pub last: i64,
}

impl WindowStats {
    /// No request yet (merging into it gives the other).
    pub const EMPTY: WindowStats = WindowStats {
        count: 0,
        reads: 0,
        first: i64::MAX,
        last: i64::MIN,
    };

    /// One request at `ts`, a read or not.
    pub fn at(ts: i64, read: bool) -> WindowStats {
        WindowStats {
            count: 1,
            reads: read as u64,
            first: ts,
            last: ts,
        }
    }

    pub fn merge(&mut self, o: &WindowStats) {
        self.count += o.count;
        self.reads += o.reads;
        self.first = self.first.min(o.first);
        self.last = self.last.max(o.last);
    }
}

/// Adds window `w`'s requests `x` to a stream's windows.
pub(super) fn add_window(into: &mut FxHashMap<i64, WindowStats>, w: i64, x: WindowStats) {
    into.entry(w).and_modify(|mine| mine.merge(&x)).or_insert(x);
}

/// Adds one stream's windows to another's.
pub(super) fn add_windows(
    into: &mut FxHashMap<i64, WindowStats>,
    from: &FxHashMap<i64, WindowStats>,
) {
    for (&w, &x) in from {
        add_window(into, w, x);
    }
}

/// 512-byte steps in a 4 KiB block: where a random request starts inside its block.
pub const PHASE_BYTES: u64 = 512;
pub const PHASES: usize = (BLOCK / PHASE_BYTES) as usize;

/// The 512-byte step of a 4 KiB block at which `offset` lies.
pub fn phase_of(offset: u64) -> usize {
    (offset / PHASE_BYTES) as usize % PHASES
}

/// Adds one set of phase counts to another.
pub(super) fn add_phases(into: &mut [u64; PHASES], from: &[u64; PHASES]) {
    for (mine, theirs) in into.iter_mut().zip(from) {
        *mine += theirs;
    }
}

/// Counts a request's phase when it is random (a cold one, with re-references on).
pub(super) fn add_phase(phase: &mut [u64; PHASES], r: &Request, kind: u8) {
    if is_cold(kind) {
        phase[phase_of(r.offset)] += 1;
    }
}

/// The smallest range holding both (None: no request yet).
pub fn union_extent(a: Option<(u64, u64)>, b: Option<(u64, u64)>) -> Option<(u64, u64)> {
    match (a, b) {
        (Some((lo1, hi1)), Some((lo2, hi2))) => Some((lo1.min(lo2), hi1.max(hi2))),
        (x, None) | (None, x) => x,
    }
}

/// Fitting settings.
#[derive(Debug, Clone, Copy)]
pub struct FitConfig {
    pub tree: Tree,
    pub flat: bool,
    pub window_ns: i64,
    /// Whether re-references are a category of their own (needs `reuse` distances).
    pub reref: bool,
}

/// One request as the fitter sees it (`key`: the statistics it counts into).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Request {
    pub ts: i64,
    pub stream: u32,
    pub key: u32,
    pub op: u8,
    pub offset: u64,
    pub size: u32,
    pub reuse: u32,
    /// How many requests back (2..=RESUME_WINDOW) the stream's request ending at this one's
    /// offset was; 0: none (see `resume_lags`).
    pub resume: u8,
}

/// Time-ordered requests as the fitter counts them: the canonical columns and, where
/// measured, each request's stack distance, resumed-run lag and statistics key (its stream's
/// type, when streams are grouped).
#[derive(Debug, Clone, Copy)]
pub struct Batch<'a> {
    pub ts: &'a [i64],
    pub stream: &'a [u32],
    pub op: &'a [u8],
    pub offset: &'a [u64],
    pub size: &'a [u32],
    pub reuse: Option<&'a [u32]>,
    pub resume: Option<&'a [u8]>,
    pub group: Option<&'a [u32]>,
}

impl<'a> Batch<'a> {
    pub fn new(
        ts: &'a [i64],
        stream: &'a [u32],
        op: &'a [u8],
        offset: &'a [u64],
        size: &'a [u32],
    ) -> Batch<'a> {
        Batch {
            ts,
            stream,
            op,
            offset,
            size,
            reuse: None,
            resume: None,
            group: None,
        }
    }

    pub fn with_reuse(self, reuse: Option<&'a [u32]>) -> Batch<'a> {
        Batch { reuse, ..self }
    }

    pub fn with_resume(self, resume: Option<&'a [u8]>) -> Batch<'a> {
        Batch { resume, ..self }
    }

    pub fn with_group(self, group: Option<&'a [u32]>) -> Batch<'a> {
        Batch { group, ..self }
    }

    pub fn len(&self) -> usize {
        self.ts.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ts.is_empty()
    }

    /// Requests [a, b).
    pub fn range(&self, a: usize, b: usize) -> Batch<'a> {
        Batch {
            ts: &self.ts[a..b],
            stream: &self.stream[a..b],
            op: &self.op[a..b],
            offset: &self.offset[a..b],
            size: &self.size[a..b],
            reuse: self.reuse.map(|r| &r[a..b]),
            resume: self.resume.map(|r| &r[a..b]),
            group: self.group.map(|g| &g[a..b]),
        }
    }

    /// Request i as the fitter sees it.
    pub fn request(&self, i: usize) -> Request {
        Request {
            ts: self.ts[i],
            stream: self.stream[i],
            key: self.group.map_or(self.stream[i], |g| g[i]),
            op: self.op[i],
            offset: self.offset[i],
            size: self.size[i],
            reuse: self.reuse.map_or(u32::MAX, |r| r[i]),
            resume: self.resume.map_or(0, |r| r[i]),
        }
    }
}

/// The I/O category of a request after `last` (its stream's previous request).
pub(super) fn category_of(cfg: &FitConfig, r: &Request, last: Option<Last>) -> Category {
    let sequential = matches!(last, Some(l) if l.end == r.offset);
    let reused = cfg.reref && r.reuse != u32::MAX;
    let resumed = cfg.reref && r.resume > 0; // never sequential (that is lag 1)
    let kind = match (sequential, reused) {
        _ if resumed && reused => KIND_RESUME_REREF,
        _ if resumed => KIND_RESUME,
        (true, true) => KIND_SEQ_REREF,
        (true, false) => KIND_SEQUENTIAL,
        (false, true) => KIND_REREF,
        (false, false) if cfg.reref && last.is_some_and(|l| near(cfg, l, r)) => KIND_NEAR,
        (false, false) => KIND_RANDOM,
    };
    Category {
        op: r.op,
        size: r.size,
        kind,
    }
}

/// Whether `r` starts within NEAR_BYTES of `l`'s end, in its leaf (`KIND_NEAR`).
fn near(cfg: &FitConfig, l: Last, r: &Request) -> bool {
    r.offset.abs_diff(l.end) < NEAR_BYTES && cfg.tree.leaf_of(r.offset) == l.leaf
}

/// Whether a request of this kind is cold and placed anew (random or near), not continuing,
/// resuming or re-reading anything.
pub fn is_cold(kind: u8) -> bool {
    kind == KIND_RANDOM || kind == KIND_NEAR
}

/// Adds a request's distances to its stream's histograms: a resumed run's lag, and its stack
/// distance apart from the re-references' (the sampler places a resume by its lag first).
pub(super) fn add_distances(
    cfg: &FitConfig,
    r: &Request,
    resume: &mut Hist,
    resume_reuse: &mut Hist,
    reuse: &mut Hist,
    [reuse_write, resume_reuse_write]: [&mut Hist; 2],
) {
    if !cfg.reref {
        return;
    }
    let sampled = r.reuse < REUSE_UNSAMPLED;
    let write = r.op == OP_WRITE;
    if r.resume > 0 {
        resume.add(r.resume as u64);
        if sampled {
            resume_reuse.add(r.reuse as u64);
            if write {
                resume_reuse_write.add(r.reuse as u64);
            }
        }
    } else if sampled {
        reuse.add(r.reuse as u64);
        if write {
            reuse_write.add(r.reuse as u64);
        }
    }
}

/// A random request's jump from the end of its stream's previous request `l`, when both
/// start in one leaf: (ahead, distance). Random requests were placed uniformly in their leaf,
/// so the twin had almost none of the short forward jumps a disk's read-ahead makes cheap
/// (4.8% of cloudPhysics' requests jump less than 1 MiB ahead); only with the re-reference
/// extension (the paper's model keeps its uniform placement).
pub(super) fn leaf_jump(
    cfg: &FitConfig,
    l: Last,
    r: &Request,
    leaf: u64,
    kind: u8,
) -> Option<(bool, u64)> {
    if !cfg.reref || !is_cold(kind) || l.leaf != leaf {
        return None;
    }
    Some(if r.offset >= l.end {
        (true, r.offset - l.end)
    } else {
        (false, l.end - r.offset)
    })
}

/// Adds a jump (`leaf_jump`) to its histogram.
pub(super) fn add_jump(ahead: &mut Hist, behind: &mut Hist, jump: Option<(bool, u64)>) {
    match jump {
        Some((true, d)) => ahead.add(d),
        Some((false, d)) => behind.add(d),
        None => {}
    }
}

/// Counts the transition from `l` to request `r` (of category `cat`) landing in `leaf`,
/// and its in-leaf jump (`leaf_jump`).
fn add_transition(
    s: &mut StreamStats,
    cfg: &FitConfig,
    l: Last,
    r: &Request,
    leaf: u64,
    cat: Category,
) {
    let jump = leaf_jump(cfg, l, r, leaf, cat.kind);
    add_jump(&mut s.jumps_ahead, &mut s.jumps_behind, jump);
    let tree = cfg.tree;
    let key = if cfg.flat {
        TransKey {
            depth: FLAT_DEPTH,
            prefix: l.leaf,
            from: 0,
            to: leaf as u32,
        }
    } else {
        tree.transition(l.leaf, leaf)
    };
    if !cfg.flat && key.depth + 1 < tree.levels {
        *s.entries.entry((key.depth, leaf)).or_insert(0) += 1;
    }
    let t = s.transitions.entry(key).or_default();
    t.count += 1;
    t.categories
        .entry(cat)
        .or_default()
        .add((r.ts - l.ts).max(0) as u64);
}

/// Accumulates statistics over requests given in time order.
#[derive(Debug, Clone)]
pub struct Fitter {
    pub config: FitConfig,
    /// Statistics by stream, or by stream type when fitted with groups.
    pub streams: FxHashMap<u32, StreamStats>,
    /// Each stream's last request (transitions stay within a stream, whatever its group).
    pub lasts: FxHashMap<u32, Last>,
    /// Each stream's first request in this fitter, for `merge_detached`.
    pub heads: FxHashMap<u32, Request>,
}

pub(super) const MAX_ALIGN_BITS: u32 = 20;

impl Fitter {
    pub fn new(config: FitConfig) -> Fitter {
        Fitter {
            config,
            streams: FxHashMap::default(),
            lasts: FxHashMap::default(),
            heads: FxHashMap::default(),
        }
    }

    /// Adds requests (time-ordered). `reuse[i]` is request i's stack distance within its
    /// stream (u32::MAX: first touch) and `resume[i]` its resumed-run lag (`resume_lags`)
    /// when the re-reference extension is on. `group[i]`, when
    /// given, is the statistics key of request i (its stream's type), so one sub-model
    /// gathers the transitions of all streams of a type. (`count.rs` holds the loop.)
    pub fn update(&mut self, batch: Batch) {
        super::count::update(self, &[batch]);
    }

    /// `update` over consecutive pieces of the trace (row groups), in order.
    pub fn update_pieces(&mut self, pieces: &[Batch]) {
        super::count::update(self, pieces);
    }

    /// `update` one request at a time into the hash maps: the reference `count.rs` is
    /// tested against.
    #[cfg(test)]
    pub fn update_reference(&mut self, batch: Batch) {
        for i in 0..batch.len() {
            let r = batch.request(i);
            let last = self.lasts.get(&r.stream).copied();
            if last.is_none() {
                self.heads.entry(r.stream).or_insert(r);
            }
            self.observe(&r, last);
            let leaf = self.config.tree.leaf_of(r.offset);
            let end = r.offset + r.size as u64;
            self.lasts.insert(
                r.stream,
                Last {
                    leaf,
                    end,
                    ts: r.ts,
                },
            );
        }
    }

    /// Counts one request, given its stream's previous request (None: the stream's first).
    #[cfg(test)]
    fn observe(&mut self, r: &Request, last: Option<Last>) {
        let cfg = self.config;
        let s = self.streams.entry(r.key).or_insert_with(|| StreamStats {
            alignment_bits: MAX_ALIGN_BITS,
            ..Default::default()
        });
        let leaf = cfg.tree.leaf_of(r.offset);
        s.requests += 1;
        s.bytes += r.size as u64;
        s.extent = union_extent(s.extent, Some((r.offset, r.offset + r.size as u64)));
        *s.leaf_visits.entry(leaf).or_insert(0) += 1;
        add_window(
            &mut s.windows,
            r.ts / cfg.window_ns.max(1),
            WindowStats::at(r.ts, r.op == crate::columns::OP_READ),
        );
        s.alignment_bits = s.alignment_bits.min(r.offset.trailing_zeros());
        add_distances(
            &cfg,
            r,
            &mut s.resume,
            &mut s.resume_reuse,
            &mut s.reuse,
            [&mut s.reuse_write, &mut s.resume_reuse_write],
        );
        let cat = category_of(&cfg, r, last);
        add_phase(&mut s.phase, r, cat.kind);
        match last {
            None => {
                s.members += 1;
                if s.first.is_none() {
                    s.first_ts = Some(r.ts);
                    s.first = Some((leaf, cat));
                }
            }
            Some(l) => add_transition(s, &cfg, l, r, leaf, cat),
        }
    }

    /// Merges the statistics of the partition that follows this one in time, fitted on its
    /// own (in parallel): each of its streams' first request becomes the transition from this
    /// partition's last request of that stream, as one pass over both would have counted it.
    pub fn merge_detached(&mut self, later: &Fitter) {
        let boundary: Vec<(Request, Last)> = later
            .heads
            .values()
            .filter_map(|h| self.lasts.get(&h.stream).map(|l| (*h, *l)))
            .collect();
        for (&stream, h) in &later.heads {
            if !self.lasts.contains_key(&stream) {
                self.heads.entry(stream).or_insert(*h); // still its first request
            }
        }
        self.merge(later);
        let cfg = self.config;
        for (h, l) in boundary {
            let s = self.streams.get_mut(&h.key).expect("merged group");
            s.members -= 1; // the later partition took the stream for a new one
            let leaf = cfg.tree.leaf_of(h.offset);
            let cat = category_of(&cfg, &h, Some(l));
            // the later partition counted its phase as a first (random) request's
            let counted = category_of(&cfg, &h, None).kind;
            if counted == KIND_RANDOM {
                s.phase[phase_of(h.offset)] -= 1;
            }
            add_phase(&mut s.phase, &h, cat.kind);
            add_transition(s, &cfg, l, &h, leaf, cat);
        }
    }

    /// Adds the statistics of the partition that follows this one in time.
    ///
    /// `later` must have been fitted with this fitter's last requests carried in
    /// (`carry_from`), so the transitions across the boundary are already in it.
    pub fn merge(&mut self, later: &Fitter) {
        for (&id, o) in &later.streams {
            let s = self.streams.entry(id).or_insert_with(|| StreamStats {
                alignment_bits: MAX_ALIGN_BITS,
                ..Default::default()
            });
            merge_stream(s, o);
        }
        self.lasts.extend(later.lasts.iter().map(|(&k, &v)| (k, v)));
    }

    /// A fitter for the next time partition that continues every stream from this one's
    /// last request.
    pub fn carry_from(&self) -> Fitter {
        let mut next = Fitter::new(self.config);
        next.lasts = self.lasts.clone();
        for (&id, s) in &self.streams {
            let carried = StreamStats {
                first_ts: s.first_ts,
                first: s.first,
                alignment_bits: MAX_ALIGN_BITS,
                ..Default::default()
            };
            next.streams.insert(id, carried);
        }
        next
    }
}

fn merge_stream(s: &mut StreamStats, o: &StreamStats) {
    s.requests += o.requests;
    s.bytes += o.bytes;
    if s.first.is_none() {
        s.first = o.first;
        s.first_ts = o.first_ts;
    }
    s.members += o.members;
    for (k, t) in &o.transitions {
        let mine = s.transitions.entry(*k).or_default();
        mine.count += t.count;
        for (c, iat) in &t.categories {
            mine.categories.entry(*c).or_default().merge(iat);
        }
    }
    add_counts(&mut s.entries, &o.entries);
    add_counts(&mut s.leaf_visits, &o.leaf_visits);
    add_windows(&mut s.windows, &o.windows);
    s.alignment_bits = s.alignment_bits.min(o.alignment_bits);
    add_phases(&mut s.phase, &o.phase);
    s.reuse.merge(&o.reuse);
    s.resume.merge(&o.resume);
    s.resume_reuse.merge(&o.resume_reuse);
    s.reuse_write.merge(&o.reuse_write);
    s.resume_reuse_write.merge(&o.resume_reuse_write);
    s.jumps_ahead.merge(&o.jumps_ahead);
    s.jumps_behind.merge(&o.jumps_behind);
    s.extent = union_extent(s.extent, o.extent);
}

fn add_counts<K: std::hash::Hash + Eq + Copy>(
    into: &mut FxHashMap<K, u64>,
    from: &FxHashMap<K, u64>,
) {
    for (k, c) in from {
        *into.entry(*k).or_insert(0) += c;
    }
}

/// Below this many requests a fit runs on one thread.
pub const PARALLEL_FIT_MIN: usize = 1 << 20;

/// Fits the requests of `batches` (consecutive pieces of one time-ordered trace: row groups,
/// or the whole of it) in time partitions on the machine's cores (up to 4) and merges them
/// (`merge_detached`): the same statistics as one pass, in a fraction of the time.
pub fn fit_parallel(config: FitConfig, batches: &[Batch]) -> Fitter {
    let n: usize = batches.iter().map(Batch::len).sum();
    let cores = std::thread::available_parallelism()
        .map_or(1, |c| c.get())
        .min(4);
    let parts = if n < PARALLEL_FIT_MIN { 1 } else { cores };
    let fitters: Vec<Fitter> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..parts)
            .map(|p| {
                let pieces = pieces_of(batches, p * n / parts, (p + 1) * n / parts);
                scope.spawn(move || {
                    let mut f = Fitter::new(config);
                    f.update_pieces(&pieces);
                    f
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("fit thread panicked"))
            .collect()
    });
    let mut parts = fitters.into_iter();
    let mut whole = parts.next().unwrap_or_else(|| Fitter::new(config));
    for later in parts {
        whole.merge_detached(&later);
    }
    whole
}

/// The pieces of `batches` that hold rows [a, b) of their concatenation.
fn pieces_of<'a>(batches: &[Batch<'a>], a: usize, b: usize) -> Vec<Batch<'a>> {
    let mut out = Vec::new();
    let mut start = 0;
    for batch in batches {
        let end = start + batch.len();
        let (lo, hi) = (a.max(start), b.min(end));
        if lo < hi {
            out.push(batch.range(lo - start, hi - start));
        }
        start = end;
    }
    out
}

/// Each request's resumed-run lag within its stream: k >= 2 when it starts where the k-th
/// latest still open run of the stream ended (`RecentEnds`), 0 when it is sequential (k = 1)
/// or starts at no open run's end. Interleaved sequential runs in one stream (a VM's disk,
/// a database's files) show up as such: 29% of cloudPhysics' requests.
pub fn resume_lags(stream: &[u32], offset: &[u64], size: &[u32]) -> Vec<u8> {
    let lags = stream.iter().zip(offset.iter().zip(size));
    let streams = stream.iter().max().map_or(0, |&m| m as usize + 1);
    if streams <= stream.len().max(1 << 16) {
        // dense ids (the canonical trace numbers streams from 0): a table, no hashing
        let mut recent = vec![RecentEnds::default(); streams];
        lags.map(|(&s, (&o, &n))| recent[s as usize].next(o, n))
            .collect()
    } else {
        let mut recent: FxHashMap<u32, RecentEnds> = FxHashMap::default();
        lags.map(|(s, (&o, &n))| recent.entry(*s).or_default().next(o, n))
            .collect()
    }
}

/// The ends of a stream's latest RESUME_WINDOW requests that no later request started at yet
/// (its open runs), fed one request at a time, so time partitions of a stream get the lags
/// one pass gives. A run continued once is closed: the twin resumes each run once, as the
/// original does, instead of re-reading it.
#[derive(Debug, Clone)]
pub struct RecentEnds {
    /// A ring of ends, CLOSED where continued; `count` requests seen so far.
    ends: [u64; RESUME_WINDOW],
    count: usize,
    /// Where the previous request started.
    start: u64,
}

const CLOSED: u64 = u64::MAX;

impl Default for RecentEnds {
    fn default() -> RecentEnds {
        RecentEnds {
            ends: [CLOSED; RESUME_WINDOW],
            count: 0,
            start: 0,
        }
    }
}

impl RecentEnds {
    /// The lag of a request at `offset` (see `resume_lags`); closes the run it continues and
    /// opens its own.
    pub fn next(&mut self, offset: u64, size: u32) -> u8 {
        // most requests continue no open run: one flat compare of the ring says so
        let found = if self.ends.contains(&offset) {
            self.open().enumerate().find(|(_, (_, e))| *e == offset)
        } else {
            None
        };
        if let Some((_, (slot, _))) = found {
            self.ends[slot] = CLOSED;
        }
        self.ends[self.count % RESUME_WINDOW] = offset + size as u64;
        self.count += 1;
        self.start = offset;
        // rank 0 is the previous request's end: a sequential request, not a resumed run
        found.map_or(0, |(rank, _)| if rank == 0 { 0 } else { rank as u8 + 1 })
    }

    /// Where the previous request started.
    pub fn last_start(&self) -> Option<u64> {
        (self.count > 0).then_some(self.start)
    }

    /// Where the previous request ended (its run is open until the next request).
    pub fn last(&self) -> Option<u64> {
        self.open_ends().next()
    }

    /// The ends of the open runs, newest first (the first is the previous request's end).
    pub fn open_ends(&self) -> impl Iterator<Item = u64> + '_ {
        self.open().map(|o| o.1)
    }

    /// (ring slot, end) of the open runs, newest first.
    fn open(&self) -> impl Iterator<Item = (usize, u64)> + '_ {
        (1..=self.count.min(RESUME_WINDOW))
            .map(|k| (self.count - k) % RESUME_WINDOW)
            .map(|slot| (slot, self.ends[slot]))
            .filter(|o| o.1 != CLOSED)
    }
}

/// A re-reference whose distance was not sampled (see `stack_distances`).
pub const REUSE_UNSAMPLED: u32 = u32::MAX - 1;
/// Streams up to this many requests get exact distances; longer ones are sampled.
pub const EXACT_REQUESTS: usize = 1 << 21;
const SAMPLE_SPACE: u64 = 1 << 24;

/// LRU stack distances of each request within its stream, at `block`-byte granularity of the
/// request's key block (`key_block`): the number of distinct blocks the stream touched since
/// it last touched this one (u32::MAX when never), where a request touches every block it
/// overlaps.
///
/// Whether a block was touched before is always exact. The distance is exact (a rank set
/// over the stream's accesses, O(n log n)) for streams of up to EXACT_REQUESTS requests; for
/// longer streams it is measured on a spatially hashed sample of blocks and scaled by the
/// sampling rate, as SHARDS does (Waldspurger et al., FAST'15), and the other re-references
/// get REUSE_UNSAMPLED: the model needs the distances' distribution, not each one.
pub fn stack_distances(stream: &[u32], offset: &[u64], size: &[u32], block: u64) -> Vec<u32> {
    let mut out = vec![u32::MAX; stream.len()];
    let mut by_stream: FxHashMap<u32, Vec<usize>> = FxHashMap::default();
    for (i, &s) in stream.iter().enumerate() {
        by_stream.entry(s).or_default().push(i);
    }
    for idx in by_stream.values() {
        stream_distances(
            idx,
            (offset, size),
            block,
            sample_threshold(idx.len() as u64),
            &mut out,
        );
    }
    out
}

/// LRU stack distances of each request against the GLOBAL history (all streams, time order),
/// at `block`-byte granularity of the request's key block: a request re-references a block
/// when any stream touched it before. Sampled as `stack_distances` samples one long stream.
/// Each stream keeps the histogram of its own requests' global distances, so the sampler can
/// re-issue blocks other streams touched (database backends read pages others wrote).
pub fn global_stack_distances(offset: &[u64], size: &[u32], block: u64) -> Vec<u32> {
    let mut out = vec![u32::MAX; offset.len()];
    let idx: Vec<usize> = (0..offset.len()).collect();
    let threshold = sample_threshold(idx.len() as u64);
    stream_distances(&idx, (offset, size), block, threshold, &mut out);
    out
}

fn stream_distances(
    idx: &[usize],
    (offset, size): (&[u64], &[u32]),
    block: u64,
    threshold: u64,
    out: &mut [u32],
) {
    let blocks = blocks_below(idx.iter().map(|&i| (offset[i], size[i])), block);
    let mut tracker = StackTracker::with_blocks(idx.len(), threshold, blocks);
    for (k, &i) in idx.iter().enumerate() {
        let ahead = idx.get(k + PREFETCH_AHEAD).map(|&j| (offset[j], size[j]));
        out[i] = tracker.next_ahead((offset[i], size[i]), ahead, block);
    }
}

/// How many requests ahead a distance pass asks for a request's table cell: far enough for
/// the memory to answer behind the requests between (the pipelined fit's pass: 10M requests
/// 1.44-1.49 -> 1.29-1.42 s at best, alternated builds).
pub const PREFETCH_AHEAD: usize = 16;

/// One past the last block any of the requests (offset, size) weighs: the size of a table
/// of their blocks' last touches.
pub fn blocks_below(requests: impl Iterator<Item = (u64, u32)>, block: u64) -> u64 {
    requests
        .map(|(o, n)| weighed_blocks(o, n, block).end)
        .max()
        .unwrap_or(0)
}

/// The sampling threshold `stack_distances` uses for a stream of `requests` requests.
pub fn sample_threshold(requests: u64) -> u64 {
    (SAMPLE_SPACE * EXACT_REQUESTS as u64 / requests.max(1)).min(SAMPLE_SPACE)
}

/// LRU stack distances of one stream's block accesses, fed one at a time, so a stream split
/// into time partitions gets the very distances one pass over it gives.
#[derive(Debug, Clone)]
pub struct StackTracker {
    /// Per sampled request, the sampled blocks whose latest access it is (a weight per
    /// request: the sums stay in cache, where a tree over every block access missed it).
    marks: WeightedSet,
    /// block -> position among the sampled accesses (u32::MAX: not in the sample)
    last: LastSeen,
    sampled: usize,
    threshold: u64,
    scale: f64,
}

impl StackTracker {
    /// A tracker for a stream of (at most) `requests` accesses, sampling as `stack_distances`.
    pub fn new(requests: usize, threshold: u64) -> StackTracker {
        StackTracker::with_blocks(requests, threshold, u64::MAX)
    }

    /// A tracker whose blocks are all below `blocks`: a table indexed by block instead of a
    /// hash map when that is not much larger than the stream.
    pub fn with_blocks(requests: usize, threshold: u64, blocks: u64) -> StackTracker {
        StackTracker {
            marks: WeightedSet::new(requests),
            last: LastSeen::new(requests, blocks),
            sampled: 0,
            threshold,
            scale: SAMPLE_SPACE as f64 / threshold.max(1) as f64,
        }
    }

    /// `next` for the request `(offset, size)`, first asking the memory for the key block's
    /// last touch of the request `ahead` (`PREFETCH_AHEAD` requests later), if any.
    #[inline]
    pub fn next_ahead(
        &mut self,
        (offset, size): (u64, u32),
        ahead: Option<(u64, u32)>,
        block: u64,
    ) -> u32 {
        if let Some((o, z)) = ahead {
            self.last.prefetch(key_block(o, z, block));
        }
        self.next(offset, size, block)
    }

    /// The distance of a request at `offset` of `size` bytes (u32::MAX: a first touch): the
    /// distinct blocks touched since its key block's (`key_block`) latest touch. Every block
    /// the request overlaps counts as touched, so a request that starts inside an old, larger
    /// one re-references it (cloudPhysics: of 113,872 requests, 44,773 started on a block no
    /// request had started on, 4,902 on a block no request had touched).
    pub fn next(&mut self, offset: u64, size: u32, block: u64) -> u32 {
        let pos = self.sampled;
        let mut weight = 0u16;
        let mut distance = u32::MAX;
        let mut retouched = Retouched::default();
        let key = key_block(offset, size, block);
        let rest = weighed_blocks(offset, size, block).filter(|&b| b != key);
        for b in std::iter::once(key).chain(rest) {
            let in_sample =
                self.threshold >= SAMPLE_SPACE || splitmix64(b) % SAMPLE_SPACE < self.threshold;
            let value = if in_sample { pos as u32 } else { u32::MAX };
            let prev = self.last.insert(b, value);
            if b == key {
                distance = match prev {
                    Some(u32::MAX) => REUSE_UNSAMPLED,
                    Some(p) => {
                        let d = self.marks.after(p as usize) as f64 * self.scale;
                        (d as u64).min(REUSE_UNSAMPLED as u64 - 1) as u32
                    }
                    None => u32::MAX,
                };
            }
            if let Some(run) = prev
                .filter(|&p| p != u32::MAX)
                .and_then(|p| retouched.push(p))
            {
                self.marks.take(run.0 as usize, run.1);
            }
            weight += in_sample as u16;
        }
        if let Some(run) = retouched.finish() {
            self.marks.take(run.0 as usize, run.1);
        }
        if weight > 0 {
            self.marks.add(pos, weight);
            self.sampled += 1;
        }
        distance
    }
}

/// The block by which a request counts as re-referencing data: the first block that starts
/// inside it, or else its first. A misaligned request's first block is mostly its
/// predecessor's last, half read (cloudPhysics starts 80% of its requests 3,584 bytes into a
/// block): judged by that one, nearly every continuation re-read data.
pub fn key_block(offset: u64, size: u32, block: u64) -> u64 {
    let first = offset / block;
    let crosses = offset + size as u64 > (first + 1) * block;
    first + (!offset.is_multiple_of(block) && crosses) as u64
}

/// Blocks a request weighs in the re-reference stacks: every block it overlaps (as the miss
/// ratios count them), at most u16::MAX (256 MiB of 4 KiB blocks; larger requests count
/// their first 256 MiB).
pub fn weighed_blocks(offset: u64, size: u32, block: u64) -> std::ops::Range<u64> {
    let blocks = crate::stats::mrc::blocks_of(offset, size, block);
    let first = *blocks.start();
    first..(blocks.end() + 1).min(first + u16::MAX as u64)
}

/// A well-mixed 64-bit hash (SplitMix64's finaliser).
fn splitmix64(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fixed_point_logs_round_to_nearest() {
        let mut x = 11u64;
        let large = (0..200_000).map(|_| {
            x = splitmix64(x);
            x >> (x % 64)
        });
        for iat in (1..1_000_000u64).chain(large).filter(|&v| v > 0) {
            let exact = ((iat as f64).ln() * LOG_SCALE).round() as i64;
            assert_eq!(log_fx(iat), exact, "{iat}");
        }
    }

    #[test]
    fn adding_all_at_once_is_adding_each() {
        let values: Vec<u64> = (0..5_000u64)
            .map(|i| (i * 2_654_435_761) % (1 << (i % 40)))
            .chain([0, 0, 1, u32::MAX as u64, 1 << 50])
            .collect();
        let (mut each, mut all) = (IatStats::default(), IatStats::default());
        values.iter().for_each(|&v| each.add(v));
        let mut scratch = [0u32; BUCKETS];
        all.add_all(&values[..1_000], &mut scratch);
        all.add_all(&values[1_000..], &mut scratch);
        assert_eq!(all, each);
        assert!(scratch.iter().all(|&c| c == 0));
    }

    fn cfg(levels: u32) -> FitConfig {
        FitConfig {
            tree: Tree::new(levels, 4, 1600),
            flat: false,
            window_ns: 1_000,
            reref: false,
        }
    }

    #[test]
    fn counts_transitions_categories_and_iats() {
        let mut f = Fitter::new(cfg(2));
        // stream 0: leaf 0 -> leaf 0 (sequential) -> leaf 6 (random); stream 1: one request
        f.update(Batch::new(
            &[0, 10, 30, 35],
            &[0, 0, 1, 0],
            &[0, 0, 1, 1],
            &[0, 50, 700, 650],
            &[50, 50, 4, 4],
        ));
        let s = &f.streams[&0];
        assert_eq!(s.requests, 3);
        let fine = &s.transitions[&TransKey {
            depth: 1,
            prefix: 0,
            from: 0,
            to: 0,
        }];
        let seq = Category {
            op: 0,
            size: 50,
            kind: KIND_SEQUENTIAL,
        };
        assert_eq!(fine.categories[&seq].count, 1);
        assert_eq!(fine.categories[&seq].sum, 10);
        let coarse = &s.transitions[&TransKey {
            depth: 0,
            prefix: 0,
            from: 0,
            to: 1,
        }];
        let rnd = Category {
            op: 1,
            size: 4,
            kind: KIND_RANDOM,
        };
        assert_eq!(coarse.categories[&rnd].sum, 25);
        assert_eq!(s.entries[&(0, 6)], 1);
        assert_eq!(s.alignment_bits, 1); // 650 = 2 * 325
        assert_eq!(f.streams[&1].requests, 1);
    }

    #[test]
    fn partitions_merge_to_the_whole() {
        let ts = [0i64, 5, 9, 14, 20, 26];
        let st = [0u32, 1, 0, 1, 0, 0];
        let op = [0u8, 1, 0, 1, 1, 0];
        let off = [0u64, 800, 100, 808, 1500, 1508];
        let sz = [100u32, 8, 4, 8, 8, 8];
        let mut whole = Fitter::new(cfg(2));
        whole.update(Batch::new(&ts, &st, &op, &off, &sz));
        let mut first = Fitter::new(cfg(2));
        first.update(Batch::new(
            &ts[..3],
            &st[..3],
            &op[..3],
            &off[..3],
            &sz[..3],
        ));
        let mut second = first.carry_from();
        second.update(Batch::new(
            &ts[3..],
            &st[3..],
            &op[3..],
            &off[3..],
            &sz[3..],
        ));
        first.merge(&second);
        assert_eq!(first.streams, whole.streams);
        assert_eq!(first.lasts, whole.lasts);
    }

    #[test]
    fn detached_partitions_merge_to_the_whole() {
        // stream 0's last request jumps 24 bytes ahead in its predecessor's leaf
        let ts = [0i64, 5, 9, 14, 20, 26, 30, 34];
        let st = [0u32, 1, 0, 1, 0, 0, 2, 0];
        let op = [0u8, 1, 0, 1, 1, 0, 0, 0];
        let off = [0u64, 800, 100, 808, 104, 1508, 40, 1540];
        let sz = [100u32, 8, 4, 8, 8, 8, 8, 8];
        let reuse = [
            u32::MAX,
            u32::MAX,
            0,
            u32::MAX,
            u32::MAX,
            u32::MAX,
            u32::MAX,
            u32::MAX,
        ];
        let mut c = cfg(2);
        c.reref = true;
        let mut whole = Fitter::new(c);
        whole.update(Batch::new(&ts, &st, &op, &off, &sz).with_reuse(Some(&reuse)));
        for cut in 1..ts.len() {
            let mut first = Fitter::new(c);
            first.update(
                Batch::new(&ts[..cut], &st[..cut], &op[..cut], &off[..cut], &sz[..cut])
                    .with_reuse(Some(&reuse[..cut])),
            );
            let mut second = Fitter::new(c);
            second.update(
                Batch::new(&ts[cut..], &st[cut..], &op[cut..], &off[cut..], &sz[cut..])
                    .with_reuse(Some(&reuse[cut..])),
            );
            first.merge_detached(&second);
            assert_eq!(first.streams, whole.streams, "cut {cut}");
            assert_eq!(first.lasts, whole.lasts);
        }
        // three partitions, merged left to right and as a tree (a Dask reduction)
        let part = |a: usize, b: usize| {
            let mut f = Fitter::new(c);
            f.update(
                Batch::new(&ts[a..b], &st[a..b], &op[a..b], &off[a..b], &sz[a..b])
                    .with_reuse(Some(&reuse[a..b])),
            );
            f
        };
        let mut left = part(0, 2);
        left.merge_detached(&part(2, 5));
        left.merge_detached(&part(5, 8));
        let mut tail = part(2, 5);
        tail.merge_detached(&part(5, 8));
        let mut tree = part(0, 2);
        tree.merge_detached(&tail);
        assert_eq!(left.streams, whole.streams);
        assert_eq!(tree.streams, whole.streams);
    }

    #[test]
    fn parallel_fit_equals_one_pass() {
        let n = PARALLEL_FIT_MIN + 200_003;
        let mut x = 7u64;
        let mut next = || {
            x = splitmix64(x);
            x
        };
        let ts: Vec<i64> = (0..n as i64).map(|i| i * 1000).collect();
        let st: Vec<u32> = (0..n).map(|_| (next() % 5) as u32).collect();
        let op: Vec<u8> = (0..n).map(|_| (next() % 2) as u8).collect();
        let sz: Vec<u32> = (0..n).map(|_| 4096 << (next() % 3)).collect();
        let mut off = vec![0u64; n];
        for i in 1..n {
            // a third sequential within the global order, the rest random
            off[i] = if next() % 3 == 0 {
                off[i - 1] + sz[i - 1] as u64
            } else {
                (next() % 100_000) * 4096
            };
        }
        let c = FitConfig {
            tree: Tree::new(3, 4, 1 << 40),
            flat: false,
            window_ns: 1 << 30,
            reref: true,
        };
        // per-stream and global distances alike: both are a pre-pass over the whole trace
        for reuse in [
            stack_distances(&st, &off, &sz, 4096),
            global_stack_distances(&off, &sz, 4096),
        ] {
            let mut one = Fitter::new(c);
            one.update(Batch::new(&ts, &st, &op, &off, &sz).with_reuse(Some(&reuse)));
            let par = fit_parallel(
                c,
                &[Batch::new(&ts, &st, &op, &off, &sz).with_reuse(Some(&reuse))],
            );
            assert_eq!(par.streams, one.streams);
            assert_eq!(par.lasts, one.lasts);
        }
        // the same rows in uneven chunks (row groups), fitted where they lie
        let c = FitConfig { reref: false, ..c };
        let mut one = Fitter::new(c);
        one.update(Batch::new(&ts, &st, &op, &off, &sz));
        let whole = Batch::new(&ts, &st, &op, &off, &sz);
        let cuts = [0, 7, 300_001, 300_002, n / 2 + 3, n - 5, n];
        let chunks: Vec<_> = cuts.windows(2).map(|w| whole.range(w[0], w[1])).collect();
        let par = fit_parallel(c, &chunks);
        assert_eq!(par.streams, one.streams);
        assert_eq!(par.lasts, one.lasts);
    }

    #[test]
    fn stack_distances_count_distinct_blocks_in_between() {
        // blocks: a b a c b a  (stream 0); stream 1 interleaves but does not count
        let st = [0u32, 0, 1, 0, 0, 0, 0];
        let off = [0u64, 4096, 0, 0, 8192, 4096, 0];
        let d = stack_distances(&st, &off, &[4096; 7], 4096);
        assert_eq!(d, vec![u32::MAX, u32::MAX, u32::MAX, 1, u32::MAX, 2, 2]);
    }

    #[test]
    fn requests_touch_every_block_they_overlap() {
        let k = 4096u64;
        let mis = 20 * k + 3584; // 3,584 bytes into block 20
        let off = [0, 2 * k, 10 * k, mis, mis + k, 0, 3 * k + 100];
        let sz = [16384u32, 4096, 4096, 4096, 4096, 512, 100];
        assert_eq!(
            stack_distances(&[0; 7], &off, &sz, k),
            vec![
                u32::MAX, // blocks 0-3
                0,        // block 2, inside the first request: nothing touched since
                u32::MAX,
                u32::MAX, // blocks 20 and 21: judged by 21, the first to start inside it
                u32::MAX, // blocks 21 and 22: new data, though its first block is not
                5,        // block 0: since, blocks 2, 10, 20, 21 and 22
                6,        // block 3 (and no other): since, those and block 0
            ]
        );
        assert_eq!(key_block(mis, 512, k), 20); // inside one block: that one
        assert_eq!(key_block(5 * k, 8192, k), 5);
        assert_eq!(weighed_blocks(mis, 4096, k), 20..22);
        assert_eq!(weighed_blocks(0, u32::MAX, k).count(), u16::MAX as usize);
    }

    #[test]
    fn global_distances_count_every_streams_blocks() {
        // time order: s0 a, s1 b, s1 a, s0 c, s0 b, s1 a
        // global: a cold, b cold, a after {b}: 1, c cold, b after {a, c}: 2, a after {c, b}: 2
        let st = [0u32, 1, 1, 0, 0, 1];
        let off = [0u64, 4096, 100, 8192, 4096 + 4000, 0];
        let sz = [512u32, 512, 512, 512, 96, 512]; // the fifth ends where block c starts
        assert_eq!(
            global_stack_distances(&off, &sz, 4096),
            vec![u32::MAX, u32::MAX, 1, u32::MAX, 2, 2]
        );
        // per stream, s1's second `a` and s0's `b` are first touches
        assert_eq!(
            stack_distances(&st, &off, &sz, 4096),
            vec![u32::MAX, u32::MAX, u32::MAX, u32::MAX, u32::MAX, 0]
        );
        // categories follow the global history: stream 1's read of `a` is a re-reference
        let c = FitConfig {
            reref: true,
            ..cfg(1)
        };
        let mut f = Fitter::new(c);
        let reuse = global_stack_distances(&off, &sz, 4096);
        let n = st.len();
        let ts: Vec<i64> = (0..n as i64).collect();
        f.update(Batch::new(&ts, &st, &vec![0; n], &off, &sz).with_reuse(Some(&reuse)));
        // (kind, count) of each stream's transitions
        let kinds = |id: u32| kind_counts(&f.streams[&id]);
        assert_eq!(kinds(1), vec![(KIND_REREF, 2)]);
        assert_eq!(kinds(0), vec![(KIND_RANDOM, 1), (KIND_REREF, 1)]);
        let reuse_count = |id: u32| {
            f.streams[&id]
                .reuse
                .sorted()
                .iter()
                .map(|b| b.1)
                .sum::<u64>()
        };
        assert_eq!((reuse_count(0), reuse_count(1)), (1, 2));
    }

    /// (kind, count) over a stream's transitions, by kind.
    fn kind_counts(s: &StreamStats) -> Vec<(u8, u64)> {
        let mut by_kind: FxHashMap<u8, u64> = FxHashMap::default();
        for (c, iat) in s.transitions.values().flat_map(|t| &t.categories) {
            *by_kind.entry(c.kind).or_insert(0) += iat.count;
        }
        let mut k: Vec<(u8, u64)> = by_kind.into_iter().collect();
        k.sort_unstable();
        k
    }

    #[test]
    fn resumed_runs_split_by_old_data() {
        // two runs of 4 KiB requests written interleaved (A0 B0 A1 B1 ...: each resumes its
        // run, on new blocks), then both re-read the same way (on old blocks)
        let block = 4096u64;
        let mut off: Vec<u64> = (0..8)
            .map(|i| (i % 2) * 1000 * block + i / 2 * block)
            .collect();
        off.extend_from_within(..);
        let n = off.len();
        let (st, sz) = (vec![0u32; n], vec![block as u32; n]);
        let ts: Vec<i64> = (0..n as i64).collect();
        let lags = resume_lags(&st, &off, &sz);
        let reuse = stack_distances(&st, &off, &sz, block);
        let mut f = Fitter::new(FitConfig {
            reref: true,
            ..cfg(1)
        });
        // B's re-reads are writes (a read-modify-write pass)
        let op: Vec<u8> = (0..n).map(|i| u8::from(i >= 8 && i % 2 == 1)).collect();
        f.update(
            Batch::new(&ts, &st, &op, &off, &sz)
                .with_reuse(Some(&reuse))
                .with_resume(Some(&lags)),
        );
        let s = &f.streams[&0];
        // A0 B0 are random; A1..B3 resume on new blocks; the second A0 and B0 re-reference
        // old blocks (the runs' ends are elsewhere), A1..B3 resume over old data
        let (new, old) = (KIND_RESUME, KIND_RESUME_REREF);
        assert_eq!(
            kind_counts(s),
            vec![(KIND_RANDOM, 1), (KIND_REREF, 2), (new, 6), (old, 6)]
        );
        assert_eq!(s.resume.sorted(), vec![(2, 12)]);
        // each re-read block was last touched 8 distinct blocks before, less one
        assert_eq!(s.resume_reuse.sorted(), vec![(7, 6)]);
        // the writes' part: B0's re-reference and B1..B3's resumes
        assert_eq!(s.resume_reuse_write.sorted(), vec![(7, 3)]);
        let count = |h: &Hist| h.sorted().iter().map(|b| b.1).sum::<u64>();
        assert_eq!((count(&s.reuse), count(&s.reuse_write)), (2, 1));
    }

    #[test]
    fn resumed_runs_start_at_open_ends() {
        // stream 0: A [0,100) B [1000,1050) C [100,200) resumes A; D [1050,1100) resumes B;
        // E [200,300) resumes C; F [100,110): A's run was continued already (a re-read);
        // G [300,310) resumes E; H [310,..) is sequential. Stream 1 interleaves at 100.
        let st = [0u32, 0, 1, 0, 0, 0, 0, 0, 0];
        let off = [0u64, 1000, 100, 100, 1050, 200, 100, 300, 310];
        let sz = [100u32, 50, 8, 100, 50, 100, 10, 10, 10];
        let lags = resume_lags(&st, &off, &sz);
        assert_eq!(lags, vec![0, 0, 0, 2, 2, 2, 0, 2, 0]);
        // stream ids too sparse for a table (a hash map instead) give the same lags
        let sparse: Vec<u32> = st.iter().map(|&s| s * 3_000_000 + 7).collect();
        assert_eq!(resume_lags(&sparse, &off, &sz), lags);
        // with the extension, they are a category of their own with their lags; their
        // distances do not join the re-references'
        let c = FitConfig {
            reref: true,
            ..cfg(1)
        };
        let mut f = Fitter::new(c);
        let reuse = stack_distances(&st, &off, &sz, 4096);
        let ts: Vec<i64> = (0..st.len() as i64).collect();
        let op = vec![0u8; st.len()];
        f.update(
            Batch::new(&ts, &st, &op, &off, &sz)
                .with_reuse(Some(&reuse))
                .with_resume(Some(&lags)),
        );
        let s = &f.streams[&0];
        // (all re-touch 4 KiB block 0: B and F re-reference it, H re-scans it)
        let resumed = (KIND_RESUME_REREF, 4);
        assert_eq!(
            kind_counts(s),
            vec![(KIND_REREF, 2), (KIND_SEQ_REREF, 1), resumed]
        );
        assert_eq!(s.resume.sorted(), vec![(2, 4)]);
        // the resumed runs' distances are kept apart from B's, F's and H's
        assert_eq!(s.resume_reuse.sorted().iter().map(|b| b.1).sum::<u64>(), 4);
        assert_eq!(s.reuse.sorted().iter().map(|b| b.1).sum::<u64>(), 3);
        // the paper's model has neither
        let mut plain = Fitter::new(cfg(1));
        plain.update(Batch::new(&ts, &st, &op, &off, &sz));
        assert!(plain.streams[&0].resume.counts.is_empty());
    }

    #[test]
    fn sampled_distances_keep_the_distribution() {
        // a cyclic scan over 1,000 blocks: every re-reference is at distance 999
        let n = 200_000usize;
        let off: Vec<u64> = (0..n as u64).map(|i| (i % 1000) * 4096).collect();
        let idx: Vec<usize> = (0..n).collect();
        let mut out = vec![u32::MAX; n];
        let sz = vec![4096; n];
        stream_distances(&idx, (&off, &sz), 4096, SAMPLE_SPACE / 10, &mut out);
        assert!(out[..1000].iter().all(|&d| d == u32::MAX));
        let measured: Vec<u32> = out[1000..]
            .iter()
            .copied()
            .filter(|&d| d != REUSE_UNSAMPLED)
            .collect();
        assert!(
            measured.len() > n / 20 && measured.len() < n / 5,
            "{}",
            measured.len()
        );
        let mean = measured.iter().map(|&d| d as f64).sum::<f64>() / measured.len() as f64;
        assert!((mean / 999.0 - 1.0).abs() < 0.1, "mean {mean}");
    }
}
