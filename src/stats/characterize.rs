//! Per-stream characterization of a canonical trace in one pass (seed 000 Tables II-III,
//! seed 003's sequentiality metrics). Definitions: design.md, "Definitions used everywhere".
//!
//! The pass only counts; fractions, classification and rendering are done by the caller
//! (Python). Every per-stream counter is kept once per stream and the whole-trace figures are
//! sums over streams, so each record touches one accumulator.

use super::footprint::{BitmapWindow, FootprintWork, Footprints, Grouped, Piece, NO_SLOT};
use rustc_hash::FxHashMap;

/// Borrowed canonical columns, all of the same length.
#[derive(Debug, Clone, Copy)]
pub struct TraceColumns<'a> {
    pub ts_ns: &'a [i64],
    pub stream: &'a [u32],
    pub op: &'a [u8],
    pub offset: &'a [u64],
    pub size: &'a [u32],
    pub latency_ns: Option<&'a [i64]>,
    /// Each request's row in the whole trace, when these columns are a part of it (one
    /// stream of a partitioned dataset): interference counts the rows in between.
    pub seq: Option<&'a [u64]>,
    /// Whether each request starts a run in the whole trace (1: it does not continue the
    /// request before it), when these columns are a part of it.
    pub run_start: Option<&'a [u8]>,
}

impl<'a> TraceColumns<'a> {
    /// The required columns alone (no latencies, row numbers or run starts).
    pub fn new(
        ts_ns: &'a [i64],
        stream: &'a [u32],
        op: &'a [u8],
        offset: &'a [u64],
        size: &'a [u32],
    ) -> TraceColumns<'a> {
        TraceColumns {
            ts_ns,
            stream,
            op,
            offset,
            size,
            latency_ns: None,
            seq: None,
            run_start: None,
        }
    }

    /// The rows `r` of every column.
    pub fn rows(&self, r: std::ops::Range<usize>) -> TraceColumns<'a> {
        TraceColumns {
            ts_ns: &self.ts_ns[r.clone()],
            stream: &self.stream[r.clone()],
            op: &self.op[r.clone()],
            offset: &self.offset[r.clone()],
            size: &self.size[r.clone()],
            latency_ns: self.latency_ns.map(|l| &l[r.clone()]),
            seq: self.seq.map(|q| &q[r.clone()]),
            run_start: self.run_start.map(|q| &q[r.clone()]),
        }
    }
}

/// Below this many rows one thread scans the extent.
const PARALLEL_ROWS: usize = 1 << 20;

/// What the caller chooses.
#[derive(Debug, Clone, Copy)]
pub struct Params {
    /// Spatial-locality ranges: fanout^levels (at least 1).
    pub leaves: u64,
    /// The address space `[0, capacity)`; 0 means max(offset + size) over the trace.
    pub capacity: u64,
    /// Activity-fluctuation window; traces shorter than `MIN_WINDOWS` windows use span / 10.
    pub window_ns: i64,
    /// Largest forward jump that keeps a relaxed detangled run going.
    pub relaxed_threshold: u64,
}

/// Traces shorter than this many windows are cut into this many equal windows instead.
pub const MIN_WINDOWS: u64 = 10;
/// The largest number of fluctuation windows (guards against a tiny --window).
pub const MAX_WINDOWS: u64 = 10_000_000;
/// Most frequent request sizes reported.
pub const TOP_SIZES: usize = 10;
/// Signed log2 jump buckets: index `JUMP_ZERO + k`, k in -65..=65 (see `jump_bucket`).
pub const JUMP_ZERO: usize = 65;
pub const JUMP_BUCKETS: usize = 2 * JUMP_ZERO + 1;
/// Size buckets: 0 holds size 0, k holds sizes in [2^(k-1), 2^k).
pub const SIZE_BUCKETS: usize = 34;

const SMALL_SIZES: usize = 4096; // sizes up to 2 MiB in 512-byte steps count in a table
const DENSE_STREAM_IDS: u32 = 1 << 22; // stream ids below this index a table directly

/// Counters of one stream (or, summed, of the whole trace).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct StreamStats {
    pub stream: u32,
    pub requests: u64,
    pub reads: u64,
    pub writes: u64,
    pub size_sum: u128,
    pub latency_sum: i128,
    pub first_ts: i64,
    pub last_ts: i64,
    /// Jumps of requests that have a predecessor in their stream, by sign.
    pub backward: u64,
    pub sequential: u64,
    pub forward: u64,
    /// Requests of other streams between successive requests of this stream, summed over
    /// its `pairs` (= requests - 1) pairs.
    pub interference_sum: u64,
    pub pairs: u64,
    /// Requests that do not continue the request just before them in the trace (any stream).
    pub global_runs: u64,
    /// Runs within the stream: strict, and tolerating 0 <= jump <= relaxed threshold.
    pub detangled_runs: u64,
    pub relaxed_runs: u64,
    /// Requests per locality range.
    pub locality: Vec<u64>,
    /// Coefficient of variation of the per-window request rate, when the trace has windows.
    pub fluctuation_cv: Option<f64>,
    pub requested_blocks_512: u64,
    pub footprint_blocks_512: u64,
    pub footprint_blocks_4k: u64,
}

/// Activity over time: request counts per window and the windows' lengths.
#[derive(Debug, Clone, PartialEq)]
pub struct Fluctuation {
    /// The nominal window length (the last window also holds the remainder).
    pub window_ns: f64,
    pub durations_ns: Vec<u64>,
    pub counts: Vec<u64>,
}

/// The result of `characterize`.
#[derive(Debug, Clone, PartialEq)]
pub struct Summary {
    pub capacity: u64,
    pub total: StreamStats,
    /// Sorted by stream id.
    pub streams: Vec<StreamStats>,
    /// Most frequent sizes, most frequent first (ties: smaller size first), and how many
    /// distinct sizes there are.
    pub top_sizes: Vec<(u32, u64)>,
    pub distinct_sizes: u64,
    pub size_log2: Vec<u64>,
    pub jump_log2: Vec<u64>,
    pub fluctuation: Option<Fluctuation>,
}

/// Characterizes a trace; errors on mismatched columns or an unusable window.
pub fn characterize(cols: &TraceColumns, params: &Params) -> Result<Summary, String> {
    characterize_pieces(std::slice::from_ref(cols), params)
}

/// Characterizes a trace given as consecutive pieces (the chunks of its columns, as Parquet
/// row groups arrive): the same counts as for the concatenated columns, without copying
/// them into one.
pub fn characterize_pieces(pieces: &[TraceColumns], params: &Params) -> Result<Summary, String> {
    let rows: usize = pieces.iter().map(|c| c.ts_ns.len()).sum();
    let parts = if rows < PARALLEL_ROWS { 1 } else { parts() };
    characterize_parts(pieces, params, parts)
}

/// How many parts a large trace's rows are cut into: one per core, between 2 and 8.
fn parts() -> usize {
    std::thread::available_parallelism().map_or(2, |n| n.get().clamp(2, 8))
}

/// `characterize_pieces` with the rows cut into `parts` runs of consecutive rows, each
/// counted by its own thread in one pass that also groups its requests for the footprint;
/// the parts' counters then merge, in order, as if one pass had made them.
fn characterize_parts(
    pieces: &[TraceColumns],
    params: &Params,
    parts: usize,
) -> Result<Summary, String> {
    for cols in pieces {
        check_lengths(cols)?;
        if cols.seq.is_some() || cols.run_start.is_some() {
            return Err("a whole trace's pieces have no row numbers or run starts".into());
        }
    }
    let extent = Extent::of_pieces(pieces);
    let rows: usize = pieces.iter().map(|c| c.ts_ns.len()).sum();
    let setup = Setup::new(params, extent, rows)?;
    let mut merged = Merged::default();
    for tally in setup.count(&Rows::split(pieces, parts)) {
        merged.push(tally);
    }
    let (tally, work) = merged.finish(setup.max_streams);
    let work = work.unwrap_or_else(|| {
        let columns: Vec<Piece> = pieces
            .iter()
            .map(|c| (c.stream, c.offset, c.size))
            .collect();
        FootprintWork::by_ranges(&columns, extent.max_stream, extent.max_end)
    });
    Ok(tally
        .into_counts()
        .finish(setup.grid.as_ref(), work.footprints()))
}

/// What counting a trace's parts needs from the whole trace: its extent and what follows
/// from it (capacity, windows, the footprint's bitmap window and how many streams fit it).
struct Setup {
    params: Params,
    extent: Extent,
    capacity: u64,
    grid: Option<WindowGrid>,
    window: BitmapWindow,
    max_streams: usize,
}

impl Setup {
    fn new(params: &Params, extent: Extent, rows: usize) -> Result<Setup, String> {
        if params.leaves == 0 {
            return Err("spatial locality needs at least one range".into());
        }
        let window = BitmapWindow::new(extent.min_offset, extent.max_end);
        Ok(Setup {
            params: *params,
            capacity: if params.capacity > 0 {
                params.capacity
            } else {
                extent.max_end
            },
            grid: WindowGrid::new(extent.span(), params.window_ns)?,
            window,
            max_streams: window.max_streams(rows),
            extent,
        })
    }

    /// Counts each part on its own thread (the first on this one), grouping its requests.
    fn count(&self, parts: &[Rows]) -> Vec<Tally> {
        std::thread::scope(|scope| {
            let others: Vec<_> = parts[1..]
                .iter()
                .map(|part| scope.spawn(|| self.count_part(part)))
                .collect();
            let first = self.count_part(&parts[0]);
            std::iter::once(first)
                .chain(
                    others
                        .into_iter()
                        .map(|h| h.join().expect("counting thread panicked")),
                )
                .collect()
        })
    }

    fn count_part(&self, part: &Rows) -> Tally {
        let groups = Grouped::with_room(self.window, part.rows(), self.max_streams);
        let grid = self.grid.as_ref();
        let mut tally = Tally::new(&self.params, self.capacity, &self.extent, grid);
        tally.groups = groups.map_or(Groups::GaveUp, Groups::On);
        let mut tally = count_rows(part, grid, tally);
        if let Groups::On(g) = &mut tally.groups {
            g.flush(); // by the thread that grouped
        }
        tally
    }
}

/// Consecutive parts' counters merged in order as they come, with their grouped requests.
#[derive(Default)]
struct Merged {
    whole: Option<Tally>,
    groups: Vec<Grouped>,
    /// For each part, its slots' slots in `whole`.
    maps: Vec<Vec<u32>>,
    /// Whether a part's bitmaps did not fit (the footprint then needs the ranges).
    gave_up: bool,
}

impl Merged {
    fn push(&mut self, mut part: Tally) {
        match std::mem::replace(&mut part.groups, Groups::Off) {
            Groups::On(g) => self.groups.push(g),
            Groups::Off | Groups::GaveUp => self.gave_up = true,
        }
        match &mut self.whole {
            None => {
                self.maps.push((0..part.accs.len() as u32).collect());
                self.whole = Some(part);
            }
            Some(whole) => self.maps.push(whole.absorb(part)),
        }
    }

    /// The merged counters, and the grouped requests with each part's slot of every merged
    /// stream (None when a part's bitmaps did not fit, or all the streams' do not).
    fn finish(self, max_streams: usize) -> (Tally, Option<FootprintWork>) {
        let whole = self.whole.expect("at least one part");
        let streams = whole.accs.len();
        if self.gave_up || streams > max_streams {
            return (whole, None);
        }
        let slots = self
            .maps
            .iter()
            .map(|map| {
                let mut slot_of = vec![NO_SLOT; streams];
                for (slot, &merged) in map.iter().enumerate() {
                    slot_of[merged as usize] = slot as u32;
                }
                slot_of
            })
            .collect();
        (whole, Some(FootprintWork::of_parts(self.groups, slots)))
    }
}

/// Characterizes a trace fed a batch of rows at a time (a Parquet file read in batches), in
/// memory that does not hold the trace: its extent must be known beforehand (recorded at
/// ingest) and the bitmaps must fit its streams. The same summary as `characterize_pieces`;
/// an error when the batches do not have the extent declared or the bitmaps do not fit (the
/// caller then counts the trace whole).
pub struct StreamCounter {
    setup: Setup,
    merged: Merged,
    /// What the batches held so far, to check the declared extent against.
    seen: Extent,
    base: u64,
    prev_end: Option<u64>,
    parts: usize,
}

impl StreamCounter {
    pub fn new(
        params: &Params,
        whole: &Whole,
        min_offset: u64,
        rows: usize,
    ) -> Result<StreamCounter, String> {
        let extent = Extent {
            first_ts: whole.first_ts,
            last_ts: whole.last_ts,
            max_stream: whole.max_stream,
            min_offset,
            max_end: whole.max_end,
        };
        Ok(StreamCounter {
            setup: Setup::new(params, extent, rows)?,
            merged: Merged::default(),
            seen: Extent::EMPTY,
            base: 0,
            prev_end: None,
            parts: parts(),
        })
    }

    /// Counts the next rows.
    pub fn update(&mut self, cols: &TraceColumns) -> Result<(), String> {
        check_lengths(cols)?;
        let n = cols.ts_ns.len();
        if n == 0 {
            return Ok(());
        }
        let e = Extent::of_pieces(std::slice::from_ref(cols));
        if e.union(&self.setup.extent) != self.setup.extent {
            return Err(format!(
                "rows {}..{} lie outside the extent declared for the trace",
                self.base,
                self.base + n as u64
            ));
        }
        self.seen = self.seen.union(&e);
        let parts = if n < PARALLEL_ROWS / 4 { 1 } else { self.parts };
        let mut split = Rows::split(std::slice::from_ref(cols), parts);
        for part in &mut split {
            part.base += self.base;
        }
        split[0].prev_end = self.prev_end;
        for tally in self.setup.count(&split) {
            self.merged.push(tally);
        }
        if self.merged.gave_up {
            return Err("the footprint's bitmaps do not fit this trace's streams".into());
        }
        self.base += n as u64;
        self.prev_end = Some(cols.offset[n - 1].saturating_add(cols.size[n - 1] as u64));
        Ok(())
    }

    pub fn finish(self) -> Result<Summary, String> {
        // an empty trace, or one the declared extent does not fit tightly, is counted whole
        if self.base == 0 || self.seen != self.setup.extent {
            return Err("the rows do not have the extent declared for the trace".into());
        }
        let grid = self.setup.grid;
        match self.merged.finish(self.setup.max_streams) {
            (tally, Some(work)) => Ok(tally.into_counts().finish(grid.as_ref(), work.footprints())),
            (_, None) => Err("the footprint's bitmaps do not fit this trace's streams".into()),
        }
    }
}

/// Consecutive rows of a trace, as pieces: where they start in the whole trace, and the end
/// of the request just before them.
struct Rows<'a> {
    pieces: Vec<TraceColumns<'a>>,
    base: u64,
    prev_end: Option<u64>,
}

impl<'a> Rows<'a> {
    /// The trace cut into `parts` runs of (nearly) equal length.
    fn split(pieces: &[TraceColumns<'a>], parts: usize) -> Vec<Rows<'a>> {
        let rows: usize = pieces.iter().map(|c| c.ts_ns.len()).sum();
        let parts = parts.max(1);
        let cuts: Vec<usize> = (0..=parts).map(|j| rows * j / parts).collect();
        let mut out: Vec<Rows> = cuts[..parts]
            .iter()
            .map(|&lo| Rows {
                pieces: Vec::new(),
                base: lo as u64,
                prev_end: None,
            })
            .collect();
        let mut start = 0;
        for cols in pieces {
            let end = start + cols.ts_ns.len();
            for (j, part) in out.iter_mut().enumerate() {
                let (lo, hi) = (cuts[j].max(start), cuts[j + 1].min(end));
                if lo < hi {
                    part.pieces.push(cols.rows(lo - start..hi - start));
                }
                if cuts[j] > start && cuts[j] <= end {
                    let last = cuts[j] - start - 1; // the row just before the part
                    part.prev_end = Some(cols.offset[last].saturating_add(cols.size[last] as u64));
                }
            }
            start = end;
        }
        out
    }

    fn rows(&self) -> usize {
        self.pieces.iter().map(|c| c.ts_ns.len()).sum()
    }
}

/// The main pass over consecutive rows, piece by piece.
fn count_rows(part: &Rows, grid: Option<&WindowGrid>, mut tally: Tally) -> Tally {
    let (mut base, mut prev_end) = (part.base, part.prev_end);
    for cols in &part.pieces {
        let mut pass = Pass {
            cols,
            grid,
            t: tally,
            base,
            prev_end,
        };
        pass.run();
        (tally, prev_end) = (pass.t, pass.prev_end);
        base += cols.ts_ns.len() as u64;
    }
    tally
}

fn check_lengths(cols: &TraceColumns) -> Result<(), String> {
    let n = cols.ts_ns.len();
    let mut lens = vec![
        ("stream", cols.stream.len()),
        ("op", cols.op.len()),
        ("offset", cols.offset.len()),
        ("size", cols.size.len()),
    ];
    if let Some(l) = cols.latency_ns {
        lens.push(("latency_ns", l.len()));
    }
    if let Some(q) = cols.seq {
        lens.push(("seq", q.len()));
    }
    if let Some(r) = cols.run_start {
        lens.push(("run_start", r.len()));
    }
    for (name, len) in lens {
        if len != n {
            return Err(format!("column {name} has {len} values, ts_ns has {n}"));
        }
    }
    Ok(())
}

/// What a cheap first pass learns: time range, largest stream id, smallest offset and
/// largest end offset.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Extent {
    first_ts: i64,
    last_ts: i64,
    max_stream: u32,
    min_offset: u64,
    max_end: u64,
}

impl Extent {
    /// The extent of no rows (the identity of `union`).
    const EMPTY: Extent = Extent {
        first_ts: i64::MAX,
        last_ts: i64::MIN,
        max_stream: 0,
        min_offset: u64::MAX,
        max_end: 0,
    };

    fn union(&self, other: &Extent) -> Extent {
        Extent {
            first_ts: self.first_ts.min(other.first_ts),
            last_ts: self.last_ts.max(other.last_ts),
            max_stream: self.max_stream.max(other.max_stream),
            min_offset: self.min_offset.min(other.min_offset),
            max_end: self.max_end.max(other.max_end),
        }
    }

    #[cfg(test)]
    fn of(cols: &TraceColumns) -> Extent {
        Extent::of_pieces(std::slice::from_ref(cols))
    }

    /// Two threads scan halves of a large trace.
    fn of_pieces(pieces: &[TraceColumns]) -> Extent {
        let rows: usize = pieces.iter().map(|c| c.ts_ns.len()).sum();
        let mut e = if rows < PARALLEL_ROWS {
            Extent::scan(pieces)
        } else {
            Extent::scan_halves(pieces, rows)
        };
        if e.min_offset == u64::MAX {
            e.min_offset = 0; // no requests
        }
        e
    }

    fn scan_halves(pieces: &[TraceColumns], rows: usize) -> Extent {
        let (mut low, mut high) = (Vec::new(), Vec::new());
        let mut seen = 0;
        for cols in pieces {
            let n = cols.ts_ns.len();
            let cut = (rows / 2).saturating_sub(seen).min(n);
            low.push(cols.rows(0..cut));
            high.push(cols.rows(cut..n));
            seen += n;
        }
        let (a, b) = std::thread::scope(|scope| {
            let b = scope.spawn(|| Extent::scan(&high));
            (
                Extent::scan(&low),
                b.join().expect("extent thread panicked"),
            )
        });
        Extent {
            first_ts: a.first_ts.min(b.first_ts),
            last_ts: a.last_ts.max(b.last_ts),
            max_stream: a.max_stream.max(b.max_stream),
            min_offset: a.min_offset.min(b.min_offset),
            max_end: a.max_end.max(b.max_end),
        }
    }

    /// With AVX2 where the CPU has it: the baseline x86-64 target has no 64-bit vector
    /// compare, so the minima and maxima were computed one value at a time.
    fn scan(pieces: &[TraceColumns]) -> Extent {
        #[cfg(target_arch = "x86_64")]
        if std::is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU has AVX2 (checked just above), the only feature the function
            // enables.
            return unsafe { Extent::scan_avx2(pieces) };
        }
        Extent::scan_portable(pieces)
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    fn scan_avx2(pieces: &[TraceColumns]) -> Extent {
        Extent::scan_portable(pieces)
    }

    #[inline(always)]
    fn scan_portable(pieces: &[TraceColumns]) -> Extent {
        let mut e = Extent {
            first_ts: i64::MAX,
            last_ts: i64::MIN,
            max_stream: 0,
            min_offset: u64::MAX,
            max_end: 0,
        };
        for cols in pieces {
            for &t in cols.ts_ns {
                (e.first_ts, e.last_ts) = (e.first_ts.min(t), e.last_ts.max(t));
            }
            e.max_stream = e
                .max_stream
                .max(cols.stream.iter().copied().max().unwrap_or(0));
            for (&o, &s) in cols.offset.iter().zip(cols.size) {
                e.min_offset = e.min_offset.min(o);
                e.max_end = e.max_end.max(o.saturating_add(s as u64));
            }
        }
        e
    }

    fn span(&self) -> u64 {
        if self.last_ts >= self.first_ts {
            (self.last_ts as i128 - self.first_ts as i128) as u64
        } else {
            0
        }
    }
}

/// Fluctuation windows over [0, span] (times relative to the first request): `count`
/// windows of `width` ns, the last one stretched to the end; or, for spans shorter than
/// `MIN_WINDOWS` widths, `MIN_WINDOWS` equal windows (boundaries ceil(i * span / 10)).
#[derive(Debug, Clone, Copy)]
pub struct WindowGrid {
    span: u64,
    count: u64,
    /// Window i starts at ceil(i * den / num).
    num: u128,
    den: u128,
}

impl WindowGrid {
    fn new(span: u64, window_ns: i64) -> Result<Option<WindowGrid>, String> {
        if window_ns <= 0 {
            return Err(format!(
                "the fluctuation window must be positive, got {window_ns} ns"
            ));
        }
        let width = window_ns as u64;
        if span < MIN_WINDOWS {
            return Ok(None); // no time (untimed, one request) or windows under a nanosecond
        }
        let (count, num, den) = if span / width >= MIN_WINDOWS {
            (span / width, 1, width as u128)
        } else {
            (MIN_WINDOWS, MIN_WINDOWS as u128, span as u128)
        };
        if count > MAX_WINDOWS {
            return Err(format!(
                "a {window_ns} ns window cuts this trace into {count} windows (at most {MAX_WINDOWS}); choose a longer window"
            ));
        }
        Ok(Some(WindowGrid {
            span,
            count,
            num,
            den,
        }))
    }

    fn start(&self, i: u64) -> u64 {
        (i as u128 * self.den).div_ceil(self.num) as u64
    }

    fn end(&self, i: u64) -> u64 {
        if i + 1 < self.count {
            self.start(i + 1)
        } else {
            u64::MAX
        }
    }

    fn index(&self, rel: u64) -> u64 {
        ((rel as u128 * self.num / self.den) as u64).min(self.count - 1)
    }

    fn duration(&self, i: u64) -> u64 {
        self.end(i).min(self.span) - self.start(i)
    }

    fn nominal_width(&self) -> f64 {
        self.den as f64 / self.num as f64
    }
}

/// Maps stream ids to accumulator slots: a direct table for small ids, a hash map otherwise.
pub(crate) enum Slots {
    Dense(Vec<u32>),
    Sparse(FxHashMap<u32, u32>),
}

impl Slots {
    const NONE: u32 = u32::MAX;

    pub(crate) fn new(max_stream: u32) -> Slots {
        if max_stream < DENSE_STREAM_IDS {
            Slots::Dense(vec![Self::NONE; max_stream as usize + 1])
        } else {
            Slots::Sparse(FxHashMap::default())
        }
    }

    /// The slot of `id`, or `next` (recorded) when the id is new.
    #[inline(always)]
    pub(crate) fn get_or_insert(&mut self, id: u32, next: usize) -> usize {
        match self {
            Slots::Dense(table) => {
                let slot = &mut table[id as usize];
                if *slot == Self::NONE {
                    *slot = next as u32;
                }
                *slot as usize
            }
            Slots::Sparse(map) => *map.entry(id).or_insert(next as u32) as usize,
        }
    }
}

/// Per-stream state while the pass runs: only what each request must update. Pairs, forward
/// jumps, strict runs and interference follow from these when the pass ends (`stats`).
struct Acc {
    stream: u32,
    requests: u64,
    first_ts: i64,
    last_ts: i64,
    /// Rows (in the whole trace) of the stream's first and latest requests.
    first_index: u64,
    last_index: u64,
    /// Where the stream's first request starts (its jump, when an earlier part of the trace
    /// has the stream too, is counted when the parts merge), and where its latest one ends.
    first_offset: u64,
    last_end: u64,
    sequential: u64,
    backward: u64,
    /// Jumps that break a relaxed run (backward, or forward past the threshold).
    relaxed_breaks: u64,
    global_runs: u64,
    /// Requests by op: read, write, other (one counter to add to, not two to test).
    ops: [u64; 3],
    size_sum: u128,
    latency_sum: i128,
    /// The window of the latest request, and the stream's requests before that window.
    window: u64,
    requests_before_window: u64,
    /// (window, requests) in time order, one entry per window the stream is active in,
    /// but for the latest window.
    windows: Vec<(u64, u64)>,
}

impl Acc {
    fn new(stream: u32) -> Acc {
        Acc {
            stream,
            requests: 0,
            first_ts: 0,
            last_ts: 0,
            first_index: 0,
            last_index: 0,
            first_offset: 0,
            last_end: 0,
            sequential: 0,
            backward: 0,
            relaxed_breaks: 0,
            global_runs: 0,
            ops: [0; 3],
            size_sum: 0,
            latency_sum: 0,
            window: NO_WINDOW,
            requests_before_window: 0,
            windows: Vec::new(),
        }
    }

    /// Counts a request of window `window` (in the trace's time order, windows mostly repeat).
    #[inline]
    fn count_window(&mut self, window: u64) {
        if window != self.window {
            self.close_window();
            (self.window, self.requests_before_window) = (window, self.requests);
        }
    }

    fn close_window(&mut self) {
        if self.window != NO_WINDOW {
            let requests = self.requests - self.requests_before_window;
            self.windows.push((self.window, requests));
        }
    }

    /// Adds the counters of the same stream in the rows that follow (`later`), and the jump
    /// between the two (its bucket is returned).
    fn absorb(&mut self, mut later: Acc, threshold: u64) -> usize {
        let (prev, next) = (self.last_end, later.first_offset);
        self.sequential += (next == prev) as u64 + later.sequential;
        self.backward += (next < prev) as u64 + later.backward;
        let beyond = next.wrapping_sub(prev) > threshold;
        self.relaxed_breaks += ((next < prev) | beyond) as u64 + later.relaxed_breaks;
        // both window lists closed, a window both parts count merged
        self.close_window();
        later.close_window();
        for (window, requests) in later.windows {
            match self.windows.last_mut() {
                Some(last) if last.0 == window => last.1 += requests,
                _ => self.windows.push((window, requests)),
            }
        }
        self.window = NO_WINDOW;
        self.requests += later.requests;
        for (mine, theirs) in self.ops.iter_mut().zip(later.ops) {
            *mine += theirs;
        }
        self.size_sum += later.size_sum;
        self.latency_sum += later.latency_sum;
        self.global_runs += later.global_runs;
        (self.last_ts, self.last_index, self.last_end) =
            (later.last_ts, later.last_index, later.last_end);
        jump_bucket_between(prev, next)
    }

    /// The stream's counters (`locality` aside) and its (window, requests) in time order.
    fn finish(mut self) -> (StreamStats, Vec<(u64, u64)>) {
        self.close_window();
        let n = self.requests;
        let pairs = n.saturating_sub(1);
        let runs = |breaks: u64| if n > 0 { 1 + breaks } else { 0 };
        let stats = StreamStats {
            stream: self.stream,
            requests: n,
            reads: self.ops[crate::columns::OP_READ as usize],
            writes: self.ops[crate::columns::OP_WRITE as usize],
            size_sum: self.size_sum,
            latency_sum: self.latency_sum,
            first_ts: self.first_ts,
            last_ts: self.last_ts,
            backward: self.backward,
            sequential: self.sequential,
            forward: pairs - self.sequential - self.backward,
            // the rows between successive requests, summed, telescope (mod 2^64 as the sum)
            interference_sum: (self.last_index.wrapping_sub(self.first_index)).wrapping_sub(pairs),
            pairs,
            global_runs: self.global_runs,
            detangled_runs: runs(pairs - self.sequential),
            relaxed_runs: runs(self.relaxed_breaks),
            ..StreamStats::default()
        };
        (stats, self.windows)
    }
}

const NO_WINDOW: u64 = u64::MAX;
// `Acc::ops` counts op.min(2): reads and writes must be ops 0 and 1.
const _: () = assert!(crate::columns::OP_READ < 2 && crate::columns::OP_WRITE < 2);
const _: () = assert!(crate::columns::OP_READ != crate::columns::OP_WRITE);

/// Locality range boundaries: range i starts at ceil(i * capacity / leaves), so an offset's
/// range is floor(offset * leaves / capacity) clamped to the last one, with no division.
struct Ranges {
    starts: Vec<u64>,
}

impl Ranges {
    fn new(leaves: u64, capacity: u64) -> Ranges {
        let capacity = capacity.max(1) as u128;
        let starts = (1..leaves)
            .map(|i| {
                (i as u128 * capacity)
                    .div_ceil(leaves as u128)
                    .min(u64::MAX as u128) as u64
            })
            .collect();
        Ranges { starts }
    }

    fn index(&self, offset: u64) -> usize {
        if self.starts.len() <= 8 {
            self.starts.iter().map(|&s| (offset >= s) as usize).sum()
        } else {
            self.starts.partition_point(|&s| s <= offset)
        }
    }
}

/// Signed log2 bucket of a jump: 0 for 0, +k for 2^(k-1) <= d < 2^k, -k for backward jumps.
pub fn jump_bucket(jump: i128) -> usize {
    let k = (128 - jump.unsigned_abs().leading_zeros()) as usize;
    if jump < 0 {
        JUMP_ZERO - k
    } else {
        JUMP_ZERO + k
    }
}

/// `jump_bucket(to - from)` without 128-bit arithmetic (the jump's magnitude fits 64 bits),
/// and without a branch on the sign: backward jumps come at random, and the branch
/// mispredicted often enough to cost ~15% of the pass.
#[inline(always)]
fn jump_bucket_between(from: u64, to: u64) -> usize {
    let k = (64 - to.abs_diff(from).leading_zeros()) as isize;
    let sign = -((to < from) as isize); // 0 or -1
    (JUMP_ZERO as isize + ((k ^ sign) - sign)) as usize
}

/// Size bucket: 0 for size 0, k for 2^(k-1) <= size < 2^k.
pub fn size_bucket(size: u32) -> usize {
    (32 - size.leading_zeros()) as usize
}

struct Pass<'a> {
    cols: &'a TraceColumns<'a>,
    grid: Option<&'a WindowGrid>,
    t: Tally,
    /// The row of the first of `cols` in the whole trace, and the end of the request before
    /// it (when `cols` is not a whole trace's first piece).
    base: u64,
    prev_end: Option<u64>,
}

/// A pass's counters, apart from the columns it reads: a stream's parts carry them from one
/// to the next (`PartCounter`).
struct Tally {
    threshold: u64,
    capacity: u64,
    first_ts: i64,
    leaves: usize,
    ranges: Ranges,
    slots: Slots,
    accs: Vec<Acc>,
    /// Requests per locality range of each stream: `leaves` counters per slot, one array
    /// (a vector per stream cost a pointer chase per request).
    locality: Vec<u64>,
    window_counts: Vec<u64>,
    /// Counts of sizes that are multiples of 512 below `SMALL_SIZES` * 512, by size / 512;
    /// other sizes go to `size_counts`.
    small_sizes: Vec<u64>,
    size_counts: FxHashMap<u32, u64>,
    jump_log2: Vec<u64>,
    /// The requests grouped for the footprint in the same pass, when it is wanted.
    groups: Groups,
}

/// Whether the pass groups its requests for the footprint's bitmaps.
enum Groups {
    /// Not wanted (the footprint is counted elsewhere).
    Off,
    On(Grouped),
    /// The bitmaps do not fit: the footprint is counted by ranges after the pass.
    GaveUp,
}

impl<'a> Pass<'a> {
    #[cfg(test)]
    fn new(
        cols: &'a TraceColumns<'a>,
        params: &Params,
        capacity: u64,
        extent: &Extent,
        grid: Option<&'a WindowGrid>,
    ) -> Pass<'a> {
        Pass {
            cols,
            grid,
            t: Tally::new(params, capacity, extent, grid),
            base: 0,
            prev_end: None,
        }
    }

    /// With lzcnt where the CPU has it: the baseline x86-64 target counts a jump's bits with
    /// bsr, which AMD's cores run several times slower (the pass took ~10% longer).
    fn run(&mut self) {
        #[cfg(target_arch = "x86_64")]
        if std::is_x86_feature_detected!("lzcnt") {
            // SAFETY: the CPU has lzcnt (checked just above), the only feature the function
            // enables.
            return unsafe { self.run_lzcnt() };
        }
        self.run_portable()
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "lzcnt")]
    fn run_lzcnt(&mut self) {
        self.run_portable()
    }

    #[inline(always)]
    fn run_portable(&mut self) {
        // One loop per combination of windows and latencies, so that no row tests for them.
        match (self.grid, self.cols.latency_ns) {
            (Some(g), Some(l)) => self.run_rows(Some(*g), Some(l)),
            (Some(g), None) => self.run_rows(Some(*g), None),
            (None, Some(l)) => self.run_rows(None, Some(l)),
            (None, None) => self.run_rows(None, None),
        }
        for (k, &n) in self.t.small_sizes.iter().enumerate() {
            if n > 0 {
                self.t.size_counts.insert((k as u32) << 9, n); // the running total so far
            }
        }
    }

    #[inline(always)]
    fn run_rows(&mut self, grid: Option<WindowGrid>, latency: Option<&[i64]>) {
        let c = self.cols;
        let n = c.ts_ns.len();
        let (ts, stream, op) = (&c.ts_ns[..n], &c.stream[..n], &c.op[..n]);
        let (offset, size) = (&c.offset[..n], &c.size[..n]);
        let latency = latency.map(|l| &l[..n]);
        let t = &mut self.t;
        let mut prev_end = self.prev_end;
        // The current window [win_lo, win_hi) and the row it started at: the whole trace's
        // count of a window is added when the window changes.
        let (mut win, mut win_lo, mut win_hi, mut win_row) = (0u64, 0u64, 0u64, 0usize);
        for i in 0..n {
            let (offset, size) = (offset[i], size[i]);
            let end = offset.saturating_add(size as u64);
            let slot = t.slot(stream[i]);
            if let Some(g) = &grid {
                let rel = (ts[i] as i128 - t.first_ts as i128) as u64;
                if rel < win_lo || rel >= win_hi {
                    t.window_counts[win as usize] += (i - win_row) as u64;
                    win = g.index(rel);
                    (win_lo, win_hi, win_row) = (g.start(win), g.end(win), i);
                }
                t.accs[slot].count_window(win);
            }
            let starts_global_run = match c.run_start {
                Some(r) => r[i] != 0,
                None => prev_end != Some(offset),
            };
            prev_end = Some(end);
            let request = Request {
                pos: c.seq.map_or(self.base + i as u64, |q| q[i]),
                ts: ts[i],
                offset,
                end,
                op: op[i],
                latency: latency.map_or(0, |l| l[i]),
                starts_global_run,
            };
            if let Some(bucket) = t.record(slot, &request) {
                t.jump_log2[bucket] += 1;
            }
            if let Groups::On(g) = &mut t.groups {
                if size != 0 {
                    g.add(slot, offset, size);
                }
            }
            let range = t.ranges.index(offset);
            t.locality[slot * t.leaves + range] += 1;
            match (size as usize).checked_shr(9) {
                Some(k) if size & 511 == 0 && k < SMALL_SIZES => t.small_sizes[k] += 1,
                _ => *t.size_counts.entry(size).or_insert(0) += 1,
            }
        }
        if grid.is_some() && n > 0 {
            t.window_counts[win as usize] += (n - win_row) as u64;
        }
        self.prev_end = prev_end;
    }
}

/// One request, as `Tally::record` reads it.
struct Request {
    /// Its row in the whole trace.
    pos: u64,
    ts: i64,
    offset: u64,
    end: u64,
    op: u8,
    latency: i64,
    starts_global_run: bool,
}

impl Tally {
    #[inline(always)]
    fn slot(&mut self, stream: u32) -> usize {
        let slot = self.slots.get_or_insert(stream, self.accs.len());
        if slot == self.accs.len() {
            self.new_slot(stream);
        }
        slot
    }

    #[inline(never)]
    fn new_slot(&mut self, stream: u32) {
        self.accs.push(Acc::new(stream));
        self.locality.resize(self.locality.len() + self.leaves, 0);
        if let Groups::On(g) = &mut self.groups {
            if !g.add_stream() {
                self.groups = Groups::GaveUp; // frees the buckets at once
            }
        }
    }

    /// Updates one stream's counters with a request; returns its jump's bucket, if it has a
    /// predecessor in the stream.
    #[inline(always)]
    fn record(&mut self, slot: usize, r: &Request) -> Option<usize> {
        let a = &mut self.accs[slot];
        let jump = if a.requests == 0 {
            (a.first_ts, a.first_index, a.first_offset) = (r.ts, r.pos, r.offset);
            None
        } else {
            let prev = a.last_end;
            a.sequential += (r.offset == prev) as u64;
            a.backward += (r.offset < prev) as u64;
            // `|`, not `||`: backward jumps come at random, and a branch on them mispredicts
            let beyond = r.offset.wrapping_sub(prev) > self.threshold;
            a.relaxed_breaks += ((r.offset < prev) | beyond) as u64;
            Some(jump_bucket_between(prev, r.offset))
        };
        a.requests += 1;
        a.last_ts = r.ts;
        a.ops[r.op.min(2) as usize] += 1;
        a.size_sum += (r.end - r.offset) as u128;
        a.latency_sum += r.latency as i128;
        a.global_runs += r.starts_global_run as u64;
        a.last_index = r.pos;
        a.last_end = r.end;
        jump
    }

    fn new(params: &Params, capacity: u64, extent: &Extent, grid: Option<&WindowGrid>) -> Tally {
        Tally {
            threshold: params.relaxed_threshold,
            capacity,
            first_ts: extent.first_ts,
            leaves: params.leaves as usize,
            ranges: Ranges::new(params.leaves, capacity),
            slots: Slots::new(extent.max_stream),
            accs: Vec::new(),
            locality: Vec::new(),
            window_counts: vec![0; grid.map_or(0, |g| g.count as usize)],
            small_sizes: vec![0; SMALL_SIZES],
            size_counts: FxHashMap::default(),
            jump_log2: vec![0; JUMP_BUCKETS],
            groups: Groups::Off,
        }
    }

    /// Adds the counters of the rows that follow; returns each of their slots' slot here.
    fn absorb(&mut self, later: Tally) -> Vec<u32> {
        let leaves = self.leaves;
        let mut map = Vec::with_capacity(later.accs.len());
        for (acc, locality) in later
            .accs
            .into_iter()
            .zip(later.locality.chunks_exact(leaves))
        {
            let slot = self.slots.get_or_insert(acc.stream, self.accs.len());
            if slot == self.accs.len() {
                self.accs.push(acc);
                self.locality.extend_from_slice(locality);
            } else {
                let bucket = self.accs[slot].absorb(acc, self.threshold);
                self.jump_log2[bucket] += 1;
                let mine = &mut self.locality[slot * leaves..(slot + 1) * leaves];
                for (a, b) in mine.iter_mut().zip(locality) {
                    *a += b;
                }
            }
            map.push(slot as u32);
        }
        let sums = [
            (&mut self.window_counts, &later.window_counts),
            (&mut self.small_sizes, &later.small_sizes),
            (&mut self.jump_log2, &later.jump_log2),
        ];
        for (mine, theirs) in sums {
            for (a, b) in mine.iter_mut().zip(theirs) {
                *a += b;
            }
        }
        for (size, n) in later.size_counts {
            *self.size_counts.entry(size).or_insert(0) += n;
        }
        map
    }

    fn into_counts(self) -> Counts {
        Counts {
            capacity: self.capacity,
            leaves: self.leaves,
            streams: self
                .accs
                .into_iter()
                .zip(self.locality.chunks_exact(self.leaves.max(1)))
                .map(|(a, locality)| {
                    let (mut stats, windows) = a.finish();
                    stats.locality = locality.to_vec();
                    (stats, windows)
                })
                .collect(),
            window_counts: self.window_counts,
            size_log2: size_log2(&self.size_counts),
            size_counts: self.size_counts,
            jump_log2: self.jump_log2,
        }
    }
}

/// What a pass counted, before finishing. Parts of a trace whose streams are disjoint (a
/// partitioned dataset's streams) merge by concatenation and sums, then finish once.
#[derive(Debug, Clone, PartialEq)]
pub struct Counts {
    pub capacity: u64,
    pub leaves: usize,
    /// Each stream's counters and its (window, requests) in time order.
    pub streams: Vec<(StreamStats, Vec<(u64, u64)>)>,
    pub window_counts: Vec<u64>,
    pub size_counts: FxHashMap<u32, u64>,
    pub size_log2: Vec<u64>,
    pub jump_log2: Vec<u64>,
}

impl Counts {
    /// The summary; `blocks.streams` follows `self.streams`' order.
    pub fn finish(mut self, grid: Option<&WindowGrid>, blocks: Footprints) -> Summary {
        let durations: Vec<u64> = grid.map_or(Vec::new(), |g| {
            (0..g.count).map(|i| g.duration(i)).collect()
        });
        for ((stats, windows), b) in self.streams.iter_mut().zip(&blocks.streams) {
            if grid.is_some() {
                stats.fluctuation_cv = Some(sparse_cv(windows, &durations));
            }
            stats.requested_blocks_512 = b.requested_512;
            stats.footprint_blocks_512 = b.unique_512;
            stats.footprint_blocks_4k = b.unique_4k;
        }
        let mut streams: Vec<StreamStats> = self.streams.into_iter().map(|a| a.0).collect();
        streams.sort_unstable_by_key(|s| s.stream);
        let mut total = sum_streams(&streams, self.leaves);
        total.footprint_blocks_512 = blocks.total.unique_512;
        total.footprint_blocks_4k = blocks.total.unique_4k;
        total.fluctuation_cv = grid.map(|_| dense_cv(&self.window_counts, &durations));
        let fluctuation = grid.map(|g| Fluctuation {
            window_ns: g.nominal_width(),
            durations_ns: durations,
            counts: self.window_counts,
        });
        let (top_sizes, distinct_sizes) = top_sizes(&self.size_counts);
        Summary {
            capacity: self.capacity,
            total,
            streams,
            top_sizes,
            distinct_sizes,
            size_log2: self.size_log2,
            jump_log2: self.jump_log2,
            fluctuation,
        }
    }
}

/// The extent of the whole trace when the columns are one part of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Whole {
    pub first_ts: i64,
    pub last_ts: i64,
    pub max_end: u64,
    pub max_stream: u32,
}

/// Counts part of a trace given a piece at a time (its streams' partitions, each stream's in
/// time order) with the whole trace's time origin, windows and capacity; the caller adds
/// the footprints.
pub struct PartCounter {
    grid: Option<WindowGrid>,
    max_stream: u32,
    tally: Option<Tally>,
}

impl PartCounter {
    pub fn new(params: &Params, whole: &Whole) -> Result<PartCounter, String> {
        if params.leaves == 0 {
            return Err("spatial locality needs at least one range".into());
        }
        let extent = Extent {
            first_ts: whole.first_ts,
            last_ts: whole.last_ts,
            max_stream: whole.max_stream,
            min_offset: 0, // only the footprint needs it, and parts count theirs elsewhere
            max_end: whole.max_end,
        };
        let capacity = if params.capacity > 0 {
            params.capacity
        } else {
            extent.max_end
        };
        let grid = WindowGrid::new(extent.span(), params.window_ns)?;
        let tally = Tally::new(params, capacity, &extent, grid.as_ref());
        Ok(PartCounter {
            grid,
            max_stream: whole.max_stream,
            tally: Some(tally),
        })
    }

    /// Counts the next piece.
    pub fn update(&mut self, cols: &TraceColumns) -> Result<(), String> {
        check_lengths(cols)?;
        if let Some(&s) = cols.stream.iter().find(|&&s| s > self.max_stream) {
            return Err(format!("stream {s} is above the trace's largest stream id"));
        }
        let t = self
            .tally
            .take()
            .expect("a counter is updated after it finished");
        let mut pass = Pass {
            cols,
            grid: self.grid.as_ref(),
            t,
            base: 0,
            prev_end: None,
        };
        pass.run();
        self.tally = Some(pass.t);
        Ok(())
    }

    pub fn finish(self) -> (Counts, Option<WindowGrid>) {
        let tally = self.tally.expect("a counter finishes once");
        (tally.into_counts(), self.grid)
    }
}

/// The window grid of a trace spanning `span` ns (None: no windows).
pub fn window_grid(span: u64, window_ns: i64) -> Result<Option<WindowGrid>, String> {
    WindowGrid::new(span, window_ns)
}

/// Requests per size bucket, from the counts of each size (no need to bucket every request).
fn size_log2(size_counts: &FxHashMap<u32, u64>) -> Vec<u64> {
    let mut buckets = vec![0; SIZE_BUCKETS];
    for (&size, &n) in size_counts {
        buckets[size_bucket(size)] += n;
    }
    buckets
}

/// Coefficient of variation (population std / mean) of per-window rates.
fn dense_cv(counts: &[u64], durations: &[u64]) -> f64 {
    let rates: Vec<f64> = counts
        .iter()
        .zip(durations)
        .map(|(&c, &d)| c as f64 / d as f64)
        .collect();
    cv_of(&rates, counts.len())
}

/// The same for a stream active in few windows: windows it is absent from have rate 0.
fn sparse_cv(windows: &mut [(u64, u64)], durations: &[u64]) -> f64 {
    windows.sort_by_key(|w| w.0); // already sorted unless the trace is out of time order
    let mut rates: Vec<f64> = Vec::with_capacity(windows.len());
    let mut last = u64::MAX;
    for &(w, c) in windows.iter() {
        let r = c as f64 / durations[w as usize] as f64;
        match rates.last_mut() {
            Some(prev) if w == last => *prev += r,
            _ => rates.push(r),
        }
        last = w;
    }
    cv_of(&rates, durations.len())
}

/// CV over `windows` windows of which `nonzero` lists the non-zero rates (two passes, so
/// equal rates give exactly 0).
fn cv_of(nonzero: &[f64], windows: usize) -> f64 {
    let n = windows as f64;
    let mean = nonzero.iter().sum::<f64>() / n;
    if mean <= 0.0 {
        return 0.0;
    }
    let zeros = (windows - nonzero.len()) as f64;
    let squares: f64 = nonzero.iter().map(|r| (r - mean) * (r - mean)).sum();
    ((squares + zeros * mean * mean) / n).sqrt() / mean
}

fn sum_streams(streams: &[StreamStats], leaves: usize) -> StreamStats {
    let mut t = StreamStats {
        locality: vec![0; leaves],
        first_ts: streams.iter().map(|s| s.first_ts).min().unwrap_or(0),
        last_ts: streams.iter().map(|s| s.last_ts).max().unwrap_or(0),
        ..StreamStats::default()
    };
    for s in streams {
        t.requests += s.requests;
        t.reads += s.reads;
        t.writes += s.writes;
        t.size_sum += s.size_sum;
        t.latency_sum += s.latency_sum;
        t.backward += s.backward;
        t.sequential += s.sequential;
        t.forward += s.forward;
        t.interference_sum += s.interference_sum;
        t.pairs += s.pairs;
        t.global_runs += s.global_runs;
        t.detangled_runs += s.detangled_runs;
        t.relaxed_runs += s.relaxed_runs;
        t.requested_blocks_512 += s.requested_blocks_512;
        for (a, b) in t.locality.iter_mut().zip(&s.locality) {
            *a += b;
        }
    }
    t
}

fn top_sizes(counts: &FxHashMap<u32, u64>) -> (Vec<(u32, u64)>, u64) {
    let mut all: Vec<(u32, u64)> = counts.iter().map(|(&s, &n)| (s, n)).collect();
    all.sort_unstable_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    let distinct = all.len() as u64;
    all.truncate(TOP_SIZES);
    (all, distinct)
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: i64 = 1_000_000_000;

    /// ts_ns, stream, op, offset, size
    pub(super) type Owned = (Vec<i64>, Vec<u32>, Vec<u8>, Vec<u64>, Vec<u32>);

    /// The hand-computed trace of tests/test_characterize.py (the same numbers, worked out there):
    /// three streams, ten requests ten seconds apart.
    fn hand_trace() -> Owned {
        let rows: [(u32, u8, u64, u32); 10] = [
            (1, 1, 0, 4096),
            (2, 0, 8192, 4096),
            (1, 1, 4096, 4096),
            (1, 1, 8192, 4096),
            (2, 0, 0, 512),
            (3, 0, 40960, 8192),
            (2, 0, 512, 512),
            (1, 1, 45056, 4096),
            (3, 0, 49152, 1024),
            (2, 0, 100000, 512),
        ];
        let ts = (0..10).map(|i| i * 10 * S).collect();
        (
            ts,
            rows.iter().map(|r| r.0).collect(),
            rows.iter().map(|r| r.1).collect(),
            rows.iter().map(|r| r.2).collect(),
            rows.iter().map(|r| r.3).collect(),
        )
    }

    fn params() -> Params {
        Params {
            leaves: 4,
            capacity: 0,
            window_ns: 1800 * S,
            relaxed_threshold: 65536,
        }
    }

    fn run(ts: &[i64], st: &[u32], op: &[u8], off: &[u64], sz: &[u32], p: &Params) -> Summary {
        let cols = TraceColumns::new(ts, st, op, off, sz);
        characterize(&cols, p).unwrap()
    }

    #[test]
    fn hand_trace_whole() {
        let (ts, st, op, off, sz) = hand_trace();
        let s = run(&ts, &st, &op, &off, &sz, &params());
        let t = &s.total;
        assert_eq!(s.capacity, 100_512);
        assert_eq!((t.requests, t.reads, t.writes), (10, 6, 4));
        assert_eq!(t.size_sum, 31_232);
        assert_eq!((t.backward, t.sequential, t.forward, t.pairs), (1, 4, 2, 7));
        assert_eq!(t.interference_sum, 11);
        assert_eq!((t.global_runs, t.detangled_runs, t.relaxed_runs), (8, 6, 5));
        assert_eq!(t.locality, vec![6, 3, 0, 1]);
        assert_eq!(t.requested_blocks_512, 62);
        assert_eq!((t.footprint_blocks_512, t.footprint_blocks_4k), (44, 7));
        assert_eq!((t.first_ts, t.last_ts), (0, 90 * S));
        assert_eq!(s.top_sizes, vec![(4096, 5), (512, 3), (1024, 1), (8192, 1)]);
        assert_eq!(s.distinct_sizes, 4);
        // 512 -> bucket 10, 1024 -> 11, 4096 -> 13, 8192 -> 14
        assert_eq!(
            (
                s.size_log2[10],
                s.size_log2[11],
                s.size_log2[13],
                s.size_log2[14]
            ),
            (3, 1, 5, 1)
        );
        // jumps -12288 (bucket -14), 0 x4, 32768 (+16), 98976 (+17)
        let j = &s.jump_log2;
        assert_eq!(
            (
                j[JUMP_ZERO - 14],
                j[JUMP_ZERO],
                j[JUMP_ZERO + 16],
                j[JUMP_ZERO + 17]
            ),
            (1, 4, 1, 1)
        );
        assert_eq!(j.iter().sum::<u64>(), 7);
        // 90 s < 10 windows of 30 min: ten 9 s windows, one request each.
        let f = s.fluctuation.as_ref().unwrap();
        assert_eq!(f.counts, vec![1; 10]);
        assert_eq!(f.durations_ns, vec![9 * S as u64; 10]);
        assert!(t.fluctuation_cv.unwrap() < 1e-12);
    }

    #[test]
    fn hand_trace_streams() {
        let (ts, st, op, off, sz) = hand_trace();
        let s = run(&ts, &st, &op, &off, &sz, &params());
        let ids: Vec<u32> = s.streams.iter().map(|x| x.stream).collect();
        assert_eq!(ids, vec![1, 2, 3]);
        let (a, b, c) = (&s.streams[0], &s.streams[1], &s.streams[2]);
        assert_eq!(
            (a.requests, a.writes, a.sequential, a.forward, a.backward),
            (4, 4, 2, 1, 0)
        );
        assert_eq!(
            (b.requests, b.reads, b.sequential, b.forward, b.backward),
            (4, 4, 1, 1, 1)
        );
        assert_eq!((c.requests, c.reads, c.sequential), (2, 2, 1));
        assert_eq!(
            (a.interference_sum, b.interference_sum, c.interference_sum),
            (4, 5, 2)
        );
        assert_eq!((a.global_runs, b.global_runs, c.global_runs), (3, 4, 1));
        assert_eq!(
            (a.detangled_runs, b.detangled_runs, c.detangled_runs),
            (2, 3, 1)
        );
        assert_eq!((a.relaxed_runs, b.relaxed_runs, c.relaxed_runs), (1, 3, 1));
        assert_eq!(a.locality, vec![3, 1, 0, 0]);
        assert_eq!(b.locality, vec![3, 0, 0, 1]);
        assert_eq!(c.locality, vec![0, 2, 0, 0]);
        assert_eq!(
            (
                a.footprint_blocks_512,
                a.footprint_blocks_4k,
                a.requested_blocks_512
            ),
            (32, 4, 32)
        );
        assert_eq!(
            (
                b.footprint_blocks_512,
                b.footprint_blocks_4k,
                b.requested_blocks_512
            ),
            (12, 3, 12)
        );
        assert_eq!(
            (
                c.footprint_blocks_512,
                c.footprint_blocks_4k,
                c.requested_blocks_512
            ),
            (18, 3, 18)
        );
        assert_eq!((a.first_ts, a.last_ts), (0, 70 * S));
        // k of 10 equal-rate windows active: cv = sqrt(10 / k - 1)
        assert!((a.fluctuation_cv.unwrap() - 1.5f64.sqrt()).abs() < 1e-12);
        assert!((c.fluctuation_cv.unwrap() - 2.0).abs() < 1e-12);
    }

    #[test]
    fn pieces_count_as_the_whole() {
        let (ts, st, op, off, sz) = hand_trace();
        let lat: Vec<i64> = (0..10).map(|i| i * 1000 + 7).collect();
        let piece = |i: usize, j: usize| TraceColumns {
            ts_ns: &ts[i..j],
            stream: &st[i..j],
            op: &op[i..j],
            offset: &off[i..j],
            size: &sz[i..j],
            latency_ns: Some(&lat[i..j]),
            seq: None,
            run_start: None,
        };
        let whole = characterize(&piece(0, 10), &params()).unwrap();
        for cuts in [vec![0, 3, 7, 10], vec![0, 0, 5, 10, 10], (0..=10).collect()] {
            let pieces: Vec<TraceColumns> = cuts.windows(2).map(|w| piece(w[0], w[1])).collect();
            assert_eq!(
                characterize_pieces(&pieces, &params()).unwrap(),
                whole,
                "{cuts:?}"
            );
        }
    }

    /// Requests of `streams` streams over `span` bytes, a third continuing their stream's
    /// previous request, some of size 0, with latencies.
    fn mixed(n: usize, streams: u64, span: u64, seed: u64) -> (Owned, Vec<i64>) {
        let mut x = seed | 1;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let mut ends = vec![0u64; streams as usize];
        let (mut ts, mut st, mut op, mut off, mut sz, mut lat) =
            (vec![], vec![], vec![], vec![], vec![], vec![]);
        for i in 0..n {
            let r = next();
            let s = (r % streams) as usize;
            let size = if r % 97 == 0 {
                0
            } else {
                512 << ((r >> 8) % 6)
            };
            let o = if (r >> 16) % 3 == 0 {
                ends[s]
            } else {
                ((r >> 20) % (span / 512)) * 512
            };
            ends[s] = o + size as u64;
            ts.push(i as i64 * 1_000_000 + (r >> 50) as i64);
            st.push(s as u32 * 3 + 1);
            op.push((r >> 40) as u8 % 3);
            off.push(o);
            sz.push(size);
            lat.push((r >> 44) as i64);
        }
        ((ts, st, op, off, sz), lat)
    }

    #[test]
    fn parts_count_as_the_whole() {
        // few and many streams over small address spans (bitmaps), over one where the
        // bitmaps stop fitting at the 40th stream, and over a large one (ranges); cut into
        // 2, 3 and 8 parts, and into pieces that the cuts split
        for (k, &(streams, span)) in [(3, 1u64 << 24), (40, 1 << 22), (40, 1 << 26), (5, 1 << 46)]
            .iter()
            .enumerate()
        {
            let ((ts, st, op, off, sz), lat) = mixed(20_000, streams, span, k as u64 + 7);
            let whole = TraceColumns {
                latency_ns: Some(&lat),
                ..TraceColumns::new(&ts, &st, &op, &off, &sz)
            };
            let p = Params {
                window_ns: 1_000_000_000,
                ..params()
            };
            let one = characterize_parts(&[whole], &p, 1).unwrap();
            assert_eq!(one.streams.len(), streams as usize);
            let pieces = [
                whole.rows(0..7_000),
                whole.rows(7_000..7_001),
                whole.rows(7_001..20_000),
            ];
            for parts in [2, 3, 8] {
                assert_eq!(
                    characterize_parts(&[whole], &p, parts).unwrap(),
                    one,
                    "{k} {parts}"
                );
                assert_eq!(
                    characterize_parts(&pieces, &p, parts).unwrap(),
                    one,
                    "{k} {parts}"
                );
            }
        }
    }

    /// The declared extent of whole columns (as ingest records it).
    fn declared(cols: &TraceColumns) -> (Whole, u64) {
        let e = Extent::of(cols);
        let whole = Whole {
            first_ts: e.first_ts,
            last_ts: e.last_ts,
            max_end: e.max_end,
            max_stream: e.max_stream,
        };
        (whole, e.min_offset)
    }

    #[test]
    fn batches_count_as_the_whole() {
        // bitmaps for few streams over a small span; batches of one row, of a few, and ones
        // large enough to be cut in parts
        let ((ts, st, op, off, sz), lat) = mixed(PARALLEL_ROWS / 2 + 5_000, 6, 1 << 30, 3);
        let cols = TraceColumns {
            latency_ns: Some(&lat),
            ..TraceColumns::new(&ts, &st, &op, &off, &sz)
        };
        let p = Params {
            window_ns: 1_000_000_000,
            ..params()
        };
        let whole = characterize_parts(&[cols], &p, 1).unwrap();
        let n = ts.len();
        let (extent, min_offset) = declared(&cols);
        for cuts in [vec![0, 1, 2, 3_000, n], vec![0, 300_000, n - 1, n]] {
            let mut counter = StreamCounter::new(&p, &extent, min_offset, n).unwrap();
            for w in cuts.windows(2) {
                counter.update(&cols.rows(w[0]..w[1])).unwrap();
            }
            assert_eq!(counter.finish().unwrap(), whole, "{cuts:?}");
        }
    }

    #[test]
    fn batches_outside_the_declared_extent_are_refused() {
        let ((ts, st, op, off, sz), _) = mixed(5_000, 3, 1 << 24, 5);
        let cols = TraceColumns::new(&ts, &st, &op, &off, &sz);
        let (extent, min_offset) = declared(&cols);
        let p = params();
        // a request past the declared end: refused as it comes
        let narrow = Whole {
            max_end: extent.max_end - 1,
            ..extent
        };
        let mut counter = StreamCounter::new(&p, &narrow, min_offset, 5_000).unwrap();
        assert!(counter
            .update(&cols)
            .unwrap_err()
            .contains("outside the extent"));
        // an extent wider than the rows: the locality ranges would differ, so finish refuses
        let wide = Whole {
            max_end: extent.max_end + 4096,
            ..extent
        };
        let mut counter = StreamCounter::new(&p, &wide, min_offset, 5_000).unwrap();
        counter.update(&cols).unwrap();
        assert!(counter.finish().unwrap_err().contains("extent declared"));
        // no rows at all
        let counter = StreamCounter::new(&p, &extent, min_offset, 0).unwrap();
        assert!(counter.finish().is_err());
        // too many streams for the bitmaps
        let ((ts, st, op, off, sz), _) = mixed(5_000, 40, 1 << 26, 5);
        let cols = TraceColumns::new(&ts, &st, &op, &off, &sz);
        let (extent, min_offset) = declared(&cols);
        let mut counter = StreamCounter::new(&p, &extent, min_offset, 5_000).unwrap();
        assert!(counter.update(&cols).unwrap_err().contains("do not fit"));
    }

    #[test]
    fn parts_count_the_hand_trace() {
        let (ts, st, op, off, sz) = hand_trace();
        let cols = TraceColumns::new(&ts, &st, &op, &off, &sz);
        let whole = characterize(&cols, &params()).unwrap();
        for parts in 2..=10 {
            assert_eq!(
                characterize_parts(&[cols], &params(), parts).unwrap(),
                whole,
                "{parts}"
            );
        }
    }

    #[test]
    fn extent_halves_agree() {
        let n = PARALLEL_ROWS + 12_345;
        let ts: Vec<i64> = (0..n as i64).map(|i| (i * 7919) % 1_000_003 - 5).collect();
        let st: Vec<u32> = (0..n as u32).map(|i| (i * 31) % 977).collect();
        let off: Vec<u64> = (0..n as u64).map(|i| (i * 104_729) % 999_983 + 3).collect();
        let sz: Vec<u32> = (0..n as u32).map(|i| (i % 17) * 512).collect();
        let op = vec![0u8; n];
        let cols = TraceColumns::new(&ts, &st, &op, &off, &sz);
        let pieces = [
            cols.rows(0..1000),
            cols.rows(1000..n - 7),
            cols.rows(n - 7..n),
        ];
        let serial = Extent::scan(&[cols]);
        for e in [Extent::of(&cols), Extent::of_pieces(&pieces)] {
            assert_eq!(
                (e.first_ts, e.last_ts, e.max_stream, e.min_offset, e.max_end),
                (
                    serial.first_ts,
                    serial.last_ts,
                    serial.max_stream,
                    serial.min_offset,
                    serial.max_end
                )
            );
        }
        assert_eq!(
            (serial.first_ts, serial.max_stream, serial.min_offset),
            (-5, 976, 3)
        );
    }

    #[test]
    fn windows_hold_remainder_and_zeros() {
        // 0,1,2,3 s, 50 s, 100 s with 10 s windows: counts 4,0,0,0,0,1,0,0,0,1; rates
        // 0.4,0..,0.1,..,0.1: mean 0.06, mean square 0.018, std 0.12, cv 2.
        let ts: Vec<i64> = [0, 1, 2, 3, 50, 100].iter().map(|t| t * S).collect();
        let n = ts.len();
        let p = Params {
            window_ns: 10 * S,
            ..params()
        };
        let s = run(
            &ts,
            &vec![0; n],
            &vec![0; n],
            &vec![0; n],
            &vec![512; n],
            &p,
        );
        let f = s.fluctuation.unwrap();
        assert_eq!(f.counts, vec![4, 0, 0, 0, 0, 1, 0, 0, 0, 1]);
        assert!((s.total.fluctuation_cv.unwrap() - 2.0).abs() < 1e-12);
        // 105 s with 10 s windows: ten windows, the last one 15 s long.
        let ts: Vec<i64> = vec![0, 105 * S];
        let s = run(&ts, &[0, 0], &[0, 0], &[0, 0], &[512, 512], &p);
        let f = s.fluctuation.unwrap();
        assert_eq!(f.durations_ns.len(), 10);
        assert_eq!(f.durations_ns[9], 15 * S as u64);
        assert_eq!(f.counts[9], 1);
    }

    #[test]
    fn empty_and_untimed() {
        let s = run(&[], &[], &[], &[], &[], &params());
        assert_eq!(s.total.requests, 0);
        assert!(s.streams.is_empty() && s.fluctuation.is_none());
        let s = run(&[0, 0], &[0, 0], &[0, 0], &[0, 512], &[512, 0], &params());
        assert!(s.fluctuation.is_none() && s.total.fluctuation_cv.is_none());
        assert_eq!(s.total.sequential, 1);
        // a zero-size request touches no block
        assert_eq!(
            (s.total.requested_blocks_512, s.total.footprint_blocks_4k),
            (1, 1)
        );
    }

    #[test]
    fn ranges_match_the_floor_formula() {
        for (leaves, capacity) in [(4u64, 100_512u64), (16, 7), (64, 1 << 40), (5, 1_000_003)] {
            let r = Ranges::new(leaves, capacity);
            for off in (0..capacity.min(5000)).chain([capacity - 1, capacity, capacity * 3]) {
                let want =
                    ((off as u128 * leaves as u128) / capacity as u128).min(leaves as u128 - 1);
                assert_eq!(
                    r.index(off) as u128,
                    want,
                    "leaves {leaves} capacity {capacity} offset {off}"
                );
            }
        }
    }

    #[test]
    fn jump_buckets_between_offsets() {
        let offsets = [0, 1, 2, 3, 511, 512, 1 << 40, u64::MAX - 1, u64::MAX];
        for &a in &offsets {
            for &b in &offsets {
                assert_eq!(
                    jump_bucket_between(a, b),
                    jump_bucket(b as i128 - a as i128)
                );
            }
        }
    }

    #[test]
    fn buckets() {
        assert_eq!(jump_bucket(0), JUMP_ZERO);
        assert_eq!(jump_bucket(1), JUMP_ZERO + 1);
        assert_eq!(jump_bucket(3), JUMP_ZERO + 2);
        assert_eq!(jump_bucket(-4), JUMP_ZERO - 3);
        assert_eq!(jump_bucket(-(u64::MAX as i128)), 1);
        assert_eq!(
            jump_bucket(u64::MAX as i128 + (u32::MAX as i128)),
            JUMP_BUCKETS - 1
        );
        assert_eq!(
            (
                size_bucket(0),
                size_bucket(1),
                size_bucket(4095),
                size_bucket(4096)
            ),
            (0, 1, 12, 13)
        );
        assert_eq!(size_bucket(u32::MAX), SIZE_BUCKETS - 2);
    }

    #[test]
    fn rejects_bad_input() {
        let cols = TraceColumns {
            ts_ns: &[0, 1],
            stream: &[0],
            op: &[0, 0],
            offset: &[0, 0],
            size: &[1, 1],
            latency_ns: None,
            seq: None,
            run_start: None,
        };
        assert!(characterize(&cols, &params())
            .unwrap_err()
            .contains("stream"));
        let ts: Vec<i64> = vec![0, 1_000 * S];
        let cols = TraceColumns {
            ts_ns: &ts,
            stream: &[0, 0],
            ..cols
        };
        let p = Params {
            window_ns: 1,
            ..params()
        };
        assert!(characterize(&cols, &p).unwrap_err().contains("windows"));
    }
}

#[cfg(test)]
mod bench {
    //! `cargo test --release --lib characterize::bench -- --ignored --nocapture`: times the
    //! pass on 10M synthetic records and the ways of counting the 4 KiB footprint. On the
    //! 2-core development VM: main pass ~120 ms (was ~230, then ~160 before the branch-free
    //! jump buckets and lzcnt), range footprint ~410 ms (on its own thread, so characterize
    //! takes ~400 ms; the 1 TiB address window is too large for bitmaps),
    //! bitmap footprint with offsets folded into 64 GiB (16 bitmaps of 16 MiB) ~410 ms, the
    //! ranges' time on the same requests (bitmaps break even at ~4 words per request), 4 KiB block ids sort_unstable + dedup ~1.3 s, block-id
    //! hash set ~3.5 s (requests average 30 KiB, so ids are ~3.5x the requests).
    use super::*;
    use crate::stats::footprint::footprints;
    use std::time::Instant;

    fn synthetic(n: usize, streams: u32) -> super::tests::Owned {
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let mut ends = vec![0u64; streams as usize];
        let (mut ts, mut st, mut op, mut off, mut sz) = (vec![], vec![], vec![], vec![], vec![]);
        for i in 0..n {
            let r = next();
            let s = (r % streams as u64) as u32;
            let size = 4096u32 << ((r >> 8) % 4);
            let o = if (r >> 16) % 3 == 0 {
                ends[s as usize]
            } else {
                ((r >> 20) % (1 << 28)) * 4096
            };
            ends[s as usize] = o + size as u64;
            ts.push(i as i64 * 100_000);
            st.push(s);
            op.push((r >> 40) as u8 & 1);
            off.push(o);
            sz.push(size);
        }
        (ts, st, op, off, sz)
    }

    #[test]
    #[ignore]
    fn ten_million() {
        let (ts, st, op, off, sz) = synthetic(10_000_000, 16);
        let cols = TraceColumns::new(&ts, &st, &op, &off, &sz);
        let p = Params {
            leaves: 4,
            capacity: 0,
            window_ns: 1_800_000_000_000,
            relaxed_threshold: 65536,
        };
        let t = Instant::now();
        let s = characterize(&cols, &p).unwrap();
        println!(
            "characterize: {:?} (footprint {})",
            t.elapsed(),
            s.total.footprint_blocks_4k
        );

        let extent = Extent::of(&cols);
        let grid = WindowGrid::new(extent.span(), p.window_ns).unwrap();
        let t = Instant::now();
        let mut pass = Pass::new(&cols, &p, 1 << 40, &extent, grid.as_ref());
        pass.run();
        println!("main pass alone: {:?}", t.elapsed());
        let t = Instant::now();
        let f = footprints(&st, &off, &sz, 15, extent.max_end);
        println!(
            "interval footprint alone: {:?} ({})",
            t.elapsed(),
            f.total.unique_4k
        );

        // Offsets folded into 64 GiB: 16 bitmaps of 16 MiB fit the budget.
        let near: Vec<u64> = off.iter().map(|&o| o % (64 << 30)).collect();
        let near_end = near.iter().zip(&sz).map(|(&o, &z)| o + z as u64).max();
        let t = Instant::now();
        let f = footprints(&st, &near, &sz, 15, near_end.unwrap());
        println!(
            "bitmap footprint (64 GiB window): {:?} ({})",
            t.elapsed(),
            f.total.unique_4k
        );

        let t = Instant::now();
        let mut blocks: Vec<u64> = Vec::new();
        for (&o, &z) in off.iter().zip(&sz) {
            if z > 0 {
                blocks.extend(o >> 12..=(o + z as u64 - 1) >> 12);
            }
        }
        blocks.sort_unstable();
        blocks.dedup();
        println!("block ids sort+dedup: {:?} ({})", t.elapsed(), blocks.len());
        assert_eq!(blocks.len() as u64, s.total.footprint_blocks_4k);

        let t = Instant::now();
        let mut set: rustc_hash::FxHashSet<u64> = Default::default();
        for (&o, &z) in off.iter().zip(&sz) {
            if z > 0 {
                set.extend(o >> 12..=(o + z as u64 - 1) >> 12);
            }
        }
        println!("block ids hash set: {:?} ({})", t.elapsed(), set.len());
    }
}
