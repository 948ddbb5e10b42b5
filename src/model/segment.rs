//! Long streams walk in segments: stretches of their fluctuation windows, each walked with its
//! own generator and its own share of the transition budgets, so one long stream walks on all
//! cores. The shares are dealt from the budgets without replacement (a multivariate
//! hypergeometric draw per category count, in order), so the segments together use the
//! fitted counts as one walk does: whole passes, and a draw from the last one. Where the
//! windows have read targets, reads and the other operations are dealt apart, each segment
//! getting its windows' reads (so steering still finds them), and each of the two goes
//! through its passes in turn.

use rand::{Rng, RngExt};
use rand_distr::StandardNormal;
use std::ops::Range;

/// Requests a segment holds at least (the last one fewer): below it the segments' seams
/// (each starts its walk afresh) and their dealing (one draw per category count) cost more
/// than the cores they walk on save.
pub const SEGMENT_REQUESTS: u64 = 1 << 19;

/// A stretch of a stream's windows walked as one segment.
#[derive(Debug, Clone, PartialEq)]
pub struct SegmentPlan {
    pub windows: Range<usize>,
    /// The stream's requests before it (its walk's first step index).
    pub start: u64,
    pub count: u64,
    /// Its requests to deal by operation class (reads, the rest) where every window has a
    /// read target; None: all in one class.
    pub by_op: Option<[u64; 2]>,
}

/// Cuts windows of (requests, read target) into segments of at least `size` requests each
/// (the last may hold fewer), at window edges. One segment or none: the stream walks whole.
pub fn plan(windows: &[(u64, Option<u64>)], size: u64) -> Vec<SegmentPlan> {
    let mut out = Vec::new();
    let (mut from, mut start, mut count) = (0, 0u64, 0u64);
    let mut reads = Some(0u64);
    for (w, &(n, r)) in windows.iter().enumerate() {
        count += n;
        reads = reads.zip(r).map(|(a, b)| a + b.min(n));
        if count >= size || w + 1 == windows.len() {
            out.push(SegmentPlan {
                windows: from..w + 1,
                start,
                count,
                by_op: reads.map(|r| [r, count - r]),
            });
            (from, start, count, reads) = (w + 1, start + count, 0, Some(0));
        }
    }
    // trailing windows without requests join the segment before them
    if out.len() > 1 && out.last().is_some_and(|p| p.count == 0) {
        let end = out.pop().map_or(0, |p| p.windows.end);
        out.last_mut().expect("a segment").windows.end = end;
    }
    out
}

/// What is left of a pass of a stream's category counts, dealt out segment by segment.
#[derive(Debug, Clone)]
pub struct Dealer {
    /// The fitted counts per transition and category (one pass).
    initial: Vec<Vec<u64>>,
    /// Their class per category (0: read, 1: the rest).
    classes: Vec<Vec<u8>>,
    left: Vec<Vec<u64>>,
}

impl Dealer {
    pub fn new(initial: Vec<Vec<u64>>, classes: Vec<Vec<u8>>) -> Dealer {
        Dealer {
            left: initial.clone(),
            initial,
            classes,
        }
    }

    /// The counts of a segment of `want[class]` requests per class (`by_op`; None: `total`
    /// in one class), taken from what is left of each class's current pass. A pass that runs
    /// out gives all it has left, then the next one is drawn from: each class goes through its
    /// passes in turn, as one walk does, so what a synthesis uses is whole passes and a draw
    /// from the last one. A class the model has no requests of gets what there is.
    pub fn deal(
        &mut self,
        by_op: Option<[u64; 2]>,
        total: u64,
        rng: &mut impl Rng,
    ) -> Vec<Vec<u64>> {
        let want = by_op.unwrap_or([total, 0]);
        let classes: &[Option<usize>] = match by_op {
            Some(_) => &[Some(0), Some(1)],
            None => &[None],
        };
        let mut dealt: Vec<Vec<u64>> = self.left.iter().map(|c| vec![0; c.len()]).collect();
        for (&class, &wanted) in classes.iter().zip(&want) {
            let (mut have, mut per_pass) = (0, 0);
            self.each(&mut dealt, class, |left, pass, _| {
                (have, per_pass) = (have + *left, per_pass + pass);
            });
            let mut need = wanted;
            if have < need && per_pass > 0 {
                // all that is left of this pass, whole passes, then the next one to draw from
                self.each(&mut dealt, class, |left, _, x| *x += std::mem::take(left));
                need -= have;
                let whole = need / per_pass;
                self.each(&mut dealt, class, |left, pass, x| {
                    (*x, *left) = (*x + whole * pass, pass);
                });
                (need, have) = (need - whole * per_pass, per_pass);
            }
            let mut need = need.min(have);
            self.each(&mut dealt, class, |left, _, x| {
                let got = hypergeometric(have, *left, need, rng);
                (have, need) = (have - *left, need - got);
                (*left, *x) = (*left - got, *x + got);
            });
        }
        dealt
    }

    /// Calls `f(left, pass, dealt)` for each category of `class` (None: every category):
    /// what is left of its pass, its count in a whole pass, and what is dealt of it.
    fn each(
        &mut self,
        dealt: &mut [Vec<u64>],
        class: Option<usize>,
        mut f: impl FnMut(&mut u64, u64, &mut u64),
    ) {
        for (t, left) in self.left.iter_mut().enumerate() {
            for (c, n) in left.iter_mut().enumerate() {
                if class.is_none_or(|k| self.classes[t][c] as usize == k) {
                    f(n, self.initial[t][c], &mut dealt[t][c]);
                }
            }
        }
    }
}

/// Featured items below which a hypergeometric draw goes item by item (exact); above it, a
/// normal draw of the same mean and variance, kept within what is possible. Either keeps the
/// dealing exact: the last count of a class gets exactly what its segment still needs.
const ITEM_BY_ITEM: u64 = 64;

/// How many of `featured` items a draw of `draws` from `population` holds (without
/// replacement). rand_distr's `Hypergeometric::new` sums factorials over the population
/// (millions of requests) for small means: 88% of a synthesis went there.
fn hypergeometric(population: u64, featured: u64, draws: u64, rng: &mut impl Rng) -> u64 {
    if featured == 0 || draws == 0 {
        return 0;
    }
    if draws >= population {
        return featured;
    }
    if featured <= ITEM_BY_ITEM {
        // each featured item is drawn with the chance the draw still has
        let (mut pool, mut need, mut got) = (population, draws, 0);
        for _ in 0..featured {
            if need == 0 {
                break;
            }
            if rng.random_range(0..pool) < need {
                (got, need) = (got + 1, need - 1);
            }
            pool -= 1;
        }
        return got;
    }
    let (n, k, d) = (population as f64, featured as f64, draws as f64);
    let mean = d * k / n;
    let variance = mean * (1.0 - k / n) * (n - d) / (n - 1.0);
    let z: f64 = rng.sample(StandardNormal);
    let lo = (draws + featured).saturating_sub(population);
    let hi = featured.min(draws);
    ((mean + z * variance.sqrt()).round().max(0.0) as u64).clamp(lo, hi)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand_pcg::Pcg64Mcg;

    #[test]
    fn plans_cut_at_window_edges_past_the_size() {
        let w = [
            (4, Some(1)),
            (3, Some(3)),
            (5, Some(0)),
            (1, Some(1)),
            (2, Some(2)),
        ];
        let p = plan(&w, 6);
        assert_eq!(
            p,
            vec![
                SegmentPlan {
                    windows: 0..2,
                    start: 0,
                    count: 7,
                    by_op: Some([4, 3])
                },
                SegmentPlan {
                    windows: 2..4,
                    start: 7,
                    count: 6,
                    by_op: Some([1, 5])
                },
                SegmentPlan {
                    windows: 4..5,
                    start: 13,
                    count: 2,
                    by_op: Some([2, 0])
                },
            ]
        );
        // a window without a read target deals its segment in one class
        let p = plan(&[(4, Some(1)), (3, None), (9, Some(2))], 100);
        assert_eq!(p.len(), 1);
        assert_eq!(p[0].by_op, None);
        assert!(plan(&[], 10).is_empty());
        // empty windows at the end do not make a segment of their own
        let p = plan(&[(4, None), (0, None), (0, None)], 3);
        assert_eq!(p.len(), 1);
        assert_eq!(p[0].windows, 0..3);
    }

    #[test]
    fn segments_use_the_counts_exactly_and_their_windows_reads() {
        // three transitions; categories alternate read (0) and write (1)
        let initial = vec![vec![500, 300], vec![7, 0, 90], vec![1000]];
        let classes = vec![vec![0, 1], vec![0, 1, 0], vec![1]];
        let mut d = Dealer::new(initial.clone(), classes.clone());
        let mut rng = Pcg64Mcg::seed_from_u64(5);
        // one pass (1,897 requests: 597 reads) in three segments
        let wants = [[200, 400], [300, 600], [97, 300]];
        let mut sum = vec![vec![0u64; 2], vec![0; 3], vec![0]];
        for want in wants {
            let dealt = d.deal(Some(want), want[0] + want[1], &mut rng);
            let mut got = [0u64; 2];
            for (t, counts) in dealt.iter().enumerate() {
                for (c, &x) in counts.iter().enumerate() {
                    got[classes[t][c] as usize] += x;
                    sum[t][c] += x;
                }
            }
            assert_eq!(got, want);
        }
        assert_eq!(sum, initial); // the pass used exactly
                                  // the next segment starts the next pass; the large counts split near in proportion
        let dealt = d.deal(None, 949, &mut rng);
        assert_eq!(dealt.iter().flatten().sum::<u64>(), 949);
        assert!((400..600).contains(&dealt[2][0]), "{dealt:?}");
    }

    #[test]
    fn hypergeometric_draws_have_the_distribution_s_mean_and_spread() {
        let mut rng = Pcg64Mcg::seed_from_u64(2);
        // (population, featured, draws): item by item, and the normal draw
        for (n, k, d) in [
            (10_000_000u64, 40u64, 500_000u64),
            (10_000_000, 90_000, 500_000),
        ] {
            let xs: Vec<f64> = (0..4000)
                .map(|_| hypergeometric(n, k, d, &mut rng) as f64)
                .collect();
            let mean = xs.iter().sum::<f64>() / xs.len() as f64;
            let var = xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / xs.len() as f64;
            let (nf, kf, df) = (n as f64, k as f64, d as f64);
            let want_mean = df * kf / nf;
            let want_var = want_mean * (1.0 - kf / nf) * (nf - df) / (nf - 1.0);
            assert!(
                (mean - want_mean).abs() < 4.0 * (want_var / 4000.0).sqrt(),
                "{mean}"
            );
            assert!(
                (var / want_var - 1.0).abs() < 0.1,
                "{var} against {want_var}"
            );
        }
        // what is possible only
        for _ in 0..100 {
            assert!((85..=90).contains(&hypergeometric(100, 90, 95, &mut rng)));
            assert!((5..=25).contains(&hypergeometric(100, 80, 25, &mut rng)));
            assert_eq!(hypergeometric(200, 200, 5, &mut rng), 5); // every item featured
            assert!(hypergeometric(10_000, 9_000, 9_500, &mut rng) >= 8_500);
        }
        assert_eq!(hypergeometric(1000, 200, 1000, &mut rng), 200);
        assert_eq!(hypergeometric(1000, 0, 10, &mut rng), 0);
    }

    #[test]
    fn each_class_goes_through_its_passes_in_turn() {
        // segments whose reads and writes do not end a pass together: each class still
        // uses whole passes of its own counts
        let initial = vec![vec![30, 20], vec![5, 45]];
        let classes = vec![vec![0, 1], vec![0, 1]];
        let mut d = Dealer::new(initial.clone(), classes);
        let mut rng = Pcg64Mcg::seed_from_u64(8);
        let mut sum = vec![vec![0u64; 2]; 2];
        // three passes: 105 reads and 195 writes, dealt unevenly
        for want in [[50, 20], [10, 100], [45, 75]] {
            for (t, counts) in d.deal(Some(want), 0, &mut rng).iter().enumerate() {
                for (c, &x) in counts.iter().enumerate() {
                    sum[t][c] += x;
                }
            }
        }
        let three: Vec<Vec<u64>> = initial
            .iter()
            .map(|r| r.iter().map(|n| 3 * n).collect())
            .collect();
        assert_eq!(sum, three);
    }

    #[test]
    fn a_class_the_model_lacks_deals_what_there_is() {
        let mut d = Dealer::new(vec![vec![10]], vec![vec![1]]);
        let mut rng = Pcg64Mcg::seed_from_u64(1);
        assert_eq!(d.deal(Some([3, 4]), 7, &mut rng), vec![vec![4]]);
        let mut empty = Dealer::new(vec![vec![0]], vec![vec![0]]);
        assert_eq!(empty.deal(None, 5, &mut rng), vec![vec![0]]);
    }
}
