//! Inter-arrival time distributions: fitting from sufficient statistics, choice by
//! goodness of fit, and sampling (seed 000, section III.D.1; design.md "The model").
//!
//! The paper's set (fixed, normal, exponential, Poisson, gamma) plus a two-phase
//! hyper-exponential and the empirical histogram. Goodness of fit is the Kolmogorov-Smirnov
//! statistic: the largest distance between the observed CDF (at the histogram's bucket
//! edges) and the candidate's CDF.

use super::hist::{bucket_range, Hist};
use super::stats::IatStats;
use rand::RngExt;
use rand_distr::{Distribution, Gamma, Normal, Poisson};

/// Poisson inter-arrivals count whole units of this many nanoseconds (DiskSpd counts ms).
pub const POISSON_UNIT_NS: f64 = 1_000_000.0;
/// Below this many samples no distribution is trusted over the plain exponential.
const MIN_FIT_SAMPLES: u64 = 8;
/// The largest KS distance at which a parametric family is kept over the empirical one.
pub const KS_ACCEPT: f64 = 0.05;
/// KS distances closer than this are a tie, settled in favour of the simpler family.
const KS_NOISE: f64 = 0.005;
const SIMPLEST_FIRST: [&str; 6] = [
    "fixed",
    "exponential",
    "poisson",
    "normal",
    "gamma",
    "hyperexp",
];
/// The empirical family needs enough samples to be more than noise.
const MIN_EMPIRICAL_SAMPLES: u64 = 50;

/// A fitted inter-arrival distribution (nanoseconds).
#[derive(Debug, Clone, PartialEq)]
pub enum Iat {
    Fixed {
        value: f64,
    },
    Normal {
        mean: f64,
        sd: f64,
    },
    Exponential {
        mean: f64,
    },
    Poisson {
        mean: f64,
    },
    Gamma {
        shape: f64,
        scale: f64,
    },
    HyperExp {
        p: f64,
        mean1: f64,
        mean2: f64,
    },
    /// (lo, hi, count) buckets: a bucket is picked by count, the value uniform inside it.
    Empirical {
        buckets: Vec<(u64, u64, u64)>,
    },
}

pub const FAMILIES: [&str; 7] = [
    "fixed",
    "normal",
    "exponential",
    "poisson",
    "gamma",
    "hyperexp",
    "empirical",
];

impl Iat {
    pub fn name(&self) -> &'static str {
        match self {
            Iat::Fixed { .. } => "fixed",
            Iat::Normal { .. } => "normal",
            Iat::Exponential { .. } => "exponential",
            Iat::Poisson { .. } => "poisson",
            Iat::Gamma { .. } => "gamma",
            Iat::HyperExp { .. } => "hyperexp",
            Iat::Empirical { .. } => "empirical",
        }
    }

    pub fn mean(&self) -> f64 {
        match self {
            Iat::Fixed { value } => *value,
            Iat::Normal { mean, .. } | Iat::Exponential { mean } | Iat::Poisson { mean } => *mean,
            Iat::Gamma { shape, scale } => shape * scale,
            Iat::HyperExp { p, mean1, mean2 } => p * mean1 + (1.0 - p) * mean2,
            Iat::Empirical { buckets } => {
                let n: u64 = buckets.iter().map(|b| b.2).sum();
                let s: f64 = buckets
                    .iter()
                    .map(|&(lo, hi, c)| (lo + hi - 1) as f64 / 2.0 * c as f64)
                    .sum();
                if n == 0 {
                    0.0
                } else {
                    s / n as f64
                }
            }
        }
    }

    /// The CDF at x (nanoseconds).
    pub fn cdf(&self, x: f64) -> f64 {
        match self {
            Iat::Fixed { value } => (x >= *value) as u8 as f64,
            Iat::Normal { mean, sd } => normal_cdf((x - mean) / sd.max(1e-9)),
            Iat::Exponential { mean } => 1.0 - (-x / mean.max(1e-9)).exp(),
            Iat::Poisson { mean } => {
                poisson_cdf((x / POISSON_UNIT_NS).floor(), mean / POISSON_UNIT_NS)
            }
            Iat::Gamma { shape, scale } => gamma_p(*shape, x.max(0.0) / scale),
            Iat::HyperExp { p, mean1, mean2 } => {
                p * (1.0 - (-x / mean1).exp()) + (1.0 - p) * (1.0 - (-x / mean2).exp())
            }
            Iat::Empirical { buckets } => {
                let n: u64 = buckets.iter().map(|b| b.2).sum();
                let mut below = 0.0;
                for &(lo, hi, c) in buckets {
                    if x >= hi as f64 {
                        below += c as f64;
                    } else if x > lo as f64 {
                        below += c as f64 * (x - lo as f64) / (hi - lo) as f64;
                    }
                }
                below / n.max(1) as f64
            }
        }
    }

    /// One inter-arrival time in nanoseconds (never negative).
    pub fn sample<R: rand::Rng + ?Sized>(&self, rng: &mut R) -> f64 {
        let v = match self {
            Iat::Fixed { value } => *value,
            Iat::Normal { mean, sd } => Normal::new(*mean, sd.max(0.0))
                .map(|d| d.sample(rng))
                .unwrap_or(*mean),
            Iat::Exponential { mean } => -mean * (1.0 - rng.random::<f64>()).ln(),
            Iat::Poisson { mean } => {
                let lambda = mean / POISSON_UNIT_NS;
                if lambda <= 0.0 {
                    0.0
                } else {
                    Poisson::new(lambda)
                        .map(|d| d.sample(rng))
                        .unwrap_or(lambda)
                        * POISSON_UNIT_NS
                }
            }
            Iat::Gamma { shape, scale } => Gamma::new(*shape, *scale)
                .map(|d| d.sample(rng))
                .unwrap_or(shape * scale),
            Iat::HyperExp { p, mean1, mean2 } => {
                let m = if rng.random::<f64>() < *p {
                    mean1
                } else {
                    mean2
                };
                -m * (1.0 - rng.random::<f64>()).ln()
            }
            Iat::Empirical { buckets } => {
                let n: u64 = buckets.iter().map(|b| b.2).sum();
                let mut pick = rng.random_range(0..n.max(1));
                let mut v = 0.0;
                for &(lo, hi, c) in buckets {
                    if pick < c {
                        v = lo as f64 + rng.random::<f64>() * (hi - lo) as f64;
                        break;
                    }
                    pick -= c;
                }
                v
            }
        };
        v.max(0.0)
    }
}

/// The fitted candidates of each family, in FAMILIES order (None where a family cannot fit).
pub fn candidates(s: &IatStats) -> Vec<Option<Iat>> {
    let n = s.count as f64;
    let (sum, sum_sq) = (s.sum as f64, s.sum_sq as f64);
    let mean = if s.count > 0 { sum / n } else { 0.0 };
    let var = if s.count > 1 {
        ((sum_sq - sum * sum / n) / (n - 1.0)).max(0.0)
    } else {
        0.0
    };
    let sd = var.sqrt();
    let cv = if mean > 0.0 { sd / mean } else { 0.0 };
    let gamma = fit_gamma(s, mean);
    let hyper = if cv > 1.0 && mean > 0.0 {
        // balanced-means two-moment fit (cv^2 > 1)
        let c2 = cv * cv;
        let p = 0.5 * (1.0 + ((c2 - 1.0) / (c2 + 1.0)).sqrt());
        Some(Iat::HyperExp {
            p,
            mean1: mean / (2.0 * p),
            mean2: mean / (2.0 * (1.0 - p)),
        })
    } else {
        None
    };
    vec![
        Some(Iat::Fixed { value: mean }),
        (sd > 0.0).then_some(Iat::Normal { mean, sd }),
        (mean > 0.0).then_some(Iat::Exponential { mean }),
        (mean > 0.0).then_some(Iat::Poisson { mean }),
        gamma,
        hyper,
        Some(empirical(&s.hist)),
    ]
}

/// Gamma by maximum likelihood (Minka's approximation) over the positive samples.
fn fit_gamma(s: &IatStats, mean: f64) -> Option<Iat> {
    if s.positive < 2 || mean <= 0.0 || s.positive != s.count {
        return None;
    }
    let ln_mean = (s.sum as f64 / s.positive as f64).ln();
    let mean_ln = s.sum_log() / s.positive as f64;
    let sdiff = ln_mean - mean_ln;
    if sdiff <= 1e-12 {
        return None;
    }
    let shape = (3.0 - sdiff + ((sdiff - 3.0).powi(2) + 24.0 * sdiff).sqrt()) / (12.0 * sdiff);
    Some(Iat::Gamma {
        shape,
        scale: mean / shape,
    })
}

pub fn empirical(h: &Hist) -> Iat {
    let buckets = h
        .sorted()
        .into_iter()
        .map(|(b, c)| {
            let (lo, hi) = bucket_range(b);
            (lo, hi, c)
        })
        .collect();
    Iat::Empirical { buckets }
}

/// KS distance between the observed histogram and a candidate, at the bucket edges.
pub fn ks_distance(h: &Hist, d: &Iat) -> f64 {
    ks_sorted(&h.sorted(), d)
}

/// `ks_distance` over the histogram's (bucket, count) sorted by bucket. Adjacent buckets
/// share an edge, whose CDF is computed once (finalisation spends its time in CDFs).
fn ks_sorted(sorted: &[(u16, u64)], d: &Iat) -> f64 {
    ks_sorted_within(sorted, d, f64::INFINITY)
}

/// `ks_sorted`, stopping as soon as the distance exceeds `limit` (it then returns a value
/// above `limit`, not the distance itself).
fn ks_sorted_within(sorted: &[(u16, u64)], d: &Iat, limit: f64) -> f64 {
    let total: u64 = sorted.iter().map(|b| b.1).sum();
    if total == 0 {
        return 0.0;
    }
    // the gamma family's ln Γ(shape), once instead of at every edge; an empirical CDF by
    // binary search over its running sums, not a pass over every bucket at every edge
    let ln_gamma_shape = match d {
        Iat::Gamma { shape, .. } => ln_gamma(*shape),
        _ => 0.0,
    };
    let empirical = match d {
        Iat::Empirical { buckets } => Some(EmpiricalCdf::new(buckets)),
        _ => None,
    };
    let cdf = |x: f64| match (d, &empirical) {
        (Iat::Gamma { shape, scale }, _) => {
            gamma_p_with(*shape, x.max(0.0) / scale, ln_gamma_shape)
        }
        (_, Some(e)) => e.at(x),
        _ => d.cdf(x),
    };
    let mut below = 0u64;
    let mut worst: f64 = 0.0;
    let mut last_edge: Option<(u64, f64)> = None; // (hi, cdf there) of the previous bucket
    for &(b, c) in sorted {
        let (lo, hi) = bucket_range(b);
        let before = below as f64 / total as f64;
        below += c;
        let after = below as f64 / total as f64;
        // the observed CDF jumps inside [lo, hi): compare on both sides of the bucket
        let at_lo = match last_edge {
            Some((edge, v)) if edge == lo => v,
            _ => cdf(lo as f64 - 0.5),
        };
        let at_hi = cdf(hi as f64 - 0.5);
        worst = worst.max((at_lo - before).abs());
        worst = worst.max((at_hi - after).abs());
        if worst > limit {
            return worst;
        }
        last_edge = Some((hi, at_hi));
    }
    worst
}

/// An empirical distribution's CDF (`Iat::cdf`, the same sums in the same order) over
/// buckets sorted and apart, as histograms give them.
struct EmpiricalCdf<'a> {
    buckets: &'a [(u64, u64, u64)],
    /// Counts of the buckets before each one, and of all of them last, summed as
    /// `Iat::cdf` sums them.
    before: Vec<f64>,
    n: f64,
}

impl<'a> EmpiricalCdf<'a> {
    fn new(buckets: &'a [(u64, u64, u64)]) -> EmpiricalCdf<'a> {
        let mut before = Vec::with_capacity(buckets.len() + 1);
        before.push(0.0);
        for b in buckets {
            before.push(before[before.len() - 1] + b.2 as f64);
        }
        let n: u64 = buckets.iter().map(|b| b.2).sum();
        EmpiricalCdf {
            buckets,
            before,
            n: n.max(1) as f64,
        }
    }

    fn at(&self, x: f64) -> f64 {
        // buckets wholly below x come first; the next one holds x, or lies above it
        let j = self.buckets.partition_point(|b| x >= b.1 as f64);
        let mut below = self.before[j];
        if let Some(&(lo, hi, c)) = self.buckets.get(j) {
            if x > lo as f64 {
                below += c as f64 * (x - lo as f64) / (hi - lo) as f64;
            }
        }
        below / self.n
    }
}

/// The chosen distribution and its KS distance. `forced` names a family (or "auto").
pub fn choose(s: &IatStats, forced: &str) -> (Iat, f64) {
    let cands = candidates(s);
    if forced != "auto" {
        let i = FAMILIES.iter().position(|f| *f == forced).unwrap_or(2);
        let d = cands[i]
            .clone()
            .or_else(|| cands[2].clone())
            .unwrap_or(Iat::Fixed { value: 0.0 });
        let ks = ks_distance(&s.hist, &d);
        return (d, ks);
    }
    if s.count < MIN_FIT_SAMPLES {
        let exp = cands[2].clone().unwrap_or(Iat::Fixed { value: 0.0 });
        // too few gaps to choose by KS: the exponential of their mean, unless a gamma is far
        // likelier (MSR's flushes: 5 us gaps between seconds of idle time; with exponentials
        // its twin's simulated mean response was -12.1%, with these gammas -0.1%)
        let d = match &cands[4] {
            Some(g) if gamma_gain(s, g) > GAMMA_EVIDENCE => g.clone(),
            _ => exp,
        };
        let ks = ks_distance(&s.hist, &d);
        return (d, ks);
    }
    // The simplest family (by parameter count) whose fit is as good as the best's, within
    // sampling noise: a hyper-exponential never wins over the exponential it contains by noise.
    let sorted = s.hist.sorted();
    // Closed-form CDFs first; a family is measured only as far as it could still be chosen
    // (within KS_NOISE of the best so far), which spares most of the iterative CDFs (gamma,
    // poisson). A family cut short is above that bound, so it is neither the best nor chosen.
    let iterative = |d: &&Iat| matches!(d, Iat::Gamma { .. } | Iat::Poisson { .. });
    let fitted = || cands.iter().take(6).flatten();
    let mut scored: Vec<(Iat, f64)> = Vec::with_capacity(6);
    let mut best_ks = f64::INFINITY;
    for d in fitted()
        .filter(|d| !iterative(d))
        .chain(fitted().filter(iterative))
    {
        let ks = ks_sorted_within(&sorted, d, best_ks + KS_NOISE);
        best_ks = best_ks.min(ks);
        scored.push((d.clone(), ks));
    }
    settle(s, &sorted, &scored)
}

/// The log-likelihood a gamma must gain over the exponential to be chosen for a category of
/// fewer than MIN_FIT_SAMPLES gaps: twice the gain is the likelihood-ratio statistic, so 6
/// asks for 12, p < 0.001 under an exponential. A model has thousands of such categories
/// (cloudPhysics 3,167), and a looser test lets enough of them switch by chance to move
/// cloudPhysics' simulated p95 (3 twins: +10.1% with AIC's 1, +9.5% with 6).
const GAMMA_EVIDENCE: f64 = 6.0;

/// How much more log-likelihood a gamma has than the exponential of the same mean, over the
/// samples of `s` (all positive, as a fitted gamma's are).
fn gamma_gain(s: &IatStats, g: &Iat) -> f64 {
    let Iat::Gamma { shape: k, scale } = *g else {
        return f64::NEG_INFINITY;
    };
    let n = s.positive as f64;
    let (mean_ln, mean) = (s.sum_log() / n, s.sum as f64 / n);
    let gamma = n * ((k - 1.0) * mean_ln - k - k * scale.ln() - ln_gamma(k));
    let exponential = n * (-mean.ln() - 1.0);
    gamma - exponential
}

/// Of the measured families, the simplest within KS_NOISE of the best; the empirical
/// histogram instead where that one fits worse than KS_ACCEPT and samples are enough.
fn settle(s: &IatStats, sorted: &[(u16, u64)], scored: &[(Iat, f64)]) -> (Iat, f64) {
    let best_ks = scored.iter().map(|c| c.1).fold(f64::INFINITY, f64::min);
    let (d, ks) = SIMPLEST_FIRST
        .iter()
        .find_map(|name| {
            scored
                .iter()
                .find(|c| c.0.name() == *name && c.1 <= best_ks + KS_NOISE)
        })
        .cloned()
        .unwrap_or((Iat::Fixed { value: 0.0 }, 1.0));
    if ks > KS_ACCEPT && s.count >= MIN_EMPIRICAL_SAMPLES {
        let e = empirical(&s.hist);
        let eks = ks_sorted(sorted, &e);
        return (e, eks);
    }
    (d, ks)
}

fn normal_cdf(z: f64) -> f64 {
    0.5 * erfc(-z / std::f64::consts::SQRT_2)
}

/// Complementary error function (W. J. Cody's rational approximation via erfc = 1 - erf for
/// small |x|; Numerical Recipes' Chebyshev fit elsewhere; |error| < 1.2e-7).
fn erfc(x: f64) -> f64 {
    let z = x.abs();
    let t = 1.0 / (1.0 + 0.5 * z);
    let r = t
        * (-z * z - 1.26551223
            + t * (1.00002368
                + t * (0.37409196
                    + t * (0.09678418
                        + t * (-0.18628806
                            + t * (0.27886807
                                + t * (-1.13520398
                                    + t * (1.48851587 + t * (-0.82215223 + t * 0.17087277)))))))))
            .exp();
    if x >= 0.0 {
        r
    } else {
        2.0 - r
    }
}

fn ln_gamma(x: f64) -> f64 {
    // Lanczos approximation (g = 7, n = 9)
    const C: [f64; 9] = [
        0.999_999_999_999_809_9,
        676.520_368_121_885_1,
        -1_259.139_216_722_402_8,
        771.323_428_777_653_1,
        -176.615_029_162_140_6,
        12.507_343_278_686_905,
        -0.138_571_095_265_720_12,
        9.984_369_578_019_572e-6,
        1.505_632_735_149_311_6e-7,
    ];
    if x < 0.5 {
        return std::f64::consts::PI.ln()
            - (std::f64::consts::PI * x).sin().ln()
            - ln_gamma(1.0 - x);
    }
    let x = x - 1.0;
    let mut a = C[0];
    let t = x + 7.5;
    for (i, c) in C.iter().enumerate().skip(1) {
        a += c / (x + i as f64);
    }
    0.5 * (2.0 * std::f64::consts::PI).ln() + (x + 0.5) * t.ln() - t + a.ln()
}

/// The regularized lower incomplete gamma function P(a, x).
pub fn gamma_p(a: f64, x: f64) -> f64 {
    gamma_p_with(a, x, ln_gamma(a))
}

/// `gamma_p` given ln Γ(a).
fn gamma_p_with(a: f64, x: f64, ln_gamma_a: f64) -> f64 {
    if x <= 0.0 {
        return 0.0;
    }
    if x < a + 1.0 {
        // series
        let mut sum = 1.0 / a;
        let mut term = sum;
        let mut n = a;
        for _ in 0..500 {
            n += 1.0;
            term *= x / n;
            sum += term;
            if term.abs() < sum.abs() * 1e-14 {
                break;
            }
        }
        (sum.ln() - x + a * x.ln() - ln_gamma_a).exp().min(1.0)
    } else {
        // continued fraction (Lentz)
        let tiny = 1e-300;
        let mut b = x + 1.0 - a;
        let mut c = 1.0 / tiny;
        let mut d = 1.0 / b;
        let mut h = d;
        for i in 1..500 {
            let an = -(i as f64) * (i as f64 - a);
            b += 2.0;
            d = an * d + b;
            if d.abs() < tiny {
                d = tiny;
            }
            c = b + an / c;
            if c.abs() < tiny {
                c = tiny;
            }
            d = 1.0 / d;
            let del = d * c;
            h *= del;
            if (del - 1.0).abs() < 1e-14 {
                break;
            }
        }
        (1.0 - (-x + a * x.ln() - ln_gamma_a).exp() * h).clamp(0.0, 1.0)
    }
}

fn poisson_cdf(k: f64, lambda: f64) -> f64 {
    if k < 0.0 {
        return 0.0;
    }
    if lambda <= 0.0 {
        return 1.0;
    }
    // P(X <= k) = Q(k + 1, lambda) = 1 - P(k + 1, lambda)
    1.0 - gamma_p(k + 1.0, lambda)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand_pcg::Pcg64Mcg;

    fn stats_of(values: impl Iterator<Item = u64>) -> IatStats {
        let mut s = IatStats::default();
        for v in values {
            s.add(v);
        }
        s
    }

    #[test]
    fn few_gaps_take_a_gamma_only_on_strong_evidence() {
        // a flush's six 5 us gaps and one of 3 s: the gamma's log-likelihood gains 48.6
        // (shape 0.0875, by hand from Minka's approximation)
        let bursty = stats_of([5_000u64; 6].into_iter().chain([3_000_000_000]));
        let (d, _) = choose(&bursty, "auto");
        let Iat::Gamma { shape, .. } = d else {
            panic!("{d:?}")
        };
        assert!((shape - 0.087_526).abs() < 1e-5, "{shape}");
        assert!((gamma_gain(&bursty, &d) - 48.5675).abs() < 1e-3);
        // five regular gaps: a gamma of shape 4.6 gains only 2.1, not evidence enough
        let regular = stats_of([1_000_000u64, 2_000_000, 500_000, 1_500_000, 800_000].into_iter());
        let gamma = candidates(&regular)[4].clone().unwrap();
        assert!((gamma_gain(&regular, &gamma) - 2.1148).abs() < 1e-3);
        assert!(matches!(
            choose(&regular, "auto").0,
            Iat::Exponential { .. }
        ));
    }

    #[test]
    fn special_functions_match_known_values() {
        assert!((normal_cdf(1.0) - 0.841_344_746).abs() < 1e-6);
        assert!((gamma_p(1.0, 2.0) - (1.0 - (-2.0f64).exp())).abs() < 1e-9);
        assert!((gamma_p(3.0, 2.5) - 0.456_186_884).abs() < 1e-6);
        assert!((poisson_cdf(2.0, 1.5) - 0.808_846_831).abs() < 1e-6);
    }

    #[test]
    fn chooses_the_family_that_made_the_data() {
        let mut rng = Pcg64Mcg::seed_from_u64(1);
        let exp = stats_of((0..20_000).map(|_| (-1e6 * (1.0 - rng.random::<f64>()).ln()) as u64));
        let (d, ks) = choose(&exp, "auto");
        assert!(
            matches!(d, Iat::Exponential { .. } | Iat::Gamma { .. }),
            "{d:?}"
        );
        assert!(ks < 0.02);
        let fixed = stats_of(std::iter::repeat_n(5_000u64, 100));
        assert_eq!(choose(&fixed, "auto").0, Iat::Fixed { value: 5_000.0 });
        let g = Gamma::new(4.0, 250_000.0).unwrap();
        let gam = stats_of((0..20_000).map(|_| g.sample(&mut rng) as u64));
        match choose(&gam, "auto").0 {
            Iat::Gamma { shape, .. } => assert!((shape - 4.0).abs() < 0.2, "shape {shape}"),
            other => panic!("expected gamma, got {other:?}"),
        }
    }

    /// The choice as made before the early stops: every family measured in full.
    fn choose_in_full(s: &IatStats) -> (Iat, f64) {
        let sorted = s.hist.sorted();
        let scored: Vec<(Iat, f64)> = candidates(s)
            .into_iter()
            .take(6)
            .flatten()
            .map(|d| {
                let ks = ks_sorted(&sorted, &d);
                (d, ks)
            })
            .collect();
        settle(s, &sorted, &scored)
    }

    #[test]
    fn early_stops_choose_as_measuring_every_family_in_full() {
        let mut rng = Pcg64Mcg::seed_from_u64(3);
        let g = Gamma::new(0.7, 3e5).unwrap();
        let mut samples: Vec<Vec<u64>> = vec![
            (0..5_000).map(|_| g.sample(&mut rng) as u64).collect(),
            (0..3_000)
                .map(|i| if i % 3 == 0 { 40 } else { 2_000_000 + i })
                .collect(),
            (0..500)
                .map(|_| (-2e6 * (1.0 - rng.random::<f64>()).ln()) as u64)
                .collect(),
            (0..60).map(|i| 1_000 + 17 * i).collect(),
        ];
        // gammas of every shape and scales around the poisson unit, where families tie
        for k in 0..120 {
            let g = Gamma::new(0.3 + 0.1 * k as f64, 2e5 * (1 + k % 7) as f64).unwrap();
            let n = 40 + 97 * (k % 11);
            samples.push((0..n).map(|_| g.sample(&mut rng) as u64).collect());
            // and two-phase mixtures, where the hyper-exponential is best and others near it
            let (p, m1, m2) = (0.2 + 0.005 * k as f64, 1e5, 1e6 * (1 + k % 5) as f64);
            let h = Iat::HyperExp {
                p,
                mean1: m1,
                mean2: m2,
            };
            samples.push((0..n).map(|_| h.sample(&mut rng) as u64).collect());
        }
        for v in samples {
            let st = stats_of(v.into_iter());
            let (fast, full) = (choose(&st, "auto"), choose_in_full(&st));
            assert_eq!(fast.0, full.0);
            assert_eq!(fast.1.to_bits(), full.1.to_bits());
        }
    }

    #[test]
    fn empirical_cdf_by_search_is_the_bucket_sum() {
        let buckets = vec![(0, 1, 3), (1, 2, 0), (5, 6, 7), (16, 18, 2), (40, 48, 11)];
        let e = EmpiricalCdf::new(&buckets);
        let d = Iat::Empirical {
            buckets: buckets.clone(),
        };
        for i in -4..120 {
            let x = i as f64 * 0.5;
            assert_eq!(e.at(x).to_bits(), d.cdf(x).to_bits(), "at {x}");
        }
    }

    #[test]
    fn samples_keep_the_mean() {
        let mut rng = Pcg64Mcg::seed_from_u64(2);
        let dists = [
            Iat::Exponential { mean: 1e5 },
            Iat::Gamma {
                shape: 2.0,
                scale: 5e4,
            },
            Iat::HyperExp {
                p: 0.8,
                mean1: 62_500.0,
                mean2: 250_000.0,
            },
            Iat::Normal { mean: 1e5, sd: 1e4 },
            Iat::Poisson { mean: 1e7 },
        ];
        for d in dists {
            let m: f64 = (0..100_000).map(|_| d.sample(&mut rng)).sum::<f64>() / 100_000.0;
            assert!((m / d.mean() - 1.0).abs() < 0.02, "{d:?}: {m}");
        }
    }
}
