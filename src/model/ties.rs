//! How streams interleave at one instant. A trace whose clock is coarse (Tencent CBS stamps
//! whole seconds) has thousands of requests per tick; their order in the file is the order
//! the device saw. The fit counts, over consecutive requests stamped alike, how often the
//! next one comes from the same stream when that stream still has a request at this
//! instant (`TieCounter`); the sampler merges the streams' requests at one instant by that
//! odds (`Interleave`) instead of stream by stream, which put 95% of Tencent's twin's
//! requests next to one of their own stream (the original: 41%) and made its in-stream
//! locality the disk's. The counts are kept apart by the operation of the stream's next
//! request too (a read or not): in Tencent's excerpt a volume goes on before a read of its
//! own 47.9% of the time, before a write 40.9%; merged by one odds for both, its twin's next
//! read in the file was the same volume's 38.5% of the time (the original's 53.7%).
//!
//! Where the stream does not go on, the next is not any stream by its weight: the original
//! returns to one it just left (`recency`). Tencent's next volume after a switch is the one
//! before the last 20.8% of the time, one of the 4 before it 44.0%.

use crate::columns::OP_READ;
use crate::fenwick::Fenwick;
use rand::{RngExt, SeedableRng};
use rand_pcg::Pcg64Mcg;
use rustc_hash::FxHashMap;
use serde_json::{json, Value};
use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// The classes of the request a stream would continue with: sequential, near (starting
/// within NEAR bytes of the stream's previous request's end, not at it), or other. Near
/// requests are a class of their own because a stream issues them together: Tencent's
/// volumes go on before a read of their own near the previous one's end far more often than
/// before one elsewhere, so the original's next read in the file starts within 1 MiB of the
/// read before 26.9% of the time; merged by the odds of both, its twin's did 18.9%, and its
/// reads seeked more on a disk.
pub const SEQUENTIAL: usize = 0;
pub const OTHER: usize = 1;
pub const NEAR_CLASS: usize = 2;
/// Not sequential, where is not known (requests placed after the merge): near or other,
/// by the odds of both.
pub const APART: usize = 3;
const CLASSES: [&str; 3] = ["sequential", "other", "near"];
/// How far from the previous request's end a near request starts, at most (bytes).
pub const NEAR: u64 = 1 << 20;

/// The class of a stream's next request: `sequential` (it continues the previous one), else
/// by how many bytes from the end of the stream's previous request it starts (None: not
/// known, as where requests are placed after the merge). The fit and the merge class alike.
pub fn class_of(sequential: bool, jump: Option<u64>) -> usize {
    match jump {
        _ if sequential => SEQUENTIAL,
        Some(j) if j < NEAR => NEAR_CLASS,
        Some(_) => OTHER,
        None => APART,
    }
}

/// The operation of the request a stream would continue with: a read, or another
/// (a write, a flush, a trim), in `operation_index` order.
pub const OPERATIONS: [&str; 2] = ["read", "write"];

/// The `OPERATIONS` entry of operation `op`.
pub fn operation_index(op: u8) -> usize {
    (op != OP_READ) as usize
}

/// How many of the streams seen last at an instant a switch may return to.
pub const RECENCY: usize = 16;

/// The run lengths the odds are counted apart by: how many requests in a row at the instant
/// the stream has given so far, 1, 2, 3, 4-7 or 8 and more. A stream that has gone on goes
/// on more: Tencent's volumes go on after a first request 26% of the time, after 4-7 in a row
/// 74%, where odds blind to the run gave its twin 42% and 47% (runs of reads from one volume
/// 5.9 requests long, request-weighted, against the twin's 3.1).
pub const RUN_STARTS: [u32; 5] = [1, 2, 3, 4, 8];

/// The `RUN_STARTS` entry of a run of `run` requests (at least 1).
pub fn run_index(run: u32) -> usize {
    RUN_STARTS.partition_point(|&s| s <= run).saturating_sub(1)
}

/// Counts of consecutive, equally stamped requests whose first one's stream has another
/// request at that instant, by the class of that next request (`all`: `Classes`);
/// `by_operations` the same
/// apart by that next request's operation, and `recency`, over the switches at one instant
/// (the next request from another stream), how often that stream was the k-th latest other
/// stream seen at the instant (k = 1..=RECENCY), at 0 how often none of them (None: a model
/// from before they were counted).
/// `by_runs`: the same apart by the length of the stream's run so far (`RUN_STARTS`).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct TieCounts {
    pub all: Classes,
    pub by_operations: Option<[Classes; 2]>,
    pub recency: Option<[u64; RECENCY + 1]>,
    pub by_runs: Option<[Classes; RUN_STARTS.len()]>,
}

/// Per class of the next request (sequential or not): the pairs, and the pairs where the
/// next request of the trace is that one (the same stream continues).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Classes {
    pub pairs: [u64; 3],
    pub same: [u64; 3],
}

impl Classes {
    fn to_json(self) -> Value {
        let class = |c: usize| json!({"pairs": self.pairs[c], "same": self.same[c]});
        let classes = CLASSES.iter().enumerate();
        Value::Object(
            classes
                .map(|(c, name)| (name.to_string(), class(c)))
                .collect(),
        )
    }

    fn from_json(v: &Value, at: &str) -> Result<Classes, String> {
        let mut t = Classes::default();
        for (c, name) in CLASSES.iter().enumerate() {
            if c == NEAR_CLASS && v.get(name).is_none() {
                continue; // a model from before near requests: counted as other
            }
            let field = |key: &str| {
                v.get(name)
                    .and_then(|o| o.get(key))
                    .and_then(Value::as_u64)
                    .ok_or_else(|| format!("ties: missing or negative '{at}{name}.{key}'"))
            };
            (t.pairs[c], t.same[c]) = (field("pairs")?, field("same")?);
            if t.same[c] > t.pairs[c] {
                return Err(format!(
                    "ties: '{at}{name}.same' exceeds '{at}{name}.pairs'"
                ));
            }
        }
        Ok(t)
    }

    /// Per class and APART, (pairs, same).
    fn cells(self) -> [(u64, u64); 4] {
        let (p, s) = (self.pairs, self.same);
        let apart = (p[OTHER] + p[NEAR_CLASS], s[OTHER] + s[NEAR_CLASS]);
        [(p[0], s[0]), (p[1], s[1]), (p[2], s[2]), apart]
    }

    /// The odds that the same stream goes on, per class and APART (None: no pairs).
    fn odds(self) -> [Option<f64>; 4] {
        self.cells()
            .map(|(pairs, same)| (pairs > 0).then(|| same as f64 / pairs as f64))
    }

    /// The same as log odds, each count given half a pair more on each side (so a class that
    /// always or never went on stays finite).
    fn log_odds(self) -> [Option<f64>; 4] {
        self.cells().map(|(pairs, same)| {
            (pairs > 0).then(|| ((same as f64 + 0.5) / ((pairs - same) as f64 + 0.5)).ln())
        })
    }
}

impl TieCounts {
    pub fn to_json(self) -> Value {
        let mut v = self.all.to_json();
        if let Some(by) = self.by_operations {
            let ops = OPERATIONS
                .iter()
                .zip(by)
                .map(|(name, c)| (name.to_string(), c.to_json()));
            v["operations"] = Value::Object(ops.collect());
        }
        if let Some(recency) = self.recency {
            v["recency"] = json!(recency);
        }
        if let Some(runs) = self.by_runs {
            v["runs"] = Value::Array(runs.iter().map(|c| c.to_json()).collect());
        }
        v
    }

    /// The counts of a model's `ties` (absent: none).
    pub fn from_json(v: Option<&Value>) -> Result<TieCounts, String> {
        let Some(v) = v else {
            return Ok(TieCounts::default());
        };
        let all = Classes::from_json(v, "")?;
        let by_operations = match v.get("operations") {
            None => None,
            Some(ops) => {
                let mut by = [Classes::default(); 2];
                for (slot, name) in by.iter_mut().zip(OPERATIONS) {
                    let c = ops
                        .get(name)
                        .ok_or(format!("ties: missing 'operations.{name}'"))?;
                    *slot = Classes::from_json(c, &format!("operations.{name}."))?;
                }
                Some(by)
            }
        };
        let recency = match v.get("recency") {
            None => None,
            Some(list) => {
                let counts = list
                    .as_array()
                    .filter(|l| l.len() == RECENCY + 1)
                    .ok_or(format!("ties: 'recency' must list {} counts", RECENCY + 1))?;
                let mut out = [0u64; RECENCY + 1];
                for (slot, c) in out.iter_mut().zip(counts) {
                    *slot = c.as_u64().ok_or("ties: 'recency' must hold counts")?;
                }
                Some(out)
            }
        };
        let by_runs = match v.get("runs") {
            None => None,
            Some(list) => {
                let runs = list
                    .as_array()
                    .filter(|l| l.len() == RUN_STARTS.len())
                    .ok_or(format!(
                        "ties: 'runs' must list {} classes",
                        RUN_STARTS.len()
                    ))?;
                let mut by = [Classes::default(); RUN_STARTS.len()];
                for (i, (slot, c)) in by.iter_mut().zip(runs).enumerate() {
                    *slot = Classes::from_json(c, &format!("runs.{i}."))?;
                }
                Some(by)
            }
        };
        Ok(TieCounts {
            all,
            by_operations,
            recency,
            by_runs,
        })
    }
}

/// What the counter remembers of a stream's latest request.
#[derive(Debug, Clone, Copy)]
struct Latest {
    ts: i64,
    file: u32,
    end: u64,
    /// Its stream's requests in a row at the instant, it included.
    run: u32,
    /// Whether the request after it was stamped alike, and then whether it was this stream's.
    followed: Option<bool>,
}

/// `TieCounts` of a time-ordered trace fed in batches (a whole trace, or the batches a
/// dataset is split from), on the trace's own offsets (file-level traces with their files:
/// a request continues its stream's previous one in the same file).
#[derive(Debug, Default, Clone)]
pub struct TieCounter {
    /// Each stream's latest request: by id for the small ids streams have, else in a table.
    dense: Vec<Option<Latest>>,
    sparse: FxHashMap<u32, Latest>,
    previous: Option<(u32, i64)>,
    /// The previous request's run (its stream's requests in a row at the instant).
    run: u32,
    /// The distinct streams seen at the current instant, the latest last (at most
    /// RECENCY + 1).
    recent: Vec<u32>,
    counts: TieCounts,
}

/// Stream ids below this are looked up by index.
const DENSE_IDS: u32 = 1 << 16;

impl TieCounter {
    pub fn update(&mut self, batch: TieBatch<'_>) {
        let TieBatch {
            ts,
            stream,
            op,
            offset,
            size,
            file,
        } = batch;
        for i in 0..ts.len() {
            let f = file.map_or(0, |f| f[i]);
            self.add(ts[i], stream[i], op[i], f, offset[i], size[i]);
        }
    }

    fn slot(&mut self, stream: u32) -> Option<&mut Latest> {
        if stream < DENSE_IDS {
            self.dense.get_mut(stream as usize)?.as_mut()
        } else {
            self.sparse.get_mut(&stream)
        }
    }

    fn set(&mut self, stream: u32, latest: Latest) {
        if stream < DENSE_IDS {
            let i = stream as usize;
            if i >= self.dense.len() {
                self.dense.resize(i + 1, None);
            }
            self.dense[i] = Some(latest);
        } else {
            self.sparse.insert(stream, latest);
        }
    }

    fn add(&mut self, ts: i64, stream: u32, op: u8, file: u32, offset: u64, size: u32) {
        self.run = match self.previous {
            Some((p, pts)) if pts == ts && p == stream => self.run + 1,
            _ => 1,
        };
        if let Some((p, pts)) = self.previous {
            if pts == ts {
                if let Some(l) = self.slot(p) {
                    l.followed = Some(p == stream);
                }
                if p != stream {
                    let rank = recency_rank(&self.recent, p, stream);
                    self.counts.recency.get_or_insert_default()[rank] += 1;
                }
            } else {
                self.recent.clear();
            }
        }
        touch_recent(&mut self.recent, stream);
        // the pair after this stream's previous request counts if both of its requests
        // share this instant
        if let Some(&mut l) = self.slot(stream) {
            if let (Some(same), true) = (l.followed, l.ts == ts) {
                // another file is as far as can be
                let jump = if file == l.file {
                    offset.abs_diff(l.end)
                } else {
                    u64::MAX
                };
                let class = class_of(jump == 0, Some(jump));
                let by = self.counts.by_operations.get_or_insert_default();
                let runs = self.counts.by_runs.get_or_insert_default();
                let cells = [
                    &mut self.counts.all,
                    &mut by[operation_index(op)],
                    &mut runs[run_index(l.run)],
                ];
                for c in cells {
                    c.pairs[class] += 1;
                    c.same[class] += same as u64;
                }
            }
        }
        let latest = Latest {
            ts,
            file,
            end: offset + size as u64,
            run: self.run,
            followed: None,
        };
        self.set(stream, latest);
        self.previous = Some((stream, ts));
    }

    /// The counts so far, apart by operations and with the switches' recency (none where
    /// no pair was stamped alike).
    pub fn counts(&self) -> TieCounts {
        TieCounts {
            by_operations: Some(self.counts.by_operations.unwrap_or_default()),
            recency: Some(self.counts.recency.unwrap_or_default()),
            by_runs: Some(self.counts.by_runs.unwrap_or_default()),
            ..self.counts
        }
    }
}

/// Where `next` stands among the streams seen at this instant other than `left` (the one a
/// switch leaves), the latest first: 1..=RECENCY, or 0 if not among them.
fn recency_rank<T: PartialEq + Copy>(recent: &[T], left: T, next: T) -> usize {
    returns(recent, Some(left))
        .position(|s| s == next)
        .map_or(0, |r| r + 1)
}

/// The streams a switch from `left` may return to, the latest first: those seen at this
/// instant (`recent`, the latest last) but `left`, at most RECENCY.
fn returns<T: PartialEq + Copy>(recent: &[T], left: Option<T>) -> impl Iterator<Item = T> + '_ {
    recent
        .iter()
        .rev()
        .copied()
        .filter(move |&s| Some(s) != left)
        .take(RECENCY)
}

/// Moves `stream` to the latest end of `recent`, which keeps RECENCY + 1 streams (the one a
/// switch leaves and the RECENCY before it).
fn touch_recent<T: PartialEq + Copy>(recent: &mut Vec<T>, stream: T) {
    if let Some(i) = recent.iter().position(|&s| s == stream) {
        recent.remove(i);
    }
    recent.push(stream);
    if recent.len() > RECENCY + 1 {
        recent.remove(0);
    }
}

/// The columns `TieCounter::update` reads (`file`: file-level traces, whose requests
/// continue their stream's previous one only in the same file).
#[derive(Clone, Copy)]
pub struct TieBatch<'a> {
    pub ts: &'a [i64],
    pub stream: &'a [u32],
    pub op: &'a [u8],
    pub offset: &'a [u64],
    pub size: &'a [u32],
    pub file: Option<&'a [u32]>,
}

/// Picks which stream continues among those with a request at the current instant.
struct Interleave {
    /// Per class, the odds that the previous request's stream continues (None: no data, so
    /// no preference: every stream by its weight), and the same per operation of the
    /// stream's next request (None where it had no pairs: the odds of both then).
    stay: [Option<f64>; 4],
    stay_by_operations: [[Option<f64>; 4]; 2],
    /// Where the model has runs' counts: the log odds of all, per operation and per run,
    /// and the odds used are those of the class and operation moved by how much the run's
    /// log odds differ from all's (each cell by its own counts; sparse ones are not left to
    /// decide alone).
    logits: Option<RunLogits>,
    /// Running sums of the fitted `recency` counts (None: a switch goes by weight alone).
    recency: Option<[u64; RECENCY + 1]>,
    weights: Vec<u64>,
    members: Fenwick<i64>,
    total: u64,
    rng: Pcg64Mcg,
}

/// Log odds per class: of all, per operation and per run (`Classes::log_odds`).
struct RunLogits {
    all: [Option<f64>; 4],
    by_operations: [[Option<f64>; 4]; 2],
    by_runs: [[Option<f64>; 4]; RUN_STARTS.len()],
}

impl RunLogits {
    /// The odds that a stream goes on before a request of `class` and operation `op` after
    /// a run of `RUN_STARTS[run]` (None: no pairs of the class).
    fn odds(&self, class: usize, op: usize, run: usize) -> Option<f64> {
        let all = self.all[class]?;
        let base = self.by_operations[op][class].unwrap_or(all);
        let moved = self.by_runs[run][class].map_or(0.0, |r| r - all);
        Some(1.0 / (1.0 + (-(base + moved)).exp()))
    }
}

/// The stream of the request before, as the merge asks whether it goes on: the class and
/// the `OPERATIONS` entry of its next request, and its run so far (`run_index`).
#[derive(Debug, Clone, Copy)]
struct Previous {
    stream: usize,
    class: usize,
    op: usize,
    run: usize,
}

impl Interleave {
    fn new(ties: TieCounts, weights: Vec<u64>, seed: u64) -> Interleave {
        let by = ties.by_operations.unwrap_or_default();
        Interleave {
            stay: ties.all.odds(),
            stay_by_operations: by.map(Classes::odds),
            logits: ties.by_runs.map(|runs| RunLogits {
                all: ties.all.log_odds(),
                by_operations: by.map(Classes::log_odds),
                by_runs: runs.map(Classes::log_odds),
            }),
            recency: ties.recency.filter(|r| r.iter().sum::<u64>() > 0).map(|r| {
                let mut acc = 0;
                r.map(|c| {
                    acc += c;
                    acc
                })
            }),
            members: Fenwick::new(weights.len()),
            // a stream with no weight still gets its turn
            weights: weights.into_iter().map(|w| w.max(1)).collect(),
            total: 0,
            rng: Pcg64Mcg::seed_from_u64(seed ^ 0x5449_4553),
        }
    }

    fn join(&mut self, k: usize) {
        self.members.add(k, self.weights[k] as i64);
        self.total += self.weights[k];
    }

    fn leave(&mut self, k: usize) {
        self.members.add(k, -(self.weights[k] as i64));
        self.total -= self.weights[k];
    }

    /// The next stream among the members; `previous` (a member, `Previous`) continues by the
    /// fitted odds of its next request's class and operation, moved by its run's where the
    /// model counted runs.
    ///
    /// `switch`: the stream the last request came from (a member or not), the streams seen
    /// at this instant (the latest last) and which have a request at it, for a switch's
    /// return to one of them.
    fn pick(&mut self, previous: Option<Previous>, switch: Switch<'_>) -> usize {
        if let Some(Previous {
            stream: p,
            class,
            op,
            run,
        }) = previous
        {
            let odds = match &self.logits {
                Some(l) => l.odds(class, op, run),
                None => {
                    // a model without near requests counted them as other
                    let stay = |c: usize| self.stay_by_operations[op][c].or(self.stay[c]);
                    match class {
                        NEAR_CLASS => stay(NEAR_CLASS).or(stay(OTHER)),
                        c => stay(c),
                    }
                }
            };
            if let Some(stay) = odds {
                if self.rng.random::<f64>() < stay || self.total == self.weights[p] {
                    return p;
                }
                if let Some(k) = self.returning(switch) {
                    return k;
                }
                // another member, by weight
                let w = self.weights[p];
                let mut u = self.rng.random_range(0..self.total - w);
                if u >= self.members.prefix(p) {
                    u += w;
                }
                return self.members.find_kth(u + 1);
            }
        }
        if let Some(k) = self.returning(switch) {
            return k;
        }
        let u = self.rng.random_range(0..self.total);
        self.members.find_kth(u + 1)
    }

    /// A switch's return, by the fitted `recency`, to the k-th latest stream seen at this
    /// instant other than the one left, if that one has a request here (None: by weight).
    fn returning(&mut self, (left, recent, member): Switch<'_>) -> Option<usize> {
        let sums = self.recency?;
        let u = self.rng.random_range(0..sums[RECENCY]);
        let rank = sums.partition_point(|&c| c <= u);
        if rank == 0 {
            return None;
        }
        returns(recent, left).nth(rank - 1).filter(|&k| member[k])
    }
}

/// What a switch may return to: the stream left (if any), the streams seen at the instant
/// (the latest last) and which streams have a request at it.
type Switch<'a> = (Option<usize>, &'a [usize], &'a [bool]);

/// Merges streams' requests by time. Requests at one instant from several streams are
/// interleaved by `Interleave`; otherwise the order is the times' (so traces without ties
/// merge exactly as a sort by time would).
pub struct Merger {
    heap: BinaryHeap<Reverse<(i64, u32)>>,
    interleave: Interleave,
    /// Streams with a request at `now` (their next one), and how many.
    member: Vec<bool>,
    members: usize,
    now: i64,
    previous: Option<usize>,
    /// The previous stream's requests in a row at the current instant.
    run: u32,
    /// The streams given at the current instant, the latest last (`touch_recent`).
    recent: Vec<usize>,
}

impl Merger {
    /// `weights`: each stream's requests; `ties`: the model's counts.
    pub fn new(ties: TieCounts, weights: Vec<u64>, seed: u64) -> Merger {
        let n = weights.len();
        Merger {
            heap: BinaryHeap::with_capacity(n),
            interleave: Interleave::new(ties, weights, seed),
            member: vec![false; n],
            members: 0,
            now: i64::MIN,
            previous: None,
            run: 1,
            recent: Vec::new(),
        }
    }

    /// Stream k's next request is at `time` (never earlier than the last one it gave).
    pub fn push(&mut self, k: usize, time: i64) {
        if self.members > 0 && time == self.now {
            self.join(k);
        } else {
            self.heap.push(Reverse((time, k as u32)));
        }
    }

    fn join(&mut self, k: usize) {
        self.member[k] = true;
        self.members += 1;
        self.interleave.join(k);
    }

    /// The stream whose request comes next and its time; `next(k)` is the class
    /// (`class_of`) and the operation of stream k's next request (asked only of a stream that
    /// has one at this instant). The stream leaves until `push` gives its following request.
    pub fn pop(&mut self, next: impl Fn(usize) -> (usize, u8)) -> Option<(i64, usize)> {
        if self.members == 0 {
            let Reverse((t, k)) = self.heap.pop()?;
            let tied = self.heap.peek().is_some_and(|h| h.0 .0 == t);
            if !tied {
                self.previous = Some(k as usize);
                return Some((t, k as usize));
            }
            self.now = t;
            self.recent.clear();
            // a run counts at one instant, as the fit's: the previous stream going on here
            // starts one
            self.run = 0;
            self.join(k as usize);
            while let Some(&Reverse((t2, k2))) = self.heap.peek() {
                if t2 != t {
                    break;
                }
                self.heap.pop();
                self.join(k2 as usize);
            }
        }
        // (the previous stream, if it has a request at this instant, whether that one is
        // sequential, and its operation)
        let previous = self.previous.filter(|&p| self.member[p]).map(|p| {
            let (class, op) = next(p);
            Previous {
                stream: p,
                class,
                op: operation_index(op),
                run: run_index(self.run),
            }
        });
        let switch = (
            self.previous,
            self.recent.as_slice(),
            self.member.as_slice(),
        );
        let k = self.interleave.pick(previous, switch);
        self.member[k] = false;
        self.members -= 1;
        self.interleave.leave(k);
        self.run = if self.previous == Some(k) {
            self.run + 1
        } else {
            1
        };
        self.previous = Some(k);
        touch_recent(&mut self.recent, k);
        Some((self.now, k))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The tests' operations: a write at offsets divisible by 3, else a read.
    fn op_at(offset: u64) -> u8 {
        offset.is_multiple_of(3) as u8
    }

    fn counts(rows: &[(i64, u32, u64)]) -> TieCounts {
        let mut c = TieCounter::default();
        for &(ts, s, off) in rows {
            c.add(ts, s, op_at(off), 0, off, 8);
        }
        c.counts()
    }

    #[test]
    fn counts_pairs_whose_stream_goes_on_at_the_instant() {
        // t=0: A0 A8 B0 A16 B100; t=1: B0
        let c = counts(&[
            (0, 1, 0),
            (0, 1, 8),
            (0, 2, 0),
            (0, 1, 16),
            (0, 2, 100),
            (1, 2, 0),
        ]);
        // A0->A8: same, A8 sequential; A8->B0: A goes on at 16 (sequential), switch;
        // B0->A16: B goes on at 100 (near: 92 bytes past B0's end), switch; A16->B100: A has
        // no more at t=0; B100->B0 is not stamped alike
        assert_eq!(c.all.pairs, [2, 0, 1]);
        assert_eq!(c.all.same, [1, 0, 0]);
        // by the next request's operation (writes at offsets 0, reads at 8, 16 and 100): A8,
        // A16 and B100 are reads
        let by = c.by_operations.unwrap();
        let (read, write) = (operation_index(OP_READ), operation_index(1));
        assert_eq!((by[read].pairs, by[read].same), ([2, 0, 1], [1, 0, 0]));
        assert_eq!(by[write], Classes::default());
        // switches at t=0: A8 -> B0 (B not seen yet), B0 -> A16 (A the latest other: 1),
        // A16 -> B100 (B the latest other: 1)
        let recency = c.recency.unwrap();
        assert_eq!(
            (recency[0], recency[1], recency[2..].iter().sum::<u64>()),
            (1, 2, 0)
        );
        assert_eq!(TieCounts::from_json(Some(&c.to_json())).unwrap(), c);
        // a model from before the operations were counted: the odds of all
        let mut older = c.to_json();
        older.as_object_mut().unwrap().remove("operations");
        older.as_object_mut().unwrap().remove("recency");
        let read = TieCounts::from_json(Some(&older)).unwrap();
        assert_eq!(
            (read.all.pairs, read.by_operations, read.recency),
            (c.all.pairs, None, None)
        );
        // and from before near requests: none near
        older.as_object_mut().unwrap().remove("near");
        let read = TieCounts::from_json(Some(&older)).unwrap();
        assert_eq!(read.all.pairs, [2, 0, 0]);
        let mut short = c.to_json();
        short["recency"] = json!([1, 2]);
        let e = TieCounts::from_json(Some(&short)).unwrap_err();
        assert!(e.contains("'recency' must list 17 counts"), "{e}");
    }

    #[test]
    fn batches_count_as_one_pass() {
        let rows: Vec<(i64, u32, u64)> = (0..200u64)
            .map(|i| ((i / 37) as i64, (i * 7 % 5) as u32, i * 8))
            .collect();
        let whole = counts(&rows);
        let mut c = TieCounter::default();
        for part in rows.chunks(23) {
            let ts: Vec<i64> = part.iter().map(|r| r.0).collect();
            let st: Vec<u32> = part.iter().map(|r| r.1).collect();
            let off: Vec<u64> = part.iter().map(|r| r.2).collect();
            let op: Vec<u8> = part.iter().map(|r| op_at(r.2)).collect();
            let size = vec![8; part.len()];
            c.update(TieBatch {
                ts: &ts,
                stream: &st,
                op: &op,
                offset: &off,
                size: &size,
                file: None,
            });
        }
        assert_eq!(c.counts(), whole);
        assert!(whole.all.pairs.iter().sum::<u64>() > 0);
    }

    fn merged(ties: TieCounts, times: &[Vec<i64>], seed: u64) -> Vec<usize> {
        merged_ops(ties, times, &vec![OP_READ; times.len()], seed)
    }

    /// Streams merged, each stream's requests all of the operation `ops[k]`, of class OTHER.
    fn merged_ops(ties: TieCounts, times: &[Vec<i64>], ops: &[u8], seed: u64) -> Vec<usize> {
        merged_as(ties, times, ops, OTHER, seed)
    }

    /// Streams merged, every request of `class` and stream k's of operation `ops[k]`.
    fn merged_as(
        ties: TieCounts,
        times: &[Vec<i64>],
        ops: &[u8],
        class: usize,
        seed: u64,
    ) -> Vec<usize> {
        let weights = times.iter().map(|t| t.len() as u64).collect();
        let mut m = Merger::new(ties, weights, seed);
        let mut pos = vec![0; times.len()];
        for (k, t) in times.iter().enumerate() {
            m.push(k, t[0]);
        }
        let mut order = Vec::new();
        while let Some((t, k)) = m.pop(|k| (class, ops[k])) {
            assert_eq!(t, times[k][pos[k]]);
            order.push(k);
            pos[k] += 1;
            if let Some(&next) = times[k].get(pos[k]) {
                m.push(k, next);
            }
        }
        order
    }

    #[test]
    fn untied_times_merge_in_time_order() {
        let times = vec![vec![0, 4, 9], vec![1, 2, 10], vec![3]];
        assert_eq!(
            merged(TieCounts::default(), &times, 1),
            [0, 1, 1, 2, 0, 0, 1]
        );
    }

    #[test]
    fn tied_streams_switch_at_the_fitted_odds() {
        // two streams of 5,000 requests at one instant
        let times = vec![vec![0; 5000], vec![0; 5000]];
        for stay in [0.1, 0.4, 0.9] {
            let ties = TieCounts {
                all: Classes {
                    pairs: [0, 1000, 0],
                    same: [0, (stay * 1000.0) as u64, 0],
                },
                ..TieCounts::default()
            };
            let order = merged(ties, &times, 7);
            assert_eq!(order.len(), 10_000);
            let same = order.windows(2).filter(|w| w[0] == w[1]).count() as f64 / 9999.0;
            assert!((same - stay).abs() < 0.03, "stay {stay}: {same}");
        }
    }

    #[test]
    fn near_requests_go_on_by_their_odds_and_unplaced_ones_by_near_and_other_together() {
        // two streams at one instant: a stream goes on before a near request 90% of the time,
        // before another 10%; a request placed after the merge (APART) by both, 50%
        let times = vec![vec![0; 5000], vec![0; 5000]];
        let ties = |near_pairs: u64| TieCounts {
            all: Classes {
                pairs: [0, 1000, near_pairs],
                same: [0, 100, near_pairs * 9 / 10],
            },
            ..TieCounts::default()
        };
        let stays = |order: Vec<usize>| {
            order.windows(2).filter(|w| w[0] == w[1]).count() as f64 / (order.len() - 1) as f64
        };
        let reads = [OP_READ; 2];
        let near = stays(merged_as(ties(1000), &times, &reads, NEAR_CLASS, 3));
        let apart = stays(merged_as(ties(1000), &times, &reads, APART, 3));
        // a model from before near requests: they go on as the others
        let older = stays(merged_as(ties(0), &times, &reads, NEAR_CLASS, 3));
        assert!((near - 0.9).abs() < 0.03, "{near}");
        assert!((apart - 0.5).abs() < 0.03, "{apart}");
        assert!((older - 0.1).abs() < 0.03, "{older}");
        assert_eq!(class_of(false, Some(NEAR - 1)), NEAR_CLASS);
        assert_eq!(class_of(false, Some(NEAR)), OTHER);
        assert_eq!(class_of(false, None), APART);
        assert_eq!(class_of(true, Some(0)), SEQUENTIAL);
    }

    #[test]
    fn counts_pairs_by_the_run_so_far() {
        // t=0: A0 A8 A16 B0 A24 B8; t=1: A32
        let c = counts(&[
            (0, 1, 0),
            (0, 1, 8),
            (0, 1, 16),
            (0, 2, 0),
            (0, 1, 24),
            (0, 2, 8),
            (1, 1, 32),
        ]);
        // A0 (run 1) -> A8: same; A8 (run 2) -> A16: same; A16 (run 3) -> B0: A goes on at
        // 24, switch; B0 (run 1) -> A24: B goes on at 8, switch; A24 (run 1) -> B8: A's next
        // is not at t=0; all sequential
        let runs = c.by_runs.unwrap();
        let cell = |r: usize| (runs[r].pairs[SEQUENTIAL], runs[r].same[SEQUENTIAL]);
        assert_eq!(
            [cell(0), cell(1), cell(2), cell(3)],
            [(2, 1), (1, 1), (1, 0), (0, 0)]
        );
        assert_eq!(runs.iter().map(|r| r.pairs[OTHER]).sum::<u64>(), 0);
        assert_eq!(
            [1, 2, 3, 4, 7, 8, 100].map(run_index),
            [0, 1, 2, 3, 3, 4, 4]
        );
        assert_eq!(TieCounts::from_json(Some(&c.to_json())).unwrap(), c);
        let mut short = c.to_json();
        short["runs"].as_array_mut().unwrap().pop();
        let e = TieCounts::from_json(Some(&short)).unwrap_err();
        assert!(e.contains("'runs' must list 5 classes"), "{e}");
    }

    #[test]
    fn tied_streams_go_on_by_their_runs_odds() {
        // a stream goes on 40% of the time in all, but 10% after one request and 90% after
        // 4 or more in a row: runs come out longer and fewer than at 40% throughout
        let times = vec![vec![0; 4000]; 6];
        let cell = |pairs: u64, same: u64| Classes {
            pairs: [0, pairs, 0],
            same: [0, same, 0],
        };
        let mut runs = [cell(1000, 400); RUN_STARTS.len()];
        runs[0] = cell(1000, 100);
        runs[3] = cell(1000, 900);
        runs[4] = cell(1000, 900);
        let fitted = |by_runs| TieCounts {
            all: cell(1000, 400),
            by_runs,
            ..TieCounts::default()
        };
        // the share of requests whose stream went on after a run of `r` (0-based index)
        let after = |order: &[usize], r: usize| {
            let (mut run, mut pairs, mut same) = (1, 0, 0);
            for w in order.windows(2) {
                if run_index(run) == r {
                    pairs += 1;
                    same += (w[0] == w[1]) as u32;
                }
                run = if w[0] == w[1] { run + 1 } else { 1 };
            }
            same as f64 / pairs as f64
        };
        let by_runs = merged(fitted(Some(runs)), &times, 9);
        let blind = merged(fitted(None), &times, 9);
        assert!(
            (after(&by_runs, 0) - 0.1).abs() < 0.03,
            "{}",
            after(&by_runs, 0)
        );
        assert!(
            (after(&by_runs, 3) - 0.9).abs() < 0.03,
            "{}",
            after(&by_runs, 3)
        );
        assert!(
            (after(&blind, 0) - 0.4).abs() < 0.03,
            "{}",
            after(&blind, 0)
        );
        assert!(
            (after(&blind, 3) - 0.4).abs() < 0.05,
            "{}",
            after(&blind, 3)
        );
    }

    #[test]
    fn without_counts_streams_mix_by_weight() {
        let times = vec![vec![5; 3000], vec![5; 1000]];
        let order = merged(TieCounts::default(), &times, 3);
        // the first half holds about half of each stream (a shuffle, not stream by stream)
        let first = order[..2000].iter().filter(|&&k| k == 1).count();
        assert!((400..600).contains(&first), "{first}");
    }

    #[test]
    fn tied_streams_go_on_by_their_operations_odds() {
        // a reading and a writing stream at one instant: the reader goes on before its reads
        // 90% of the time, the writer before its writes 20% (the reader has enough requests to
        // outlast the writer's 5,000 at these odds)
        let times = vec![vec![0; 60_000], vec![0; 5000]];
        let mut by = [Classes::default(); 2];
        by[operation_index(OP_READ)] = Classes {
            pairs: [0, 1000, 0],
            same: [0, 900, 0],
        };
        by[operation_index(1)] = Classes {
            pairs: [0, 1000, 0],
            same: [0, 200, 0],
        };
        let ties = TieCounts {
            all: Classes {
                pairs: [0, 1000, 0],
                same: [0, 500, 0],
            },
            by_operations: Some(by),
            ..TieCounts::default()
        };
        let order = merged_ops(ties, &times, &[OP_READ, 1], 11);
        // while both streams have requests: up to the writer's last
        let both = order.iter().rposition(|&k| k == 1).unwrap();
        let order = &order[..both];
        let after = |k: usize| {
            let pairs = order.windows(2).filter(|w| w[0] == k && w[1] != k).count();
            let all = order[..order.len() - 1].iter().filter(|&&x| x == k).count();
            1.0 - pairs as f64 / all as f64
        };
        assert!((after(0) - 0.9).abs() < 0.03, "{}", after(0));
        assert!((after(1) - 0.2).abs() < 0.03, "{}", after(1));
    }

    #[test]
    fn recency_ranks_the_streams_left_latest_first() {
        let mut recent = Vec::new();
        for s in [1u32, 2, 3, 2, 4] {
            touch_recent(&mut recent, s);
        }
        assert_eq!(recent, [1, 3, 2, 4]);
        // leaving 4: 2 is the latest other, then 3, then 1; 9 was not seen
        assert_eq!(
            [2, 3, 1, 9].map(|s| recency_rank(&recent, 4, s)),
            [1, 2, 3, 0]
        );
        for s in 10..40 {
            touch_recent(&mut recent, s);
        }
        assert_eq!(recent.len(), RECENCY + 1);
        assert_eq!(recent[0], 40 - RECENCY as u32 - 1);
    }

    #[test]
    fn switches_return_to_streams_just_left() {
        // four streams at one instant; a stream goes on 10% of the time, and a switch goes
        // back to the one before the last 60% of the time (else by weight): A B A B ...
        let times = vec![vec![0; 3000]; 4];
        let mut recency = [0u64; RECENCY + 1];
        (recency[0], recency[1]) = (400, 600);
        let fitted = |recency| TieCounts {
            all: Classes {
                pairs: [0, 1000, 0],
                same: [0, 100, 0],
            },
            recency,
            ..TieCounts::default()
        };
        let back = |order: &[usize]| {
            let switches: Vec<_> = order
                .windows(3)
                .filter(|w| w[0] != w[1] && w[1] != w[2])
                .collect();
            switches.iter().filter(|w| w[0] == w[2]).count() as f64 / switches.len() as f64
        };
        let returning = merged(fitted(Some(recency)), &times, 5);
        let by_weight = merged(fitted(None), &times, 5);
        // by weight a switch picks the one before the last a third of the time; with recency
        // 60% + 40% / 3
        assert!(
            (back(&by_weight) - 1.0 / 3.0).abs() < 0.03,
            "{}",
            back(&by_weight)
        );
        let expected = 0.6 + 0.4 / 3.0;
        assert!(
            (back(&returning) - expected).abs() < 0.03,
            "{}",
            back(&returning)
        );
    }
}
