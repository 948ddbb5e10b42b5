//! Fitting with the re-reference pass running ahead of the counting. The stack-distance pass
//! is sequential (each distance depends on every access before it), but counting a stretch of
//! requests only needs that stretch's distances: while one thread measures the distances
//! chunk after chunk, another counts the chunks already measured, and when the pass is done
//! the first thread counts the later half of what is left. The two fitters merge exactly
//! (`Fitter::merge_detached`), so the statistics are one pass's.

use super::stats::{
    blocks_below, sample_threshold, Batch, FitConfig, Fitter, StackTracker, PARALLEL_FIT_MIN,
    PREFETCH_AHEAD,
};
use std::sync::{mpsc, Mutex};

/// How many chunks the distance pass hands to the counting thread: each chunk's counts are
/// flushed into the fitter's maps once (with 2^16 requests a chunk, a 10M-request fit took
/// 4.36 s of CPU, against 3.97 s so: medians of 6 alternated processes), and enough chunks
/// remain for the two threads to share the end.
const CHUNKS: usize = 20;
/// Requests per chunk, at least and at most.
const MIN_CHUNK: usize = 1 << 16;
const MAX_CHUNK: usize = 1 << 20;

/// Requests per chunk for a fit of `n` requests.
fn chunk_for(n: usize) -> usize {
    (n / CHUNKS).clamp(MIN_CHUNK, MAX_CHUNK)
}

/// Whether `requests` are worth two threads (the single-pass fit runs on one below this).
pub fn worth_it(requests: usize) -> bool {
    requests >= PARALLEL_FIT_MIN && std::thread::available_parallelism().is_ok_and(|c| c.get() > 1)
}

/// The tracker of one sequence of accesses (the whole trace: its only stream, or all streams
/// against one history), sampled as `stack_distances` samples a stream of its length.
pub fn trace_tracker(offset: &[u64], size: &[u32], block: u64) -> StackTracker {
    let blocks = blocks_below(offset.iter().copied().zip(size.iter().copied()), block);
    let n = offset.len();
    StackTracker::with_blocks(n, sample_threshold(n as u64), blocks)
}

/// The statistics of `Fitter::update` over all requests of `batch` (whose `reuse` is
/// ignored), with distances from `tracker` fed every request's blocks in order
/// (`trace_tracker`).
pub fn fit_pipelined(config: FitConfig, batch: Batch, tracker: StackTracker, block: u64) -> Fitter {
    let chunk = chunk_for(batch.len());
    fit_in_chunks(config, batch, tracker, block, chunk)
}

fn fit_in_chunks(
    config: FitConfig,
    batch: Batch,
    mut tracker: StackTracker,
    block: u64,
    chunk: usize,
) -> Fitter {
    let (n, offset, size) = (batch.len(), batch.offset, batch.size);
    let mut reuse = vec![0u32; n];
    let parts: Vec<&mut [u32]> = reuse.chunks_mut(chunk.max(1)).collect();
    let chunks = parts.len();
    // (the counting thread's next chunk, the first chunk it may not take)
    let claims = Mutex::new((0usize, chunks));
    let count = |f: &mut Fitter, k: usize, d: &[u32]| {
        let (a, b) = (k * chunk, k * chunk + d.len());
        f.update(batch.range(a, b).with_reuse(Some(d)));
    };
    let (tx, rx) = mpsc::channel::<&[u32]>();
    std::thread::scope(|scope| {
        let (claims_ref, count_ref) = (&claims, &count);
        let counter = scope.spawn(move || {
            let mut f = Fitter::new(config);
            loop {
                let k = {
                    let mut c = claims_ref.lock().expect("claims");
                    if c.0 >= c.1 {
                        break;
                    }
                    c.0 += 1;
                    c.0 - 1
                };
                // chunks arrive in order and this thread takes a prefix of them
                let d = rx.recv().expect("distances of a claimed chunk");
                count_ref(&mut f, k, d);
            }
            f
        });
        let mut measured: Vec<&[u32]> = Vec::with_capacity(chunks);
        for (k, part) in parts.into_iter().enumerate() {
            let a = k * chunk;
            for (j, d) in part.iter_mut().enumerate() {
                let (i, k) = (a + j, a + j + PREFETCH_AHEAD);
                let ahead = offset.get(k).map(|&o| (o, size[k]));
                *d = tracker.next_ahead((offset[i], size[i]), ahead, block);
            }
            let part: &[u32] = part;
            measured.push(part);
            let _ = tx.send(part); // the counter may be done already
        }
        // count the later half of the chunks the counting thread has not taken yet
        let first_mine = {
            let mut c = claims.lock().expect("claims");
            c.1 = c.0 + (c.1 - c.0) / 2;
            c.1
        };
        let mut later = Fitter::new(config);
        for (k, d) in measured.iter().enumerate().skip(first_mine) {
            count(&mut later, k, d);
        }
        let mut whole = counter.join().expect("counting thread panicked");
        if first_mine < chunks {
            whole.merge_detached(&later);
        }
        whole
    })
}

#[cfg(test)]
mod tests {
    use super::super::stats::{global_stack_distances, resume_lags, stack_distances};
    use super::super::tree::Tree;
    use super::*;

    #[test]
    fn pipelined_fit_equals_one_pass() {
        let n = 50_003usize;
        let mut x = 5u64;
        let mut next = || {
            x = x
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            x >> 33
        };
        let ts: Vec<i64> = (0..n as i64).map(|i| i * 1000).collect();
        let op: Vec<u8> = (0..n).map(|_| (next() % 2) as u8).collect();
        let sz: Vec<u32> = (0..n).map(|_| 4096 << (next() % 3)).collect();
        let mut off = vec![0u64; n];
        for i in 1..n {
            off[i] = if next() % 3 == 0 {
                off[i - 1] + sz[i - 1] as u64
            } else {
                (next() % 20_000) * 4096
            };
        }
        let one_stream = vec![7u32; n];
        let streams: Vec<u32> = (0..n).map(|_| (next() % 4) as u32).collect();
        let c = FitConfig {
            tree: Tree::new(3, 4, 20_000 * 4096),
            flat: false,
            window_ns: 1 << 24,
            reref: true,
        };
        // one stream (per-stream distances) and several against one history (global)
        for (st, reuse) in [
            (&one_stream, stack_distances(&one_stream, &off, &sz, 4096)),
            (&streams, global_stack_distances(&off, &sz, 4096)),
        ] {
            let resume = resume_lags(st, &off, &sz);
            let mut one = Fitter::new(c);
            one.update(
                Batch::new(&ts, st, &op, &off, &sz)
                    .with_reuse(Some(&reuse))
                    .with_resume(Some(&resume)),
            );
            for chunk in [1000, 7_777, n, 2 * n] {
                let tracker = trace_tracker(&off, &sz, 4096);
                let r = Some(&resume[..]);
                let f = fit_in_chunks(
                    c,
                    Batch::new(&ts, st, &op, &off, &sz).with_resume(r),
                    tracker,
                    4096,
                    chunk,
                );
                assert_eq!(f.streams, one.streams, "chunk {chunk}");
                assert_eq!(f.lasts, one.lasts);
            }
        }
    }
}
