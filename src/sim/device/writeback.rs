//! The tiered device's write-back queues: dirty blocks the cache evicted, and dirty blocks
//! still cached, kept as bits in address order, chunk by chunk: queueing, taking out and
//! flushing a block are bit operations, and an ordered map is touched only when a chunk of
//! `CHUNK` blocks comes or goes. (Runs of blocks in an ordered map cost a map operation per
//! write and per evicted dirty block: a third of the tiered device's time on a write-heavy
//! trace; a set of single blocks was a fifth on cloudPhysics before that.)

use std::collections::BTreeMap;

/// Blocks per chunk: 64 words of 64 bits.
const CHUNK: u64 = 4096;
const WORDS: usize = (CHUNK / 64) as usize;

#[derive(Debug, Clone, PartialEq, Eq)]
struct Chunk {
    words: [u64; WORDS],
    /// Bits set (a chunk with none leaves the map).
    count: u32,
}

#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Pending {
    /// Chunk number (block / CHUNK) -> its bits; only chunks with a block queued.
    chunks: BTreeMap<u64, Box<Chunk>>,
    blocks: usize,
}

impl Pending {
    /// Blocks waiting.
    pub fn len(&self) -> usize {
        self.blocks
    }

    pub fn is_empty(&self) -> bool {
        self.blocks == 0
    }

    /// Queues the blocks `[start, end)` (those already queued stay queued once).
    pub fn insert(&mut self, start: u64, end: u64) {
        let mut at = start;
        while at < end {
            let stop = end.min((at / CHUNK + 1) * CHUNK);
            let chunk = self.chunks.entry(at / CHUNK).or_insert_with(|| {
                Box::new(Chunk {
                    words: [0; WORDS],
                    count: 0,
                })
            });
            let added = set_bits(chunk, at % CHUNK, stop - at, true);
            self.blocks += added as usize;
            at = stop;
        }
    }

    /// Queues `blocks` (any order, repeats allowed), one range per contiguous stretch.
    pub fn insert_all(&mut self, blocks: &mut [u64]) {
        blocks.sort_unstable();
        let mut i = 0;
        while i < blocks.len() {
            let start = blocks[i];
            let mut end = start + 1;
            i += 1;
            while i < blocks.len() && blocks[i] <= end {
                end = end.max(blocks[i] + 1);
                i += 1;
            }
            self.insert(start, end);
        }
    }

    /// Removes and returns the next write-back from `head` in elevator order: the first
    /// queued block at or after `head` (else the lowest queued block) and the queued blocks
    /// contiguous with it, `max_blocks` at most, as (first block, blocks).
    pub fn pop_next(&mut self, head: u64, max_blocks: u64) -> Option<(u64, u64)> {
        let first = self.first_from(head).or_else(|| self.first_from(0))?;
        let mut blocks = 0;
        while blocks < max_blocks {
            let at = first + blocks;
            let Some(chunk) = self.chunks.get_mut(&(at / CHUNK)) else {
                break;
            };
            let run = run_from(chunk, at % CHUNK).min(max_blocks - blocks);
            if run == 0 {
                break;
            }
            self.take(at, run);
            blocks += run;
        }
        Some((first, blocks))
    }

    /// Takes `block` out of the queue, if it is queued.
    pub fn remove(&mut self, block: u64) -> bool {
        let queued = self
            .chunks
            .get(&(block / CHUNK))
            .is_some_and(|c| c.words[(block % CHUNK / 64) as usize] >> (block % 64) & 1 == 1);
        if queued {
            self.take(block, 1);
        }
        queued
    }

    /// The first queued block at or after `from`.
    fn first_from(&self, from: u64) -> Option<u64> {
        self.chunks.range(from / CHUNK..).find_map(|(&n, c)| {
            let lo = if n == from / CHUNK { from % CHUNK } else { 0 };
            first_set(c, lo).map(|bit| n * CHUNK + bit)
        })
    }

    /// Clears `n` queued blocks from `start`, inside one chunk.
    fn take(&mut self, start: u64, n: u64) {
        let key = start / CHUNK;
        let chunk = self.chunks.get_mut(&key).expect("a queued block's chunk");
        let cleared = set_bits(chunk, start % CHUNK, n, false);
        self.blocks -= cleared as usize;
        if chunk.count == 0 {
            self.chunks.remove(&key);
        }
    }
}

/// Sets (or clears) bits `[lo, lo + n)` of a chunk; returns how many changed.
fn set_bits(c: &mut Chunk, lo: u64, n: u64, set: bool) -> u32 {
    let mut changed = 0;
    let (mut at, end) = (lo, lo + n);
    while at < end {
        let (w, b) = ((at / 64) as usize, at % 64);
        let width = (64 - b).min(end - at);
        let mask = (u64::MAX >> (64 - width)) << b;
        let word = &mut c.words[w];
        let flips = if set { mask & !*word } else { mask & *word };
        *word ^= flips;
        changed += flips.count_ones();
        at += width;
    }
    if set {
        c.count += changed;
    } else {
        c.count -= changed;
    }
    changed
}

/// The first set bit of a chunk at or after `lo`.
fn first_set(c: &Chunk, lo: u64) -> Option<u64> {
    let w = (lo / 64) as usize;
    let masked = c.words[w] & (u64::MAX << (lo % 64));
    if masked != 0 {
        return Some(w as u64 * 64 + masked.trailing_zeros() as u64);
    }
    c.words[w + 1..]
        .iter()
        .position(|&x| x != 0)
        .map(|i| (w + 1 + i) as u64 * 64 + c.words[w + 1 + i].trailing_zeros() as u64)
}

/// How many bits are set in a row from `lo` to the chunk's end at most.
fn run_from(c: &Chunk, lo: u64) -> u64 {
    let mut run = 0;
    let mut at = lo;
    while at < CHUNK {
        let (w, b) = ((at / 64) as usize, at % 64);
        let ones = (c.words[w] >> b).trailing_ones() as u64;
        let ones = ones.min(64 - b);
        run += ones;
        if ones < 64 - b {
            break;
        }
        at += ones;
    }
    run
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    /// The block-set queue this replaces, as the reference.
    fn pop_set(set: &mut BTreeSet<u64>, head: u64, max: u64) -> Option<(u64, u64)> {
        let first = *set.range(head..).next().or(set.first())?;
        let mut last = first;
        while last + 1 - first < max && set.remove(&(last + 1)) {
            last += 1;
        }
        set.remove(&first);
        Some((first, last + 1 - first))
    }

    #[test]
    fn runs_behave_as_the_block_set() {
        // one chunk, short runs
        behaves_as_the_block_set(|r| r % 400, 420);
        // runs across word and chunk boundaries, with chunks emptied and made again
        behaves_as_the_block_set(|r| (r % 5) * CHUNK + CHUNK - 70 + r % 140, 5 * CHUNK + 80);
    }

    fn behaves_as_the_block_set(base_of: impl Fn(u64) -> u64, space: u64) {
        let mut runs = Pending::default();
        let mut set = BTreeSet::new();
        let mut x: u64 = 12345;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for step in 0..20_000 {
            if next() % 3 != 0 {
                let mut batch: Vec<u64> = (0..next() % 12)
                    .map(|_| {
                        let base = base_of(next());
                        base + next() % 3
                    })
                    .collect();
                set.extend(batch.iter().copied());
                runs.insert_all(&mut batch);
            } else if next() % 4 == 0 {
                let block = next() % space;
                assert_eq!(runs.remove(block), set.remove(&block), "step {step}");
            } else {
                let head = next() % space;
                let max = 1 + next() % 200;
                assert_eq!(
                    runs.pop_next(head, max),
                    pop_set(&mut set, head, max),
                    "step {step}"
                );
            }
            assert_eq!(runs.len(), set.len(), "step {step}");
        }
    }

    #[test]
    fn hand_computed() {
        let mut p = Pending::default();
        p.insert_all(&mut [7, 3, 4, 5, 9, 4]);
        assert_eq!(p.len(), 5); // 3 4 5, 7, 9
        assert_eq!(p.pop_next(4, 8), Some((4, 2))); // 4 5 from the head; 3 stays
        assert_eq!(p.pop_next(6, 8), Some((7, 1)));
        assert_eq!(p.pop_next(10, 8), Some((3, 1))); // nothing past the head: the lowest
        assert_eq!(p.pop_next(0, 8), Some((9, 1)));
        assert_eq!(p.pop_next(0, 8), None);
        assert!(p.is_empty());
    }
}
