//! The sampler: regenerates requests from a model document (design.md "The model").
//!
//! Per stream, a Markov walk over the address-space tree picks each request's transition
//! top-down (at each level: move to a sibling, or stay and look one level deeper), descends a
//! coarse move through each node's entry distribution, then draws the transition's I/O
//! category (operation, size, random / sequential / re-reference) and its inter-arrival time.
//! Time follows the model's fluctuation windows: each window gets its share of the stream's
//! requests (exact counts, so thread weights and the activity shape hold), and the sampled
//! inter-arrival times spread them inside the window.

use super::dist::Iat;
use super::finalize::kind_code;
use super::stats::{Category, Fenwick, KIND_REREF, KIND_SEQUENTIAL};
use super::tree::{TransKey, Tree};
use crate::columns::Columns;
use rand::{RngExt, SeedableRng};
use rand_pcg::Pcg64Mcg;
use rustc_hash::FxHashMap;
use serde_json::Value;

const REREF_BLOCK: u64 = 4096;

/// One generated request before times are placed: (op, offset, size).
type Request = (u8, u64, u32);
/// A stream's generated requests: (times, requests, stream id).
type StreamPart = (Vec<i64>, Vec<Request>, u32);

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

/// Categories of one transition, drawn by count.
#[derive(Debug, Clone, Default)]
struct Choices {
    cum: Vec<u64>,
    items: Vec<(Category, Iat)>,
}

impl Choices {
    fn push(&mut self, count: u64, c: Category, iat: Iat) {
        let last = self.cum.last().copied().unwrap_or(0);
        self.cum.push(last + count);
        self.items.push((c, iat));
    }

    fn pick(&self, rng: &mut Pcg64Mcg) -> Option<&(Category, Iat)> {
        let total = *self.cum.last()?;
        if total == 0 {
            return None;
        }
        let u = rng.random_range(0..total);
        Some(&self.items[self.cum.partition_point(|&c| c <= u)])
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

/// One table row: moves from child `from` of a node to its siblings (or itself, at the
/// finest level), and how often the walk stayed inside `from` instead.
#[derive(Debug, Clone, Default)]
struct Row {
    moves: Weighted,
    stay: u64,
}

#[derive(Debug, Clone)]
struct StreamModel {
    id: u32,
    weight: f64,
    alignment: u64,
    first: Option<(u64, Category)>,
    windows: Vec<u64>,
    rows: FxHashMap<(u32, u64, u32), Row>,
    flat_rows: FxHashMap<u64, Weighted>,
    choices: FxHashMap<TransKey, Choices>,
    node_entry: FxHashMap<(u32, u64), Weighted>,
    leaves: Weighted,
    all: Choices,
    reuse: Vec<(u64, u64, u64)>,
    reuse_total: u64,
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
            .map(|s| stream_model(s, &tree, flat))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Sampler {
            tree,
            flat,
            window_ns: int(model, "window_ns")?.max(1) as i64,
            span_ns: int(model, "span_ns")? as i64,
            total_requests: int(model, "requests")?,
            streams,
        })
    }

    /// Generates the synthetic trace, time-sorted, times from 0.
    pub fn generate(&self, p: &SynthParams) -> Columns {
        let counts = self.requests_per_stream(p);
        let mut parts: Vec<StreamPart> = Vec::with_capacity(self.streams.len());
        for (s, &n) in self.streams.iter().zip(&counts) {
            let mut rng =
                Pcg64Mcg::seed_from_u64(p.seed ^ (s.id as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15));
            let quotas = self.window_quotas(s, p, n);
            let n = quotas.iter().map(|q| q.2).sum::<u64>();
            let (reqs, gaps) = self.walk(s, n, p.uniform, &mut rng);
            let times = place_times(&quotas, &gaps, p.intensity);
            parts.push((times, reqs, s.id));
        }
        merge_streams(parts)
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
    fn window_quotas(&self, s: &StreamModel, p: &SynthParams, n: u64) -> Vec<(f64, f64, u64)> {
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
            if p.requests.is_some() && done + quota >= n {
                let left = n - done;
                if quota > 0 {
                    len *= left as f64 / quota as f64;
                }
                out.push((t, len, left));
                break;
            }
            out.push((t, len, quota));
            done += quota;
            t += lengths[w];
            if j > 1_000_000_000 {
                break;
            }
        }
        out
    }

    /// The Markov walk: n requests as (op, offset, size) with their raw inter-arrival gaps.
    fn walk(
        &self,
        s: &StreamModel,
        n: u64,
        uniform: bool,
        rng: &mut Pcg64Mcg,
    ) -> (Vec<Request>, Vec<f64>) {
        let mut reqs = Vec::with_capacity(n as usize);
        let mut gaps = Vec::with_capacity(n as usize);
        let mut reref = s.reuse_total.gt(&0).then(|| Reref::new(n as usize));
        let mut cur: Option<(u64, u64)> = None; // (leaf, end) of the previous request
        for i in 0..n {
            let (cat, target, gap) = match (i, cur, s.first) {
                (0, _, Some((leaf, c))) => (c, leaf, 0.0),
                (_, Some((leaf, _)), _) => self.step(s, leaf, rng),
                _ => self.jump(s, rng),
            };
            let offset = if uniform {
                self.uniform_offset(s, cat.size, rng)
            } else {
                let prev_end = cur.map(|c| c.1);
                self.place(s, &cat, target, prev_end, reref.as_mut(), rng)
            };
            if let Some(r) = reref.as_mut() {
                r.touch(i as usize, offset);
            }
            cur = Some((self.tree.leaf_of(offset), offset + cat.size as u64));
            reqs.push((cat.op, offset, cat.size));
            gaps.push(gap);
        }
        (reqs, gaps)
    }

    /// One transition from `leaf`: (category, target leaf, gap).
    fn step(&self, s: &StreamModel, leaf: u64, rng: &mut Pcg64Mcg) -> (Category, u64, f64) {
        let picked = if self.flat {
            self.flat_move(s, leaf, rng)
        } else {
            self.tree_move(s, leaf, rng)
        };
        match picked.and_then(|(key, q)| {
            s.choices
                .get(&key)
                .and_then(|c| c.pick(rng))
                .map(|c| (c, q))
        }) {
            Some(((cat, iat), q)) => (*cat, q, iat.sample(rng)),
            None => self.jump(s, rng),
        }
    }

    /// Top-down: at each level move to a sibling or stay and look deeper.
    fn tree_move(&self, s: &StreamModel, leaf: u64, rng: &mut Pcg64Mcg) -> Option<(TransKey, u64)> {
        let t = &self.tree;
        for d in 0..t.levels {
            let node = t.ancestor(leaf, d);
            let x = t.digit(leaf, d);
            let row = s.rows.get(&(d, node, x))?;
            let moves = row.moves.total();
            let stay = if d + 1 < t.levels { row.stay } else { 0 };
            if moves + stay == 0 {
                return None;
            }
            let u = rng.random_range(0..moves + stay);
            if u < moves {
                let y = row.moves.pick_at(u) as u32;
                let key = TransKey {
                    depth: d,
                    prefix: node,
                    from: x,
                    to: y,
                };
                let child = node * t.fanout as u64 + y as u64;
                return Some((key, self.descend(s, d + 1, child, rng)));
            }
        }
        None
    }

    /// From a node at `depth`, down to a leaf through the nodes' entry distributions.
    fn descend(&self, s: &StreamModel, depth: u32, node: u64, rng: &mut Pcg64Mcg) -> u64 {
        let t = &self.tree;
        let mut node = node;
        for e in depth..t.levels {
            let child = match s.node_entry.get(&(e, node)).and_then(|w| w.pick(rng)) {
                Some(c) => c,
                None => rng.random_range(0..t.fanout as u64),
            };
            node = node * t.fanout as u64 + child;
        }
        node
    }

    fn flat_move(&self, s: &StreamModel, leaf: u64, rng: &mut Pcg64Mcg) -> Option<(TransKey, u64)> {
        let to = s.flat_rows.get(&leaf)?.pick(rng)?;
        Some((
            TransKey {
                depth: super::stats::FLAT_DEPTH,
                prefix: leaf,
                from: 0,
                to: to as u32,
            },
            to,
        ))
    }

    /// A restart where the walk has no data: a leaf by visit counts, a category by the
    /// stream's overall mix.
    fn jump(&self, s: &StreamModel, rng: &mut Pcg64Mcg) -> (Category, u64, f64) {
        let leaf = s.leaves.pick(rng).unwrap_or(0);
        match s.all.pick(rng) {
            Some((c, iat)) => (*c, leaf, iat.sample(rng)),
            None => (
                s.first.map(|f| f.1).unwrap_or(Category {
                    op: 0,
                    size: 4096,
                    kind: 0,
                }),
                leaf,
                0.0,
            ),
        }
    }

    fn place(
        &self,
        s: &StreamModel,
        cat: &Category,
        target: u64,
        prev_end: Option<u64>,
        reref: Option<&mut Reref>,
        rng: &mut Pcg64Mcg,
    ) -> u64 {
        let cap = self.tree.capacity;
        if cat.kind == KIND_SEQUENTIAL {
            if let Some(end) = prev_end.filter(|e| e + cat.size as u64 <= cap) {
                return end;
            }
        }
        if cat.kind == KIND_REREF {
            if let Some(off) = reref.and_then(|r| r.pick(s, rng)) {
                return off;
            }
        }
        let (lo, hi) = self.tree.leaf_range(target);
        random_in(lo, hi.min(cap), cat.size as u64, s.alignment, rng)
    }

    fn uniform_offset(&self, s: &StreamModel, size: u32, rng: &mut Pcg64Mcg) -> u64 {
        random_in(0, self.tree.capacity, size as u64, s.alignment, rng)
    }

    pub fn total_requests(&self) -> u64 {
        self.total_requests
    }
}

/// A uniformly random aligned offset in [lo, hi) leaving room for `size` where possible.
fn random_in(lo: u64, hi: u64, size: u64, align: u64, rng: &mut Pcg64Mcg) -> u64 {
    let align = align.max(1);
    let first = lo.div_ceil(align) * align;
    let last_start = hi.saturating_sub(size).max(first);
    let slots = (last_start - first) / align + 1;
    first + rng.random_range(0..slots) * align
}

/// Re-references: the synthetic stream's own LRU stack of first blocks.
struct Reref {
    fen: Fenwick,
    last: FxHashMap<u64, usize>,
    offsets: Vec<u64>,
    marks: u64,
}

impl Reref {
    fn new(n: usize) -> Reref {
        Reref {
            fen: Fenwick::new(n.max(1)),
            last: FxHashMap::default(),
            offsets: Vec::with_capacity(n),
            marks: 0,
        }
    }

    /// The offset last used for the block at a stack distance drawn from the model.
    fn pick(&self, s: &StreamModel, rng: &mut Pcg64Mcg) -> Option<u64> {
        let mut u = rng.random_range(0..s.reuse_total);
        let mut dist = 0;
        for &(lo, hi, c) in &s.reuse {
            if u < c {
                dist = rng.random_range(lo..hi.max(lo + 1));
                break;
            }
            u -= c;
        }
        if dist >= self.marks {
            return None;
        }
        let pos = self.fen.find_kth(self.marks - dist);
        Some(self.offsets[pos])
    }

    fn touch(&mut self, pos: usize, offset: u64) {
        self.offsets.push(offset);
        let block = offset / REREF_BLOCK;
        match self.last.insert(block, pos) {
            Some(prev) => self.fen.add(prev, -1),
            None => self.marks += 1,
        }
        self.fen.add(pos, 1);
    }
}

/// Request times: each window's requests spread over it by their relative gaps.
fn place_times(quotas: &[(f64, f64, u64)], gaps: &[f64], intensity: f64) -> Vec<i64> {
    let mut times = Vec::with_capacity(gaps.len());
    let mut i = 0usize;
    for &(start, len, q) in quotas {
        let q = q as usize;
        if q == 0 {
            continue;
        }
        let window = &gaps[i..(i + q).min(gaps.len())];
        let mean = window.iter().sum::<f64>() / window.len().max(1) as f64;
        let total: f64 = window.iter().sum::<f64>() + mean;
        let mut acc = 0.0;
        for (j, g) in window.iter().enumerate() {
            // the stream's very first request opens its window; later ones follow their gap
            acc += if i + j == 0 { 0.0 } else { *g };
            let frac = if total > 0.0 { acc / total } else { 0.0 };
            times.push(((start + frac * len) / intensity.max(1e-12)).round() as i64);
        }
        i += window.len();
    }
    times
}

/// Merges the streams' requests by time (stable: ties keep stream order), times from 0.
fn merge_streams(parts: Vec<StreamPart>) -> Columns {
    let n: usize = parts.iter().map(|p| p.0.len()).sum();
    let mut order: Vec<(i64, u32, u32)> = Vec::with_capacity(n); // (time, part, index)
    for (pi, (times, _, _)) in parts.iter().enumerate() {
        for (j, &t) in times.iter().enumerate() {
            order.push((t, pi as u32, j as u32));
        }
    }
    order.sort_unstable();
    let t0 = order.first().map(|o| o.0).unwrap_or(0);
    let mut out = Columns::with_capacity(n);
    for (t, pi, j) in order {
        let (_, reqs, id) = &parts[pi as usize];
        let (op, off, size) = reqs[j as usize];
        out.push(t - t0, *id, op, off, size);
    }
    out
}

fn stream_model(v: &Value, tree: &Tree, flat: bool) -> Result<StreamModel, Err> {
    let id = int(v, "id")? as u32;
    let mut m = StreamModel {
        id,
        weight: num(v, "weight")?,
        alignment: int(v, "alignment").unwrap_or(1),
        first: None,
        windows: v
            .get("windows")
            .and_then(Value::as_array)
            .map(|a| a.iter().filter_map(Value::as_u64).collect())
            .unwrap_or_default(),
        rows: FxHashMap::default(),
        flat_rows: FxHashMap::default(),
        choices: FxHashMap::default(),
        node_entry: FxHashMap::default(),
        leaves: Weighted::default(),
        all: Choices::default(),
        reuse: Vec::new(),
        reuse_total: 0,
    };
    if let Some(f) = v.get("first").filter(|f| !f.is_null()) {
        m.first = Some((int(f, "leaf")?, category(f)?));
    }
    for t in v
        .get("transitions")
        .and_then(Value::as_array)
        .ok_or("missing 'transitions'")?
    {
        let count = int(t, "count")?;
        let key = if flat {
            let (from, to) = (int(t, "from_leaf")?, int(t, "to_leaf")?);
            m.flat_rows.entry(from).or_default().add(to, count);
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
            m.rows
                .entry((key.depth, key.prefix, key.from))
                .or_default()
                .moves
                .add(key.to as u64, count);
            add_stays(&mut m.rows, tree, &key, count);
            key
        };
        let mut choices = Choices::default();
        for c in t
            .get("categories")
            .and_then(Value::as_array)
            .ok_or("transition without categories")?
        {
            let cat = category(c)?;
            let iat = parse_iat(c.get("iat").ok_or("category without iat")?)?;
            let n = int(c, "count")?;
            choices.push(n, cat, iat.clone());
            m.all.push(n, cat, iat);
        }
        m.choices.insert(key, choices);
    }
    for e in v
        .get("entries")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let (d, q, c) = triple(e)?;
        for depth in (d as u32 + 1)..tree.levels {
            let node = tree.ancestor(q, depth);
            let child = tree.digit(q, depth) as u64;
            m.node_entry.entry((depth, node)).or_default().add(child, c);
        }
    }
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
        m.leaves
            .add(a[0].as_u64().unwrap_or(0), a[1].as_u64().unwrap_or(0));
    }
    for r in v
        .get("reuse")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let b = triple(r)?;
        m.reuse_total += b.2;
        m.reuse.push(b);
    }
    let _ = KIND_REREF;
    Ok(m)
}

/// A transition at depth e inside the subtree of child x of a node at depth d < e is a "stay"
/// for that node's row x.
fn add_stays(rows: &mut FxHashMap<(u32, u64, u32), Row>, tree: &Tree, key: &TransKey, count: u64) {
    let b = tree.fanout as u64;
    for d in 0..key.depth {
        let up = key.depth - d; // levels between the table's node and depth d
        let node = key.prefix / b.pow(up);
        let x = ((key.prefix / b.pow(up - 1)) % b) as u32;
        rows.entry((d, node, x)).or_default().stay += count;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::finalize::finalize;
    use crate::model::stats::{FitConfig, Fitter};

    fn fitted(levels: u32, flat: bool) -> Value {
        // a stream that scans leaf 0 sequentially, then jumps to leaf 9, and back
        let mut ts = Vec::new();
        let mut off = Vec::new();
        for i in 0..2000u64 {
            ts.push(i as i64 * 1000);
            off.push(if i % 10 < 7 {
                (i % 10) * 8
            } else {
                900 + (i % 10) * 4
            });
        }
        let n = ts.len();
        let cfg = FitConfig {
            tree: Tree::new(levels, 4, 1600),
            flat,
            window_ns: 100_000,
            reref: false,
        };
        let mut f = Fitter::new(cfg);
        f.update(&ts, &vec![0; n], &vec![0; n], &off, &vec![8; n], None);
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
            // root child 0 (bytes 0..400): sequential runs may drift past leaf 0's end
            let low = c.offset.iter().filter(|&&o| o < 400).count();
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
    fn same_seed_same_trace() {
        let s = Sampler::from_json(&fitted(2, false)).unwrap();
        assert_eq!(s.generate(&params(500)), s.generate(&params(500)));
        let mut other = params(500);
        other.seed = 8;
        assert_ne!(s.generate(&params(500)).offset, s.generate(&other).offset);
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
