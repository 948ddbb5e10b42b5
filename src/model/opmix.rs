//! Each fluctuation window's mix of operations. The paper's fluctuation windows scale a
//! stream's rate; its operations need not fluctuate together: cloudPhysics reads almost only
//! in its two busy windows (21,910 and 22,116 reads, at most 377 in the nine others) while it
//! writes in every one. The twin's walk, blind to windows, spread its reads evenly, so its
//! reads met the background writes of the quiet windows and waited behind them (simulated
//! p95 +10.9% against the original's, +7.9% with the mix kept). Models fitted with
//! `window_reads` steer the walk's operations toward each window's share of reads: a drawn
//! category of the operation the window has had too much of is put back and drawn again with
//! a probability set by how far off the window is (`accept`), so transitions, categories and
//! their exact counts stay the walk's and only their order in time moves.

/// Draws of a category before the walk takes what it drew.
pub const TRIES: usize = 16;

/// Where a stream's walk stands against its windows' read targets.
#[derive(Debug, Clone, Default)]
pub struct OpPlan {
    /// Per window: the step after its last, and its reads.
    windows: Vec<(u64, u64)>,
    /// The window the walk is in and its reads so far.
    at: usize,
    reads: u64,
}

impl OpPlan {
    /// A plan over windows of (requests, reads), in the walk's order.
    pub fn new(windows: impl IntoIterator<Item = (u64, u64)>) -> OpPlan {
        let mut end = 0;
        let windows = windows
            .into_iter()
            .map(|(count, reads)| {
                end += count;
                (end, reads.min(count))
            })
            .collect();
        OpPlan {
            windows,
            ..OpPlan::default()
        }
    }

    /// The share of reads the walk should aim for at step `i` (the window's reads still to
    /// come over its steps still to come); None past the plan.
    pub fn want(&mut self, i: u64) -> Option<f64> {
        self.seek(i);
        let &(end, reads) = self.windows.get(self.at)?;
        let left = end.saturating_sub(i).max(1) as f64;
        Some((reads.saturating_sub(self.reads) as f64 / left).min(1.0))
    }

    /// Step `i` was a read or not.
    pub fn record(&mut self, i: u64, read: bool) {
        self.seek(i);
        self.reads += read as u64;
    }

    /// Moves to the window holding step `i` (steps come in order).
    fn seek(&mut self, i: u64) {
        while self.at < self.windows.len() && i >= self.windows[self.at].0 {
            self.at += 1;
            self.reads = 0;
        }
    }
}

/// Whether to keep a drawn category of `read`-ness, aiming for a share `want` of reads where
/// the stream's categories hold a share `share`: each operation is kept in proportion to how
/// much more the window needs it than the stream has it (`want / share` against
/// `(1 - want) / (1 - share)`), the more needed one always, so draws repeated until one is
/// kept come out reads with probability `want`.
pub fn accept(read: bool, want: f64, share: f64, u: f64) -> bool {
    let share = share.clamp(1e-6, 1.0 - 1e-6);
    let (reads, writes) = (want / share, (1.0 - want) / (1.0 - share));
    let mine = if read { reads } else { writes };
    u * reads.max(writes) < mine
}

/// Whether steering categories can carry a stream's windows' mix: the requests of its
/// transitions that hold both operations (2 min(reads, writes) each, from
/// `transitions` as (reads, writes)) must reach the requests a walk blind to windows would
/// put in another window than the original's (the sum over `windows`, (requests, reads), of
/// reads off the stream's share). cloudPhysics: 75,238 such requests against 13,974 to move.
/// MSR keeps reads and writes on separate leaves: 88 against 458; steered, it moved only
/// the few mixed transitions' requests, its busy window's reads rose from 299 to 320 of the
/// original's 502 (64 twins) and its simulated mean from -2.1% to +2.5%.
pub fn steerable(
    transitions: impl IntoIterator<Item = (u64, u64)>,
    windows: impl IntoIterator<Item = (u64, u64)>,
) -> bool {
    let windows: Vec<(u64, u64)> = windows.into_iter().collect();
    let (count, reads) = windows
        .iter()
        .fold((0, 0), |(n, r), &(wn, wr)| (n + wn, r + wr));
    let share = reads as f64 / count.max(1) as f64;
    let off: f64 = windows
        .iter()
        .map(|&(n, r)| (r as f64 - share * n as f64).abs())
        .sum();
    let mixed: u64 = transitions.into_iter().map(|(r, w)| 2 * r.min(w)).sum();
    off >= 1.0 && mixed as f64 >= off
}

/// Draws with `draw` (an item, whether it is a read, a uniform number) and draws again while
/// `accept` puts the item back, up to TRIES draws.
pub fn steered<T>(want: f64, share: f64, mut draw: impl FnMut() -> (T, bool, f64)) -> T {
    let mut tries = 0;
    loop {
        let (item, read, u) = draw();
        tries += 1;
        if tries >= TRIES || accept(read, want, share, u) {
            return item;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{RngExt, SeedableRng};
    use rand_pcg::Pcg64Mcg;

    #[test]
    fn the_plan_follows_each_window_s_reads() {
        // two windows of 4 steps: all reads, then none
        let mut p = OpPlan::new([(4, 4), (4, 0)]);
        assert_eq!(p.want(0), Some(1.0));
        p.record(0, true);
        assert_eq!(p.want(1), Some(1.0));
        p.record(1, false); // the walk took a write anyway: 3 reads over 2 steps
        assert_eq!(p.want(2), Some(1.0));
        p.record(2, true);
        p.record(3, true);
        assert_eq!(p.want(4), Some(0.0));
        assert_eq!(p.want(8), None);
    }

    #[test]
    fn categories_are_kept_by_how_much_the_window_needs_them() {
        // the stream reads half the time; a window of all reads keeps every read, no write
        assert!(accept(true, 1.0, 0.5, 0.999));
        assert!(!accept(false, 1.0, 0.5, 0.0));
        // a window at the stream's own mix keeps everything
        assert!(accept(true, 0.5, 0.5, 0.999) && accept(false, 0.5, 0.5, 0.999));
        // a window a quarter reads, of a stream half reads, keeps every write and a third of
        // the reads drawn: 1/2 * 1/3 against 1/2 * 1 is a quarter
        assert!(accept(false, 0.25, 0.5, 0.999));
        assert!(accept(true, 0.25, 0.5, 0.33) && !accept(true, 0.25, 0.5, 0.34));
        // steering: a write-only window puts back the read drawn first and takes the write
        // drawn next
        let mut draws = [(0, true, 0.5), (1, false, 0.5)].into_iter();
        assert_eq!(steered(0.0, 0.5, || draws.next().unwrap()), 1);
    }

    #[test]
    fn steering_needs_mixed_transitions_enough_for_the_windows() {
        // two windows of 10: all reads, then all writes; 10 reads are off the 50% share
        let windows = [(10, 10), (10, 0)];
        assert!(steerable([(3, 2), (2, 3), (5, 5)], windows)); // 4 + 4 + 10 mixed
        assert!(!steerable([(10, 1), (0, 9)], windows)); // 2 mixed
                                                         // windows at the stream's own mix have nothing to steer
        assert!(!steerable([(5, 5)], [(10, 5), (10, 5)]));
    }

    #[test]
    fn steered_draws_come_out_at_the_wanted_share() {
        // a stream of 30% reads steered to 60% and to 10%: 200,000 draws each
        let mut rng = Pcg64Mcg::seed_from_u64(1);
        for want in [0.6, 0.1] {
            let n = 200_000;
            let reads = (0..n)
                .filter(|_| {
                    let draw = || {
                        let read = rng.random::<f64>() < 0.3;
                        (read, read, rng.random::<f64>())
                    };
                    steered(want, 0.3, draw)
                })
                .count();
            assert!(
                (reads as f64 / n as f64 - want).abs() < 0.005,
                "{want}: {reads}"
            );
        }
    }
}
