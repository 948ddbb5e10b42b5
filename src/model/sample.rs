//! The sampler: regenerates requests from a model document (design.md "The model").
//!
//! Per stream, a Markov walk over the address-space tree picks each request's transition
//! top-down (at each level: move to a sibling, or stay and look one level deeper), descends a
//! coarse move through each node's entry distribution, then draws the transition's I/O
//! category (operation, size, random / sequential / re-reference) and its inter-arrival time.
//! Time follows the model's fluctuation windows: each window gets its share of the stream's
//! requests (exact counts, so thread weights and the activity shape hold), and the sampled
//! inter-arrival times spread them inside the window.

use super::data::DataMap;
use super::dist::Iat;
use super::finalize::kind_code;
use super::history::{History, BLOCK};
use super::nodemap::NodeMap;
use super::opmix::{self, OpPlan};
use super::segment::{self, Dealer, SegmentPlan, SEGMENT_REQUESTS};
use super::stats::{
    is_continuation, Category, RecentEnds, KIND_NEAR, KIND_RANDOM, KIND_REREF, KIND_RESUME,
    KIND_RESUME_REREF, KIND_SEQUENTIAL, KIND_SEQ_REREF, PHASES, PHASE_BYTES,
};
use super::ties::{class_of, Merger, TieCounts};
use super::tree::{TransKey, Tree};
use crate::columns::Columns;
use crate::columns::OP_READ;
use crate::fenwick::Fenwick;
use rand::{RngExt, SeedableRng};
use rand_pcg::Pcg64Mcg;
use rustc_hash::FxHashMap;
use serde_json::Value;
use std::collections::VecDeque;
use std::sync::Arc;

/// How many blocks of the stack a re-reference may look past its drawn distance for its leaf.
const REREF_SEARCH: u64 = 1024;
/// How often a cold request re-draws an offset that landed on an old block.
const COLD_RETRIES: u32 = 4;

/// One walked request before its offset is placed: its category and the transition's
/// target leaf.
#[derive(Debug, Clone, Copy)]
struct Step {
    cat: Category,
    target: u64,
    /// The offset, when the walk placed it (per-stream models).
    placed: Option<u64>,
}
/// A stream's walked requests: (times, steps, stream id).
type StreamPart = (Vec<i64>, Vec<Step>, u32);
/// Below this many requests in all, streams walk one after another (threads cost more).
const PARALLEL_WALK_MIN: u64 = 100_000;
/// Salt of the placement generators (apart from the walks', so both modes draw alike).
const PLACE_SALT: u64 = 0xD1B5_4A32_D192_ED03;
/// A stream's segments walking at once at most (each holds 2^19 requests or more, about
/// 25 MiB, until it is placed).
const SEGMENTS_AT_ONCE: usize = 8;
/// Mixed into a stream's seed for the dealing of its budgets to its segments.
const DEAL_SALT: u64 = 0x9FB2_1C65_1E98_DF25;

/// What to generate.
#[derive(Debug, Clone, Copy)]
pub struct SynthParams {
    /// Total requests (split over streams by weight), or None to run for `duration_ns`.
    pub requests: Option<u64>,
    pub duration_ns: Option<i64>,
    /// Rate multiplier: every inter-arrival time is divided by it.
    pub intensity: f64,
    /// Fluctuation windows are this many times shorter (same rate, faster phases).
    pub compress: f64,
    pub seed: u64,
    /// The IOMeter-like baseline: same mix and timing, uniformly random offsets.
    pub uniform: bool,
}

type Err = String;

fn num(v: &Value, key: &str) -> Result<f64, Err> {
    v.get(key)
        .and_then(Value::as_f64)
        .ok_or_else(|| format!("missing number '{key}'"))
}

fn int(v: &Value, key: &str) -> Result<u64, Err> {
    v.get(key)
        .and_then(Value::as_u64)
        .ok_or_else(|| format!("missing integer '{key}'"))
}

pub fn parse_iat(v: &Value) -> Result<Iat, Err> {
    let name = v
        .get("dist")
        .and_then(Value::as_str)
        .ok_or("iat without 'dist'")?;
    Ok(match name {
        "fixed" => Iat::Fixed {
            value: num(v, "value_ns")?,
        },
        "normal" => Iat::Normal {
            mean: num(v, "mean_ns")?,
            sd: num(v, "sd_ns")?,
        },
        "exponential" => Iat::Exponential {
            mean: num(v, "mean_ns")?,
        },
        "poisson" => Iat::Poisson {
            mean: num(v, "mean_ns")?,
        },
        "gamma" => Iat::Gamma {
            shape: num(v, "shape")?,
            scale: num(v, "scale_ns")?,
        },
        "hyperexp" => Iat::HyperExp {
            p: num(v, "p")?,
            mean1: num(v, "mean1_ns")?,
            mean2: num(v, "mean2_ns")?,
        },
        "empirical" => {
            let b = v
                .get("buckets")
                .and_then(Value::as_array)
                .ok_or("empirical without buckets")?;
            let buckets = b.iter().map(triple).collect::<Result<Vec<_>, _>>()?;
            Iat::Empirical { buckets }
        }
        other => return Err(format!("unknown distribution '{other}'")),
    })
}

fn triple(v: &Value) -> Result<(u64, u64, u64), Err> {
    let a = v
        .as_array()
        .filter(|a| a.len() == 3)
        .ok_or("expected [lo, hi, count]")?;
    let g = |i: usize| {
        a[i].as_u64()
            .ok_or_else(|| "expected an integer".to_string())
    };
    Ok((g(0)?, g(1)?, g(2)?))
}

/// An inter-arrival distribution ready to sample. Empirical histograms keep 32-bit running
/// sums under a guide table (the cutpoint method): each of the guide's equal slices of the
/// draws starts its search at the first bucket any draw in it can fall in, so a draw reads a
/// guide entry and about one bucket, without the data-dependent scans that mispredicted
/// (18% of the sampler's time went to them). The bucket drawn is the same as `Iat::sample`'s
/// (histograms of 2^32 counts or more sample through it).
#[derive(Debug, Clone)]
enum Gap {
    Empirical(Empirical),
    Parametric(Iat),
}

/// An empirical histogram laid out for the sampler's few memory accesses a draw: a draw's
/// slice is its top bits (no division), and each bucket keeps its running sum beside its
/// bounds in 12 bytes, so the bucket found is the bucket read and the buckets of a model
/// take half the cache (the sampler is bound by these loads).
#[derive(Debug, Clone)]
struct Empirical {
    total: u64,
    /// Draws `d` fall in slice `d >> shift`.
    shift: u32,
    /// Per slice, the first bucket whose running sum exceeds the slice's smallest draw.
    guide: Box<[u16]>,
    buckets: Box<[Bucket]>,
}

/// One bucket of an empirical histogram: the running sum of the counts up to it, and
/// [lo, lo + width). The fit's buckets (`hist::bucket_range`) start at a few significant
/// bits and are a power of two wide, so f32 holds both exactly and a draw is the very f64
/// `Iat::sample` computes; other buckets sample through `Iat`.
#[derive(Debug, Clone, Copy)]
struct Bucket {
    cum: u32,
    lo: f32,
    width: f32,
}

/// `v` as an f32 when that holds it exactly (then an f64 does too).
fn exact_f32(v: u64) -> Option<f32> {
    let f = v as f32;
    (f as u64 == v).then_some(f)
}

impl Gap {
    fn new(iat: Iat) -> Gap {
        let Iat::Empirical { buckets } = &iat else {
            return Gap::Parametric(iat);
        };
        let total: u64 = buckets.iter().map(|b| b.2).sum();
        if total > u32::MAX as u64 || buckets.len() > u16::MAX as usize {
            return Gap::Parametric(iat);
        }
        let mut cum = 0u32;
        let laid: Option<Box<[Bucket]>> = buckets
            .iter()
            .map(|&(lo, hi, count)| {
                cum += count as u32;
                Some(Bucket {
                    cum,
                    lo: exact_f32(lo)?,
                    width: exact_f32(hi.checked_sub(lo)?)?,
                })
            })
            .collect();
        let Some(buckets) = laid else {
            return Gap::Parametric(iat);
        };
        // about as many slices as buckets (a power of two), so a slice holds about one bucket
        let wanted = buckets.len().next_power_of_two().trailing_zeros();
        let draws = 64 - total.saturating_sub(1).leading_zeros(); // bits of the largest draw
        let shift = draws.saturating_sub(wanted);
        let slices = if total == 0 {
            0
        } else {
            ((total - 1) >> shift) + 1
        };
        let guide = (0..slices)
            .map(|k| buckets.partition_point(|b| b.cum as u64 <= k << shift) as u16)
            .collect();
        Gap::Empirical(Empirical {
            total,
            shift,
            guide,
            buckets,
        })
    }

    /// A draw of the gap: its random numbers taken now, in the generator's order, and an
    /// empirical one's table lookups left for later (`Empirical::resolve`), so a walk can
    /// look many up at once instead of waiting on each one's two loads in turn.
    fn draw<'a>(&'a self, rng: &mut Pcg64Mcg) -> Drawn<'a> {
        match self {
            Gap::Empirical(e) => {
                let pick = rng.random_range(0..e.total.max(1));
                if e.total == 0 {
                    return Drawn::Ready(0.0);
                }
                // the bucket holding the pick exists (the last running sum is the total)
                Drawn::Later(e, pick, rng.random::<f64>())
            }
            Gap::Parametric(iat) => Drawn::Ready(iat.sample(rng)),
        }
    }
}

/// A gap drawn (`Gap::draw`): its value, or an empirical draw's pick and fraction with the
/// histogram to look them up in.
#[derive(Clone, Copy)]
enum Drawn<'a> {
    Ready(f64),
    Later(&'a Empirical, u64, f64),
}

#[cfg(test)]
impl Drawn<'_> {
    /// The gap, looked up now (the tests' reference for the walk's deferred lookups).
    fn value(self) -> f64 {
        match self {
            Drawn::Ready(g) => g,
            Drawn::Later(e, pick, u) => e.resolve(pick, u),
        }
    }
}

impl Empirical {
    /// The slice of the guide a pick starts from.
    fn guide_entry(&self, pick: u64) -> &u16 {
        &self.guide[(pick >> self.shift) as usize]
    }

    /// The gap of a pick below `total` and a fraction in [0, 1): within the first bucket
    /// whose running sum exceeds the pick.
    fn resolve(&self, pick: u64, u: f64) -> f64 {
        let mut i = *self.guide_entry(pick) as usize;
        while self.buckets[i].cum as u64 <= pick {
            i += 1;
        }
        let b = &self.buckets[i];
        (b.lo as f64 + u * b.width as f64).max(0.0)
    }
}

/// Steps ahead a walk's pending gap draws ask the memory for their guide entries, and half
/// as many for their buckets (the guide entry found by then).
const GAP_PREFETCH: usize = 16;
/// Pending gap draws a walk looks up at once (their records stay in the first cache).
const GAP_BATCH: usize = 1024;

/// Fills in `gaps` the draws left pending (`Drawn::Later`, at their step's index): each
/// one's guide entry and bucket are asked for ahead of its turn, so the loads overlap.
fn resolve_gaps(pending: &[(usize, &Empirical, u64, f64)], gaps: &mut [f64]) {
    let half = GAP_PREFETCH / 2;
    for (k, &(at, e, pick, u)) in pending.iter().enumerate() {
        if let Some(&(_, f, p, _)) = pending.get(k + GAP_PREFETCH) {
            crate::prefetch::prefetch(f.guide_entry(p));
        }
        if let Some(&(_, f, p, _)) = pending.get(k + half) {
            let i = *f.guide_entry(p) as usize;
            crate::prefetch::prefetch(&f.buckets[i]);
        }
        gaps[at] = e.resolve(pick, u);
    }
}

/// Counted alternatives (children, target leaves), drawn by count.
#[derive(Debug, Clone, Default)]
struct Weighted {
    cum: Vec<u64>,
    items: Vec<u64>,
}

impl Weighted {
    fn add(&mut self, item: u64, count: u64) {
        let last = self.cum.last().copied().unwrap_or(0);
        self.cum.push(last + count);
        self.items.push(item);
    }

    fn total(&self) -> u64 {
        self.cum.last().copied().unwrap_or(0)
    }

    fn pick_at(&self, u: u64) -> u64 {
        self.items[self.cum.partition_point(|&c| c <= u)]
    }

    fn pick(&self, rng: &mut Pcg64Mcg) -> Option<u64> {
        let t = self.total();
        (t > 0).then(|| self.pick_at(rng.random_range(0..t)))
    }
}

/// One table row: the transitions from child `from` of a node to its siblings (or itself,
/// at the finest level), as (to, transition index).
#[derive(Debug, Clone, Default)]
struct Row {
    moves: Vec<(u64, usize)>,
}

/// A stream's table rows, fixed once built: (depth, node, from) -> row number, each row's
/// moves, and per transition the rows whose stay counts it (so using a transition updates
/// them by number, without hashing). Their stay budgets live in `Budgets::stay`.
#[derive(Debug, Clone)]
struct Rows {
    /// By the child node a row leaves from: (depth + 1, node * fanout + from).
    index: NodeMap<u32>,
    moves: Vec<Vec<(u64, usize)>>,
    stays_of: Vec<Vec<u32>>,
    /// Flat models: leaf -> (to, transition index).
    flat: FxHashMap<u64, Vec<(u64, usize)>>,
}

/// Transition budgets: how many times each transition and category may still be used. The
/// walk draws without replacement, so one pass reproduces the fitted counts (the paper's
/// generator visits states round-robin for the same reason) and refills when it runs dry.
#[derive(Debug, Clone)]
struct Budgets {
    /// Per row (`Rows`): the transitions still to come that start inside it and live deeper.
    stay: Vec<u64>,
    remaining: Vec<u64>,
    all: Fenwick<i64>,
    /// The sum of `remaining` (kept, not queried from `all`, on every request).
    left: u64,
    categories: Vec<Vec<u64>>,
    node_entry: NodeMap<Vec<u64>>,
}

impl Budgets {
    /// The budgets of category counts (a stream's fitted ones, or a segment's dealt share of
    /// them, `Dealer`): its transitions' and rows' counts follow from them.
    fn from_counts(
        rows: &Rows,
        categories: Vec<Vec<u64>>,
        node_entry: NodeMap<Vec<u64>>,
    ) -> Budgets {
        let remaining: Vec<u64> = categories.iter().map(|c| c.iter().sum()).collect();
        let mut all = Fenwick::new(remaining.len().max(1));
        let mut stay = vec![0u64; rows.moves.len()];
        for (t, &n) in remaining.iter().enumerate() {
            all.add(t, n as i64);
            for &r in &rows.stays_of[t] {
                stay[r as usize] += n;
            }
        }
        Budgets {
            stay,
            left: remaining.iter().sum(),
            remaining,
            all,
            categories,
            node_entry,
        }
    }
}

/// A long stream's segments (`segment.rs`) and the dealing of its budgets to them, in order.
struct Segments {
    plans: Vec<SegmentPlan>,
    next: usize,
    /// Segments walked at once (one a core).
    cores: usize,
    dealer: Dealer,
    rng: Pcg64Mcg,
}

impl Segments {
    /// Keeps up to `cores` segments walking (`walking`, in order), starting each next one
    /// with `start` (a thread walking it).
    fn walk_ahead<H>(
        &mut self,
        s: &StreamModel,
        walking: &mut VecDeque<H>,
        mut start: impl FnMut((usize, SegmentPlan, Budgets)) -> H,
    ) {
        while walking.len() < self.cores {
            let Some(next) = self.deal(s) else { break };
            walking.push_back(start(next));
        }
    }

    /// The next segment (its index, plan and budgets); None when all are dealt.
    fn deal(&mut self, s: &StreamModel) -> Option<(usize, SegmentPlan, Budgets)> {
        let j = self.next;
        let plan = self.plans.get(j)?.clone();
        self.next += 1;
        // the stream's first request is the model's own, outside the counts
        let (mut by_op, mut count) = (plan.by_op, plan.count);
        if let (0, Some((_, first))) = (plan.start, s.first) {
            count = count.saturating_sub(1);
            if let Some(classes) = by_op.as_mut() {
                let class = &mut classes[(first.op != OP_READ) as usize];
                *class = class.saturating_sub(1);
            }
        }
        let counts = self.dealer.deal(by_op, count, &mut self.rng);
        let budget = Budgets::from_counts(&s.rows, counts, s.initial.node_entry.clone());
        Some((j, plan, budget))
    }
}

#[derive(Debug, Clone)]
struct StreamModel {
    id: u32,
    weight: f64,
    alignment: u64,
    /// Running sums of the random requests' phases in their 4 KiB block (`stats::phase_of`);
    /// None: random offsets keep only the alignment.
    phase: Option<[u64; PHASES]>,
    first: Option<(u64, Category)>,
    windows: Vec<u64>,
    keys: Vec<TransKey>,
    cats: Vec<Vec<(Category, Gap)>>,
    initial: Budgets,
    rows: Rows,
    leaves: Weighted,
    /// Re-references' stack distances in all (`reuse`): whether the stream has any.
    reuse_total: u64,
    /// Lags of resumed runs and their total.
    resume: Buckets,
    resume_total: u64,
    /// Resumed runs over old data with a stack distance, in all.
    resume_reuse_total: u64,
    /// `reuse` and `resume_reuse` by operation (read, write), each with its total: where the
    /// model has the writes' part (`reuse_write`), reads draw from the rest; before it, both
    /// draw from the whole.
    reuse_by_op: [(Buckets, u64); 2],
    resume_reuse_by_op: [(Buckets, u64); 2],
    /// In-leaf jumps of random requests from the previous request's end, ahead and behind.
    jumps_ahead: Buckets,
    jumps_ahead_total: u64,
    jumps_behind: Buckets,
    jumps_behind_total: u64,
    /// Of the jumps ahead and behind, how many are near (`KIND_NEAR`: below `near_bytes`);
    /// None in models from before the near kind, whose random requests jump by any.
    near: Option<(u64, u64)>,
    /// Where the stream's requests lay, [lo, hi): its random requests stay inside (the whole
    /// space for models from before `extent`).
    extent: (u64, u64),
    /// 4 KiB blocks a request spans on average (by its categories' sizes): what a history of
    /// its requests holds.
    blocks_per_request: f64,
    /// When in each fluctuation window the stream is active, as fractions of the window:
    /// its first and last request (none: the whole window).
    spans: Vec<(f64, f64)>,
    /// Reads per fluctuation window (`window_reads`; empty in models from before it and in
    /// streams whose categories cannot carry it, `opmix::steerable`) and the stream's share
    /// of reads.
    window_reads: Vec<u64>,
    read_share: f64,
    /// How many requests its bursts held (`bursts`: runs of requests under `BURST_GAP_NS`
    /// apart, cumulative buckets) and their total; empty in models without them.
    bursts: (Buckets, u64),
    /// The same for the bursts that began in each fluctuation window (`window_bursts`; an
    /// empty histogram where a window had none or the model has no windows' bursts).
    window_bursts: Vec<(Buckets, u64)>,
    /// Per fluctuation window, quantiles (ns) of its short and long gaps (`window_gaps`;
    /// empty where the window had none or the model keeps none).
    window_gaps: Vec<GapShape>,
}

impl StreamModel {
    /// 4 KiB blocks `n` of the stream's requests span, as a history holds them.
    fn blocks(&self, n: u64) -> u64 {
        (n as f64 * self.blocks_per_request).ceil() as u64
    }
}

/// A histogram as [lo, hi, running sum of the counts] buckets (the document keeps counts).
type Buckets = Vec<(u64, u64, u64)>;

/// One window of a stream's synthesis: its active stretch (`start`, `len`, ns before
/// intensity), its requests, and of them how many should be reads (None: as the walk draws
/// them; models from before `window_reads`).
#[derive(Debug, Clone, Copy)]
struct Quota {
    /// The fluctuation window it repeats (windows cycle under --compress and --duration).
    window: usize,
    start: f64,
    len: f64,
    count: u64,
    reads: Option<u64>,
}

/// The walk's operation plan over a stream's windows (None without read targets).
fn op_plan(quotas: &[Quota]) -> Option<OpPlan> {
    let targets: Option<Vec<(u64, u64)>> = quotas
        .iter()
        .map(|q| q.reads.map(|r| (q.count, r)))
        .collect();
    targets.filter(|t| !t.is_empty()).map(OpPlan::new)
}

/// A model ready to sample.
#[derive(Debug, Clone)]
pub struct Sampler {
    tree: Tree,
    flat: bool,
    window_ns: i64,
    span_ns: i64,
    total_requests: u64,
    streams: Vec<StreamModel>,
    /// Re-references draw from one history of all streams (models fitted with global
    /// distances, `reuse_scope: "global"`), or each from its own stream's (older models).
    global_reuse: bool,
    /// How many live requests on each side of a drawn distance a re-reference considers,
    /// preferring one followed by old data (0: the nearest alone; `reuse_pick`).
    follow: usize,
    /// How the fitted trace interleaved streams at one instant (`ties.rs`).
    ties: TieCounts,
    /// Requests a long stream's segments hold at least (`segment.rs`; smaller in tests).
    segment_requests: u64,
    /// The gap at or above which a burst ends (the model's `burst_gap_ns`).
    burst_gap_ns: f64,
    /// A file-level model's files: new data and runs stay inside them (`data.rs`).
    data: DataMap,
}

fn category(v: &Value) -> Result<Category, Err> {
    let kind = v.get("kind").and_then(Value::as_str).unwrap_or("random");
    Ok(Category {
        op: int(v, "op")? as u8,
        size: int(v, "size")? as u32,
        kind: kind_code(kind),
    })
}

impl Sampler {
    pub fn from_json(model: &Value) -> Result<Sampler, Err> {
        let levels = int(model, "levels")? as u32;
        let fanout = int(model, "fanout")? as u32;
        if levels == 0 || fanout < 2 {
            return Err("levels must be >= 1 and fanout >= 2".into());
        }
        let tree = Tree::new(levels, fanout, int(model, "capacity")?);
        let flat = model.get("flat").and_then(Value::as_bool).unwrap_or(false);
        let streams = model
            .get("streams")
            .and_then(Value::as_array)
            .ok_or("missing 'streams'")?
            .iter()
            .enumerate()
            .map(|(i, s)| stream_model(s, &tree, flat).map_err(|e| format!("streams/{i}: {e}")))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Sampler {
            tree,
            flat,
            window_ns: int(model, "window_ns")?.max(1) as i64,
            span_ns: int(model, "span_ns")? as i64,
            total_requests: int(model, "requests")?,
            streams,
            global_reuse: model.get("reuse_scope").and_then(Value::as_str) == Some("global"),
            follow: follow_of(model)?,
            ties: TieCounts::from_json(model.get("ties"))?,
            segment_requests: SEGMENT_REQUESTS,
            burst_gap_ns: model
                .get("burst_gap_ns")
                .and_then(Value::as_f64)
                .unwrap_or(BURST_GAP_NS),
            data: DataMap::from_json(model.get("files"))?,
        })
    }

    /// Generates the synthetic trace, time-sorted, times from 0: each stream walks its states
    /// (categories, target leaves, times), then offsets are placed in the merged time order.
    pub fn generate(&self, p: &SynthParams) -> Columns {
        let counts = self.requests_per_stream(p);
        let quotas: Vec<_> = self
            .streams
            .iter()
            .zip(&counts)
            .map(|(s, &n)| self.window_quotas(s, p, n))
            .collect();
        let lengths: Vec<u64> = quotas
            .iter()
            .map(|q| q.iter().map(|w| w.count).sum())
            .collect();
        let parts = self.walk_streams(&quotas, &lengths, p);
        let mut placer = Placer::new(self, &lengths, p.seed);
        let merger = Merger::new(self.ties, lengths, p.seed);
        merge_streams(parts, merger, |k, step| {
            placer.place(self, k, step, p.uniform)
        })
    }

    /// Each stream's walk (times, steps, id). Streams walk independently, each with its own
    /// generator, so they share the machine's cores (largest first) with the same result.
    fn walk_streams(
        &self,
        quotas: &[Vec<Quota>],
        lengths: &[u64],
        p: &SynthParams,
    ) -> Vec<StreamPart> {
        let total: u64 = lengths.iter().sum();
        let one = |k: usize| {
            let (s, n) = (&self.streams[k], lengths[k]);
            if let Some(segments) = self.segments(s, &quotas[k], (n, total), p.seed) {
                let (times, steps) = self.walk_segmented(s, segments, &quotas[k], p, n);
                return (times, steps, s.id);
            }
            let mut st = self.walk_state(s, n, p.seed);
            st.ops = op_plan(&quotas[k]);
            let (mut steps, mut gaps) = (Vec::with_capacity(n as usize), Vec::new());
            self.walk(s, &mut st, n, p.uniform, &mut steps, &mut gaps);
            let bursts = self.bursts(s, p.seed);
            let times = place_times(&quotas[k], &gaps, p.intensity, bursts);
            (times, steps, s.id)
        };
        let cores = std::thread::available_parallelism().map_or(1, |c| c.get());
        let largest = lengths.iter().copied().max().unwrap_or(0);
        if cores < 2 || total < PARALLEL_WALK_MIN || largest * 10 > total * 9 {
            return (0..self.streams.len()).map(one).collect();
        }
        let mut order: Vec<usize> = (0..self.streams.len()).collect();
        order.sort_by_key(|&k| std::cmp::Reverse(lengths[k]));
        let next = std::sync::atomic::AtomicUsize::new(0);
        let mut done: Vec<(usize, StreamPart)> = std::thread::scope(|scope| {
            let workers: Vec<_> = (0..cores.min(self.streams.len()))
                .map(|_| {
                    scope.spawn(|| {
                        let mut mine = Vec::new();
                        loop {
                            let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                            let Some(&k) = order.get(i) else { break mine };
                            mine.push((k, one(k)));
                        }
                    })
                })
                .collect();
            workers
                .into_iter()
                .flat_map(|w| w.join().expect("walk thread panicked"))
                .collect()
        });
        done.sort_unstable_by_key(|d| d.0);
        done.into_iter().map(|d| d.1).collect()
    }

    /// The same requests as `generate`, in the same order, produced on the fly: each stream
    /// walks one fluctuation window at a time and the streams are merged by time, so memory
    /// holds one window per stream instead of the whole trace.
    pub fn stream(self, p: SynthParams) -> Synth {
        let counts = self.requests_per_stream(&p);
        let all_quotas: Vec<Vec<Quota>> = (self.streams.iter().zip(&counts))
            .map(|(s, &n)| self.window_quotas(s, &p, n))
            .collect();
        let lengths: Vec<u64> = all_quotas
            .iter()
            .map(|q| q.iter().map(|w| w.count).sum())
            .collect();
        let total = lengths.iter().sum();
        let mut cursors = Vec::with_capacity(self.streams.len());
        for ((s, quotas), &n) in self.streams.iter().zip(all_quotas).zip(&lengths) {
            let mut st = self.walk_state(s, n, p.seed);
            st.ops = op_plan(&quotas);
            let segments = self.segments(s, &quotas, (n, total), p.seed);
            cursors.push(Cursor {
                st,
                quotas: quotas.into(),
                window: 0,
                placed: 0,
                times: Vec::new(),
                steps: Vec::new(),
                gaps: Vec::new(),
                pos: 0,
                ahead: None,
                spare: (Vec::new(), Vec::new()),
                segments,
                walking: VecDeque::new(),
            });
        }
        let placer = Placer::new(&self, &lengths, p.seed);
        let merger = Merger::new(self.ties, lengths, p.seed);
        let mut synth = Synth {
            placer,
            sampler: Arc::new(self),
            params: p,
            ends: vec![None; cursors.len()],
            cursors,
            merger,
            t0: None,
            total,
            epoch: 0,
            cores: std::thread::available_parallelism().map_or(1, |c| c.get()),
        };
        for k in 0..synth.cursors.len() {
            synth.push_head(k);
        }
        synth
    }

    fn walk_state(&self, s: &StreamModel, n: u64, seed: u64) -> WalkState {
        let own_history = !self.global_reuse && s.reuse_total > 0;
        WalkState {
            rng: Pcg64Mcg::seed_from_u64(stream_seed(seed, s.id)),
            budget: s.initial.clone(),
            cur: None,
            reref: own_history.then(|| History::new(n as usize, s.blocks(n), self.tree.capacity)),
            recent: RecentEnds::default(),
            i: 0,
            ops: None,
        }
    }

    /// A long stream's segments (`segment.rs`), where its walk can be cut: it keeps no
    /// history of its own (a history spans the stream's whole walk), it holds at least half
    /// of the synthesis' `total` requests (others walk beside other streams on the cores,
    /// and at most two streams hold their walking segments in memory at once), and its
    /// windows hold at least two segments' requests. None: it walks whole. What is cut does
    /// not depend on the machine, so neither do the bytes.
    fn segments(
        &self,
        s: &StreamModel,
        quotas: &[Quota],
        (n, total): (u64, u64),
        seed: u64,
    ) -> Option<Segments> {
        let own_history = !self.global_reuse && s.reuse_total > 0;
        if own_history || n * 2 < total {
            return None;
        }
        let windows: Vec<_> = quotas.iter().map(|q| (q.count, q.reads)).collect();
        let plans = segment::plan(&windows, self.segment_requests);
        if plans.len() < 2 {
            return None;
        }
        let classes = s
            .cats
            .iter()
            .map(|cats| cats.iter().map(|(c, _)| (c.op != OP_READ) as u8).collect())
            .collect();
        Some(Segments {
            plans,
            next: 0,
            cores: std::thread::available_parallelism()
                .map_or(1, |c| c.get())
                .min(SEGMENTS_AT_ONCE),
            dealer: Dealer::new(s.initial.categories.clone(), classes),
            rng: Pcg64Mcg::seed_from_u64(stream_seed(seed, s.id) ^ DEAL_SALT),
        })
    }

    /// A segmented stream's whole walk: its segments walk on threads, as many at once as
    /// there are cores, and join in order (as `Cursor::next_segment` walks them ahead).
    fn walk_segmented(
        &self,
        s: &StreamModel,
        mut segments: Segments,
        quotas: &[Quota],
        p: &SynthParams,
        n: u64,
    ) -> (Vec<i64>, Vec<Step>) {
        let (mut times, mut steps) = (Vec::new(), Vec::new());
        times.reserve_exact(n as usize);
        steps.reserve_exact(n as usize);
        std::thread::scope(|scope| {
            let mut walking = VecDeque::new();
            loop {
                segments.walk_ahead(s, &mut walking, |(j, plan, budget)| {
                    scope.spawn(move || self.walk_segment(s, j, &plan, budget, quotas, p))
                });
                let Some(walking) = walking.pop_front() else {
                    break;
                };
                let (t, st) = walking.join().expect("segment walk panicked");
                times.extend(t);
                steps.extend(st);
            }
        });
        (times, steps)
    }

    /// One segment's walk over its windows, from its own generator and budgets: its
    /// requests' times and steps.
    fn walk_segment(
        &self,
        s: &StreamModel,
        j: usize,
        plan: &SegmentPlan,
        budget: Budgets,
        quotas: &[Quota],
        p: &SynthParams,
    ) -> (Vec<i64>, Vec<Step>) {
        let mut st = WalkState {
            rng: Pcg64Mcg::seed_from_u64(stream_seed(p.seed, s.id) ^ segment_salt(j)),
            budget,
            cur: None,
            reref: None,
            recent: RecentEnds::default(),
            i: plan.start,
            ops: op_plan(quotas),
        };
        let n = plan.count as usize;
        let (mut times, mut steps) = (Vec::with_capacity(n), Vec::with_capacity(n));
        let mut gaps = Vec::new();
        for q in &quotas[plan.windows.clone()] {
            if q.count == 0 {
                continue;
            }
            // the stream's very first request opens its window
            let first = plan.start == 0 && steps.is_empty();
            gaps.clear();
            self.walk(s, &mut st, q.count, p.uniform, &mut steps, &mut gaps);
            let bursts = self.bursts(s, p.seed);
            place_window(
                (q.window, q.start, q.len),
                &gaps,
                first,
                p.intensity,
                &mut times,
                bursts,
            );
        }
        (times, steps)
    }

    /// Refuses, with a message meant for the user, a synthesis whose re-reference histories
    /// cannot be held: positions are 32-bit, and a history takes memory in proportion to its
    /// requests (checked against the memory the system has available, where it says).
    pub fn check_capacity(&self, p: &SynthParams) -> Result<(), String> {
        let counts = self.requests_per_stream(p);
        // requests per stream; by count each gets exactly its share, by duration its windows
        let lengths = self
            .streams
            .iter()
            .zip(&counts)
            .map(|(s, &n)| match p.requests {
                Some(_) => n,
                None => self.window_quotas(s, p, n).iter().map(|w| w.count).sum(),
            });
        // what each history holds, (requests, blocks): one of all streams' requests (where
        // any re-references), or one per stream that re-references
        let held = self
            .streams
            .iter()
            .zip(lengths)
            .map(|(s, n)| (s, n, s.blocks(n)));
        let histories: Vec<(u64, u64)> = if self.global_reuse {
            let any = self.streams.iter().any(|s| s.reuse_total > 0);
            let all = held.fold((0, 0), |(n, b), (_, m, c)| (n + m, b + c));
            any.then_some(all).into_iter().collect()
        } else {
            held.filter(|(s, _, _)| s.reuse_total > 0)
                .map(|(_, n, b)| (n, b))
                .collect()
        };
        let largest = histories.iter().map(|h| h.0).max().unwrap_or(0);
        let total: u64 = histories.iter().map(|h| h.0).sum();
        let blocks: u64 = histories.iter().map(|h| h.1).sum();
        let limit = u32::MAX as u64 - 1;
        if largest >= limit {
            return Err(format!(
                "{} requests in one re-reference history; it holds at most {}: ask \
                 for fewer requests or a shorter duration, or fit without re-references \
                 (--no-reref)",
                grouped(largest),
                grouped(limit)
            ));
        }
        let need = total.saturating_mul(HISTORY_BYTES_PER_REQUEST)
            + blocks.saturating_mul(HISTORY_BYTES_PER_BLOCK);
        match available_memory() {
            Some(free) if need > free => Err(format!(
                "{} requests need about {:.1} GiB for their re-reference histories \
                 ({HISTORY_BYTES_PER_REQUEST} bytes a request and {HISTORY_BYTES_PER_BLOCK} a \
                 4 KiB block it spans) and {:.1} GiB are available: \
                 ask for fewer requests or a shorter duration, or fit without re-references \
                 (--no-reref)",
                grouped(total),
                need as f64 / GIB,
                free as f64 / GIB
            )),
            _ => Ok(()),
        }
    }

    /// Requests per stream: exact shares of `requests` by weight (largest remainder), or
    /// None-sized (decided by the duration) when running for a duration.
    fn requests_per_stream(&self, p: &SynthParams) -> Vec<u64> {
        let Some(total) = p.requests else {
            return vec![u64::MAX; self.streams.len()];
        };
        let exact: Vec<f64> = self
            .streams
            .iter()
            .map(|s| s.weight * total as f64)
            .collect();
        let mut counts: Vec<u64> = exact.iter().map(|e| e.floor() as u64).collect();
        let mut short = total.saturating_sub(counts.iter().sum());
        let mut order: Vec<usize> = (0..exact.len()).collect();
        order.sort_by(|&a, &b| {
            (exact[b] - exact[b].floor())
                .total_cmp(&(exact[a] - exact[a].floor()))
                .then(a.cmp(&b))
        });
        for i in order {
            if short == 0 {
                break;
            }
            counts[i] += 1;
            short -= 1;
        }
        counts
    }

    /// The stream's windows as (start, length, requests), cycling through the fluctuation
    /// pattern until `n` requests (or the duration) are reached. Times are before intensity.
    fn window_quotas(&self, s: &StreamModel, p: &SynthParams, n: u64) -> Vec<Quota> {
        let k = s.windows.len().max(1);
        let compress = p.compress.max(1e-9);
        let lengths: Vec<f64> = (0..k)
            .map(|w| {
                let start = w as i64 * self.window_ns;
                ((self.span_ns - start).clamp(0, self.window_ns)) as f64 / compress
            })
            .collect();
        let pattern_total: u64 = s.windows.iter().sum();
        let limit = p.duration_ns.map(|d| d as f64 * p.intensity);
        let mut out = Vec::new();
        if pattern_total == 0 || (p.requests.is_some() && n == 0) {
            return out;
        }
        let (mut t, mut done, mut cum, mut assigned) = (0.0f64, 0u64, 0.0f64, 0u64);
        for j in 0.. {
            let w = j % k;
            cum += s.windows[w] as f64 / compress;
            let mut quota = (cum.round() as u64).saturating_sub(assigned);
            assigned += quota;
            let mut len = lengths[w];
            if let Some(lim) = limit {
                if t >= lim {
                    break;
                }
                if t + len > lim && len > 0.0 {
                    let keep = (lim - t) / len;
                    quota = (quota as f64 * keep).round() as u64;
                    len = lim - t;
                }
            }
            // the stream's requests fill its active stretch of the window (streams take
            // turns; one stream alone fills its windows, idle edges and all)
            let (lo, hi) = match self.streams.len() {
                1 => (0.0, 1.0),
                _ => s.spans.get(w).copied().unwrap_or((0.0, 1.0)),
            };
            // the active stretch of `len` ns from `t`, with `count` requests and the window's
            // share of reads among them
            let stretch = |len: f64, count: u64| Quota {
                window: w,
                start: t + lo * len,
                len: (hi - lo) * len,
                count,
                reads: s.window_reads.get(w).map(|&r| {
                    let share = r as f64 / s.windows[w].max(1) as f64;
                    (share * count as f64).round() as u64
                }),
            };
            if p.requests.is_some() && done + quota >= n {
                let left = n - done;
                if quota > 0 {
                    len *= left as f64 / quota as f64;
                }
                out.push(stretch(len, left));
                break;
            }
            out.push(stretch(len, quota));
            done += quota;
            t += lengths[w];
            if j > 1_000_000_000 {
                break;
            }
        }
        out
    }

    /// The Markov walk: the next n requests' categories and target leaves with their raw
    /// inter-arrival gaps, continuing from `st` (walking in pieces gives the same requests).
    /// With a shared history the walk stands at each transition's target leaf and offsets
    /// are placed afterwards (`Placer`); per-stream models place them here, with the stream's
    /// own history, as before the shared one.
    fn walk(
        &self,
        s: &StreamModel,
        st: &mut WalkState,
        n: u64,
        uniform: bool,
        steps: &mut Vec<Step>,
        gaps: &mut Vec<f64>,
    ) {
        let WalkState {
            rng,
            budget,
            cur,
            reref,
            recent,
            i,
            ops,
        } = st;
        // empirical gaps looked up a batch at a time, their loads overlapped (`resolve_gaps`)
        let mut pending = Vec::with_capacity((n as usize).min(GAP_BATCH));
        for _ in 0..n {
            if budget.left == 0 {
                *budget = s.initial.clone(); // a full pass is done: start the next one
            }
            let (cat, target, gap) = match (*i, *cur, s.first) {
                (0, _, Some((leaf, c))) => (c, leaf, Drawn::Ready(0.0)),
                (_, Some((leaf, _)), _) => {
                    let want = ops.as_mut().and_then(|o| o.want(*i));
                    self.step(s, budget, leaf, want, rng)
                }
                _ => self.teleport(s, budget, rng),
            };
            let placed = if self.global_reuse {
                *cur = Some((target, 0));
                None
            } else {
                let (offset, size) = if uniform {
                    (self.uniform_offset(s, cat.size, rng), cat.size)
                } else {
                    self.place(s, &cat, target, recent, reref.as_ref(), None, rng)
                };
                if let Some(r) = reref.as_mut() {
                    r.touch(offset, size, self.tree.leaf_of(offset));
                }
                recent.next(offset, size);
                *cur = Some((self.tree.leaf_of(offset), offset + size as u64));
                Some(offset)
            };
            if let Some(o) = ops.as_mut() {
                o.record(*i, cat.op == OP_READ);
            }
            steps.push(Step {
                cat,
                target,
                placed,
            });
            match gap {
                Drawn::Ready(g) => gaps.push(g),
                Drawn::Later(e, pick, u) => {
                    pending.push((gaps.len(), e, pick, u));
                    gaps.push(0.0);
                    if pending.len() == GAP_BATCH {
                        resolve_gaps(&pending, gaps);
                        pending.clear();
                    }
                }
            }
            *i += 1;
        }
        resolve_gaps(&pending, gaps);
    }

    /// One transition from `leaf`: (category, target leaf, gap), its category steered toward
    /// a share `want` of reads where the window has a target (`opmix`).
    fn step<'a>(
        &self,
        s: &'a StreamModel,
        b: &mut Budgets,
        leaf: u64,
        want: Option<f64>,
        rng: &mut Pcg64Mcg,
    ) -> (Category, u64, Drawn<'a>) {
        let picked = if self.flat {
            self.flat_move(s, b, leaf, rng)
        } else {
            self.tree_move(s, b, leaf, rng)
        };
        match picked {
            Some((t, q)) => self.consume(s, b, t, q, want, rng),
            None => self.teleport(s, b, rng),
        }
    }

    /// Uses one count of transition `t` (and of one of its categories) landing in leaf `q`.
    /// Steering redraws the category only. Redrawing the transition with it steers a walk
    /// whose transitions hold one operation each too, but MSR's twin then crowded its reads,
    /// spread over its leaves, into its busy window: simulated mean +35% (docs/model.md).
    fn consume<'a>(
        &self,
        s: &'a StreamModel,
        b: &mut Budgets,
        t: usize,
        q: u64,
        want: Option<f64>,
        rng: &mut Pcg64Mcg,
    ) -> (Category, u64, Drawn<'a>) {
        // the transition's categories hold exactly its remaining count: draw below it
        let (counts, left) = (&b.categories[t], b.remaining[t]);
        let c = match want {
            None => peek(counts, left, rng).unwrap_or(0),
            Some(w) => opmix::steered(w, s.read_share, || {
                let c = peek(counts, left, rng).unwrap_or(0);
                (c, s.cats[t][c].0.op == OP_READ, rng.random())
            }),
        };
        self.use_category(s, b, t, c, q, rng)
    }

    /// Uses one count of category `c` of transition `t` landing in leaf `q`.
    fn use_category<'a>(
        &self,
        s: &'a StreamModel,
        b: &mut Budgets,
        t: usize,
        c: usize,
        q: u64,
        rng: &mut Pcg64Mcg,
    ) -> (Category, u64, Drawn<'a>) {
        b.categories[t][c] -= 1;
        b.remaining[t] -= 1;
        b.left -= 1;
        b.all.add(t, -1);
        for &r in &s.rows.stays_of[t] {
            let stay = &mut b.stay[r as usize];
            *stay = stay.saturating_sub(1);
        }
        let (cat, iat) = &s.cats[t][c];
        (*cat, q, iat.draw(rng))
    }

    /// Top-down: at each level move to a sibling or stay and look deeper.
    fn tree_move(
        &self,
        s: &StreamModel,
        b: &mut Budgets,
        leaf: u64,
        rng: &mut Pcg64Mcg,
    ) -> Option<(usize, u64)> {
        let t = &self.tree;
        for d in 0..t.levels {
            let node = t.ancestor(leaf, d);
            let x = t.digit(leaf, d);
            let row = *s.rows.index.get(d + 1, t.child(node, x as u64))? as usize;
            let row_moves = &s.rows.moves[row];
            let moves: u64 = row_moves.iter().map(|m| b.remaining[m.1]).sum();
            let stay = if d + 1 < t.levels { b.stay[row] } else { 0 };
            if moves + stay == 0 {
                return None;
            }
            let u = rng.random_range(0..moves + stay);
            if u < moves {
                let (y, idx) = pick_move(row_moves, &b.remaining, u)?;
                let child = t.child(node, y);
                return Some((idx, self.descend(b, d + 1, child, rng)));
            }
        }
        None
    }

    /// From a node at `depth`, down to a leaf through the nodes' entry budgets.
    fn descend(&self, b: &mut Budgets, depth: u32, node: u64, rng: &mut Pcg64Mcg) -> u64 {
        let t = &self.tree;
        let mut node = node;
        for e in depth..t.levels {
            let child = match b.node_entry.get_mut(e, node).and_then(|w| take(w, rng)) {
                Some(c) => c as u64,
                None => rng.random_range(0..t.fanout as u64),
            };
            node = t.child(node, child);
        }
        node
    }

    fn flat_move(
        &self,
        s: &StreamModel,
        b: &mut Budgets,
        leaf: u64,
        rng: &mut Pcg64Mcg,
    ) -> Option<(usize, u64)> {
        let row = s.rows.flat.get(&leaf)?;
        let total: u64 = row.iter().map(|m| b.remaining[m.1]).sum();
        if total == 0 {
            return None;
        }
        let (to, idx) = pick_move(row, &b.remaining, rng.random_range(0..total))?;
        Some((idx, to))
    }

    /// Where the walk has no transition left from its leaf: take any remaining transition,
    /// as if the walk stood at its source.
    fn teleport<'a>(
        &self,
        s: &'a StreamModel,
        b: &mut Budgets,
        rng: &mut Pcg64Mcg,
    ) -> (Category, u64, Drawn<'a>) {
        let left = b.left;
        if left == 0 {
            let leaf = s.leaves.pick(rng).unwrap_or(0);
            let cat = s.first.map(|f| f.1).unwrap_or(Category {
                op: 0,
                size: 4096,
                kind: 0,
            });
            return (cat, leaf, Drawn::Ready(0.0));
        }
        // A teleport leaves the walk's leaf, and a sequential request can only start where
        // the previous one ended, not in the transition's target leaf: drawn here it landed
        // off its count's leaf (cloudPhysics at levels 3: 2,463 such requests, the
        // hierarchical twin's level-2 shares .005 off). Draws of a continuation are put
        // back a few times, so they are used when the walk stands at their leaf.
        let mut tries = 0;
        let (t, c) = loop {
            let t = b.all.find_kth(rng.random_range(0..left) + 1);
            let c = peek(&b.categories[t], b.remaining[t], rng).unwrap_or(0);
            tries += 1;
            if !is_continuation(s.cats[t][c].0.kind) || tries == TELEPORT_TRIES {
                break (t, c);
            }
        };
        let key = s.keys[t];
        let q = if self.flat {
            key.to as u64
        } else {
            let child = self.tree.child(key.prefix, key.to as u64);
            self.descend(b, key.depth + 1, child, rng)
        };
        self.use_category(s, b, t, c, q, rng)
    }

    #[allow(clippy::too_many_arguments)]
    fn place(
        &self,
        s: &StreamModel,
        cat: &Category,
        target: u64,
        recent: &RecentEnds,
        reref: Option<&History>,
        frontier: Option<&mut FxHashMap<u64, u64>>,
        rng: &mut Pcg64Mcg,
    ) -> (u64, u32) {
        let cap = self.tree.capacity;
        let own = cat.size;
        let prev_end = recent.last();
        let resumed = cat.kind == KIND_RESUME || cat.kind == KIND_RESUME_REREF;
        if resumed && s.resume_total > 0 {
            if let Some(end) = self.resume_at(s, target, recent, cat, reref, rng) {
                return (end, own);
            }
        }
        if cat.kind == KIND_RESUME_REREF {
            // no run of old data open in its leaf: re-read old data as far back as the
            // original's resumed re-scans did, not fresh blocks (cloudPhysics' footprint leak)
            let (d, total) = &s.resume_reuse_by_op[cat.op.min(1) as usize];
            let distances = (d, *total);
            if let Some(off) = reref.and_then(|r| pick(r, distances, target, self.follow, rng)) {
                return (off, own);
            }
        }
        if cat.kind == KIND_SEQUENTIAL {
            // with one shared history, a run of new data that would overwrite others' data
            // moves on to fresh space instead (a log appends where nothing was written)
            let new_data =
                |e: &u64| !self.global_reuse || reref.is_none_or(|r| !r.seen(*e, cat.size));
            if let Some(end) = prev_end.filter(|e| self.continues(*e, cat.size) && new_data(e)) {
                return (end, own);
            }
        }
        if cat.kind == KIND_SEQ_REREF {
            // a re-scan continues like any sequential request (sequentiality first); only
            // where it cannot does it re-reference old data elsewhere in its leaf
            let old_data =
                |e: &u64| !self.global_reuse || reref.is_none_or(|r| r.seen(*e, cat.size));
            if let Some(end) = prev_end.filter(|e| self.continues(*e, cat.size) && old_data(e)) {
                return (end, own);
            }
        }
        if cat.kind == KIND_REREF || cat.kind == KIND_SEQ_REREF {
            // where an old request was (its size stays the category's: exact size shares)
            let (d, total) = &s.reuse_by_op[cat.op.min(1) as usize];
            if let Some(off) = reref.and_then(|r| pick(r, (d, *total), target, self.follow, rng)) {
                return (off, own);
            }
        }
        let (lo, hi) = self.tree.leaf_range(target);
        let leaf = (lo, hi.min(cap));
        let packed = frontier.is_some();
        if let Some(f) = frontier {
            let phase = fresh_phase(s, &self.data, rng);
            if let Some(off) = next_fresh(f, target, leaf, &self.data, s, cat, reref, phase) {
                return (off, own);
            }
        }
        let room = self.data.room(within(s.extent, leaf), rng);
        if let (false, Some(start), Some(end)) = (packed, recent.last_start(), prev_end) {
            // per-stream models: a cold request in its predecessor's leaf jumps from its end as
            // the original's random ones did (`leaf_jump`). So do the resumes and re-references
            // that found nothing to continue or re-read: they land on new data too, and placed
            // anywhere in the leaf they seeked too far (cloudPhysics: 26% of the twin's requests
            // land so; over 12 twins simulated p95 +10.2% -> +9.5%, jump-distance TVD .193 -> .154)
            let prev = (start, end);
            if self.tree.leaf_of(start) == target {
                // a near or far jump that lands nowhere new takes any jump before a uniform
                // offset, which lands farther still
                let size = cat.size as u64;
                for jumps in [Jumps::of(s, cat.kind), Jumps::Any] {
                    if let Some(off) = jump_from(s, jumps, prev, room, size, reref, rng) {
                        return (off, own);
                    }
                }
            }
        }
        let (lo, hi) = room;
        let mut off = random_for(s, lo, hi, cat.size as u64, rng);
        // a cold request touches a block no one has touched (in the history's scope): re-draw
        // a few times where the leaf is small enough for a random offset to land on old data
        if let Some(r) = reref {
            for _ in 0..COLD_RETRIES {
                if !r.seen(off, cat.size) {
                    break;
                }
                off = random_for(s, lo, hi, cat.size as u64, rng);
            }
        }
        (off, own)
    }

    /// Where a resumed run picks up: the end of the stream's open run in the transition's
    /// target leaf (so locality holds) whose lag is nearest a drawn one; None where no open
    /// run ends in that leaf (the request then lands like a random one).
    fn resume_at(
        &self,
        s: &StreamModel,
        target: u64,
        recent: &RecentEnds,
        cat: &Category,
        history: Option<&History>,
        rng: &mut Pcg64Mcg,
    ) -> Option<u64> {
        let lag = draw(&s.resume, s.resume_total, rng) as usize;
        // a resumed re-scan goes on over old data, a resumed run of new data onto new data
        // (models from before the split into 'resume-reref' resume either). Not with one
        // history of all streams: pgbench's twin then touched 0.79x the original's data
        // (0.81x resuming either; largest cache speedup error 5.13 against 5.09)
        let old = cat.kind == KIND_RESUME_REREF;
        let split = s.resume_reuse_total > 0 && !self.global_reuse;
        let data = |e: u64| !split || history.is_none_or(|h| h.seen(e, cat.size) == old);
        let fits =
            |e: u64| self.tree.leaf_of(e) == target && self.continues(e, cat.size) && data(e);
        recent
            .open_ends()
            .enumerate()
            .skip(1) // lag 1 is the previous request's end: a sequential request's
            .filter(|&(_, e)| fits(e))
            .min_by_key(|&(i, _)| (i + 1).abs_diff(lag))
            .map(|(_, e)| e)
    }

    /// Whether a sequential request may continue at `end`: wherever it fits. The walk's
    /// count budgets keep locality (measured: within 0.002 at level 1 on cloudPhysics), while
    /// holding runs inside their transition's leaf broke them at small leaves.
    fn continues(&self, end: u64, size: u32) -> bool {
        end + size as u64 <= self.tree.capacity && self.data.holds(end, size as u64)
    }

    fn uniform_offset(&self, s: &StreamModel, size: u32, rng: &mut Pcg64Mcg) -> u64 {
        random_in(0, self.tree.capacity, size as u64, s.alignment, rng)
    }

    pub fn total_requests(&self) -> u64 {
        self.total_requests
    }
}

/// Bytes a re-reference history holds per request at most: its touch record (16), its leaf's
/// list (4, with index and flags) and its weight (2, with the chunk sums); and per block the
/// requests span, the last-touch table's (up to 16: 4 slots a block touched).
const HISTORY_BYTES_PER_REQUEST: u64 = 24;
const HISTORY_BYTES_PER_BLOCK: u64 = 16;
const GIB: f64 = (1u64 << 30) as f64;

/// 1234567 -> "1,234,567", for messages.
fn grouped(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// MemAvailable of /proc/meminfo in bytes (None where the system does not say).
fn available_memory() -> Option<u64> {
    let info = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = info.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// The move of `row` (target, transition) that position `u` falls in, each move as wide as its
/// transition's remaining count (`u` below their sum).
fn pick_move(row: &[(u64, usize)], remaining: &[u64], mut u: u64) -> Option<(u64, usize)> {
    for &(to, idx) in row {
        let r = remaining[idx];
        if u < r {
            return Some((to, idx));
        }
        u -= r;
    }
    None
}

/// A value from a histogram of `total` counts (uniform inside its bucket): the bucket whose
/// running sum first exceeds a uniform draw below the total (a search, not a scan).
fn draw(buckets: &[(u64, u64, u64)], total: u64, rng: &mut Pcg64Mcg) -> u64 {
    draw_between(buckets, 0..total, rng)
}

/// A value drawn from the histogram's counts `counts` (a range of its running sum: the
/// buckets wholly below a value are a prefix of it).
fn draw_between(
    buckets: &[(u64, u64, u64)],
    counts: std::ops::Range<u64>,
    rng: &mut Pcg64Mcg,
) -> u64 {
    let u = rng.random_range(counts);
    match buckets.get(buckets.partition_point(|b| b.2 <= u)) {
        Some(&(lo, hi, _)) => rng.random_range(lo..hi.max(lo + 1)),
        None => 0,
    }
}

/// The offset of an old request to re-issue: its block lies in the transition's target leaf,
/// at the stack distance nearest one drawn from `distances` (within REREF_SEARCH of it), so
/// the walk's locality is kept. A distance deeper than the history so far finds nothing: the
/// request stays cold, which measured closer to real block reuse than drawing again
/// (cloudPhysics MRC). `follow` as `History::at_distance`.
fn pick(
    history: &History,
    (distances, total): (&Buckets, u64),
    target: u64,
    follow: usize,
    rng: &mut Pcg64Mcg,
) -> Option<u64> {
    if total == 0 {
        return None; // the stream's re-references were all outside the SHARDS sample
    }
    let dist = draw(distances, total, rng);
    history.at_distance(target, dist, REREF_SEARCH, follow)
}

/// Candidates on each side of a drawn distance for a followed pick (`reuse_pick:
/// "followed"`): session 35 measured 4 and 16 alike on cloudPhysics.
const FOLLOWED_PICKS: usize = 4;

/// How a model's re-references pick among old requests near their drawn distance: the
/// nearest (absent or "nearest"), or the nearest followed by old data ("followed", written
/// by calibrated fits, whose distances were tuned for it).
fn follow_of(model: &Value) -> Result<usize, Err> {
    match model.get("reuse_pick").map(Value::as_str) {
        None | Some(Some("nearest")) => Ok(0),
        Some(Some("followed")) => Ok(FOLLOWED_PICKS),
        Some(other) => Err(format!(
            "reuse_pick {other:?}: expected nearest or followed"
        )),
    }
}

/// With one history of all streams, new data fills each leaf from its start, past what is
/// touched already, as a file system allocates: the footprint stays dense, so runs that read
/// on past one request find data others wrote (pgbench: 205 runs of touched blocks in the
/// original; 2,028 with cold requests at random offsets). In a file-level model new data
/// goes only where files are (`data.rs`). None once the leaf is full.
#[allow(clippy::too_many_arguments)]
fn next_fresh(
    frontier: &mut FxHashMap<u64, u64>,
    leaf: u64,
    (lo, hi): (u64, u64),
    data: &DataMap,
    s: &StreamModel,
    cat: &Category,
    history: Option<&History>,
    phase: Option<u64>,
) -> Option<u64> {
    let align = s.alignment.max(1);
    let size = cat.size as u64;
    let at = frontier.entry(leaf).or_insert(lo);
    let start = |off: u64| match phase {
        Some(p) => off + (p + BLOCK - off % BLOCK) % BLOCK,
        None => off.div_ceil(align) * align,
    };
    let fit = |off: u64| data.next_fit(start(off), size, align);
    let inside = |o: &u64| o + size <= hi;
    let mut off = fit(*at);
    while let Some(o) = off.filter(|o| inside(o) && history.is_some_and(|r| r.seen(*o, cat.size))) {
        off = fit(o + size.max(1));
    }
    let Some(off) = off.filter(inside) else {
        *at = hi; // the leaf's data is all touched
        return None;
    };
    *at = off + size;
    Some(off)
}

/// Where in its 4 KiB block new data starts (`next_fresh`): the stream's phase, drawn when it
/// has several (a shared history packed new data at the alignment from the leaf's frontier,
/// so cloudPhysics fitted as one thread, 80% of whose requests start 3,584 bytes into a block,
/// got phases .785 from the original's). None for file-level models, whose new data stays
/// inside files (`DataMap::next_fit`), and for streams without phases.
fn fresh_phase(s: &StreamModel, data: &DataMap, rng: &mut Pcg64Mcg) -> Option<u64> {
    let sums = s.phase.as_ref().filter(|_| data.is_empty())?;
    let total = sums[PHASES - 1];
    let first = sums.partition_point(|&c| c == 0);
    if sums[first] == total {
        return Some(first as u64 * PHASE_BYTES); // one phase: nothing to draw
    }
    draw_phase(s, rng)
}

/// Draws of an in-leaf jump before a random request falls back to a uniform offset.
const JUMP_TRIES: usize = 4;
/// The same for a near request, whose short jumps land on old data more often.
const NEAR_TRIES: usize = 16;

/// Which of a stream's in-leaf jumps a cold request draws from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Jumps {
    /// All: models from before the near kind, and requests falling back to new data.
    Any,
    /// Those below `near_bytes` (`KIND_NEAR`).
    Near,
    /// Those at or above it (`KIND_RANDOM`, where the model has near requests).
    Far,
}

impl Jumps {
    /// What a request of `kind` jumps by in stream `s`.
    fn of(s: &StreamModel, kind: u8) -> Jumps {
        match (s.near, kind) {
            (None, _) => Jumps::Any,
            (Some(_), KIND_NEAR) => Jumps::Near,
            (Some(_), KIND_RANDOM) => Jumps::Far,
            _ => Jumps::Any,
        }
    }

    /// The range of the running sums of the jumps ahead and behind it draws from.
    fn counts(self, s: &StreamModel) -> [std::ops::Range<u64>; 2] {
        let (ahead, behind) = (s.jumps_ahead_total, s.jumps_behind_total);
        let (near_ahead, near_behind) = s.near.unwrap_or((ahead, behind));
        match self {
            Jumps::Any => [0..ahead, 0..behind],
            Jumps::Near => [0..near_ahead, 0..near_behind],
            Jumps::Far => [near_ahead..ahead, near_behind..behind],
        }
    }
}

/// Where a cold request lands by a jump drawn from its stream's in-leaf jumps from `end`,
/// the previous request's end (it spans [start, end)): aligned, inside [lo, hi) (its leaf
/// within the stream's extent) with room for `size`, not sequential, and on a block no
/// request touched (a random request is a cold one, as in the fit). None when the stream has
/// no jumps or no draw lands so.
#[allow(clippy::too_many_arguments)]
fn jump_from(
    s: &StreamModel,
    jumps: Jumps,
    (start, end): (u64, u64),
    (lo, hi): (u64, u64),
    size: u64,
    history: Option<&History>,
    rng: &mut Pcg64Mcg,
) -> Option<u64> {
    let [ahead_counts, behind_counts] = jumps.counts(s);
    let ahead_n = ahead_counts.end - ahead_counts.start;
    let total = ahead_n + (behind_counts.end - behind_counts.start);
    if total == 0 {
        return None;
    }
    let align = s.alignment.max(1);
    let tries = if jumps == Jumps::Near {
        NEAR_TRIES
    } else {
        JUMP_TRIES
    };
    for _ in 0..tries {
        let ahead = rng.random_range(0..total) < ahead_n;
        let off = if ahead {
            end.checked_add(draw_between(&s.jumps_ahead, ahead_counts.clone(), rng))
        } else {
            end.checked_sub(draw_between(&s.jumps_behind, behind_counts.clone(), rng))
        };
        let Some(off) = off.and_then(|o| snap(s, o, ahead, align, rng)) else {
            continue;
        };
        // a jump leaves the previous request: no overlap with it
        let clear = off >= end || off + size <= start;
        let inside = off >= lo && off + size <= hi && off != end && clear;
        if inside && history.is_none_or(|h| !h.seen(off, size as u32)) {
            return Some(off);
        }
    }
    None
}

/// The part of a leaf inside the stream's extent: a volume's twin stays on the volume's range
/// (Tencent's volumes end below 11 GB at the median, in 104 GB leaves at level 2; placed over
/// the whole leaf, the twin's seeks between volumes were 2.5x the original's). The whole leaf
/// where they do not meet (a stream type's walk may reach a leaf only another member visited;
/// a stream of empty requests, such as flushes, has an empty extent).
fn within(extent: (u64, u64), leaf: (u64, u64)) -> (u64, u64) {
    let (lo, hi) = (leaf.0.max(extent.0), leaf.1.min(extent.1));
    if lo < hi {
        (lo, hi)
    } else {
        leaf
    }
}

/// A random offset of stream `s` in [lo, hi) with room for `size`: in a random 4 KiB block,
/// at a phase drawn from the stream's (MSR hm0: 93% of the requests start on a block, a
/// twin placing them at any 512-byte step started 15% so, and covered an extra block with
/// most 4 KiB requests), else uniformly at the stream's alignment.
fn random_for(s: &StreamModel, lo: u64, hi: u64, size: u64, rng: &mut Pcg64Mcg) -> u64 {
    if let Some(phase) = draw_phase(s, rng) {
        let first = lo.saturating_sub(phase).div_ceil(BLOCK);
        let last_start = hi.saturating_sub(size);
        if let Some(last) = last_start.checked_sub(phase).map(|o| o / BLOCK) {
            if first <= last {
                return rng.random_range(first..=last) * BLOCK + phase;
            }
        }
    }
    random_in(lo, hi, size, s.alignment, rng)
}

/// Where a drawn jump target `off` lands: at a phase drawn from the stream's, the first such
/// offset past `off` for a jump ahead and the last before it for one behind (so a short jump
/// keeps its direction), else at the stream's alignment.
fn snap(s: &StreamModel, off: u64, ahead: bool, align: u64, rng: &mut Pcg64Mcg) -> Option<u64> {
    let Some(phase) = draw_phase(s, rng) else {
        return Some(off / align * align);
    };
    if ahead {
        Some(off + (phase + BLOCK - off % BLOCK) % BLOCK)
    } else {
        off.checked_sub((off + BLOCK - phase) % BLOCK)
    }
}

/// A random request's byte offset inside its 4 KiB block, drawn from the stream's phases.
fn draw_phase(s: &StreamModel, rng: &mut Pcg64Mcg) -> Option<u64> {
    let sums = s.phase.as_ref()?;
    let u = rng.random_range(0..sums[PHASES - 1]);
    Some(sums.partition_point(|&c| c <= u) as u64 * PHASE_BYTES)
}

/// A uniformly random aligned offset in [lo, hi) leaving room for `size` where possible.
fn random_in(lo: u64, hi: u64, size: u64, align: u64, rng: &mut Pcg64Mcg) -> u64 {
    let align = align.max(1);
    let first = lo.div_ceil(align) * align;
    let last_start = hi.saturating_sub(size).max(first);
    let slots = (last_start - first) / align + 1;
    first + rng.random_range(0..slots) * align
}

/// Request times: each window's requests spread over it by their relative gaps.
fn place_times(quotas: &[Quota], gaps: &[f64], intensity: f64, bursts: Bursts) -> Vec<i64> {
    let mut times = Vec::with_capacity(gaps.len());
    let mut i = 0usize;
    for &Quota {
        window: w,
        start,
        len,
        count,
        ..
    } in quotas
    {
        let q = count as usize;
        if q == 0 {
            continue;
        }
        let window = &gaps[i..(i + q).min(gaps.len())];
        let span = (w, start, len);
        place_window(span, window, i == 0, intensity, &mut times, bursts);
        i += window.len();
    }
    times
}

/// One window's request times from its gaps; the stream's very first request opens its
/// window, later ones follow their gap. With the stream's bursts (`Bursts`), the window's
/// long gaps are moved first so that its runs of short ones take burst lengths drawn from
/// the window's (`rebursted`), and with its gap shape its gaps take the original window's.
fn place_window(
    (w, start, len): (usize, f64, f64),
    window: &[f64],
    first: bool,
    intensity: f64,
    times: &mut Vec<i64>,
    bursts: Bursts,
) {
    let mean = window.iter().sum::<f64>() / window.len().max(1) as f64;
    let total: f64 = window.iter().sum::<f64>() + mean;
    let moved;
    let window = match bursts.of(w, start) {
        Some((hist, shape, mut rng)) if total > 0.0 => {
            let unit = total / len.max(1.0); // the gaps' own units per ns
            let long = bursts.gap_ns * unit;
            let shape = shape.map(|s| (s, unit));
            moved = rebursted(window, usize::from(first), long, hist, shape, &mut rng);
            &moved[..]
        }
        _ => window,
    };
    let mut acc = 0.0;
    for (j, g) in window.iter().enumerate() {
        acc += if first && j == 0 { 0.0 } else { *g };
        let frac = if total > 0.0 { acc / total } else { 0.0 };
        times.push(((start + frac * len) / intensity.max(1e-12)).round() as i64);
    }
}

/// The gap, in nanoseconds of the trace's own time, at or above which a stream's burst ends,
/// where the model does not say (fits write `burst_gap_ns` since session 49).
/// msr_hm0's original has 181 bursts of 3 requests at the median and 35 at most; its twins'
/// reached 40-118, whose reads waited behind each other (docs/model.md, "bursts").
pub const BURST_GAP_NS: f64 = 5e6;

/// A stream's bursts for `place_window`, and the seed its windows' draws derive from (none:
/// the gaps stay where the walk drew them).
#[derive(Clone, Copy)]
struct Bursts<'a> {
    hist: Option<&'a (Buckets, u64)>,
    windows: &'a [(Buckets, u64)],
    gaps: &'a [GapShape],
    gap_ns: f64,
    seed: u64,
}

impl Sampler {
    /// Stream `s`'s bursts, for its windows' times.
    fn bursts<'a>(&self, s: &'a StreamModel, seed: u64) -> Bursts<'a> {
        Bursts {
            hist: (s.bursts.1 > 0).then_some(&s.bursts),
            windows: &s.window_bursts,
            gaps: &s.window_gaps,
            gap_ns: self.burst_gap_ns,
            seed: stream_seed(seed, s.id) ^ 0xB5AD_4ECE_DA1C_E2A9,
        }
    }
}

impl<'a> Bursts<'a> {
    /// The histogram of fluctuation window `w` (the stream's where the window has none) and
    /// a generator of its own for the window's repeat starting at `start` (so a window's
    /// draws do not depend on how the stream was split into segments).
    fn of(
        &self,
        w: usize,
        start: f64,
    ) -> Option<(&'a (Buckets, u64), Option<&'a GapShape>, Pcg64Mcg)> {
        let seed = self.seed ^ start.to_bits().wrapping_mul(0x9E37_79B9);
        let own = self.windows.get(w).filter(|h| h.1 > 0);
        let shape = self
            .gaps
            .get(w)
            .filter(|g| !g.short.is_empty() || !g.long.is_empty());
        self.hist
            .map(|h| (own.unwrap_or(h), shape, Pcg64Mcg::seed_from_u64(seed)))
    }
}

/// A window's gaps with its long ones (at or above `long`) moved so that the runs of short
/// gaps between them take lengths drawn from `hist` until they hold the window's requests.
/// The long gaps the twin drew beyond those bursts' boundaries join the short ones where the
/// window has its gap shape (`narrowed`), else each makes a burst of one request among them
/// (models from session 48). Where it drew too few, the largest short gaps become boundaries too
/// and every boundary is lifted to `long`, taken from the longer ones (`widened`): msr_hm0's
/// busy window holds 97 bursts of at most 19 requests, a twin's gaps there as few as 40 long
/// ones, whose bursts stretched to 56. The window keeps its span, and the short gaps left
/// inside bursts keep their order. Gaps before `keep` stay in place.
fn rebursted(
    gaps: &[f64],
    keep: usize,
    long: f64,
    (hist, total): &(Buckets, u64),
    shape: Option<(&GapShape, f64)>,
    rng: &mut Pcg64Mcg,
) -> Vec<f64> {
    let (fixed, rest) = gaps.split_at(keep.min(gaps.len()));
    let n = rest.len();
    let mut longs: Vec<f64> = rest.iter().copied().filter(|&g| g >= long).collect();
    if longs.is_empty() || longs.len() >= n {
        return gaps.to_vec();
    }
    let mut shorts: Vec<f64> = rest.iter().copied().filter(|&g| g < long).collect();
    // with the window's gap shape, bursts take exactly the drawn lengths: the long gaps
    // beyond their boundaries join the short ones, whose shape they then take
    let singles = if shape.is_some() { 0 } else { longs.len() };
    let lengths = burst_plan(n, singles, hist, *total, rng);
    let boundaries = lengths.len() - 1;
    if boundaries > longs.len() {
        widened(&mut shorts, &mut longs, boundaries, long);
    } else if boundaries < longs.len() {
        narrowed(&mut shorts, &mut longs, boundaries, rng);
    }
    if let Some((shape, unit)) = shape {
        shaped(&mut shorts, &mut longs, unit, shape, rest.iter().sum());
    }
    // the long gaps shuffled over the bursts' boundaries
    for i in (1..longs.len()).rev() {
        longs.swap(i, rng.random_range(0..=i));
    }
    let mut out = fixed.to_vec();
    let (mut shorts, mut longs) = (shorts.into_iter(), longs.into_iter());
    for (b, &l) in lengths.iter().enumerate() {
        let opening = if b == 0 { shorts.next() } else { longs.next() };
        out.extend(opening);
        out.extend(shorts.by_ref().take(l - 1));
    }
    debug_assert_eq!(out.len(), gaps.len());
    out
}

/// A window's short and long gaps mapped rank for rank onto the original window's quantiles
/// (`unit`: the gaps' units per ns, the order of each kept), the long ones then scaled so
/// that all of them still sum to `span`. Scaled whole, some can fall under 5 ms and merge
/// their neighbours' bursts (pgbench's clients: 101 bursts against 181); scaling only their
/// excess kept the bursts and measured worse on the bare disk (docs/model.md, "Exact bursts").
fn shaped(shorts: &mut [f64], longs: &mut [f64], unit: f64, shape: &GapShape, span: f64) {
    for (gaps, quantiles) in [(&mut *shorts, &shape.short), (&mut *longs, &shape.long)] {
        if quantiles.is_empty() {
            continue;
        }
        let mut idx: Vec<usize> = (0..gaps.len()).collect();
        idx.sort_by(|&a, &b| gaps[a].total_cmp(&gaps[b]).then(a.cmp(&b)));
        let n = idx.len() as f64;
        for (rank, &i) in idx.iter().enumerate() {
            gaps[i] = quantile(quantiles, (rank as f64 + 0.5) / n) * unit;
        }
    }
    let (short, long): (f64, f64) = (shorts.iter().sum(), longs.iter().sum());
    if long > 0.0 && span > short {
        longs.iter_mut().for_each(|g| *g *= (span - short) / long);
    }
}

/// Makes `longs` `boundaries` long: the shortest long gaps join the short ones, each at a
/// random place among them.
fn narrowed(shorts: &mut Vec<f64>, longs: &mut Vec<f64>, boundaries: usize, rng: &mut Pcg64Mcg) {
    longs.sort_by(f64::total_cmp);
    for g in longs.drain(..longs.len() - boundaries) {
        shorts.insert(rng.random_range(0..=shorts.len()), g);
    }
}

/// The value at `p` of quantiles taken evenly from 0 to 1, linearly between them.
fn quantile(q: &[f64], p: f64) -> f64 {
    let x = (p * (q.len() - 1) as f64).clamp(0.0, (q.len() - 1) as f64);
    let (i, f) = (x.floor() as usize, x.fract());
    let j = (i + 1).min(q.len() - 1);
    q[i] + (q[j] - q[i]) * f
}

/// The lengths of a window's bursts over its `n` requests: drawn from `hist` (of `total`)
/// until they hold the requests, the last cut where the window ends; where fewer than
/// `singles + 1` fit, `singles` long gaps left over each open a burst of one request (a twin
/// that draws more long gaps than its original window had keeps that window's long bursts:
/// msr_hm0's flushes). In a random order.
fn burst_plan(
    n: usize,
    singles: usize,
    hist: &Buckets,
    total: u64,
    rng: &mut Pcg64Mcg,
) -> Vec<usize> {
    let mut lengths: Vec<usize> = Vec::with_capacity(singles + 1);
    let mut held = 0usize; // requests of the bursts drawn
    let ones = |drawn: usize| (singles + 1).saturating_sub(drawn); // bursts of one to come
    while held + ones(lengths.len()) < n {
        let l = draw(hist, total, rng).max(1) as usize;
        let l = l.min(n - held - ones(lengths.len() + 1)); // the last ends with the window
        lengths.push(l);
        held += l;
    }
    lengths.resize(lengths.len().max(singles + 1), 1);
    for i in (1..lengths.len()).rev() {
        lengths.swap(i, rng.random_range(0..=i));
    }
    lengths
}

/// Makes `longs` `boundaries` long: the largest short gaps join them (the others keep
/// their order), then each boundary below `long` is lifted to it from the excess of those
/// above, so the gaps keep their sum (where the excess is too small, the boundaries share
/// their sum alike).
fn widened(shorts: &mut Vec<f64>, longs: &mut Vec<f64>, boundaries: usize, long: f64) {
    let promote = (boundaries - longs.len()).min(shorts.len());
    let mut by_size: Vec<usize> = (0..shorts.len()).collect();
    by_size.sort_by(|&a, &b| shorts[b].total_cmp(&shorts[a]).then(a.cmp(&b)));
    let mut moved = vec![false; shorts.len()];
    for &i in &by_size[..promote] {
        moved[i] = true;
        longs.push(shorts[i]);
    }
    let mut k = 0;
    shorts.retain(|_| {
        k += 1;
        !moved[k - 1]
    });
    let deficit: f64 = longs.iter().map(|&g| (long - g).max(0.0)).sum();
    let excess: f64 = longs.iter().map(|&g| (g - long).max(0.0)).sum();
    if excess >= deficit {
        let keep = if excess > 0.0 {
            1.0 - deficit / excess
        } else {
            1.0
        };
        for g in longs.iter_mut() {
            *g = if *g < long {
                long
            } else {
                long + (*g - long) * keep
            };
        }
    } else {
        let mean = longs.iter().sum::<f64>() / longs.len() as f64;
        longs.iter_mut().for_each(|g| *g = mean);
    }
}

/// A stream's walk between windows (`cur`: the leaf it stands at, and where its previous
/// request ended when the walk places offsets itself).
struct WalkState {
    rng: Pcg64Mcg,
    budget: Budgets,
    cur: Option<(u64, u64)>,
    /// The stream's own re-reference history (per-stream models that place in the walk).
    reref: Option<History>,
    /// Where its latest requests ended (sequential and resumed runs continue there).
    recent: RecentEnds,
    i: u64,
    /// Each window's reads to aim for (models with `window_reads`).
    ops: Option<OpPlan>,
}

/// The walk generator's seed for a stream.
fn stream_seed(seed: u64, id: u32) -> u64 {
    seed ^ (id as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15)
}

/// What tells a stream's segment j's generator from its other segments' (none for the
/// first: a stream's first segment starts as its whole walk would).
fn segment_salt(j: usize) -> u64 {
    (j as u64).wrapping_mul(0xA24B_AED4_963E_E407)
}

/// The second pass: offsets placed request by request in the merged time order, so one
/// re-reference history spans every stream (a shared cache sees them all). Requests of
/// per-stream models come placed by their walk (as before the shared history) and pass.
struct Placer {
    /// Per stream (by position): its placement generator and its latest requests' ends.
    rngs: Vec<Pcg64Mcg>,
    recent: Vec<RecentEnds>,
    /// The shared history.
    history: Option<History>,
    /// Per leaf, where new data goes next (`next_fresh`).
    frontier: FxHashMap<u64, u64>,
}

impl Placer {
    /// `lengths`: each stream's request count (the history's capacity).
    fn new(sampler: &Sampler, lengths: &[u64], seed: u64) -> Placer {
        let streams = &sampler.streams;
        let total = lengths.iter().sum::<u64>() as usize;
        let blocks = streams.iter().zip(lengths).map(|(s, &n)| s.blocks(n)).sum();
        let any = streams.iter().any(|s| s.reuse_total > 0);
        Placer {
            rngs: streams
                .iter()
                .map(|s| Pcg64Mcg::seed_from_u64(stream_seed(seed, s.id) ^ PLACE_SALT))
                .collect(),
            recent: vec![RecentEnds::default(); streams.len()],
            history: (sampler.global_reuse && any)
                .then(|| History::new(total, blocks, sampler.tree.capacity)),
            frontier: FxHashMap::default(),
        }
    }

    /// Stream k's next request: (op, offset, size).
    fn place(&mut self, sampler: &Sampler, k: usize, step: Step, uniform: bool) -> Output {
        let size = step.cat.size;
        if let Some(offset) = step.placed {
            return (step.cat.op, offset, size);
        }
        let s = &sampler.streams[k];
        let rng = &mut self.rngs[k];
        let offset = if uniform {
            sampler.uniform_offset(s, size, rng)
        } else {
            let history = self.history.as_ref();
            let frontier = Some(&mut self.frontier);
            let recent = &self.recent[k];
            sampler
                .place(s, &step.cat, step.target, recent, history, frontier, rng)
                .0
        };
        if let Some(r) = self.history.as_mut() {
            r.touch(offset, size, sampler.tree.leaf_of(offset));
        }
        self.recent[k].next(offset, size);
        (step.cat.op, offset, size)
    }
}

/// One placed request: (op, offset, size).
type Output = (u8, u64, u32);

/// One stream of a streaming synthesis: its windows and the current window's requests.
struct Cursor {
    st: WalkState,
    quotas: Arc<[Quota]>,
    window: usize,
    placed: usize,
    times: Vec<i64>,
    steps: Vec<Step>,
    gaps: Vec<f64>,
    pos: usize,
    /// The next non-empty window, walked ahead with the other streams' (`Synth::walk_ahead`):
    /// (its times, its steps).
    ahead: Option<(Vec<i64>, Vec<Step>)>,
    /// The buffers of the window before, for the next window walked.
    spare: (Vec<i64>, Vec<Step>),
    /// A long stream's segments (it then walks a segment at a time, not a window), and the
    /// ones walking ahead, in order, each on a thread of its own.
    segments: Option<Segments>,
    walking: VecDeque<std::thread::JoinHandle<(Vec<i64>, Vec<Step>)>>,
}

impl Cursor {
    /// Walks the stream's next window (skipping empty ones) onto `ahead`, or its next
    /// segment where it walks in segments; false when none is left.
    fn walk_next(&mut self, sampler: &Sampler, s: &StreamModel, p: &SynthParams) -> bool {
        while self.window < self.quotas.len() {
            if self.walk_window(sampler, s, p) {
                return true;
            }
        }
        false
    }

    /// A segmented stream's next segment onto `ahead` (false when none is left), with as
    /// many segments after it walking ahead on threads as there are cores: the streaming
    /// synthesis places and writes one segment while the next ones walk.
    fn next_segment(&mut self, sampler: &Arc<Sampler>, k: usize, p: &SynthParams) -> bool {
        let Some(segments) = self.segments.as_mut() else {
            return false;
        };
        loop {
            segments.walk_ahead(
                &sampler.streams[k],
                &mut self.walking,
                |(j, plan, budget)| {
                    let (sampler, quotas, p) = (Arc::clone(sampler), Arc::clone(&self.quotas), *p);
                    std::thread::spawn(move || {
                        let s = &sampler.streams[k];
                        sampler.walk_segment(s, j, &plan, budget, &quotas, &p)
                    })
                },
            );
            let Some(walking) = self.walking.pop_front() else {
                return false;
            };
            let next = walking.join().expect("segment walk panicked");
            if !next.1.is_empty() {
                self.ahead = Some(next);
                return true;
            }
        }
    }

    /// Walks the stream's windows below `until` onto `ahead`.
    fn walk_until(&mut self, sampler: &Sampler, s: &StreamModel, p: &SynthParams, until: usize) {
        if self.segments.is_some() {
            return; // it walks its segments on all cores when it reaches them
        }
        while self.window < until.min(self.quotas.len()) {
            self.walk_window(sampler, s, p);
        }
    }

    /// Walks window `self.window` onto `ahead` (its times and steps after those already
    /// there) and moves past it; false for an empty window.
    fn walk_window(&mut self, sampler: &Sampler, s: &StreamModel, p: &SynthParams) -> bool {
        let Quota {
            window: w,
            start,
            len,
            count: q,
            ..
        } = self.quotas[self.window];
        self.window += 1;
        if q == 0 {
            return false;
        }
        let (times, steps) = self.ahead.get_or_insert_with(|| {
            let (mut times, mut steps) = std::mem::take(&mut self.spare);
            times.clear();
            steps.clear();
            (times, steps)
        });
        self.gaps.clear();
        sampler.walk(s, &mut self.st, q, p.uniform, steps, &mut self.gaps);
        let first = self.placed == 0;
        let bursts = sampler.bursts(s, p.seed);
        place_window(
            (w, start, len),
            &self.gaps,
            first,
            p.intensity,
            times,
            bursts,
        );
        self.placed += q as usize;
        true
    }

    /// Requests of its next non-empty window, which the stream has not walked yet.
    fn next_window_size(&self) -> u64 {
        if self.segments.is_some() {
            return 0; // not walked with the others
        }
        self.quotas[self.window.min(self.quotas.len())..]
            .iter()
            .map(|q| q.count)
            .find(|&c| c > 0)
            .unwrap_or(0)
    }
}

/// The requests the streams walk ahead together at least (`Synth::walk_ahead`): below
/// them a thread costs more than it saves.
const WALK_AHEAD_MIN: u64 = 200_000;
/// The windows they walk ahead at most in one go (many windows of few requests each).
const WALK_AHEAD_WINDOWS: usize = 4096;

/// One synthesized request: (time since the first request, stream, op, offset, size).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Synthesized {
    pub ts_ns: i64,
    pub stream: u32,
    pub op: u8,
    pub offset: u64,
    pub size: u32,
}

/// Requests of a model in time order, generated window by window (see `Sampler::stream`).
pub struct Synth {
    /// Shared with the threads that walk a long stream's segments ahead.
    sampler: Arc<Sampler>,
    placer: Placer,
    params: SynthParams,
    cursors: Vec<Cursor>,
    /// The order of `merge_streams`.
    merger: Merger,
    /// Each stream's previous request's end (`jump`).
    ends: Vec<Option<u64>>,
    /// The first request's time.
    t0: Option<i64>,
    total: u64,
    /// Windows below this one were walked ahead by all streams at once (`walk_ahead`).
    epoch: usize,
    /// The cores to walk on (asked once: the question reads the process's cgroup files).
    cores: usize,
}

impl Synth {
    /// How many requests the whole stream yields.
    pub fn total(&self) -> u64 {
        self.total
    }

    /// Queues stream k's next request, walking its next non-empty window when needed.
    fn push_head(&mut self, k: usize) {
        if self.cursors[k].pos >= self.cursors[k].steps.len() {
            if self.cursors[k].ahead.is_none() && !self.walk_ahead(k) {
                return; // the stream is done
            }
            let c = &mut self.cursors[k];
            let (times, steps) = c.ahead.take().expect("a walked window");
            let old = (
                std::mem::replace(&mut c.times, times),
                std::mem::replace(&mut c.steps, steps),
            );
            (c.spare, c.pos) = (old, 0);
        }
        let c = &self.cursors[k];
        self.merger.push(k, c.times[c.pos]);
    }

    /// Walks stream k's next window onto its `ahead`; false when it has none left. The first
    /// stream to reach a window past the last walk ahead (the streams' windows are the same
    /// stretches of time) has every stream walk its windows up to the one where together
    /// they hold WALK_AHEAD_MIN requests, on all cores. Each stream walks with its own
    /// generator and state, so when it walks does not change what it yields.
    fn walk_ahead(&mut self, k: usize) -> bool {
        let Synth {
            sampler,
            params,
            cursors,
            epoch,
            cores,
            ..
        } = self;
        let (window, cores) = (cursors[k].window, *cores);
        if cursors[k].segments.is_some() {
            return cursors[k].next_segment(sampler, k, params);
        }
        if window < *epoch || cores < 2 || cursors.len() < 2 {
            return cursors[k].walk_next(sampler, &sampler.streams[k], params);
        }
        // how many windows hold WALK_AHEAD_MIN requests, at the streams' next windows' rate
        let per_window: u64 = cursors.iter().map(Cursor::next_window_size).sum();
        let span = WALK_AHEAD_MIN.div_ceil(per_window.max(1)) as usize;
        let until = window + span.clamp(1, WALK_AHEAD_WINDOWS);
        *epoch = until;
        if per_window * (until - window) as u64 >= WALK_AHEAD_MIN {
            let load = |c: &Cursor| c.next_window_size();
            let mut todo: Vec<(usize, &mut Cursor)> = cursors.iter_mut().enumerate().collect();
            // deal the streams out by size, largest first, to as many shares as cores
            todo.sort_by_key(|(_, c)| std::cmp::Reverse(load(c)));
            let mut shares: Vec<(u64, Vec<(usize, &mut Cursor)>)> = (0..cores.min(todo.len()))
                .map(|_| (0, Vec::new()))
                .collect();
            for (j, c) in todo {
                let lightest = shares.iter_mut().min_by_key(|s| s.0).expect("a share");
                lightest.0 += load(c);
                lightest.1.push((j, c));
            }
            let (sampler, params) = (&*sampler, &*params);
            std::thread::scope(|scope| {
                for (_, share) in shares {
                    scope.spawn(move || {
                        for (j, c) in share {
                            c.walk_until(sampler, &sampler.streams[j], params, until);
                        }
                    });
                }
            });
        }
        let c = &mut cursors[k];
        c.ahead.is_some() || c.walk_next(sampler, &sampler.streams[k], params)
    }
}

impl Iterator for Synth {
    type Item = Synthesized;

    fn next(&mut self) -> Option<Synthesized> {
        let (cursors, ends) = (&self.cursors, &self.ends);
        let (t, k) = self
            .merger
            .pop(|k| tie_class(cursors[k].steps[cursors[k].pos], ends[k]))?;
        let t0 = *self.t0.get_or_insert(t);
        let c = &mut self.cursors[k];
        let step = c.steps[c.pos];
        c.pos += 1;
        let (op, offset, size) = self
            .placer
            .place(&self.sampler, k, step, self.params.uniform);
        self.ends[k] = Some(offset + size as u64);
        let stream = self.sampler.streams[k].id;
        self.push_head(k);
        Some(Synthesized {
            ts_ns: t - t0,
            stream,
            op,
            offset,
            size,
        })
    }
}

/// What the merge at one instant asks of a stream's next step: its class (`class_of`; how far
/// it starts from `end`, its stream's previous request's end, is known where the walk placed
/// it) and its operation.
fn tie_class(step: Step, end: Option<u64>) -> (usize, u8) {
    let jump = step.placed.zip(end).map(|(at, end)| at.abs_diff(end));
    (class_of(is_continuation(step.cat.kind), jump), step.cat.op)
}

/// Merges the streams' requests by time (`Merger`: streams at one instant interleave as
/// fitted), times from 0, placing each one's offset in that order (`place(stream position,
/// step)`).
fn merge_streams(
    parts: Vec<StreamPart>,
    mut merger: Merger,
    mut place: impl FnMut(usize, Step) -> Output,
) -> Columns {
    let n: usize = parts.iter().map(|p| p.0.len()).sum();
    let mut out = Columns::with_capacity(n);
    if let [(times, steps, id)] = &parts[..] {
        if times.is_sorted() {
            // one stream in time order already: the merge is the identity
            let t0 = times.first().copied().unwrap_or(0);
            for (&t, &step) in times.iter().zip(steps) {
                let (op, off, size) = place(0, step);
                out.push(t - t0, *id, op, off, size);
            }
            return out;
        }
    }
    let mut next = vec![0usize; parts.len()];
    for (k, (times, _, _)) in parts.iter().enumerate() {
        if let Some(&t) = times.first() {
            merger.push(k, t);
        }
    }
    let mut t0 = None;
    let mut ends = vec![None; parts.len()];
    while let Some((t, k)) = merger.pop(|k| tie_class(parts[k].1[next[k]], ends[k])) {
        let t0 = *t0.get_or_insert(t);
        let (times, steps, id) = &parts[k];
        let (op, off, size) = place(k, steps[next[k]]);
        ends[k] = Some(off + size as u64);
        out.push(t - t0, *id, op, off, size);
        next[k] += 1;
        if let Some(&t) = times.get(next[k]) {
            merger.push(k, t);
        }
    }
    out
}

fn stream_model(v: &Value, tree: &Tree, flat: bool) -> Result<StreamModel, Err> {
    let transitions = v
        .get("transitions")
        .and_then(Value::as_array)
        .ok_or("missing 'transitions'")?;
    let n = transitions.len();
    let mut keys = Vec::with_capacity(n);
    let mut cats = Vec::with_capacity(n);
    let mut rows: FxHashMap<(u32, u64, u32), Row> = FxHashMap::default();
    let mut flat_rows: FxHashMap<u64, Vec<(u64, usize)>> = FxHashMap::default();
    let mut categories = Vec::with_capacity(n);
    let mut weighed = (0u64, 0u64); // (blocks, requests) of the categories
    for (idx, t) in transitions.iter().enumerate() {
        let key = if flat {
            let (from, to) = (int(t, "from_leaf")?, int(t, "to_leaf")?);
            flat_rows.entry(from).or_default().push((to, idx));
            TransKey {
                depth: super::stats::FLAT_DEPTH,
                prefix: from,
                from: 0,
                to: to as u32,
            }
        } else {
            let key = TransKey {
                depth: int(t, "depth")? as u32,
                prefix: int(t, "node")?,
                from: int(t, "from")? as u32,
                to: int(t, "to")? as u32,
            };
            rows.entry((key.depth, key.prefix, key.from))
                .or_default()
                .moves
                .push((key.to as u64, idx));
            key
        };
        let mut list = Vec::new();
        let mut counts = Vec::new();
        for c in t
            .get("categories")
            .and_then(Value::as_array)
            .ok_or("transition without categories")?
        {
            list.push((
                category(c)?,
                Gap::new(parse_iat(c.get("iat").ok_or("category without iat")?)?),
            ));
            counts.push(int(c, "count")?);
        }
        for ((c, _), n) in list.iter().zip(&counts) {
            weighed.0 += n * (c.size as u64).div_ceil(BLOCK).max(1);
            weighed.1 += n;
        }
        if !flat {
            add_stay_rows(&mut rows, tree, &key);
        }
        categories.push(counts);
        keys.push(key);
        cats.push(list);
    }
    let blocks_per_request = weighed.0.max(1) as f64 / weighed.1.max(1) as f64;
    let rows = dense_rows(rows, flat_rows, tree, &keys, flat);
    let mut entries: FxHashMap<(u32, u64), Vec<u64>> = FxHashMap::default();
    for e in v
        .get("entries")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let (d, q, c) = triple(e)?;
        for depth in (d as u32 + 1)..tree.levels {
            let node = tree.ancestor(q, depth);
            let child = tree.digit(q, depth) as usize;
            let slot = entries
                .entry((depth, node))
                .or_insert_with(|| vec![0; tree.fanout as usize]);
            slot[child] += c;
        }
    }
    let initial = Budgets::from_counts(&rows, categories, NodeMap::new(tree, entries));
    let mut leaves = Weighted::default();
    for l in v
        .get("leaves")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let a = l
            .as_array()
            .filter(|a| a.len() == 2)
            .ok_or("expected [leaf, count]")?;
        leaves.add(a[0].as_u64().unwrap_or(0), a[1].as_u64().unwrap_or(0));
    }
    let reuse_total = buckets(v, "reuse")?.1;
    let (resume, resume_total) = buckets(v, "resume")?;
    let resume_reuse_total = buckets(v, "resume_reuse")?.1;
    let reuse_by_op = by_op(v, "reuse", "reuse_write")?;
    let resume_reuse_by_op = by_op(v, "resume_reuse", "resume_reuse_write")?;
    let (jumps_ahead, jumps_ahead_total) = buckets(v, "jumps_ahead")?;
    let (jumps_behind, jumps_behind_total) = buckets(v, "jumps_behind")?;
    let near = match v.get("near_bytes") {
        Some(n) => {
            let n = n.as_u64().ok_or("near_bytes: expected an integer")?;
            Some((below(&jumps_ahead, n), below(&jumps_behind, n)))
        }
        None => None,
    };
    let windows: Vec<u64> = v
        .get("windows")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_u64).collect())
        .unwrap_or_default();
    let window_bursts = window_bursts(v, windows.len())?;
    let window_gaps = window_gaps(v, windows.len())?;
    let (window_reads, read_share) = window_reads(v, &windows)?;
    let window_reads = steerable_reads(window_reads, &windows, &cats, &initial.categories);
    let first = match v.get("first").filter(|f| !f.is_null()) {
        Some(f) => Some((int(f, "leaf")?, category(f)?)),
        None => None,
    };
    Ok(StreamModel {
        id: int(v, "id")? as u32,
        weight: num(v, "weight")?,
        alignment: int(v, "alignment").unwrap_or(1),
        phase: phases(v)?,
        first,
        windows,
        keys,
        cats,
        initial,
        rows,
        leaves,
        reuse_total,
        resume,
        resume_total,
        resume_reuse_total,
        reuse_by_op,
        resume_reuse_by_op,
        jumps_ahead,
        jumps_ahead_total,
        jumps_behind,
        jumps_behind_total,
        near,
        extent: extent(v)?,
        blocks_per_request,
        spans: spans(v)?,
        window_reads,
        read_share,
        bursts: buckets(v, "bursts")?,
        window_bursts,
        window_gaps,
    })
}

/// Quantiles (ns) of a window's gaps under `BURST_GAP_NS` and of those at or above it.
#[derive(Debug, Clone, Default)]
struct GapShape {
    short: Vec<f64>,
    long: Vec<f64>,
}

/// A stream's `window_gaps` ([window, short quantiles, long quantiles]), one shape per window.
fn window_gaps(v: &Value, windows: usize) -> Result<Vec<GapShape>, Err> {
    let mut out = vec![GapShape::default(); windows];
    let list = v.get("window_gaps").and_then(Value::as_array);
    let numbers = |x: Option<&Value>| -> Option<Vec<f64>> {
        x?.as_array()?.iter().map(Value::as_f64).collect()
    };
    for item in list.into_iter().flatten() {
        let w = window_of(item, windows, "window_gaps")?;
        match (numbers(item.get(1)), numbers(item.get(2))) {
            (Some(short), Some(long)) => out[w] = GapShape { short, long },
            _ => {
                return Err(format!(
                    "window_gaps: {item} is not [window, quantiles, quantiles]"
                ))
            }
        }
    }
    Ok(out)
}

/// The window an item of a per-window list (`field`) names first, checked against the
/// stream's `windows`.
fn window_of(item: &Value, windows: usize, field: &str) -> Result<usize, Err> {
    match item.get(0).and_then(Value::as_u64) {
        Some(w) if (w as usize) < windows => Ok(w as usize),
        Some(w) => Err(format!(
            "{field}: window {w} is past the stream's {windows} windows"
        )),
        None => Err(format!("{field}: {item} does not start with a window")),
    }
}

/// A stream's bursts per fluctuation window (`window_bursts`: [window, buckets] pairs), as
/// many histograms as it has windows.
fn window_bursts(v: &Value, windows: usize) -> Result<Vec<(Buckets, u64)>, Err> {
    let mut out = vec![(Vec::new(), 0); windows];
    let pairs = v.get("window_bursts").and_then(Value::as_array);
    for pair in pairs.into_iter().flatten() {
        let w = window_of(pair, windows, "window_bursts")?;
        match pair.get(1) {
            Some(held) => out[w] = buckets_of(Some(held))?,
            None => return Err(format!("window_bursts: {pair} is not [window, buckets]")),
        }
    }
    Ok(out)
}

/// A stream's reads per window (`window_reads`: as many as `windows`, none above its window's
/// requests) and its share of reads; none in models from before them.
fn window_reads(v: &Value, windows: &[u64]) -> Result<(Vec<u64>, f64), Err> {
    let Some(list) = v.get("window_reads").and_then(Value::as_array) else {
        return Ok((Vec::new(), 0.0));
    };
    if list.len() != windows.len() {
        return Err(format!(
            "'window_reads' has {} windows, 'windows' {}",
            list.len(),
            windows.len()
        ));
    }
    let reads = list
        .iter()
        .zip(windows)
        .enumerate()
        .map(|(w, (r, &n))| match r.as_u64() {
            Some(r) if r <= n => Ok(r),
            _ => Err(format!(
                "'window_reads' window {w}: expected a count of reads up to its {n} requests"
            )),
        })
        .collect::<Result<Vec<u64>, Err>>()?;
    let share = reads.iter().sum::<u64>() as f64 / windows.iter().sum::<u64>().max(1) as f64;
    Ok((reads, share))
}

/// The window reads the walk steers toward: none where the stream's transitions that hold
/// both operations cannot carry them (`opmix::steerable`; `counts` per transition and
/// category, as `cats`).
fn steerable_reads(
    reads: Vec<u64>,
    windows: &[u64],
    cats: &[Vec<(Category, Gap)>],
    counts: &[Vec<u64>],
) -> Vec<u64> {
    let by_transition = cats.iter().zip(counts).map(|(cs, ns)| {
        let read: u64 = cs
            .iter()
            .zip(ns)
            .filter(|((c, _), _)| c.op == OP_READ)
            .map(|(_, &n)| n)
            .sum();
        (read, ns.iter().sum::<u64>() - read)
    });
    let targets = windows.iter().copied().zip(reads.iter().copied());
    if opmix::steerable(by_transition, targets) {
        reads
    } else {
        Vec::new()
    }
}

/// A stream's `window_spans`: per window, [first, last] as fractions of the window (absent
/// in models from before them: whole windows).
fn spans(v: &Value) -> Result<Vec<(f64, f64)>, Err> {
    let Some(list) = v.get("window_spans").and_then(Value::as_array) else {
        return Ok(Vec::new());
    };
    list.iter()
        .enumerate()
        .map(|(w, p)| {
            let at = |i: usize| p.get(i).and_then(Value::as_f64);
            match (at(0), at(1)) {
                (Some(lo), Some(hi)) if (0.0..=hi).contains(&lo) && hi <= 1.0 => Ok((lo, hi)),
                _ => Err(format!(
                    "'window_spans' window {w}: expected [first, last] in 0..1"
                )),
            }
        })
        .collect()
}

/// A stream's `extent` [lo, hi] (the whole space when absent).
fn extent(v: &Value) -> Result<(u64, u64), Err> {
    let Some(e) = v.get("extent") else {
        return Ok((0, u64::MAX));
    };
    match e.as_array().map(Vec::as_slice) {
        Some([lo, hi]) => match (lo.as_u64(), hi.as_u64()) {
            (Some(lo), Some(hi)) if lo <= hi => Ok((lo, hi)),
            _ => Err("expected extent [lo, hi] with lo <= hi".into()),
        },
        _ => Err("expected extent [lo, hi]".into()),
    }
}

/// The stream's phase counts as running sums (None where absent or all zero).
fn phases(v: &Value) -> Result<Option<[u64; PHASES]>, Err> {
    let Some(list) = v.get("phase").and_then(Value::as_array) else {
        return Ok(None);
    };
    if list.len() != PHASES {
        return Err(format!(
            "phase: expected {PHASES} counts, found {}",
            list.len()
        ));
    }
    let mut sums = [0u64; PHASES];
    let mut total = 0u64;
    for (sum, c) in sums.iter_mut().zip(list) {
        total += c.as_u64().ok_or("phase: expected non-negative integers")?;
        *sum = total;
    }
    Ok((total > 0).then_some(sums))
}

/// A stream's [lo, hi, count] histogram `key` (empty when absent) with running sums in place
/// of the counts, and its total count.
/// How many of the histogram's values lie in buckets wholly below `limit`.
fn below(b: &Buckets, limit: u64) -> u64 {
    let n = b.partition_point(|x| x.1 <= limit);
    if n == 0 {
        0
    } else {
        b[n - 1].2
    }
}

fn buckets(v: &Value, key: &str) -> Result<(Buckets, u64), Err> {
    buckets_of(v.get(key))
}

/// Cumulative buckets and their total from a list of [lo, hi, count] (none: empty).
fn buckets_of(list: Option<&Value>) -> Result<(Buckets, u64), Err> {
    let list = list.and_then(Value::as_array).into_iter().flatten();
    let mut total = 0u64;
    let b = list
        .map(|x| {
            let (lo, hi, count) = triple(x)?;
            total += count;
            Ok((lo, hi, total))
        })
        .collect::<Result<Vec<_>, Err>>()?;
    Ok((b, total))
}

/// The histogram `all` split by operation (read, write) as cumulative buckets with totals:
/// `write` (the writes' part, on the same buckets) and the rest; both `all` where the model
/// has no `write` part.
fn by_op(v: &Value, all: &str, write: &str) -> Result<[(Buckets, u64); 2], Err> {
    let Some(writes) = v.get(write) else {
        let whole = buckets(v, all)?;
        return Ok([whole.clone(), whole]);
    };
    let raw = |x: Option<&Value>| -> Result<Vec<(u64, u64, u64)>, Err> {
        x.and_then(Value::as_array)
            .into_iter()
            .flatten()
            .map(triple)
            .collect()
    };
    let mut of_writes: FxHashMap<(u64, u64), u64> = FxHashMap::default();
    for (lo, hi, c) in raw(Some(writes))? {
        *of_writes.entry((lo, hi)).or_insert(0) += c;
    }
    let mut reads = Vec::new();
    for (lo, hi, c) in raw(v.get(all))? {
        let w = of_writes.remove(&(lo, hi)).unwrap_or(0);
        let r = c
            .checked_sub(w)
            .ok_or_else(|| format!("{write}: bucket [{lo}, {hi}) counts more than {all}'s"))?;
        reads.push((lo, hi, r));
    }
    if let Some(((lo, hi), _)) = of_writes.into_iter().next() {
        return Err(format!(
            "{write}: bucket [{lo}, {hi}) is not one of {all}'s"
        ));
    }
    let cumulative = |rows: Vec<(u64, u64, u64)>| {
        let mut total = 0;
        let b: Buckets = rows
            .into_iter()
            .filter(|r| r.2 > 0)
            .map(|(lo, hi, c)| {
                total += c;
                (lo, hi, total)
            })
            .collect();
        (b, total)
    };
    let write_rows = raw(Some(writes))?;
    Ok([cumulative(reads), cumulative(write_rows)])
}

/// Teleports drawing a continuation before they take it anyway (`Sampler::teleport`).
const TELEPORT_TRIES: usize = 8;

/// Draws an index by count (`total` is the counts' sum) without using it.
fn peek(counts: &[u64], total: u64, rng: &mut Pcg64Mcg) -> Option<usize> {
    if total == 0 {
        return None;
    }
    let mut u = rng.random_range(0..total);
    for (i, &c) in counts.iter().enumerate() {
        if u < c {
            return Some(i);
        }
        u -= c;
    }
    None
}

/// Draws an index by count and uses one count of it.
fn take(counts: &mut [u64], rng: &mut Pcg64Mcg) -> Option<usize> {
    let total: u64 = counts.iter().sum();
    let i = peek(counts, total, rng)?;
    counts[i] -= 1;
    Some(i)
}

/// A transition at depth e inside the subtree of child x of a node at depth d < e is a "stay"
/// for that node's row x: the rows it stays in exist, moves or not (their budgets count it,
/// `Budgets::from_counts`).
fn add_stay_rows(rows: &mut FxHashMap<(u32, u64, u32), Row>, tree: &Tree, key: &TransKey) {
    for (d, node, x) in stay_rows(tree, key) {
        rows.entry((d, node, x)).or_default();
    }
}

/// The rows numbered, with each transition's stay rows.
fn dense_rows(
    rows: FxHashMap<(u32, u64, u32), Row>,
    flat_rows: FxHashMap<u64, Vec<(u64, usize)>>,
    tree: &Tree,
    keys: &[TransKey],
    flat: bool,
) -> Rows {
    // a row is found by the child node it leaves from
    let by_child =
        |(depth, node, from): (u32, u64, u32)| (depth + 1, tree.child(node, from as u64));
    let mut index = FxHashMap::default();
    let mut moves = Vec::with_capacity(rows.len());
    for (key, row) in rows {
        index.insert(by_child(key), moves.len() as u32);
        moves.push(row.moves);
    }
    let stays_of = keys
        .iter()
        .map(|key| match flat {
            true => Vec::new(),
            false => stay_rows(tree, key).map(|r| index[&by_child(r)]).collect(),
        })
        .collect();
    Rows {
        index: NodeMap::new(tree, index),
        moves,
        stays_of,
        flat: flat_rows,
    }
}

fn stay_rows(tree: &Tree, key: &TransKey) -> impl Iterator<Item = (u32, u64, u32)> {
    let b = tree.fanout as u64;
    let (depth, prefix) = (key.depth, key.prefix);
    (0..depth).map(move |d| {
        let up = depth - d; // levels between the table's node and depth d
        (d, prefix / b.pow(up), ((prefix / b.pow(up - 1)) % b) as u32)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rebursted_windows_keep_their_gaps_and_take_the_drawn_burst_lengths() {
        // bursts of exactly 4 requests; a window of 12 gaps, 2 of them long (10 and 20)
        let hist = (vec![(4, 5, 1)], 1);
        let gaps = [10.0, 1., 1., 1., 1., 1., 1., 1., 1., 20.0, 1., 1.];
        let mut rng = Pcg64Mcg::seed_from_u64(3);
        let out = rebursted(&gaps, 0, 5.0, &hist, None, &mut rng);
        let sorted = |v: &[f64]| {
            let mut v = v.to_vec();
            v.sort_by(f64::total_cmp);
            v
        };
        // the same gaps, so the window keeps its span; three bursts of 4 requests: the long
        // gaps before requests 4 and 8
        assert_eq!(sorted(&out), sorted(&gaps));
        let long: Vec<usize> = (0..out.len()).filter(|&j| out[j] >= 5.0).collect();
        assert_eq!(long, vec![4, 8]);
        // a kept first gap stays where it was; a window without long gaps is left alone
        let kept = rebursted(&gaps, 1, 5.0, &hist, None, &mut rng);
        assert_eq!(kept[0], 10.0);
        let flat = [1.0; 6];
        assert_eq!(
            rebursted(&flat, 0, 5.0, &hist, None, &mut rng),
            flat.to_vec()
        );
    }

    #[test]
    fn bursts_take_their_drawn_lengths_and_gaps_their_window_s_shape() {
        // a window of 12 requests drawing bursts of exactly 4: 2 boundaries
        let hist = (vec![(4, 5, 1)], 1);
        let mut rng = Pcg64Mcg::seed_from_u64(5);
        assert_eq!(burst_plan(12, 0, &hist.0, hist.1, &mut rng), vec![4, 4, 4]);
        // 5 long gaps where 2 are boundaries: 3 bursts of one among the drawn ones; 10
        // requests: drawn bursts of 4 and 2 (cut where the window ends), then the ones
        let mut plan = burst_plan(10, 5, &hist.0, hist.1, &mut rng);
        assert_eq!(plan.len(), 6);
        plan.sort();
        assert_eq!(plan, vec![1, 1, 1, 1, 2, 4]);
        // too few long gaps for the boundaries: the largest short one joins them, and both
        // are lifted to the threshold (5) from the other's excess; the sum stays 23
        let (mut shorts, mut longs) = (vec![1.0, 3.0, 2.0], vec![20.0]);
        widened(&mut shorts, &mut longs, 2, 5.0);
        assert_eq!(shorts, vec![1.0, 2.0]);
        assert_eq!(longs, vec![18.0, 5.0]);
        // too many: the shortest long gap goes among the short ones
        let (mut shorts, mut longs) = (vec![1.0], vec![9.0, 6.0]);
        narrowed(&mut shorts, &mut longs, 1, &mut rng);
        assert_eq!(longs, vec![9.0]);
        assert!(shorts.contains(&6.0) && shorts.len() == 2);
        // shapes: quantiles 0, 10, 20 ns for short gaps and 100 ns for long ones, at 2 units
        // per ns; the short gaps keep their order (ranks 1 0 2) and the long ones are scaled
        // so that all sum to the 1,000 units they held
        let shape = GapShape {
            short: vec![0.0, 10.0, 20.0],
            long: vec![100.0],
        };
        let (mut shorts, mut longs) = (vec![0.5, 0.1, 0.9], vec![600.0, 398.5]);
        shaped(&mut shorts, &mut longs, 2.0, &shape, 1000.0);
        let near = |a: &[f64], b: &[f64]| a.iter().zip(b).all(|(x, y)| (x - y).abs() < 1e-9);
        assert!(
            near(&shorts, &[20.0, 20.0 / 3.0, 100.0 / 3.0]),
            "{shorts:?}"
        );
        assert!(near(&longs, &[470.0, 470.0]), "{longs:?}");
    }

    #[test]
    fn distances_split_by_operation() {
        use serde_json::json;
        let v = json!({"reuse": [[1, 2, 5], [2, 4, 4], [4, 8, 1]], "reuse_write": [[1, 2, 2], [4, 8, 1]]});
        let [reads, writes] = by_op(&v, "reuse", "reuse_write").unwrap();
        assert_eq!(reads, (vec![(1, 2, 3), (2, 4, 7)], 7));
        assert_eq!(writes, (vec![(1, 2, 2), (4, 8, 3)], 3));
        // without the writes' part both draw from the whole
        let whole = by_op(&json!({"reuse": [[1, 2, 5]]}), "reuse", "reuse_write").unwrap();
        assert_eq!(whole, [(vec![(1, 2, 5)], 5), (vec![(1, 2, 5)], 5)]);
        for bad in [json!([[1, 2, 6]]), json!([[3, 4, 1]])] {
            let v = json!({"reuse": [[1, 2, 5]], "reuse_write": bad});
            assert!(by_op(&v, "reuse", "reuse_write")
                .unwrap_err()
                .starts_with("reuse_write: bucket"));
        }
        let v = json!({"reuse_pick": "farthest"});
        assert!(follow_of(&v)
            .unwrap_err()
            .contains("expected nearest or followed"));
        assert_eq!(
            follow_of(&json!({"reuse_pick": "followed"})),
            Ok(FOLLOWED_PICKS)
        );
        assert_eq!(follow_of(&json!({})), Ok(0));
    }
    use crate::model::finalize::finalize;
    use crate::model::stats::{self, Batch, FitConfig, Fitter, KIND_RANDOM};

    fn fitted(levels: u32, flat: bool) -> Value {
        // a stream that scans 56 bytes of leaf 0 (of 1,000 bytes) sequentially, then jumps
        // to leaf 9, and back
        let mut ts = Vec::new();
        let mut off = Vec::new();
        for i in 0..2000u64 {
            ts.push(i as i64 * 1000);
            off.push(if i % 10 < 7 {
                (i % 10) * 8
            } else {
                9000 + (i % 10) * 4
            });
        }
        let n = ts.len();
        let cfg = FitConfig {
            tree: Tree::new(levels, 4, 16_000),
            flat,
            window_ns: 100_000,
            reref: false,
        };
        one_stream(cfg, &ts, &vec![0; n], &off, &vec![8; n])
    }

    /// A model of one stream (0) of these requests, without re-reference distances.
    fn one_stream(cfg: FitConfig, ts: &[i64], op: &[u8], off: &[u64], sz: &[u32]) -> Value {
        let mut f = Fitter::new(cfg);
        f.update(Batch::new(ts, &vec![0; ts.len()], op, off, sz));
        finalize(&f, "auto", *ts.last().unwrap())
    }

    fn params(n: u64) -> SynthParams {
        SynthParams {
            requests: Some(n),
            duration_ns: None,
            intensity: 1.0,
            compress: 1.0,
            seed: 7,
            uniform: false,
        }
    }

    #[test]
    fn regenerates_counts_locality_and_span() {
        for flat in [false, true] {
            let s = Sampler::from_json(&fitted(2, flat)).unwrap();
            let c = s.generate(&params(2000));
            assert_eq!(c.len(), 2000);
            let low = c.offset.iter().filter(|&&o| o < 1_000).count();
            assert!(
                (low as f64 / 2000.0 - 0.7).abs() < 0.03,
                "flat={flat}: {low}"
            );
            let span = *c.ts_ns.last().unwrap();
            assert!(
                (span as f64 / 1_999_000.0 - 1.0).abs() < 0.02,
                "span {span}"
            );
            assert!(c.ts_ns.windows(2).all(|w| w[0] <= w[1]));
        }
    }

    #[test]
    fn jumps_put_continuations_back() {
        // leaf 0's scan makes 6 of every 10 transitions sequential (0 -> 0); a jump that took
        // them as drawn would be sequential 60% of the time, off its count's leaf; put back up
        // to TELEPORT_TRIES times, 0.6^8 = 1.7%
        let s = Sampler::from_json(&fitted(2, false)).unwrap();
        let m = &s.streams[0];
        let (mut rng, mut continuations) = (Pcg64Mcg::seed_from_u64(1), 0);
        let full = m.initial.left;
        for _ in 0..1000 {
            let mut b = m.initial.clone();
            let (cat, _, _) = s.teleport(m, &mut b, &mut rng);
            continuations += is_continuation(cat.kind) as u32;
            assert_eq!(b.left, full - 1); // a jump still uses exactly one count
        }
        assert!(continuations <= 40, "{continuations} of 1000");
    }

    #[test]
    fn gaps_draw_as_the_distributions_they_prepare() {
        let mut shape = Pcg64Mcg::seed_from_u64(3);
        // small counts (many empty buckets, several per slice) and large ones (slices of
        // many draws: the guide's shift)
        let sizes = [0usize, 1, 15, 16, 17, 145, 300];
        for (n, most) in sizes
            .map(|n| (n, 4))
            .into_iter()
            .chain(sizes.map(|n| (n, 1 << 24)))
        {
            let buckets: Vec<(u64, u64, u64)> = (0..n as u64)
                .map(|i| {
                    (
                        i * 100,
                        i * 100 + 1 + shape.random_range(0..99),
                        shape.random_range(0..most),
                    )
                })
                .collect();
            let iat = Iat::Empirical { buckets };
            let gap = Gap::new(iat.clone());
            assert!(matches!(gap, Gap::Empirical(_)));
            let (mut a, mut b) = (
                Pcg64Mcg::seed_from_u64(n as u64),
                Pcg64Mcg::seed_from_u64(n as u64),
            );
            for _ in 0..2000 {
                assert_eq!(
                    gap.draw(&mut a).value().to_bits(),
                    iat.sample(&mut b).to_bits()
                );
            }
        }
        // the fit's buckets lay out in f32 at any scale (a day's gaps, in ns); one f32 cannot
        // hold exactly draws through `Iat`
        let day = 86_400_000_000_000u64;
        let fitted: Vec<_> = [5, 1000, 3_000_000, day]
            .map(|v| {
                let (lo, hi) = crate::model::hist::bucket_range(crate::model::hist::bucket(v));
                (lo, hi, 3)
            })
            .into();
        assert!(fitted.last().unwrap().1 > day);
        let odd = vec![(0, 100, 2), ((1 << 40) + 1, (1 << 40) + 9, 5)];
        for (buckets, laid) in [(fitted, true), (odd, false)] {
            let iat = Iat::Empirical { buckets };
            let gap = Gap::new(iat.clone());
            assert_eq!(matches!(gap, Gap::Empirical(_)), laid);
            let (mut a, mut b) = (Pcg64Mcg::seed_from_u64(9), Pcg64Mcg::seed_from_u64(9));
            for _ in 0..2000 {
                assert_eq!(
                    gap.draw(&mut a).value().to_bits(),
                    iat.sample(&mut b).to_bits()
                );
            }
        }
    }

    #[test]
    fn gaps_looked_up_together_are_the_gaps_looked_up_one_by_one() {
        // more pending draws than the prefetch distance, over histograms of several shapes
        let gaps: Vec<Gap> = [3u64, 17, 300]
            .iter()
            .map(|&n| {
                let buckets = (0..n).map(|i| (i * 64, i * 64 + 64, 1 + i % 7)).collect();
                Gap::new(Iat::Empirical { buckets })
            })
            .collect();
        let mut rng = Pcg64Mcg::seed_from_u64(11);
        let drawn: Vec<Drawn> = (0..200).map(|k| gaps[k % 3].draw(&mut rng)).collect();
        let pending: Vec<_> = drawn
            .iter()
            .enumerate()
            .map(|(k, d)| match *d {
                Drawn::Later(e, pick, u) => (k, e, pick, u),
                Drawn::Ready(_) => panic!("an empirical gap drew its value"),
            })
            .collect();
        let mut together = vec![f64::NAN; drawn.len()];
        resolve_gaps(&pending, &mut together);
        let one_by_one: Vec<f64> = drawn.iter().map(|d| d.value()).collect();
        assert_eq!(together, one_by_one);
        assert!(together.iter().all(|g| (0.0..300.0 * 64.0).contains(g)));
    }

    #[test]
    fn refuses_a_history_too_large_to_hold() {
        let s = Sampler::from_json(&shared_blocks(true)).unwrap();
        assert!(s.check_capacity(&params(1000)).is_ok());
        let e = s.check_capacity(&params(20_000_000_000)).unwrap_err();
        assert!(
            e.contains("one re-reference history") && e.contains("4,294,967,294"),
            "{e}"
        );
        // without re-references nothing is held per request
        let plain = Sampler::from_json(&fitted(2, false)).unwrap();
        assert!(plain.check_capacity(&params(20_000_000_000)).is_ok());
        let cases = [
            (0, "0"),
            (999, "999"),
            (1000, "1,000"),
            (1_234_567, "1,234,567"),
        ];
        for (n, text) in cases {
            assert_eq!(grouped(n), text);
        }
    }

    #[test]
    fn same_seed_same_trace() {
        let s = Sampler::from_json(&fitted(2, false)).unwrap();
        assert_eq!(s.generate(&params(500)), s.generate(&params(500)));
        let mut other = params(500);
        other.seed = 8;
        assert_ne!(s.generate(&params(500)).offset, s.generate(&other).offset);
    }

    #[test]
    fn streaming_gives_the_generated_trace() {
        for (levels, flat) in [(2, false), (1, true)] {
            let s = Sampler::from_json(&fitted(levels, flat)).unwrap();
            for p in [
                params(1500),
                SynthParams {
                    requests: None,
                    duration_ns: Some(3_000_000),
                    intensity: 1.5,
                    ..params(0)
                },
            ] {
                let whole = s.generate(&p);
                let mut c = Columns::default();
                for r in s.clone().stream(p) {
                    c.push(r.ts_ns, r.stream, r.op, r.offset, r.size);
                }
                assert!(c.len() > 100);
                assert_eq!(c, whole);
            }
        }
    }

    #[test]
    fn streams_walked_ahead_on_all_cores_give_the_generated_trace() {
        // the model's 3,950 requests 150 times over: the streams walk a few hundred of their
        // small windows ahead together, WALK_AHEAD_MIN requests at a time, on every core, and
        // yield what one stream at a time yields
        let for_a_while = SynthParams {
            requests: None,
            duration_ns: Some(700_000_000),
            intensity: 1.5,
            ..params(0)
        };
        for (global, p) in [
            (false, params(600_000)),
            (true, params(600_000)),
            (false, for_a_while),
        ] {
            let s = Sampler::from_json(&shared_blocks(global)).unwrap();
            let whole = s.generate(&p);
            assert!(whole.len() as u64 >= 2 * WALK_AHEAD_MIN);
            let mut c = Columns::default();
            for r in s.clone().stream(p) {
                c.push(r.ts_ns, r.stream, r.op, r.offset, r.size);
            }
            assert_eq!(c, whole);
        }
    }

    /// A stream of reads and writes of three sizes over two leaves, 2,000 requests in 20
    /// windows.
    fn mixed_sizes() -> Value {
        let n = 2000u64;
        let ts: Vec<i64> = (0..n as i64).map(|i| i * 1000).collect();
        let op: Vec<u8> = (0..n).map(|i| (i % 7 < 3) as u8).collect();
        let off: Vec<u64> = (0..n)
            .map(|i| {
                if i % 10 < 7 {
                    (i % 10) * 64
                } else {
                    9000 + (i % 10) * 32
                }
            })
            .collect();
        let sz: Vec<u32> = (0..n).map(|i| 8 << (i % 3)).collect();
        let cfg = FitConfig {
            tree: Tree::new(2, 4, 16_000),
            flat: false,
            window_ns: 100_000,
            reref: false,
        };
        one_stream(cfg, &ts, &op, &off, &sz)
    }

    #[test]
    fn long_streams_walk_in_segments_as_they_stream() {
        let one_pass = params(2000);
        let for_a_while = SynthParams {
            requests: None,
            duration_ns: Some(9_000_000),
            intensity: 2.0,
            ..params(0)
        };
        let mut s = Sampler::from_json(&mixed_sizes()).unwrap();
        let whole = s.generate(&one_pass);
        // segments of 3 windows (300 requests) or more
        s.segment_requests = 250;
        let quotas = s.window_quotas(&s.streams[0], &one_pass, 2000);
        assert_eq!(
            s.segments(&s.streams[0], &quotas, (2000, 2000), 7)
                .unwrap()
                .plans
                .len(),
            7
        );
        for p in [one_pass, for_a_while] {
            let c = s.generate(&p);
            assert_eq!(c, s.generate(&p)); // the same seed, the same requests
            let mut streamed = Columns::default();
            for r in s.clone().stream(p) {
                streamed.push(r.ts_ns, r.stream, r.op, r.offset, r.size);
            }
            assert_eq!(streamed, c);
            assert!(c.ts_ns.is_sorted());
        }
        // one pass in segments uses the fitted counts exactly, as the whole walk does: the
        // same operations and sizes, in another order
        let c = s.generate(&one_pass);
        let mix = |c: &Columns| {
            let mut m: Vec<(u8, u32)> = c.op.iter().copied().zip(c.size.iter().copied()).collect();
            m.sort_unstable();
            m
        };
        assert_ne!(c.offset, whole.offset);
        assert_eq!(mix(&c), mix(&whole));
        let reads = |c: &Columns| c.op.iter().filter(|&&o| o == 0).count();
        assert_eq!(reads(&c), 1142); // the trace's: 4 in 7
                                     // pinned, as tests/test_synth_pinned.py pins whole walks: speed work must not change
                                     // the draws (a change that alters them on purpose updates this)
        use std::hash::{Hash, Hasher};
        let mut h = rustc_hash::FxHasher::default();
        (&c.ts_ns, &c.op, &c.offset, &c.size).hash(&mut h);
        assert_eq!(h.finish(), 0x908e_4401_f2e8_58f8);
    }

    #[test]
    fn only_a_stream_with_half_the_requests_walks_in_segments() {
        // two streams with one shared history (placed after the walk): stream 0 holds 50.6%
        // of the requests and walks in segments, stream 1 walks whole, streamed or not alike
        let mut s = Sampler::from_json(&shared_blocks(true)).unwrap();
        s.segment_requests = 5_000;
        let p = params(60_000);
        let total = 60_000;
        let cut = |k: usize| {
            let quotas = s.window_quotas(&s.streams[k], &p, s.requests_per_stream(&p)[k]);
            let n = quotas.iter().map(|q| q.count).sum();
            s.segments(&s.streams[k], &quotas, (n, total), p.seed)
                .is_some()
        };
        assert_eq!((cut(0), cut(1)), (true, false));
        let c = s.generate(&p);
        let mut streamed = Columns::default();
        for r in s.clone().stream(p) {
            streamed.push(r.ts_ns, r.stream, r.op, r.offset, r.size);
        }
        assert_eq!(streamed, c);
        // stream 1 still re-reads stream 0's blocks through the shared history
        assert!(shared_hits(&c) > 0.9, "{}", shared_hits(&c));
    }

    /// Stream 0 writes blocks scattered over half a GiB; stream 1 reads each of them 50 requests
    /// later: re-references only against the global history.
    fn shared_blocks(global: bool) -> Value {
        use crate::model::stats::{global_stack_distances, stack_distances};
        let (mut ts, mut st, mut op, mut off) = (vec![], vec![], vec![], vec![]);
        let block = |i: u64| (i * 7919 % 2000) * 65 * 4096;
        for i in 0..2000u64 {
            ts.push(2 * i as i64 * 1000);
            st.push(0);
            op.push(1);
            off.push(block(i));
            if i >= 50 {
                ts.push((2 * i + 1) as i64 * 1000);
                st.push(1);
                op.push(0);
                off.push(block(i - 50));
            }
        }
        let n = ts.len();
        let cfg = FitConfig {
            tree: Tree::new(2, 4, 1 << 30),
            flat: false,
            window_ns: 1_000_000,
            reref: true,
        };
        let sz = vec![4096; n];
        let reuse = match global {
            true => global_stack_distances(&off, &sz, 4096),
            false => stack_distances(&st, &off, &sz, 4096),
        };
        let mut f = Fitter::new(cfg);
        f.update(Batch::new(&ts, &st, &op, &off, &sz).with_reuse(Some(&reuse)));
        let mut doc = finalize(&f, "auto", *ts.last().unwrap());
        if global {
            doc["reuse_scope"] = "global".into();
        }
        doc
    }

    /// The share of stream 1's requests on a block touched before (by any stream): what a
    /// cache both streams share sees as hits.
    fn shared_hits(c: &Columns) -> f64 {
        let mut seen = std::collections::HashSet::new();
        let (mut reads, mut hits) = (0, 0);
        for i in 0..c.len() {
            let fresh = seen.insert(c.offset[i] / 4096);
            if c.stream[i] == 1 {
                reads += 1;
                hits += !fresh as u64;
            }
        }
        hits as f64 / reads as f64
    }

    #[test]
    fn global_history_rereads_other_streams_blocks() {
        let global = Sampler::from_json(&shared_blocks(true)).unwrap();
        assert!(global.global_reuse);
        let c = global.generate(&params(3950));
        assert!(shared_hits(&c) > 0.9, "{}", shared_hits(&c));
        // per-stream distances (older models): stream 1 never re-reads its own blocks
        let own = Sampler::from_json(&shared_blocks(false)).unwrap();
        assert!(!own.global_reuse);
        let c = own.generate(&params(3950));
        assert!(shared_hits(&c) < 0.1, "{}", shared_hits(&c));
    }

    #[test]
    fn global_history_streams_as_generated() {
        let s = Sampler::from_json(&shared_blocks(true)).unwrap();
        let p = params(3950);
        let whole = s.generate(&p);
        assert_eq!(whole, s.generate(&p));
        let mut c = Columns::default();
        for r in s.clone().stream(p) {
            c.push(r.ts_ns, r.stream, r.op, r.offset, r.size);
        }
        assert_eq!(c, whole);
    }

    /// Two sequential runs of 4 KiB requests interleaved in one stream (A B A B ...), in
    /// leaves 0 and 9 (of 125 blocks), each starting over every 100 requests.
    fn interleaved_runs(reref: bool) -> Value {
        use crate::model::stats::{resume_lags, stack_distances};
        let n = 4000usize;
        let ts: Vec<i64> = (0..n as i64).map(|i| i * 1000).collect();
        let off: Vec<u64> = (0..n as u64)
            .map(|i| ([0, 9 * 125][(i % 2) as usize] + i / 2 % 100) * 4096)
            .collect();
        let (st, sz) = (vec![0u32; n], vec![4096u32; n]);
        let cfg = FitConfig {
            tree: Tree::new(2, 4, 16 * 125 * 4096),
            flat: false,
            window_ns: 1_000_000,
            reref,
        };
        let reuse = stack_distances(&st, &off, &sz, 4096);
        let resume = resume_lags(&st, &off, &sz);
        let mut f = Fitter::new(cfg);
        let (reuse, resume) = (reref.then_some(&reuse[..]), reref.then_some(&resume[..]));
        f.update(
            Batch::new(&ts, &st, &vec![0; n], &off, &sz)
                .with_reuse(reuse)
                .with_resume(resume),
        );
        finalize(&f, "auto", *ts.last().unwrap())
    }

    /// The share of a trace's requests that resume a run from further back than the previous
    /// request.
    fn resumed_share(c: &Columns) -> f64 {
        let lags = crate::model::stats::resume_lags(&c.stream, &c.offset, &c.size);
        lags.iter().filter(|&&l| l > 1).count() as f64 / c.len() as f64
    }

    #[test]
    fn resumed_runs_interleave_as_in_the_original() {
        let doc = interleaved_runs(true);
        assert_eq!(
            doc["streams"][0]["resume"],
            serde_json::json!([[2, 3, 3960]])
        );
        let twin = Sampler::from_json(&doc).unwrap().generate(&params(4000));
        // (the first pass's 99 resumes of new data per run, drawn at any time, find no run of
        // new data open after it and land at random: each breaks its run once; 0.888)
        assert!(resumed_share(&twin) > 0.85, "{}", resumed_share(&twin));
        // each run stays in its leaf
        let low = twin.offset.iter().filter(|&&o| o < 125 * 4096).count();
        assert_eq!(low, 2000);
        // the paper's model places them at random in their leaves (small ones: some by chance)
        let plain = Sampler::from_json(&interleaved_runs(false)).unwrap();
        let c = plain.generate(&params(4000));
        assert!(resumed_share(&c) < 0.1, "{}", resumed_share(&c));
    }

    #[test]
    fn resumes_follow_runs_of_their_data_or_reread_old_data() {
        let s = Sampler::from_json(&interleaved_runs(true)).unwrap();
        let m = &s.streams[0];
        let block = 4096u64;
        // the stream touched 100 blocks of leaf 0, then 120 of leaf 9 (re-scans re-read at
        // distances 192-208: into leaf 0's)
        let mut history = History::new(220, 220, s.tree.capacity);
        for b in 0..100 {
            history.touch(b * block, 4096, 0);
        }
        for b in 0..120 {
            history.touch((9 * 125 + b) * block, 4096, 9);
        }
        // open runs: one ending on new data in leaf 0 (block 110), then one in leaf 9
        let mut recent = RecentEnds::default();
        recent.next(109 * block, block as u32);
        recent.next(9 * 125 * block, block as u32);
        let mut rng = Pcg64Mcg::seed_from_u64(3);
        let cat = |kind| Category {
            op: 0,
            size: block as u32,
            kind,
        };
        let mut place = |kind| s.place(m, &cat(kind), 0, &recent, Some(&history), None, &mut rng);
        for _ in 0..100 {
            // a run of new data resumes where it stands; a re-scan does not go on there
            // (new data) but re-reads a block the stream touched
            assert_eq!(place(KIND_RESUME).0, 110 * block);
            let (off, _) = place(KIND_RESUME_REREF);
            assert!(off < 100 * block && off % block == 0, "{off}");
        }
    }

    #[test]
    fn requests_that_find_nothing_land_by_an_in_leaf_jump() {
        // every cold request of the stream jumped 64 KiB ahead of its predecessor's end
        let mut doc = interleaved_runs(true);
        doc["streams"][0]["jumps_ahead"] = serde_json::json!([[65536, 65537, 1]]);
        doc["streams"][0]["jumps_behind"] = serde_json::json!([]);
        let s = Sampler::from_json(&doc).unwrap();
        let m = &s.streams[0];
        let block = 4096u64;
        // 50 blocks of history: the re-references' distances (192-208) reach past it, and the
        // only open run ends on old data, where a resumed run of new data may not go on
        let mut history = History::new(50, 50, s.tree.capacity);
        for b in 0..50 {
            history.touch(b * block, 4096, 0);
        }
        let mut recent = RecentEnds::default();
        recent.next(48 * block, block as u32);
        let mut rng = Pcg64Mcg::seed_from_u64(5);
        for kind in [KIND_REREF, KIND_RESUME, KIND_RANDOM] {
            let cat = Category {
                op: 0,
                size: block as u32,
                kind,
            };
            let (off, _) = s.place(m, &cat, 0, &recent, Some(&history), None, &mut rng);
            assert_eq!(off, 49 * block + 65536, "kind {kind}");
        }
    }

    #[test]
    fn new_data_in_a_leaf_whose_files_are_all_touched_finds_none() {
        let s = Sampler::from_json(&interleaved_runs(true)).unwrap();
        let files = serde_json::json!([{"base": 0, "size": 8192}]);
        let data = DataMap::from_json(Some(&files)).unwrap();
        let mut history = History::new(4, 4, s.tree.capacity);
        for b in 0..3 {
            history.touch(b * 4096, 4096, 0);
        }
        let mut frontier = FxHashMap::default();
        // twice each: a flush (no size) once stood still past the last file, forever
        for size in [4096, 0, 4096, 0] {
            let cat = Category {
                op: 0,
                size,
                kind: KIND_RANDOM,
            };
            let leaf = (0, 10_000);
            let got = next_fresh(
                &mut frontier,
                0,
                leaf,
                &data,
                &s.streams[0],
                &cat,
                Some(&history),
                None,
            );
            assert_eq!(got, None);
        }
    }

    #[test]
    fn new_data_packed_from_the_frontier_starts_at_the_phase() {
        let s = Sampler::from_json(&fitted(1, false)).unwrap();
        let cat = Category {
            op: 0,
            size: 65_536,
            kind: KIND_RANDOM,
        };
        let (mut frontier, none) = (FxHashMap::default(), DataMap::default());
        let leaf = (0, 1 << 30);
        let mut at = |phase| {
            let s0 = &s.streams[0];
            next_fresh(&mut frontier, 0, leaf, &none, s0, &cat, None, phase).unwrap()
        };
        // 3,584 bytes into the first block, then where the first request ended (at that
        // phase too); at phase 0, 512 bytes on; without a phase, at the alignment right
        // where the previous one ended
        assert_eq!(at(Some(3584)), 3584);
        assert_eq!(at(Some(3584)), 3584 + 65_536);
        assert_eq!(at(Some(0)), 3584 + 2 * 65_536 + 512);
        assert_eq!(at(None), 3584 + 3 * 65_536 + 512);
    }

    /// One stream of 8-byte requests at random in [3000, 3400), in leaf 0 = [0, 4000) of a
    /// 16,000-byte space (levels 1).
    fn narrow_stream() -> Value {
        let mut rng = Pcg64Mcg::seed_from_u64(5);
        let n = 1000;
        let ts: Vec<i64> = (0..n as i64).map(|i| i * 1000).collect();
        let off: Vec<u64> = (0..n)
            .map(|_| 3000 + rng.random_range(0..50u64) * 8)
            .collect();
        let cfg = FitConfig {
            tree: Tree::new(1, 4, 16_000),
            flat: false,
            window_ns: 100_000,
            reref: false,
        };
        one_stream(cfg, &ts, &vec![0; n], &off, &vec![8; n])
    }

    #[test]
    fn random_requests_stay_in_their_streams_extent() {
        let mut doc = narrow_stream();
        assert_eq!(doc["streams"][0]["extent"], serde_json::json!([3000, 3400]));
        let twin = Sampler::from_json(&doc).unwrap().generate(&params(1000));
        assert!(twin.offset.iter().all(|&o| (3000..=3392).contains(&o)));
        // a model from before extents places them over the whole leaf
        doc["streams"][0].as_object_mut().unwrap().remove("extent");
        let before = Sampler::from_json(&doc).unwrap().generate(&params(1000));
        let outside = before.offset.iter().filter(|&&o| o < 3000).count();
        assert!(outside > 500, "{outside}");
        doc["streams"][0]["extent"] = serde_json::json!([3400, 3000]);
        let err = Sampler::from_json(&doc).unwrap_err();
        assert!(err.contains("extent"), "{err}");
    }

    /// One stream of 4 KiB requests on random even blocks of a 64 MiB space, starting 3,584
    /// bytes into the block (three in four) or 2,048 bytes (one in four).
    fn misaligned_stream(phase: [u64; 2]) -> Value {
        let mut rng = Pcg64Mcg::seed_from_u64(3);
        let n = 400;
        let ts: Vec<i64> = (0..n as i64).map(|i| i * 1000).collect();
        let off: Vec<u64> = (0..n)
            .map(|i| rng.random_range(0..8000u64) * 8192 + phase[usize::from(i % 4 == 0)])
            .collect();
        let cfg = FitConfig {
            tree: Tree::new(2, 4, 64 << 20),
            flat: false,
            window_ns: 100_000,
            reref: true,
        };
        one_stream(cfg, &ts, &vec![0; n], &off, &vec![4096; n])
    }

    fn phase_counts(offsets: &[u64]) -> [usize; PHASES] {
        let mut counts = [0; PHASES];
        for &o in offsets {
            counts[stats::phase_of(o)] += 1;
        }
        counts
    }

    #[test]
    fn random_requests_keep_their_streams_4k_phase() {
        let mut doc = misaligned_stream([3584, 2048]);
        let stream = &doc["streams"][0];
        assert_eq!(stream["alignment"], 512);
        assert_eq!(
            stream["phase"],
            serde_json::json!([0, 0, 0, 0, 100, 0, 0, 300])
        );
        let twin = Sampler::from_json(&doc).unwrap().generate(&params(4000));
        let counts = phase_counts(&twin.offset);
        assert_eq!(counts[4] + counts[7], 4000, "{counts:?}");
        assert!((900..1100).contains(&counts[4]), "{counts:?}");
        // a model from before phases places them at any 512-byte step
        doc["streams"][0].as_object_mut().unwrap().remove("phase");
        let before = Sampler::from_json(&doc).unwrap().generate(&params(4000));
        let counts = phase_counts(&before.offset);
        assert!(counts.iter().all(|&c| c > 350), "{counts:?}");
        doc["streams"][0]["phase"] = serde_json::json!([1, 2, 3]);
        let err = Sampler::from_json(&doc).unwrap_err();
        assert!(err.contains("phase"), "{err}");
        // streams aligned to 4 KiB have one phase: the model keeps none
        let aligned = misaligned_stream([0, 4096]);
        assert_eq!(aligned["streams"][0]["alignment"], 4096);
        assert!(aligned["streams"][0].get("phase").is_none());
    }

    #[test]
    fn intensity_and_duration_scale_time() {
        let s = Sampler::from_json(&fitted(1, false)).unwrap();
        let mut p = params(2000);
        p.intensity = 2.0;
        let span = *s.generate(&p).ts_ns.last().unwrap();
        assert!((span as f64 / 999_500.0 - 1.0).abs() < 0.02, "span {span}");
        let d = SynthParams {
            requests: None,
            duration_ns: Some(4_000_000),
            ..params(0)
        };
        let c = s.generate(&d);
        assert!((c.len() as f64 / 4000.0 - 1.0).abs() < 0.01, "{}", c.len());
    }
}
