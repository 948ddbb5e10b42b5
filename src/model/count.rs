//! The counting loop of `Fitter::update`: the very statistics of counting each request into
//! `StreamStats`' hash maps, gathered first in dense tables (leaf visits, entries, transition
//! slots) where the tree is small, one category lookup per request, and each stream's state
//! found without hashing while requests of one stream follow each other. The gathered counts
//! are added into the fitter at the end of the batch, so merging and encoding see the same
//! `StreamStats` as before.

use super::hist::{Hist, BUCKETS};
use super::stats::{
    add_distances, add_jump, add_phase, add_phases, add_window, add_windows, category_of,
    leaf_jump, Batch, Category, FitConfig, Fitter, IatStats, Last, StreamStats, WindowStats,
    FLAT_DEPTH, MAX_ALIGN_BITS, PHASES,
};
use super::tree::{TransKey, Tree};
use crate::columns::OP_READ;
use rustc_hash::FxHashMap;
use std::collections::hash_map::Entry;

/// Cells all dense tables of one batch may take together (8 or 4 bytes each); tables that
/// do not fit any more fall back to hash maps (many streams, deep or flat trees).
const DENSE_BUDGET: usize = 1 << 23;

/// Counts keyed by a small integer: a vector when it fits the budget, else a hash map.
enum Counts {
    Dense(Vec<u64>),
    Sparse(FxHashMap<u64, u64>),
}

impl Counts {
    fn new(cells: Option<u64>, budget: &mut usize) -> Counts {
        match cells {
            Some(n) if n as usize <= *budget => {
                *budget -= n as usize;
                Counts::Dense(vec![0; n as usize])
            }
            _ => Counts::Sparse(FxHashMap::default()),
        }
    }

    #[inline]
    fn add(&mut self, i: u64) {
        match self {
            Counts::Dense(v) => v[i as usize] += 1,
            Counts::Sparse(m) => *m.entry(i).or_insert(0) += 1,
        }
    }

    /// (index, count) of every non-zero count.
    fn nonzero(&self) -> Vec<(u64, u64)> {
        match self {
            Counts::Dense(v) => v
                .iter()
                .enumerate()
                .filter(|(_, &c)| c > 0)
                .map(|(i, &c)| (i as u64, c))
                .collect(),
            Counts::Sparse(m) => m.iter().map(|(&i, &c)| (i, c)).collect(),
        }
    }
}

/// Transition -> its slot in `KeyCounts::trans`: a vector over every possible transition of
/// a small tree, a hash map otherwise.
enum Slots {
    Dense(Vec<u32>),
    Sparse(FxHashMap<TransKey, u32>),
}

const NO_SLOT: u32 = u32::MAX;

/// The tree's arithmetic on the hot path: transitions by bit operations when the fanout is a
/// power of two, and each transition's index among all possible ones (dense tables).
#[derive(Clone, Copy)]
struct Geometry {
    tree: Tree,
    flat: bool,
    /// log2(fanout) when the fanout is a power of two.
    bits: Option<u32>,
    /// Possible transitions, when they fit in u64.
    transitions: Option<u64>,
    /// Nodes above each depth, (b^d - 1)/(b - 1): where a depth's tables start.
    nodes_above: [u64; 64],
}

impl Geometry {
    fn new(cfg: &FitConfig) -> Geometry {
        let t = cfg.tree;
        let b = t.fanout as u64;
        let leaves = t.leaves();
        let transitions = if cfg.flat {
            leaves.checked_mul(leaves)
        } else {
            // b² per node, over all nodes above the leaves: b²·(b^L - 1)/(b - 1)
            (leaves - 1).checked_mul(b * b).map(|x| x / (b - 1))
        };
        let mut nodes_above = [0u64; 64];
        for d in 1..=(t.levels as usize).min(63) {
            nodes_above[d] = nodes_above[d - 1].saturating_mul(b).saturating_add(1);
        }
        Geometry {
            tree: t,
            flat: cfg.flat,
            bits: b.is_power_of_two().then(|| b.trailing_zeros()),
            transitions,
            nodes_above,
        }
    }

    /// `Tree::transition`, or the flat model's key.
    #[inline]
    fn transition(&self, p: u64, q: u64) -> TransKey {
        if self.flat {
            return TransKey {
                depth: FLAT_DEPTH,
                prefix: p,
                from: 0,
                to: q as u32,
            };
        }
        let Some(bits) = self.bits else {
            return self.tree.transition(p, q);
        };
        let levels = self.tree.levels;
        let mask = (1u64 << bits) - 1;
        // the highest base-b digit where the leaves differ (0 when they are equal: the
        // finest table holds self-transitions)
        let high = match p ^ q {
            0 => 0,
            x => (63 - x.leading_zeros()) / bits,
        };
        TransKey {
            depth: levels - 1 - high,
            prefix: p >> (bits * (high + 1)),
            from: ((p >> (bits * high)) & mask) as u32,
            to: ((q >> (bits * high)) & mask) as u32,
        }
    }

    /// The transition's index among all possible ones (`transitions` of them).
    #[inline]
    fn index(&self, k: &TransKey) -> u64 {
        if self.flat {
            return k.prefix * self.tree.leaves() + k.to as u64;
        }
        let b = self.tree.fanout as u64;
        // each node holds b² (from, to) pairs
        ((self.nodes_above[k.depth as usize] + k.prefix) * b + k.from as u64) * b + k.to as u64
    }
}

/// What one statistics key (a stream, or a stream type) gathers in a batch.
struct KeyCounts {
    key: u32,
    requests: u64,
    bytes: u64,
    alignment_bits: u32,
    phase: [u64; PHASES],
    visits: Counts,
    /// by depth * leaves + landing leaf
    entries: Counts,
    /// the current window and its requests so far (requests come in time order), then the
    /// rest
    window: i64,
    window_now: WindowStats,
    windows: FxHashMap<i64, WindowStats>,
    slots: Slots,
    trans: Vec<(TransKey, u64)>,
    /// (slot, category) -> index into `iats`, keyed by `category_key` (one word to hash and
    /// compare) where the size fits it, else by the pair.
    cats: FxHashMap<u64, u32>,
    wide_cats: FxHashMap<(u32, Category), u32>,
    iats: Vec<(u32, Category, IatStats)>,
    /// (category, inter-arrival time) not yet added: added grouped by category, so each
    /// category's histogram is in cache while its times go in (sums are integers, so the
    /// order of the additions changes nothing)
    pending: Vec<(u32, u64)>,
    reuse: Hist,
    resume: Hist,
    resume_reuse: Hist,
    reuse_write: Hist,
    resume_reuse_write: Hist,
    jumps_ahead: Hist,
    jumps_behind: Hist,
    /// smallest offset and largest end so far (lo > hi before the first request)
    lo: u64,
    hi: u64,
}

/// A (slot, category) pair as one word: slot, size (below 2^24 bytes), kind and operation.
#[inline]
fn category_key(slot: u32, c: Category) -> Option<u64> {
    let key = (slot as u64) << 32 | (c.size as u64) << 4 | (c.kind as u64) << 1 | c.op as u64;
    (c.size < 1 << 24 && c.kind < 8 && c.op < 2).then_some(key)
}

/// Inter-arrival times held back before they are added by category (few in tests, so they
/// add in several rounds).
const PENDING_MAX: usize = if cfg!(test) { 1 << 10 } else { 1 << 18 };

impl KeyCounts {
    fn new(key: u32, g: &Geometry, budget: &mut usize) -> KeyCounts {
        let leaves = g.tree.leaves();
        let entry_cells = (!g.flat).then(|| leaves.saturating_mul(g.tree.levels as u64));
        let slots = match g.transitions {
            Some(n) if (n as usize) <= *budget / 2 => {
                *budget -= n as usize / 2; // u32 cells
                Slots::Dense(vec![NO_SLOT; n as usize])
            }
            _ => Slots::Sparse(FxHashMap::default()),
        };
        KeyCounts {
            key,
            requests: 0,
            bytes: 0,
            alignment_bits: MAX_ALIGN_BITS,
            phase: [0; PHASES],
            visits: Counts::new(Some(leaves), budget),
            entries: Counts::new(entry_cells, budget),
            window: i64::MIN,
            window_now: WindowStats::EMPTY,
            windows: FxHashMap::default(),
            slots,
            trans: Vec::new(),
            cats: FxHashMap::default(),
            wide_cats: FxHashMap::default(),
            iats: Vec::new(),
            pending: Vec::new(),
            reuse: Hist::default(),
            resume: Hist::default(),
            resume_reuse: Hist::default(),
            reuse_write: Hist::default(),
            resume_reuse_write: Hist::default(),
            jumps_ahead: Hist::default(),
            jumps_behind: Hist::default(),
            lo: u64::MAX,
            hi: 0,
        }
    }

    #[inline]
    fn count_window(&mut self, w: i64, ts: i64, read: bool) {
        if w != self.window {
            self.close_window();
            self.window = w;
        }
        self.window_now.merge(&WindowStats::at(ts, read));
    }

    fn close_window(&mut self) {
        let now = std::mem::replace(&mut self.window_now, WindowStats::EMPTY);
        if now.count > 0 {
            add_window(&mut self.windows, self.window, now);
        }
    }

    /// `stats::add_transition`, into the dense tables.
    #[inline]
    fn transition(&mut self, g: &Geometry, l: Last, leaf: u64, cat: Category, ts: i64) {
        let key = g.transition(l.leaf, leaf);
        if !g.flat && key.depth + 1 < g.tree.levels {
            self.entries.add(key.depth as u64 * g.tree.leaves() + leaf);
        }
        let next = self.trans.len() as u32;
        let slot = match &mut self.slots {
            Slots::Dense(v) => {
                let cell = &mut v[g.index(&key) as usize];
                if *cell == NO_SLOT {
                    *cell = next;
                }
                *cell
            }
            Slots::Sparse(m) => *m.entry(key).or_insert(next),
        };
        if slot == next {
            self.trans.push((key, 0));
        }
        self.trans[slot as usize].1 += 1;
        let next = self.iats.len() as u32;
        let c = match category_key(slot, cat) {
            Some(key) => *self.cats.entry(key).or_insert(next),
            None => *self.wide_cats.entry((slot, cat)).or_insert(next),
        };
        if c == next {
            self.iats.push((slot, cat, IatStats::default()));
        }
        self.pending.push((c, (ts - l.ts).max(0) as u64));
        if self.pending.len() >= PENDING_MAX {
            self.add_pending();
        }
    }

    /// Adds the pending inter-arrival times, category by category (a counting sort).
    fn add_pending(&mut self) {
        let mut start = vec![0usize; self.iats.len() + 1];
        for &(c, _) in &self.pending {
            start[c as usize + 1] += 1;
        }
        for i in 1..start.len() {
            start[i] += start[i - 1];
        }
        let mut next = start.clone();
        let mut grouped = vec![0u64; self.pending.len()];
        for &(c, v) in &self.pending {
            grouped[next[c as usize]] = v;
            next[c as usize] += 1;
        }
        let mut scratch = [0u32; BUCKETS];
        for (c, iat) in self.iats.iter_mut().enumerate() {
            iat.2
                .add_all(&grouped[start[c]..start[c + 1]], &mut scratch);
        }
        self.pending.clear();
    }

    /// Adds what was gathered into the key's statistics.
    fn flush_into(mut self, s: &mut StreamStats, g: &Geometry) {
        self.close_window();
        self.add_pending();
        s.requests += self.requests;
        s.bytes += self.bytes;
        s.alignment_bits = s.alignment_bits.min(self.alignment_bits);
        add_phases(&mut s.phase, &self.phase);
        for (leaf, c) in self.visits.nonzero() {
            *s.leaf_visits.entry(leaf).or_insert(0) += c;
        }
        let leaves = g.tree.leaves();
        for (i, c) in self.entries.nonzero() {
            *s.entries
                .entry(((i / leaves) as u32, i % leaves))
                .or_insert(0) += c;
        }
        add_windows(&mut s.windows, &self.windows);
        for (k, c) in &self.trans {
            s.transitions.entry(*k).or_default().count += c;
        }
        for (slot, cat, iat) in self.iats {
            let t = s
                .transitions
                .get_mut(&self.trans[slot as usize].0)
                .expect("counted transition");
            match t.categories.entry(cat) {
                Entry::Vacant(e) => {
                    e.insert(iat);
                }
                Entry::Occupied(mut e) => e.get_mut().merge(&iat),
            }
        }
        s.reuse.merge(&self.reuse);
        s.resume.merge(&self.resume);
        s.resume_reuse.merge(&self.resume_reuse);
        s.reuse_write.merge(&self.reuse_write);
        s.resume_reuse_write.merge(&self.resume_reuse_write);
        s.jumps_ahead.merge(&self.jumps_ahead);
        s.jumps_behind.merge(&self.jumps_behind);
        if self.lo <= self.hi {
            s.extent = super::stats::union_extent(s.extent, Some((self.lo, self.hi)));
        }
    }
}

/// One stream's place in the batch: its statistics key and its previous request.
struct Lane {
    stream: u32,
    key: u32,
    counts: usize,
    last: Option<Last>,
}

fn new_stream_stats() -> StreamStats {
    StreamStats {
        alignment_bits: MAX_ALIGN_BITS,
        ..Default::default()
    }
}

/// `Fitter::update`: counts time-ordered requests into `f`.
pub fn update(f: &mut Fitter, batches: &[Batch]) {
    // tables much larger than the batch cost more to clear and scan than they save
    let rows: usize = batches.iter().map(Batch::len).sum();
    let budget = DENSE_BUDGET.min(rows.saturating_mul(2) + 4096);
    count_batches(f, batches, budget);
}

/// Counts consecutive pieces of the trace (row groups) as one batch: gathered in the same
/// tables and flushed once (a flush per row group cost a 10M-request fit 10%).
fn count_batches(f: &mut Fitter, batches: &[Batch], mut budget: usize) {
    let cfg = f.config;
    let g = Geometry::new(&cfg);
    let window_ns = cfg.window_ns.max(1);
    let mut lanes: Vec<Lane> = Vec::new();
    let mut lane_of: FxHashMap<u32, usize> = FxHashMap::default();
    let mut counts: Vec<KeyCounts> = Vec::new();
    let mut counts_of: FxHashMap<u32, usize> = FxHashMap::default();
    let mut current = usize::MAX; // the lane of the previous request
                                  // a loop per piece: one over all pieces' requests (`flat_map`) counted 30% slower
    for batch in batches {
        for i in 0..batch.len() {
            let r = batch.request(i);
            if current == usize::MAX || lanes[current].stream != r.stream {
                current = *lane_of.entry(r.stream).or_insert_with(|| {
                    lanes.push(Lane {
                        stream: r.stream,
                        key: u32::MAX,
                        counts: usize::MAX,
                        last: f.lasts.get(&r.stream).copied(),
                    });
                    lanes.len() - 1
                });
            }
            let lane = &mut lanes[current];
            if lane.key != r.key || lane.counts == usize::MAX {
                lane.key = r.key;
                lane.counts = *counts_of.entry(r.key).or_insert_with(|| {
                    counts.push(KeyCounts::new(r.key, &g, &mut budget));
                    counts.len() - 1
                });
            }
            let c = &mut counts[lane.counts];
            let leaf = cfg.tree.leaf_of(r.offset);
            c.requests += 1;
            c.bytes += r.size as u64;
            c.lo = c.lo.min(r.offset);
            c.hi = c.hi.max(r.offset + r.size as u64);
            c.visits.add(leaf);
            c.count_window(r.ts / window_ns, r.ts, r.op == OP_READ);
            c.alignment_bits = c.alignment_bits.min(r.offset.trailing_zeros());
            add_distances(
                &cfg,
                &r,
                &mut c.resume,
                &mut c.resume_reuse,
                &mut c.reuse,
                [&mut c.reuse_write, &mut c.resume_reuse_write],
            );
            let cat = category_of(&cfg, &r, lane.last);
            add_phase(&mut c.phase, &r, cat.kind);
            match lane.last {
                None => {
                    f.heads.entry(r.stream).or_insert(r);
                    let s = f.streams.entry(r.key).or_insert_with(new_stream_stats);
                    s.members += 1;
                    if s.first.is_none() {
                        s.first_ts = Some(r.ts);
                        s.first = Some((leaf, cat));
                    }
                }
                Some(l) => {
                    let jump = leaf_jump(&cfg, l, &r, leaf, cat.kind);
                    add_jump(&mut c.jumps_ahead, &mut c.jumps_behind, jump);
                    c.transition(&g, l, leaf, cat, r.ts)
                }
            }
            lane.last = Some(Last {
                leaf,
                end: r.offset + r.size as u64,
                ts: r.ts,
            });
        }
    }
    for lane in &lanes {
        if let Some(l) = lane.last {
            f.lasts.insert(lane.stream, l);
        }
    }
    for c in counts {
        let s = f.streams.entry(c.key).or_insert_with(new_stream_stats);
        c.flush_into(s, &g);
    }
}

#[cfg(test)]
mod tests {
    use super::super::stats::{resume_lags, stack_distances};
    use super::*;

    fn mix(x: &mut u64) -> u64 {
        *x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = *x;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    #[test]
    fn fast_transitions_equal_the_trees() {
        let mut x = 3u64;
        for (levels, fanout) in [(1, 2), (2, 4), (3, 3), (4, 4), (5, 8), (7, 2), (3, 5)] {
            let cfg = FitConfig {
                tree: Tree::new(levels, fanout, 1 << 30),
                flat: false,
                window_ns: 1,
                reref: false,
            };
            let g = Geometry::new(&cfg);
            let mut seen = std::collections::HashSet::new();
            for _ in 0..20_000 {
                let p = mix(&mut x) % g.tree.leaves();
                let q = if mix(&mut x).is_multiple_of(4) {
                    p
                } else {
                    mix(&mut x) % g.tree.leaves()
                };
                let k = g.transition(p, q);
                assert_eq!(k, cfg.tree.transition(p, q), "{levels} {fanout} {p} {q}");
                let i = g.index(&k);
                assert!(i < g.transitions.unwrap());
                seen.insert((i, k));
            }
            // distinct transitions get distinct indices
            let indices: std::collections::HashSet<u64> = seen.iter().map(|s| s.0).collect();
            assert_eq!(indices.len(), seen.len());
        }
    }

    /// Random requests over several streams, groups, sequential runs and re-references: the
    /// dense counting equals counting each request into the hash maps, for hierarchical and
    /// flat trees, dense and hash-map tables.
    #[test]
    fn dense_counting_equals_one_request_at_a_time() {
        let mut x = 11u64;
        let n = 30_000usize;
        let ts: Vec<i64> = (0..n as i64).map(|i| i * 997 - 5_000_000).collect();
        let st: Vec<u32> = (0..n)
            .map(|i| {
                if i % 50 < 30 {
                    3
                } else {
                    (mix(&mut x) % 40) as u32
                }
            })
            .collect();
        let op: Vec<u8> = (0..n).map(|_| (mix(&mut x) % 2) as u8).collect();
        let sz: Vec<u32> = (0..n).map(|_| 512 << (mix(&mut x) % 4)).collect();
        let mut off = vec![0u64; n];
        for i in 1..n {
            off[i] = if mix(&mut x).is_multiple_of(3) {
                off[i - 1] + sz[i - 1] as u64
            } else {
                (mix(&mut x) % 300_000) * 512
            };
        }
        let groups: Vec<u32> = st.iter().map(|s| s % 3).collect();
        for (levels, fanout, flat) in [(2, 4, false), (4, 4, false), (3, 3, false), (2, 4, true)] {
            let lags = resume_lags(&st, &off, &sz);
            for reuse in [None, Some(stack_distances(&st, &off, &sz, 4096))] {
                let lag = reuse.as_ref().map(|_| &lags[..]);
                for group in [None, Some(&groups[..])] {
                    let cfg = FitConfig {
                        tree: Tree::new(levels, fanout, 300_000 * 512),
                        flat,
                        window_ns: 1_000_000,
                        reref: reuse.is_some(),
                    };
                    let r = reuse.as_deref();
                    let whole = Batch::new(&ts, &st, &op, &off, &sz)
                        .with_reuse(r)
                        .with_resume(lag)
                        .with_group(group);
                    let mut one = Fitter::new(cfg);
                    one.update_reference(whole);
                    let mut fast = Fitter::new(cfg);
                    fast.update(whole);
                    assert_eq!(fast.streams, one.streams, "{levels} {fanout} {flat}");
                    assert_eq!(fast.lasts, one.lasts);
                    assert_eq!(fast.heads, one.heads);
                    // a batch continuing carried-in streams, on hash maps only
                    let cut = n / 3;
                    let mut a = Fitter::new(cfg);
                    a.update_reference(whole.range(0, cut));
                    let mut b = a.clone();
                    a.update_reference(whole.range(cut, n));
                    // in two pieces, as row groups come
                    let pieces = [whole.range(cut, 2 * n / 3), whole.range(2 * n / 3, n)];
                    count_batches(&mut b, &pieces, 0);
                    assert_eq!(a.streams, b.streams);
                    assert_eq!(a.lasts, b.lasts);
                    assert_eq!(a.heads, b.heads);
                }
            }
        }
    }

    #[test]
    fn categories_of_any_size_count_as_one_pass_does() {
        // sizes on both sides of the one-word key's 16 MiB limit
        let n = 4_000usize;
        let mut x = 9u64;
        let ts: Vec<i64> = (0..n as i64).map(|i| i * 1000).collect();
        let st = vec![0u32; n];
        let op: Vec<u8> = (0..n).map(|_| (mix(&mut x) % 2) as u8).collect();
        let sz: Vec<u32> = (0..n)
            .map(|_| [4096, (1 << 24) - 512, 1 << 24, 1 << 26][(mix(&mut x) % 4) as usize])
            .collect();
        let off: Vec<u64> = (0..n).map(|_| (mix(&mut x) % 64) << 26).collect();
        let cfg = FitConfig {
            tree: Tree::new(2, 4, 1 << 32),
            flat: false,
            window_ns: 1 << 20,
            reref: false,
        };
        let (mut one, mut fast) = (Fitter::new(cfg), Fitter::new(cfg));
        one.update_reference(Batch::new(&ts, &st, &op, &off, &sz));
        fast.update(Batch::new(&ts, &st, &op, &off, &sz));
        assert_eq!(fast.streams, one.streams);
        let cats = |f: &Fitter| {
            f.streams[&0]
                .transitions
                .values()
                .map(|t| t.categories.len())
                .sum::<usize>()
        };
        assert!(cats(&fast) > 8, "{}", cats(&fast));
        let key = |size| {
            category_key(
                3,
                Category {
                    op: 1,
                    size,
                    kind: 2,
                },
            )
        };
        assert_ne!(key(4096), key(8192));
        assert_eq!(key(1 << 24), None);
    }

    #[test]
    fn sparse_tables_count_like_dense_ones() {
        let mut budget = 0usize;
        let mut c = Counts::new(Some(10), &mut budget);
        let mut d = Counts::new(Some(10), &mut { 10 });
        for i in [3u64, 3, 7, 0] {
            c.add(i);
            d.add(i);
        }
        assert!(matches!(c, Counts::Sparse(_)));
        let mut a = c.nonzero();
        a.sort_unstable();
        assert_eq!(a, d.nonzero());
        assert_eq!(a, vec![(0, 1), (3, 2), (7, 1)]);
    }
}
