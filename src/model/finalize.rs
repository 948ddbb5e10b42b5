//! Finalisation: sufficient statistics -> the model document (JSON), with probabilities and
//! fitted inter-arrival distributions. The Python side adds names, provenance and the schema
//! check; the sampler (`sample.rs`) reads the same document back.

use super::dist::{choose, Iat};
use super::hist::{bucket_range, Hist};
use super::history::BLOCK;
use super::stats::{
    Category, Fitter, StreamStats, TransStats, WindowStats, FLAT_DEPTH, KIND_NEAR, KIND_RANDOM,
    KIND_REREF, KIND_RESUME, KIND_RESUME_REREF, KIND_SEQUENTIAL, KIND_SEQ_REREF, NEAR_BYTES,
    PHASE_BYTES,
};
use super::tree::TransKey;
use serde_json::{json, Map, Value};

pub const MODEL_VERSION: u64 = 1;

pub fn kind_name(kind: u8) -> &'static str {
    match kind {
        KIND_SEQUENTIAL => "sequential",
        KIND_REREF => "reref",
        KIND_SEQ_REREF => "sequential-reref",
        KIND_RESUME => "resume",
        KIND_RESUME_REREF => "resume-reref",
        KIND_NEAR => "near",
        _ => "random",
    }
}

pub fn kind_code(name: &str) -> u8 {
    match name {
        "sequential" => KIND_SEQUENTIAL,
        "reref" => KIND_REREF,
        "sequential-reref" => KIND_SEQ_REREF,
        "resume" => KIND_RESUME,
        "resume-reref" => KIND_RESUME_REREF,
        "near" => KIND_NEAR,
        _ => KIND_RANDOM,
    }
}

pub fn iat_json(d: &Iat, ks: f64, count: u64) -> Value {
    let mut m = match d {
        Iat::Fixed { value } => json!({"dist": "fixed", "value_ns": value}),
        Iat::Normal { mean, sd } => json!({"dist": "normal", "mean_ns": mean, "sd_ns": sd}),
        Iat::Exponential { mean } => json!({"dist": "exponential", "mean_ns": mean}),
        Iat::Poisson { mean } => json!({"dist": "poisson", "mean_ns": mean}),
        Iat::Gamma { shape, scale } => json!({"dist": "gamma", "shape": shape, "scale_ns": scale}),
        Iat::HyperExp { p, mean1, mean2 } => {
            json!({"dist": "hyperexp", "p": p, "mean1_ns": mean1, "mean2_ns": mean2})
        }
        Iat::Empirical { buckets } => {
            let b: Vec<Value> = buckets
                .iter()
                .map(|&(lo, hi, c)| json!([lo, hi, c]))
                .collect();
            let mut m = json!({"dist": "empirical"});
            m["buckets"] = Value::Array(b); // moved in: `json!` would copy the whole tree
            m
        }
    };
    let obj = m.as_object_mut().unwrap();
    obj.insert("ks".into(), json!(round6(ks)));
    obj.insert("samples".into(), json!(count));
    m
}

fn round6(x: f64) -> f64 {
    (x * 1e6).round() / 1e6
}

fn category_json(c: &Category, count: u64, total: u64, iat: Value) -> Value {
    let mut doc = json!({
        "op": c.op,
        "size": c.size,
        "kind": kind_name(c.kind),
        "count": count,
        "p": count as f64 / total.max(1) as f64,
    });
    doc["iat"] = iat;
    doc
}

/// The model document for fitted statistics.
pub fn finalize(f: &Fitter, iat_family: &str, span_ns: i64) -> Value {
    let cfg = f.config;
    let total: u64 = f.streams.values().map(|s| s.requests).sum();
    let windows = Windows {
        count: (span_ns / cfg.window_ns.max(1) + 1).max(1) as usize,
        window_ns: cfg.window_ns.max(1),
        span_ns,
    };
    let mut ids: Vec<u32> = f.streams.keys().copied().collect();
    ids.sort_unstable();
    let streams: Vec<Value> = ids
        .iter()
        .map(|id| stream_json(*id, &f.streams[id], total, &windows, iat_family))
        .collect();
    let mut doc = json!({
        "format": "iotwin-model",
        "version": MODEL_VERSION,
        "levels": cfg.tree.levels,
        "fanout": cfg.tree.fanout,
        "flat": cfg.flat,
        "capacity": cfg.tree.capacity,
        "reref": cfg.reref,
        "window_ns": cfg.window_ns,
        "span_ns": span_ns,
        "requests": total,
        "iat_family": iat_family,
    });
    // moved in: a `json!` value is serialized anew, a deep copy of every stream (100 ms of a
    // 10M-request fit)
    doc["streams"] = Value::Array(streams);
    doc
}

/// Transitions from this many up are finalised on every core (choosing each category's
/// inter-arrival distribution is most of finalisation).
const PARALLEL_TRANSITIONS: usize = 64;

fn transition_json(k: &TransKey, t: &TransStats, iat_family: &str) -> Value {
    let mut cats: Vec<_> = t.categories.iter().collect();
    cats.sort_by(|a, b| b.1.count.cmp(&a.1.count).then(a.0.cmp(b.0)));
    let cats: Vec<Value> = cats
        .into_iter()
        .map(|(c, st)| {
            let (d, ks) = choose(st, iat_family);
            category_json(c, st.count, t.count, iat_json(&d, ks, st.count))
        })
        .collect();
    let mut m = Map::new();
    if k.depth == FLAT_DEPTH {
        m.insert("from_leaf".into(), json!(k.prefix));
        m.insert("to_leaf".into(), json!(k.to));
    } else {
        m.insert("depth".into(), json!(k.depth));
        m.insert("node".into(), json!(k.prefix));
        m.insert("from".into(), json!(k.from));
        m.insert("to".into(), json!(k.to));
    }
    m.insert("count".into(), json!(t.count));
    m.insert("categories".into(), Value::Array(cats));
    Value::Object(m)
}

/// The transitions in key order, finalised in contiguous chunks on the machine's cores.
fn transitions_json(s: &StreamStats, iat_family: &str) -> Vec<Value> {
    let mut keys: Vec<_> = s.transitions.keys().copied().collect();
    keys.sort_unstable();
    let one = |k: &TransKey| transition_json(k, &s.transitions[k], iat_family);
    let cores = std::thread::available_parallelism().map_or(1, |c| c.get());
    if cores < 2 || keys.len() < PARALLEL_TRANSITIONS {
        return keys.iter().map(one).collect();
    }
    let chunk = keys.len().div_ceil(cores);
    std::thread::scope(|scope| {
        let handles: Vec<_> = keys
            .chunks(chunk)
            .map(|part| scope.spawn(move || part.iter().map(one).collect::<Vec<Value>>()))
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().expect("finalise thread panicked"))
            .collect()
    })
}

/// The trace's fluctuation windows.
struct Windows {
    count: usize,
    window_ns: i64,
    span_ns: i64,
}

impl Windows {
    /// A stream's requests and reads per window, and per window the stretch between its
    /// first and last request as fractions of the window ([0, 1] where it has none);
    /// requests past the last window count in it.
    fn of(&self, s: &StreamStats) -> (Vec<u64>, Vec<u64>, Vec<[f64; 2]>) {
        let mut merged = vec![WindowStats::EMPTY; self.count];
        for (&w, x) in &s.windows {
            merged[w.clamp(0, self.count as i64 - 1) as usize].merge(x);
        }
        let counts = merged.iter().map(|x| x.count).collect();
        let reads = merged.iter().map(|x| x.reads).collect();
        let spans = merged
            .iter()
            .enumerate()
            .map(|(i, x)| {
                let start = i as i64 * self.window_ns;
                let len = (self.span_ns - start).clamp(0, self.window_ns);
                if x.count == 0 || len == 0 {
                    return [0.0, 1.0];
                }
                let at = |t: i64| round4(((t - start) as f64 / len as f64).clamp(0.0, 1.0));
                [at(x.first), at(x.last)]
            })
            .collect();
        (counts, reads, spans)
    }
}

/// Rounded to 4 decimals: a window's stretch needs no more (and the model stays readable).
fn round4(x: f64) -> f64 {
    (x * 1e4).round() / 1e4
}

fn stream_json(id: u32, s: &StreamStats, total: u64, w: &Windows, iat_family: &str) -> Value {
    let transitions = transitions_json(s, iat_family);
    let (window_counts, window_reads, window_spans) = w.of(s);
    let mut entries: Vec<_> = s.entries.iter().map(|(&(d, q), &c)| (d, q, c)).collect();
    entries.sort_unstable();
    let mut leaves: Vec<_> = s.leaf_visits.iter().map(|(&l, &c)| (l, c)).collect();
    leaves.sort_unstable();
    let buckets = |h: &Hist| -> Vec<Value> {
        h.sorted()
            .into_iter()
            .map(|(b, c)| {
                let (lo, hi) = bucket_range(b);
                json!([lo, hi, c])
            })
            .collect()
    };
    let first = s.first.map(
        |(leaf, c)| json!({"leaf": leaf, "op": c.op, "size": c.size, "kind": kind_name(c.kind)}),
    );
    let alignment = 1u64 << s.alignment_bits.min(20);
    let mut doc = json!({
        "id": id,
        "requests": s.requests,
        "count": s.members.max(1),
        "weight": s.requests as f64 / total.max(1) as f64,
        "bytes": s.bytes,
        "start_ns": s.first_ts.unwrap_or(0),
        "alignment": alignment,
        "first": first,
        "windows": window_counts,
        "window_reads": window_reads,
        "window_spans": window_spans,
        "leaves": leaves.iter().map(|&(l, c)| json!([l, c])).collect::<Vec<_>>(),
        "entries": entries.iter().map(|&(d, q, c)| json!([d, q, c])).collect::<Vec<_>>(),
        "reuse": buckets(&s.reuse),
    });
    doc["transitions"] = Value::Array(transitions); // moved, not copied (as `streams`)
    if let Some((lo, hi)) = s.extent {
        doc["extent"] = json!([lo, hi]); // absent before stream extents
    }
    if !s.resume.counts.is_empty() {
        doc["resume"] = Value::Array(buckets(&s.resume)); // absent before resumed runs
    }
    if !s.resume_reuse.counts.is_empty() {
        doc["resume_reuse"] = Value::Array(buckets(&s.resume_reuse)); // absent before them
    }
    // the writes' part of each (absent before distances by operation, and with no writes)
    for (key, h) in [
        ("reuse_write", &s.reuse_write),
        ("resume_reuse_write", &s.resume_reuse_write),
    ] {
        if !h.counts.is_empty() {
            doc[key] = Value::Array(buckets(h));
        }
    }
    // where the random requests start inside their 4 KiB block, in 512-byte steps: absent
    // before, and for streams aligned to 4 KiB (always step 0) or to less than 512 bytes
    if (PHASE_BYTES..BLOCK).contains(&alignment) && s.phase.iter().any(|&c| c > 0) {
        doc["phase"] = json!(s.phase);
    }
    // absent before in-leaf jumps (and without the re-reference extension)
    for (key, h) in [
        ("jumps_ahead", &s.jumps_ahead),
        ("jumps_behind", &s.jumps_behind),
    ] {
        if !h.counts.is_empty() {
            doc[key] = Value::Array(buckets(h));
        }
    }
    if !(s.jumps_ahead.counts.is_empty() && s.jumps_behind.counts.is_empty()) {
        doc["near_bytes"] = json!(NEAR_BYTES); // the jumps split into near and random ones
    }
    doc
}

#[cfg(test)]
mod tests {
    use super::super::stats::add_window;
    use super::*;

    #[test]
    fn window_spans_are_fractions_of_each_window() {
        // windows of 100 ns over a 250 ns trace: 0-99, 100-199, 200-250 (50 ns long)
        let w = Windows {
            count: 3,
            window_ns: 100,
            span_ns: 250,
        };
        let mut s = StreamStats::default();
        for (win, first, last, count) in [(0, 20, 80, 3), (2, 210, 240, 2), (2, 205, 220, 1)] {
            let x = WindowStats {
                count,
                reads: count / 2,
                first,
                last,
            };
            add_window(&mut s.windows, win, x);
        }
        let (counts, reads, spans) = w.of(&s);
        assert_eq!(counts, vec![3, 0, 3]);
        assert_eq!(reads, vec![1, 0, 1]);
        assert_eq!(spans, vec![[0.2, 0.8], [0.0, 1.0], [0.1, 0.8]]);
        // requests past the last window count in it
        let late = WindowStats::at(260, true);
        s.windows.insert(5, late);
        let (counts, reads, spans) = w.of(&s);
        assert_eq!((counts[2], reads[2], spans[2]), (4, 2, [0.1, 1.0]));
    }
}
