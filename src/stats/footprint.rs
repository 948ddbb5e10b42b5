//! Block footprints: 512-byte blocks requested, unique 512-byte and 4 KiB blocks touched, for
//! the whole trace and per stream.
//!
//! A request touches every block it overlaps; zero-size requests touch none. Two exact methods
//! give the same counts:
//! - bitmaps, when one bit per 512-byte block of the touched address window, times the streams,
//!   fits a budget: requests are grouped by stream and address region in one pass, then each
//!   region's bits are set (whole words at a time) stream by stream in a small bitmap that
//!   stays in cache, and popcounts count them, the streams' and their union's.
//! - ranges otherwise: requests become ranges of 512-byte blocks (a stream's consecutive
//!   overlapping or touching ranges are merged as they come, so sequential streams stay
//!   small), the ranges are radix-sorted by start, and one scan merges them globally and per
//!   stream.
//!
//! A 4 KiB block is touched exactly when one of its eight 512-byte blocks is: in a bitmap, when
//! its byte is nonzero; in the range scan, the same union with ranges rounded out.

use super::characterize::Slots;
use std::sync::atomic::{AtomicUsize, Ordering};

const SECTOR_SHIFT: u32 = 9;
const SECTORS_PER_PAGE_SHIFT: u32 = 3;
/// Bitmaps of all streams together may span this much. They are no longer held whole (each
/// region is counted in a small bitmap), but every word is still counted: the limits,
/// measured when they were, keep each trace on the way it took.
const BITMAP_BUDGET_BYTES: u64 = 256 << 20;
/// Nor more than this many words per request: bitmaps cost ~28 ns per request and ~4 ns per
/// word (zeroing, counting), ranges ~45 ns per request, so sparse bitmaps lose.
const BITMAP_WORDS_PER_REQUEST: u64 = 4;

/// Block counts of one stream or of the whole trace.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BlockCounts {
    pub requested_512: u64,
    pub unique_512: u64,
    pub unique_4k: u64,
}

/// Whole-trace counts and per-stream counts, streams in order of first appearance.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Footprints {
    pub total: BlockCounts,
    pub streams: Vec<BlockCounts>,
}

/// The footprints of a trace's requests; `max_stream` and `max_end` (the largest stream id and
/// offset + size) size the tables.
pub fn footprints(
    stream: &[u32],
    offset: &[u64],
    size: &[u32],
    max_stream: u32,
    max_end: u64,
) -> Footprints {
    let min_offset = offset.iter().copied().min().unwrap_or(0);
    footprints_of(&[(stream, offset, size)], max_stream, min_offset, max_end)
}

/// One piece of a trace's (stream, offset, size) columns.
pub type Piece<'a> = (&'a [u32], &'a [u64], &'a [u32]);

/// The footprints of a trace given as consecutive pieces, with its smallest offset too.
pub fn footprints_of(
    pieces: &[Piece],
    max_stream: u32,
    min_offset: u64,
    max_end: u64,
) -> Footprints {
    FootprintWork::new(pieces, max_stream, min_offset, max_end).footprints()
}

/// Below this many spans one thread counts all regions.
const PARALLEL_SPANS: usize = 1 << 16;

/// A trace's footprints in two steps, so that threads can share the second: the requests are
/// grouped first (by one thread, or by several, each its own consecutive rows: `parts`),
/// then any number of threads may `count` at once (they take the address regions in turn),
/// and `finish` adds up what they counted.
pub struct FootprintWork {
    parts: Vec<Grouped>,
    /// For each part, each stream's slot in it (streams in the whole trace's order of first
    /// appearance), or `NO_SLOT`.
    slots: Vec<Vec<u32>>,
    next: AtomicUsize,
    /// The footprints, when the bitmaps did not fit and the ranges gave them at once.
    done: Option<Footprints>,
}

/// A stream that has no request in a part.
pub(crate) const NO_SLOT: u32 = u32::MAX;

/// What one thread counted: the union's blocks and each stream's.
pub type Counted = (BlockCounts, Vec<BlockCounts>);

impl FootprintWork {
    pub fn new(pieces: &[Piece], max_stream: u32, min_offset: u64, max_end: u64) -> Self {
        let window = BitmapWindow::new(min_offset, max_end);
        let requests = pieces.iter().map(|p| p.0.len()).sum();
        // The bitmaps give up (None) as soon as the streams seen outgrow them.
        match Grouped::new(pieces, max_stream, window, window.max_streams(requests)) {
            Some(g) => {
                let identity = (0..g.requested.len() as u32).collect();
                FootprintWork::of_parts(vec![g], vec![identity])
            }
            None => FootprintWork::by_ranges(pieces, max_stream, max_end),
        }
    }

    /// Parts grouped by several threads (`Grouped::with_room`, `add_stream`, `add`), with
    /// each part's slot of every stream of the whole trace (`NO_SLOT` where it has none).
    pub(crate) fn of_parts(parts: Vec<Grouped>, slots: Vec<Vec<u32>>) -> Self {
        FootprintWork {
            parts,
            slots,
            next: AtomicUsize::new(0),
            done: None,
        }
    }

    /// The footprints by sorting ranges, when the bitmaps do not fit.
    pub(crate) fn by_ranges(pieces: &[Piece], max_stream: u32, max_end: u64) -> Self {
        FootprintWork {
            parts: Vec::new(),
            slots: Vec::new(),
            next: AtomicUsize::new(0),
            done: Some(by_ranges(pieces, max_stream, max_end)),
        }
    }

    fn spans(&self) -> usize {
        self.parts.iter().map(|g| g.spans).sum()
    }

    /// Counts the regions, with two threads taking them in turn when there are many spans,
    /// and finishes.
    pub fn footprints(self) -> Footprints {
        let parts = if self.spans() < PARALLEL_SPANS {
            vec![self.count()]
        } else {
            std::thread::scope(|scope| {
                let other = scope.spawn(|| self.count());
                vec![self.count(), other.join().expect("bitmap thread panicked")]
            })
        };
        self.finish(parts)
    }

    fn streams(&self) -> usize {
        self.slots.first().map_or(0, Vec::len)
    }

    /// Counts regions until none is left (nothing when the ranges gave the footprints).
    /// With AVX2 where the CPU has it (the words' bits are counted four at a time), else
    /// popcnt (the baseline x86-64 target has neither, and counting bits without them took
    /// most of the time).
    pub fn count(&self) -> Counted {
        #[cfg(target_arch = "x86_64")]
        {
            if std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("popcnt") {
                // SAFETY: the CPU has both features (checked just above), the only ones the
                // function enables.
                return unsafe { self.count_avx2() };
            }
            if std::is_x86_feature_detected!("popcnt") {
                // SAFETY: as above, for popcnt.
                return unsafe { self.count_popcnt() };
            }
        }
        self.count_portable()
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,popcnt")]
    fn count_avx2(&self) -> Counted {
        self.count_portable()
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "popcnt")]
    fn count_popcnt(&self) -> Counted {
        self.count_portable()
    }

    /// Each region this thread takes: every stream's pieces there, from every part, set in
    /// one small bitmap, counted, OR-ed into the region's union and cleared.
    #[inline(always)]
    fn count_portable(&self) -> Counted {
        let Some(regions) = self.parts.first().map(|g| g.regions) else {
            return (BlockCounts::default(), Vec::new());
        };
        let (mut total, mut per_stream) = (
            BlockCounts::default(),
            vec![BlockCounts::default(); self.streams()],
        );
        let (mut bits, mut union) = (vec![0u64; REGION_WORDS], vec![0u64; REGION_WORDS]);
        loop {
            let region = self.next.fetch_add(1, Ordering::Relaxed);
            if region >= regions {
                return (total, per_stream);
            }
            let mut touched = false;
            for (stream, counts) in per_stream.iter_mut().enumerate() {
                let mut set = false;
                for (part, slots) in self.parts.iter().zip(&self.slots) {
                    let slot = slots[stream];
                    if slot == NO_SLOT {
                        continue;
                    }
                    set |= part.set_bucket(slot as usize * regions + region, &mut bits);
                }
                if set {
                    drain_words(counts, &mut bits, &mut union);
                    touched = true;
                }
            }
            if touched {
                add_words(&mut total, &union);
                union.fill(0);
            }
        }
    }

    /// The footprints from what the threads counted (each thread's `count`).
    pub fn finish(self, parts: Vec<Counted>) -> Footprints {
        if let Some(done) = self.done {
            return done;
        }
        let mut f = Footprints {
            total: BlockCounts::default(),
            streams: vec![BlockCounts::default(); self.streams()],
        };
        for (part, slots) in self.parts.iter().zip(&self.slots) {
            for (counts, &slot) in f.streams.iter_mut().zip(slots) {
                if slot != NO_SLOT {
                    counts.requested_512 += part.requested[slot as usize];
                }
            }
        }
        for (total, streams) in parts {
            f.total.unique_512 += total.unique_512;
            f.total.unique_4k += total.unique_4k;
            for (counts, part) in f.streams.iter_mut().zip(streams) {
                counts.unique_512 += part.unique_512;
                counts.unique_4k += part.unique_4k;
            }
        }
        f.total.requested_512 = f.streams.iter().map(|s| s.requested_512).sum();
        f
    }
}

/// The 512-byte blocks `[first, end)` a request of `size` > 0 bytes at `offset` touches.
pub(crate) fn blocks(offset: u64, size: u32) -> (u64, u64) {
    let end = offset.saturating_add(size as u64) - 1;
    (offset >> SECTOR_SHIFT, (end >> SECTOR_SHIFT) + 1)
}

/// Stream slots in order of first appearance, with each stream's counts.
struct Streams {
    slots: Slots,
    counts: Vec<BlockCounts>,
}

impl Streams {
    fn new(max_stream: u32) -> Streams {
        Streams {
            slots: Slots::new(max_stream),
            counts: Vec::new(),
        }
    }

    /// The slot of stream `id`, added when new.
    #[inline(always)]
    fn slot(&mut self, id: u32) -> usize {
        let slot = self.slots.get_or_insert(id, self.counts.len());
        if slot == self.counts.len() {
            self.counts.push(BlockCounts::default());
        }
        slot
    }
}

/// The 512-byte blocks a bitmap covers: `words` 64-bit words from block `base`, a multiple of
/// 64 so that every 4 KiB block is one byte of a word.
#[derive(Debug, Clone, Copy)]
pub(crate) struct BitmapWindow {
    base: u64,
    words: u64,
}

impl BitmapWindow {
    pub(crate) fn new(min_offset: u64, max_end: u64) -> BitmapWindow {
        let base = (min_offset >> SECTOR_SHIFT) & !63;
        let end = max_end.div_ceil(1 << SECTOR_SHIFT);
        BitmapWindow {
            base,
            words: end.saturating_sub(base).div_ceil(64),
        }
    }

    #[cfg(test)]
    fn fits(&self, streams: usize, requests: usize) -> bool {
        let words = self.words.saturating_mul(streams as u64);
        words <= BITMAP_BUDGET_BYTES / 8
            && words <= BITMAP_WORDS_PER_REQUEST.saturating_mul(requests as u64)
    }

    /// The most streams whose bitmaps fit (`fits`).
    pub(crate) fn max_streams(&self, requests: usize) -> usize {
        let limit =
            (BITMAP_BUDGET_BYTES / 8).min(BITMAP_WORDS_PER_REQUEST.saturating_mul(requests as u64));
        match limit.checked_div(self.words) {
            Some(n) => n.try_into().unwrap_or(usize::MAX),
            None => usize::MAX, // an empty window
        }
    }
}

/// Address regions of 2^REGION_SHIFT blocks: one stream's bits of a region (128 KiB) and
/// the region's union fit a core's L2 cache together.
const REGION_SHIFT: u32 = 20;
const REGION_WORDS: usize = 1 << (REGION_SHIFT - 6);
/// A piece of a span (within one region) packs its first block there and its length.
const PIECE_LEN_BITS: u32 = 32 - REGION_SHIFT;
const PIECE_MAX: u64 = (1 << PIECE_LEN_BITS) - 1;
/// Pieces are kept in blocks of this many, handed out from one buffer as buckets fill.
const BLOCK: usize = 1024;

/// The requests' spans as pieces in buckets, grouped in one pass, so that each address
/// region can be counted on its own: its streams' bits are set in a small bitmap that stays
/// in cache, counted, OR-ed into the region's union and cleared. The whole bitmaps never
/// exist: setting them in request order cost a cache and TLB miss per request, and region
/// by region it still cost the kernel's zeroing and reading every word back to count it.
///
/// Bucket `slot * regions + region` holds the pieces of a stream slot in an address region:
/// those of its blocks (`pieces[k * BLOCK..]` for each block k in `blocks`, the last one up
/// to `cursor`). Slots are given by the caller, in order (`add_stream`), so that a pass that
/// already numbers its streams groups in the same loop.
///
/// Each bucket stages its pieces a cache line at a time and writes full lines out with
/// streaming stores: a piece stored straight into its bucket's line in memory waited for
/// that line to be read first, and those waits filled the store buffer and stalled the pass.
pub(crate) struct Grouped {
    base: u64,
    regions: usize,
    pieces: Lines,
    /// Each bucket's line being filled.
    staged: Vec<Line>,
    blocks: Vec<Vec<u32>>,
    /// Where each bucket's next piece goes (0: it has no block yet or its block is full).
    cursor: Vec<usize>,
    next_block: usize,
    spans: usize,
    /// 512-byte blocks requested, per slot.
    requested: Vec<u64>,
    max_streams: usize,
}

impl Grouped {
    /// Empty buckets with room for `rows` requests' pieces in `window`; None when not even
    /// one stream's bitmap fits (`max_streams` is 0).
    pub(crate) fn with_room(
        window: BitmapWindow,
        rows: usize,
        max_streams: usize,
    ) -> Option<Grouped> {
        if max_streams == 0 {
            return None;
        }
        let g = Grouped {
            base: window.base,
            regions: (window.words as usize).div_ceil(REGION_WORDS),
            // room for every request's piece and the partly filled blocks
            pieces: Lines::zeroed(rows + rows / 4 + 64 * BLOCK),
            staged: Vec::new(),
            blocks: Vec::new(),
            cursor: Vec::new(),
            next_block: 0,
            spans: 0,
            requested: Vec::new(),
            max_streams,
        };
        Some(g)
    }

    /// Groups a trace's requests in one pass; None past `max_streams` streams.
    fn new(
        pieces: &[Piece],
        max_stream: u32,
        window: BitmapWindow,
        max_streams: usize,
    ) -> Option<Grouped> {
        let rows = pieces.iter().map(|p| p.0.len()).sum();
        let mut g = Grouped::with_room(window, rows, max_streams)?;
        let mut slots = Slots::new(max_stream);
        for &(stream, offset, size) in pieces {
            for i in 0..stream.len() {
                let known = g.requested.len();
                let slot = slots.get_or_insert(stream[i], known);
                if slot == known && !g.add_stream() {
                    return None;
                }
                if size[i] != 0 {
                    g.add(slot, offset[i], size[i]);
                }
            }
        }
        g.flush();
        Some(g)
    }

    /// Buckets for the next slot; false when its bitmap would no longer fit.
    #[inline(never)]
    pub(crate) fn add_stream(&mut self) -> bool {
        let known = self.requested.len();
        if known == self.max_streams {
            return false;
        }
        self.blocks
            .resize_with((known + 1) * self.regions, Vec::new);
        self.cursor.resize((known + 1) * self.regions, 0);
        self.staged
            .resize((known + 1) * self.regions, Line([0; LINE]));
        self.requested.push(0);
        true
    }

    /// Adds the span of a request of `size` > 0 bytes: one piece, unless it crosses a region
    /// or is very long.
    #[inline(always)]
    pub(crate) fn add(&mut self, slot: usize, offset: u64, size: u32) {
        let (first, end) = blocks(offset, size);
        self.requested[slot] += end - first;
        self.spans += 1;
        let (start, len) = (first - self.base, end - first);
        let at = start & ((1 << REGION_SHIFT) - 1);
        if at + len <= 1 << REGION_SHIFT && len <= PIECE_MAX {
            let bucket = slot * self.regions + (start >> REGION_SHIFT) as usize;
            self.push(bucket, (at << PIECE_LEN_BITS | len) as u32);
        } else {
            self.add_cut(slot, start, start + len);
        }
    }

    /// Adds the span `[start, end)` (blocks from `base`) cut at regions and `PIECE_MAX`.
    #[inline(never)]
    fn add_cut(&mut self, slot: usize, mut start: u64, end: u64) {
        while start < end {
            let region = start >> REGION_SHIFT;
            let stop = end.min((region + 1) << REGION_SHIFT).min(start + PIECE_MAX);
            let at = start & ((1 << REGION_SHIFT) - 1);
            let bucket = slot * self.regions + region as usize;
            self.push(bucket, (at << PIECE_LEN_BITS | (stop - start)) as u32);
            start = stop;
        }
    }

    #[inline(always)]
    fn push(&mut self, bucket: usize, piece: u32) {
        let mut at = self.cursor[bucket];
        if at.is_multiple_of(BLOCK) {
            at = self.new_block(bucket);
        }
        self.staged[bucket].0[at % LINE] = piece;
        self.cursor[bucket] = at + 1;
        if (at + 1).is_multiple_of(LINE) {
            stream_line(self.pieces.line(at / LINE), &self.staged[bucket]);
        }
    }

    /// A fresh block for a bucket; returns where its first piece goes.
    #[inline(never)]
    fn new_block(&mut self, bucket: usize) -> usize {
        let start = self.next_block * BLOCK;
        if start + BLOCK > self.pieces.len() {
            let grown = (start + BLOCK).max(self.pieces.len() * 3 / 2);
            self.pieces.grow(grown, start);
        }
        self.blocks[bucket].push(self.next_block as u32);
        self.next_block += 1;
        start
    }

    /// Writes out the lines still being filled; the pieces are complete after this.
    pub(crate) fn flush(&mut self) {
        for (bucket, &at) in self.cursor.iter().enumerate() {
            let pending = at % LINE;
            if pending > 0 {
                self.pieces.line(at / LINE).0[..pending]
                    .copy_from_slice(&self.staged[bucket].0[..pending]);
            }
        }
        fence_streams(); // the threads that count read them once this one is joined
    }

    /// Sets the bits of a bucket's pieces in a region's bitmap; false when it has none.
    #[inline(always)]
    fn set_bucket(&self, bucket: usize, bits: &mut [u64]) -> bool {
        let blocks = &self.blocks[bucket];
        let pieces = self.pieces.as_slice();
        let last = blocks.len().wrapping_sub(1);
        for (i, &k) in blocks.iter().enumerate() {
            let start = k as usize * BLOCK;
            let end = if i == last {
                self.cursor[bucket]
            } else {
                start + BLOCK
            };
            for &piece in &pieces[start..end] {
                let start = (piece >> PIECE_LEN_BITS) as u64;
                set_short(bits, start, start + (piece as u64 & PIECE_MAX));
            }
        }
        !blocks.is_empty()
    }
}

/// Pieces per cache line.
const LINE: usize = 16;

/// A cache line of pieces.
#[derive(Debug, Clone, Copy)]
#[repr(C, align(64))]
struct Line([u32; LINE]);

const _: () = assert!(std::mem::size_of::<Line>() == 4 * LINE && BLOCK.is_multiple_of(LINE));

/// Zeroed u32 whose pages only become memory when written (`vec![0u32; _]`, which asks the
/// allocator for zeroed memory: an aligned allocation would be zeroed by hand, every page at
/// once), seen from the first one on a cache line's start, so that whole lines can be
/// streamed to them.
struct Lines {
    words: Vec<u32>,
    /// Words before the first line start.
    pad: usize,
}

impl Lines {
    fn zeroed(n: usize) -> Lines {
        let words = vec![0u32; n + LINE];
        crate::hugepages::advise(&words);
        let pad = Lines::pad_of(&words);
        Lines { words, pad }
    }

    fn pad_of(words: &[u32]) -> usize {
        (words.as_ptr() as usize).wrapping_neg() % 64 / 4
    }

    fn len(&self) -> usize {
        self.words.len() - LINE
    }

    /// Room for `n` words, of which the first `used` are kept.
    fn grow(&mut self, n: usize, used: usize) {
        fence_streams();
        self.words.resize(n + LINE, 0);
        let pad = Lines::pad_of(&self.words);
        if pad != self.pad {
            self.words.copy_within(self.pad..self.pad + used, pad);
            self.pad = pad;
        }
    }

    /// Line `k` (words `k * LINE..`).
    #[inline(always)]
    fn line(&mut self, k: usize) -> &mut Line {
        let words = &mut self.words[self.pad + k * LINE..self.pad + (k + 1) * LINE];
        debug_assert!((words.as_ptr() as usize).is_multiple_of(64));
        // SAFETY: the words are LINE u32 in a row, starting on a 64-byte boundary (`pad`),
        // which is a Line's layout; the borrow of `self` covers the reference's life.
        unsafe { &mut *words.as_mut_ptr().cast::<Line>() }
    }

    fn as_slice(&self) -> &[u32] {
        &self.words[self.pad..]
    }
}

/// Copies a full line to memory without reading the line there first (streaming stores,
/// which SSE2, part of every x86-64, has).
#[inline(always)]
fn stream_line(to: &mut Line, from: &Line) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{__m128i, _mm_load_si128, _mm_stream_si128};
        let (to, from) = (
            (to as *mut Line).cast::<__m128i>(),
            (from as *const Line).cast::<__m128i>(),
        );
        // SAFETY: both lines are 64-byte aligned and 64 bytes long: four aligned 16-byte
        // loads and stores stay within them.
        unsafe {
            for k in 0..4 {
                _mm_stream_si128(to.add(k), _mm_load_si128(from.add(k)));
            }
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        *to = *from;
    }
}

/// Orders the streaming stores made so far before the stores that follow.
fn fence_streams() {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: sfence has no operands and only orders stores.
    unsafe {
        std::arch::x86_64::_mm_sfence()
    };
}

/// Sets bits `[start, end)` (start < end) of a bitmap without branching on the span's
/// words, when it covers at most five and the bitmap has five from its first: whether a
/// short span crosses a word boundary is random, and branches on it mispredicted often.
#[inline(always)]
fn set_short(map: &mut [u64], start: u64, end: u64) {
    let first = (start / 64) as usize;
    let words = ((end - 1) / 64) as usize - first; // beyond the first
    if words > 4 || first + 4 >= map.len() {
        set_bits(map, start, end);
        return;
    }
    let head = u64::MAX << (start % 64);
    let tail = u64::MAX >> (63 - (end - 1) % 64);
    let span = &mut map[first..first + 5];
    span[0] |= head & if words == 0 { tail } else { u64::MAX };
    for (j, word) in span.iter_mut().enumerate().skip(1) {
        let full = ((j < words) as u64).wrapping_neg();
        let last = ((j == words) as u64).wrapping_neg() & tail;
        *word |= full | last;
    }
}

/// Sets bits `[start, end)` (start < end) of a bitmap, whole words at a time.
#[inline]
fn set_bits(map: &mut [u64], start: u64, end: u64) {
    let (first, last) = ((start / 64) as usize, ((end - 1) / 64) as usize);
    let head = u64::MAX << (start % 64);
    let tail = u64::MAX >> (63 - (end - 1) % 64);
    if first == last {
        map[first] |= head & tail;
        return;
    }
    map[first] |= head;
    map[last] |= tail;
    let middle = &mut map[first + 1..last];
    let n = middle.len();
    if n > 4 {
        middle.fill(u64::MAX);
    } else if n > 0 {
        // most requests span a few words: stores that may overlap beat a call to memset
        middle[0] = u64::MAX;
        middle[n - 1] = u64::MAX;
        middle[1.min(n - 1)] = u64::MAX;
        middle[n.saturating_sub(2)] = u64::MAX;
    }
}

/// Adds the blocks of a stream's words (as `add_words`), ORs them into the union and clears
/// them, in one loop.
#[inline(always)]
fn drain_words(counts: &mut BlockCounts, words: &mut [u64], union: &mut [u64]) {
    const LOW7: u64 = 0x7F7F_7F7F_7F7F_7F7F;
    let (mut ones, mut zero_bytes) = (0u64, 0u64);
    for (word, u) in words.iter_mut().zip(union.iter_mut()) {
        let w = *word;
        ones += w.count_ones() as u64;
        zero_bytes += (!(((w & LOW7) + LOW7) | w | LOW7)).count_ones() as u64;
        *u |= w;
        *word = 0;
    }
    counts.unique_512 += ones;
    counts.unique_4k += 8 * words.len() as u64 - zero_bytes;
}

/// Adds the blocks of bitmap words: their set bits, and their nonzero bytes (4 KiB blocks),
/// both as sums of popcounts, which the compiler counts several words at a time.
#[inline(always)]
fn add_words(counts: &mut BlockCounts, words: &[u64]) {
    const LOW7: u64 = 0x7F7F_7F7F_7F7F_7F7F;
    let (mut ones, mut zero_bytes) = (0u64, 0u64);
    for &word in words {
        ones += word.count_ones() as u64;
        // a byte's high bit is set when the byte is zero
        zero_bytes += (!(((word & LOW7) + LOW7) | word | LOW7)).count_ones() as u64;
    }
    counts.unique_512 += ones;
    counts.unique_4k += 8 * words.len() as u64 - zero_bytes;
}

/// Block ranges in 512-byte blocks packed as `start << len_bits | length` (so sorting the keys
/// sorts by start), and the stream slot that touched each (only kept with several streams).
struct Ranges {
    keys: Vec<u64>,
    owners: Vec<u32>,
    len_bits: u32,
}

impl Ranges {
    /// Lengths get 24 bits (8 GiB) unless the largest block number needs more than 40 bits;
    /// longer ranges are split, which changes no union.
    fn new(max_end_bytes: u64, capacity: usize) -> Ranges {
        let start_bits = 64 - (max_end_bytes >> SECTOR_SHIFT).leading_zeros();
        Ranges {
            keys: Vec::with_capacity(capacity),
            owners: Vec::new(),
            len_bits: 24.min(64 - start_bits).max(1),
        }
    }

    fn max_len(&self) -> u64 {
        (1 << self.len_bits) - 1
    }

    fn start(&self, key: u64) -> u64 {
        key >> self.len_bits
    }

    fn end(&self, key: u64) -> u64 {
        self.start(key) + (key & self.max_len())
    }

    fn key(&self, start: u64, end: u64) -> u64 {
        start << self.len_bits | (end - start)
    }
}

/// Footprints by sorting ranges; `max_end` sizes the packed keys.
fn by_ranges(pieces: &[Piece], max_stream: u32, max_end: u64) -> Footprints {
    let n = pieces.iter().map(|p| p.0.len()).sum();
    let first_stream = pieces.iter().find_map(|p| p.0.first().copied());
    let several = pieces
        .iter()
        .any(|p| p.0.iter().any(|&s| Some(s) != first_stream));
    let mut r = Ranges::new(max_end, n);
    if several {
        r.owners.reserve(n);
    }
    let mut streams = Streams::new(max_stream);
    let mut last: Vec<usize> = Vec::new(); // each slot's latest range
    for (stream, offset, size) in pieces.iter().flat_map(|&(st, off, sz)| {
        st.iter()
            .zip(off)
            .zip(sz)
            .map(|((&st, &off), &sz)| (st, off, sz))
    }) {
        let slot = streams.slot(stream);
        if slot == last.len() {
            last.push(usize::MAX);
        }
        if size == 0 {
            continue;
        }
        let (mut first, end) = blocks(offset, size);
        streams.counts[slot].requested_512 += end - first;
        let k = last[slot];
        if k != usize::MAX {
            let (s, e) = (r.start(r.keys[k]), r.end(r.keys[k]));
            if first >= s && first <= e && end.max(e) - s <= r.max_len() {
                r.keys[k] = r.key(s, end.max(e));
                continue;
            }
        }
        while first < end {
            let piece_end = end.min(first + r.max_len());
            last[slot] = r.keys.len();
            r.keys.push(r.key(first, piece_end));
            if several {
                r.owners.push(slot as u32);
            }
            first = piece_end;
        }
    }
    radix_sort(&mut r);
    let total = count_unions(&r, &mut streams.counts);
    Footprints {
        total,
        streams: streams.counts,
    }
}

/// Stable LSD radix sort of the keys by their start bits (owners move along), one pass per
/// byte that varies; the histograms of all bytes come from one read.
fn radix_sort(r: &mut Ranges) {
    let n = r.keys.len();
    let (all, any) = r
        .keys
        .iter()
        .fold((u64::MAX, 0u64), |(a, o), &k| (a & k, o | k));
    let varying = (all ^ any) >> r.len_bits << r.len_bits; // lengths need no order
    let shifts: Vec<u32> = (0..64)
        .step_by(8)
        .filter(|&s| (varying >> s) & 0xFF != 0)
        .collect();
    let mut counts = vec![[0usize; 256]; shifts.len()];
    for &k in &r.keys {
        for (c, &s) in counts.iter_mut().zip(&shifts) {
            c[((k >> s) & 0xFF) as usize] += 1;
        }
    }
    let several = !r.owners.is_empty();
    let mut keys = vec![0u64; n];
    let mut owners = vec![0u32; if several { n } else { 0 }];
    for (pos, &shift) in counts.iter_mut().zip(&shifts) {
        let mut sum = 0;
        for p in pos.iter_mut() {
            (*p, sum) = (sum, sum + *p);
        }
        for i in 0..n {
            let k = r.keys[i];
            let d = &mut pos[((k >> shift) & 0xFF) as usize];
            keys[*d] = k;
            if several {
                owners[*d] = r.owners[i];
            }
            *d += 1;
        }
        std::mem::swap(&mut r.keys, &mut keys);
        std::mem::swap(&mut r.owners, &mut owners);
    }
}

/// A union of ranges fed in order of start: the current merged range and the blocks before it.
#[derive(Clone, Copy, Default)]
pub(crate) struct Union {
    start: u64,
    end: u64,
    done: u64,
}

impl Union {
    pub(crate) fn add(&mut self, start: u64, end: u64) {
        if start > self.end {
            self.done += self.end - self.start;
            (self.start, self.end) = (start, end);
        } else {
            self.end = self.end.max(end);
        }
    }

    pub(crate) fn total(&self) -> u64 {
        self.done + self.end - self.start
    }
}

/// Merges the sorted ranges, globally and per stream, at 512-byte and 4 KiB granularity.
fn count_unions(r: &Ranges, streams: &mut [BlockCounts]) -> BlockCounts {
    let (mut all_512, mut all_4k) = (Union::default(), Union::default());
    let mut per_stream = vec![(Union::default(), Union::default()); streams.len()];
    for (i, &key) in r.keys.iter().enumerate() {
        let (s, e) = (r.start(key), r.end(key));
        let (s4, e4) = (
            s >> SECTORS_PER_PAGE_SHIFT,
            e.div_ceil(1 << SECTORS_PER_PAGE_SHIFT),
        );
        all_512.add(s, e);
        all_4k.add(s4, e4);
        let owner = r.owners.get(i).copied().unwrap_or(0) as usize;
        let (u512, u4k) = &mut per_stream[owner];
        u512.add(s, e);
        u4k.add(s4, e4);
    }
    for (counts, (u512, u4k)) in streams.iter_mut().zip(&per_stream) {
        counts.unique_512 = u512.total();
        counts.unique_4k = u4k.total();
    }
    BlockCounts {
        requested_512: streams.iter().map(|s| s.requested_512).sum(),
        unique_512: all_512.total(),
        unique_4k: all_4k.total(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rounds_sectors_to_pages() {
        // stream 0: bytes [3584, 4608) = sectors 7..8 (pages 0 and 1), [8192, 8704) = sector 16
        // (page 2); stream 1: [1536, 2560) = sectors 3..4 (page 0), and a zero-size request.
        let f = footprints(
            &[0, 0, 1, 1],
            &[3584, 8192, 1536, 0],
            &[1024, 512, 1024, 0],
            1,
            9216,
        );
        assert_eq!(
            f.total,
            BlockCounts {
                requested_512: 5,
                unique_512: 5,
                unique_4k: 3
            }
        );
        assert_eq!((f.streams[0].unique_512, f.streams[0].unique_4k), (3, 3));
        assert_eq!((f.streams[1].unique_512, f.streams[1].unique_4k), (2, 1));
    }

    #[test]
    fn overlaps_count_once_and_unaligned_ends_round_up() {
        // [0, 4096) twice, then [4000, 4200) touching sectors 7..8 and pages 0..1.
        let f = footprints(&[5, 5, 5], &[0, 0, 4000], &[4096, 4096, 200], 5, 4200);
        assert_eq!(f.total.requested_512, 8 + 8 + 2);
        assert_eq!((f.total.unique_512, f.total.unique_4k), (9, 2));
        assert_eq!(f.streams.len(), 1);
    }

    #[test]
    fn radix_sort_agrees_with_sort() {
        let mut x: u64 = 12345;
        let mut r = Ranges::new(1 << 53, 5000);
        for i in 0..5000u32 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let s = (x >> 20) % (1 << 44);
            r.keys.push(r.key(s, s + 1 + (x % 7)));
            r.owners.push(i);
        }
        let mut want: Vec<(u64, u32)> = r
            .keys
            .iter()
            .map(|&k| r.start(k))
            .zip(r.owners.clone())
            .collect();
        want.sort(); // owners ascend in input order, so this is the stable order by start
        radix_sort(&mut r);
        let got: Vec<(u64, u32)> = r
            .keys
            .iter()
            .map(|&k| r.start(k))
            .zip(r.owners.clone())
            .collect();
        assert_eq!(got, want);
    }

    #[test]
    fn huge_offsets_split_long_ranges() {
        // offsets near 2^63 leave 64 - 54 = 10 bits for lengths: a 1 MiB request (2048
        // sectors) is split into pieces of at most 1023 sectors; the counts do not change.
        let base = 1u64 << 63;
        let f = footprints(
            &[0, 0],
            &[base, base + 4096],
            &[1 << 20, 4096],
            0,
            base + (1 << 20),
        );
        assert_eq!(f.total.requested_512, 2048 + 8);
        assert_eq!((f.total.unique_512, f.total.unique_4k), (2048, 256));
    }

    /// Random requests from `streams` streams with ids `k * spread` (a spread over 2^20 puts
    /// ids past the dense slot table), at byte offsets in `[base, base + span)` (clipped at
    /// the top of the address space); 30% continue their stream, sizes are unaligned, some
    /// zero, some long enough to cover whole words.
    fn random_requests(
        seed: u64,
        n: usize,
        streams: u32,
        spread: u32,
        base: u64,
        span: u64,
    ) -> (Vec<u32>, Vec<u64>, Vec<u32>) {
        let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let mut ends = vec![base; streams as usize];
        let (mut st, mut off, mut sz) = (vec![], vec![], vec![]);
        for _ in 0..n {
            let r = next();
            let k = (r % streams as u64) as usize;
            let size = match (r >> 8) % 20 {
                0 => 0,
                1 => 1 + (r >> 16) as u32 % (1 << 20),
                _ => 1 + (r >> 16) as u32 % 40_000,
            };
            let o = if (r >> 40) % 10 < 3 {
                ends[k]
            } else {
                base.saturating_add(next() % span)
            };
            ends[k] = o.saturating_add(size as u64);
            st.push(k as u32 * spread);
            off.push(o);
            sz.push(size);
        }
        (st, off, sz)
    }

    /// The bitmap way whatever the streams, with two threads counting when there are many
    /// spans.
    fn by_bitmap(
        pieces: &[Piece],
        max_stream: u32,
        window: BitmapWindow,
        max_streams: usize,
    ) -> Option<Footprints> {
        let g = Grouped::new(pieces, max_stream, window, max_streams)?;
        let identity = (0..g.requested.len() as u32).collect();
        let work = FootprintWork::of_parts(vec![g], vec![identity]);
        let parts = std::thread::scope(|scope| {
            let other = scope.spawn(|| work.count());
            vec![work.count(), other.join().unwrap()]
        });
        Some(work.finish(parts))
    }

    fn by_both_methods(stream: &[u32], offset: &[u64], size: &[u32]) -> (Footprints, Footprints) {
        let max_stream = stream.iter().copied().max().unwrap_or(0);
        let min_offset = offset.iter().copied().min().unwrap_or(0);
        let max_end = offset
            .iter()
            .zip(size)
            .map(|(&o, &s)| o.saturating_add(s as u64))
            .max()
            .unwrap_or(0);
        let window = BitmapWindow::new(min_offset, max_end);
        let whole: [Piece; 1] = [(stream, offset, size)];
        let both = (
            by_bitmap(&whole, max_stream, window, usize::MAX).unwrap(),
            by_ranges(&whole, max_stream, max_end),
        );
        // the same requests cut into pieces (Parquet row groups) count the same
        let (a, b) = (stream.len() / 3, stream.len() / 3 * 2);
        let pieces: Vec<Piece> = [(0, a), (a, b), (b, stream.len())]
            .iter()
            .map(|&(i, j)| (&stream[i..j], &offset[i..j], &size[i..j]))
            .collect();
        assert_eq!(
            by_bitmap(&pieces, max_stream, window, usize::MAX),
            Some(both.0.clone())
        );
        assert_eq!(by_ranges(&pieces, max_stream, max_end), both.1);
        both
    }

    #[test]
    fn bitmap_agrees_with_ranges() {
        let cases = [
            // (streams, id spread, base, span): one stream, dense and sparse ids, 4 GiB per
            // stream (several bitmap regions each), offsets near 2^63 (ranges split into 1023-block pieces) and at the top of the address
            // space (ends saturate, ranges split into 511-block pieces).
            (1, 1, 0, 1 << 24),
            (5, 1, 0, 1 << 32),
            (9, 1 << 21, 12_345, 1 << 26),
            (3, 7, 1 << 63, 1 << 23),
            (4, 1, u64::MAX - (1 << 22), 1 << 22),
            // 64 streams over 1 TiB: ~20k buckets of one or two pieces, each taking a
            // block, so the pieces' buffer grows many times over
            (64, 1, 0, 1 << 40),
        ];
        for (seed, &(streams, spread, base, span)) in cases.iter().enumerate() {
            let (st, off, sz) = random_requests(seed as u64, 20_000, streams, spread, base, span);
            let (bitmap, ranges) = by_both_methods(&st, &off, &sz);
            assert_eq!(bitmap, ranges, "case {seed}");
            assert_eq!(bitmap.streams.len(), streams as usize);
            assert!(bitmap.total.unique_4k > 0);
        }
    }

    #[test]
    fn bitmap_threads_agree_with_ranges() {
        // enough spans for two threads to count the regions, over many regions
        let (st, off, sz) = random_requests(11, 600_000, 8, 1, 0, 1 << 33);
        assert!(st.len() >= PARALLEL_SPANS);
        let (bitmap, ranges) = by_both_methods(&st, &off, &sz);
        assert_eq!(bitmap, ranges);
    }

    #[test]
    fn spans_are_cut_at_regions_and_lengths() {
        // one request across three regions (2.5 regions long, from mid-region), one longer
        // than a piece within a region, one ending exactly at a region's end
        let region = 512u64 << REGION_SHIFT; // bytes
        let st = [0, 0, 1];
        let off = [region / 2, 3 * region + 4096, 5 * region - 8192];
        let sz = [(5 * region / 2) as u32, 3 << 20, 8192];
        let (bitmap, ranges) = by_both_methods(&st, &off, &sz);
        assert_eq!(bitmap, ranges);
        assert_eq!(
            bitmap.streams[0].unique_512,
            (5 << REGION_SHIFT) / 2 + (3 << 11)
        );
    }

    #[test]
    fn bitmap_agrees_with_ranges_on_edge_requests() {
        // single blocks and pages at word edges, requests ending exactly on a word, one
        // spanning many words, overlaps across streams, and zero sizes
        let st = [0, 1, 0, 1, 2, 2, 0, 1];
        let off = [32_256, 32_768, 0, 65_536 + 100, 1 << 20, 0, 4_096, 40_000];
        let sz = [512, 512, 32_768, 4_000_000, 0, 1, 28_672, 0];
        let (bitmap, ranges) = by_both_methods(&st, &off, &sz);
        assert_eq!(bitmap, ranges);
    }

    #[test]
    fn set_bits_sets_exactly_the_range() {
        for (start, end) in (0..200u64).flat_map(|s| (s + 1..=320).map(move |e| (s, e))) {
            for short in [false, true] {
                // with room after the span, so set_short takes its branch-free way
                let mut map = [0u64; 10];
                if short {
                    set_short(&mut map, start, end);
                } else {
                    set_bits(&mut map, start, end);
                }
                for bit in 0..640 {
                    let set = map[bit as usize / 64] >> (bit % 64) & 1 == 1;
                    assert_eq!(
                        set,
                        (start..end).contains(&bit),
                        "[{start}, {end}) bit {bit}"
                    );
                }
            }
        }
    }

    #[test]
    fn bitmaps_are_used_within_budget_and_density() {
        // 4 GiB of address space is 2^23 blocks = 1 MiB of bitmap per stream
        let window = BitmapWindow::new(0, 4 << 30);
        assert_eq!(window.words, 1 << 17);
        assert!(window.fits(200, 10_000_000));
        assert!(!window.fits(300, 10_000_000)); // over 256 MiB
        assert!(!window.fits(1, 30_000)); // 4.4 words per request
        for requests in [0, 1, 30_000, 32_768, 10_000_000, 1 << 40] {
            let n = window.max_streams(requests);
            assert!(window.fits(n, requests) && !window.fits(n + 1, requests));
        }
        // offsets near 2^63 only need the window they touch
        let high = BitmapWindow::new((1 << 63) + 4096, (1 << 63) + 8192);
        assert_eq!((high.base, high.words), (1 << 54, 1));
    }
}
