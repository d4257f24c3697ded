//! The search of `tune`, apart from any replay: successive halving with a
//! fixed launch budget, and the full grid it is measured against
//! (bench/tune_search.sh).
//!
//! Successive halving (Karnin, Koren and Somekh 2013): every variant is
//! measured with few repetitions; the faster half (by the median of all
//! its launches so far) is kept and measured again with more, until one
//! is left. The budget is half of the
//! grid's (`n` variants × `repetitions` launches), split evenly between the
//! `ceil(log2 n)` rounds, so each round gives its survivors more
//! repetitions than the one before and the final comparison is the best
//! measured one. A variant that does not verify is dropped for good, in the
//! round it fails: it is never the answer however fast it ran.

/// One measurement of a variant: whether its output verified and the
/// kernel time of each repetition.
#[derive(Clone, Debug)]
pub struct Measured {
    pub verified: bool,
    pub times_ns: Vec<u64>,
}

impl Measured {
    /// The median kernel time (the lower one of an even count), or None
    /// when the kernel did not run.
    pub fn median(&self) -> Option<u64> {
        median(&self.times_ns)
    }
}

/// The median of `v`, the lower middle one of an even count: of two
/// repetitions the faster, since the first launch of a replay pays for
/// first touches of its memory that later ones do not.
pub fn median(v: &[u64]) -> Option<u64> {
    let mut s = v.to_vec();
    s.sort_unstable();
    s.get(s.len().checked_sub(1)? / 2).copied()
}

/// The rounds of a halving search of `n` variants: (variants measured,
/// repetitions each), within half of `n * repetitions` launches (at least
/// one repetition each).
pub fn plan(n: usize, repetitions: u32) -> Vec<(usize, u32)> {
    if n == 0 {
        return Vec::new();
    }
    if n == 1 {
        return vec![(1, repetitions.max(1))];
    }
    let mut sizes = vec![n];
    while let Some(&last) = sizes.last().filter(|&&l| l > 1) {
        let next = last.div_ceil(2);
        if next == 1 {
            break;
        }
        sizes.push(next);
    }
    let budget = n as u64 * u64::from(repetitions.max(1)) / 2;
    let per_round = budget / sizes.len() as u64;
    sizes
        .into_iter()
        .map(|k| {
            (
                k,
                (per_round / k as u64).clamp(1, u64::from(u32::MAX)) as u32,
            )
        })
        .collect()
}

/// What the search found: the winner (None when nothing verified), every
/// measurement as (round, variant, result) in order, and the baseline's.
pub struct Outcome<T> {
    pub best: Option<usize>,
    pub trials: Vec<(u32, usize, T)>,
    pub baseline: Option<T>,
}

/// `measure(Some(variant), repetitions, round)` replays a variant,
/// `measure(None, repetitions, round)` the baseline (rounds from 1).
pub type Measure<'a, T, E> = dyn FnMut(Option<usize>, u32, u32) -> Result<T, E> + 'a;

/// Halving over variants `0..n`; `verdict` reads a measurement. The
/// baseline is measured once, right before the last round with its
/// repetitions: under the same conditions as the final comparison.
pub fn halving<T, E>(
    n: usize,
    repetitions: u32,
    measure: &mut Measure<'_, T, E>,
    verdict: &dyn Fn(&T) -> Measured,
) -> Result<Outcome<T>, E> {
    let rounds = plan(n, repetitions);
    let mut alive: Vec<usize> = (0..n).collect();
    let mut trials = Vec::new();
    let mut baseline = None;
    let mut pooled: std::collections::HashMap<usize, Vec<u64>> = Default::default();
    for (round, &(size, reps)) in rounds.iter().enumerate() {
        if round + 1 == rounds.len() {
            baseline = Some(measure(None, reps, round as u32 + 1)?);
        }
        alive.truncate(size);
        let mut ranked = Vec::new();
        for &v in &alive {
            let t = measure(Some(v), reps, round as u32 + 1)?;
            let m = verdict(&t);
            if m.verified {
                // Ranked by every launch it made so far: a survivor's
                // earlier rounds count too, at no cost.
                let all = pooled.entry(v).or_default();
                all.extend_from_slice(&m.times_ns);
                if let Some(med) = median(all) {
                    ranked.push((med, v));
                }
            }
            trials.push((round as u32 + 1, v, t));
        }
        ranked.sort();
        alive = ranked.into_iter().map(|(_, v)| v).collect();
        if alive.is_empty() {
            // Nothing left to compare, but the baseline is still shown.
            if baseline.is_none() {
                baseline = Some(measure(None, reps, round as u32 + 1)?);
            }
            break;
        }
    }
    Ok(Outcome {
        best: alive.first().copied(),
        trials,
        baseline,
    })
}

/// Every variant with `repetitions` each, after the baseline: the
/// fastest verified median.
pub fn grid<T, E>(
    n: usize,
    repetitions: u32,
    measure: &mut Measure<'_, T, E>,
    verdict: &dyn Fn(&T) -> Measured,
) -> Result<Outcome<T>, E> {
    let mut trials = Vec::new();
    let mut best: Option<(u64, usize)> = None;
    let baseline = Some(measure(None, repetitions.max(1), 1)?);
    for v in 0..n {
        let t = measure(Some(v), repetitions.max(1), 1)?;
        let m = verdict(&t);
        if let (true, Some(med)) = (m.verified, m.median()) {
            if best.is_none_or(|(b, _)| med < b) {
                best = Some((med, v));
            }
        }
        trials.push((1, v, t));
    }
    Ok(Outcome {
        best: best.map(|(_, v)| v),
        trials,
        baseline,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A noisy fake kernel: variant `v` takes `cost[v]` plus noise that
    /// shrinks with more repetitions (a median), and `bad` ones change
    /// the output.
    fn fake<'a>(
        cost: &'a [u64],
        bad: &[usize],
    ) -> impl FnMut(Option<usize>, u32, u32) -> Result<Measured, ()> + 'a {
        let mut seed = 12345u64;
        let bad = bad.to_vec();
        move |v, reps, _| {
            let v = v.unwrap_or(0);
            let mut times = Vec::new();
            for _ in 0..reps {
                seed = seed
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                times.push(cost[v] + (seed >> 33) % 30);
            }
            Ok(Measured {
                verified: !bad.contains(&v),
                times_ns: times,
            })
        }
    }

    #[test]
    fn the_plan_stays_within_half_of_the_grid() {
        for n in 1..40usize {
            for r in [2u32, 4, 8, 16, 32] {
                let p = plan(n, r);
                let spent: u64 = p.iter().map(|&(k, r)| k as u64 * u64::from(r)).sum();
                assert!(p.last().is_some_and(|&(k, _)| k <= 2), "{n} {r} {p:?}");
                if n > 1 && r as usize >= 2 * p.len() {
                    assert!(spent * 2 <= n as u64 * u64::from(r), "{n} {r} {p:?}");
                }
                // Later rounds measure each survivor at least as long.
                assert!(p.windows(2).all(|w| w[1].1 >= w[0].1), "{p:?}");
            }
        }
    }

    #[test]
    fn halving_finds_the_best_and_never_a_variant_that_does_not_verify() {
        // Variant 5 is fastest but changes the output; 3 is the best verified.
        let cost = [500, 400, 300, 100, 450, 10, 350, 600];
        let verdict = |m: &Measured| m.clone();
        let mut m = fake(&cost, &[5]);
        let out = halving(8, 16, &mut m, &verdict).unwrap();
        assert_eq!(out.best, Some(3));
        let spent: u32 = out.trials.iter().map(|t| t.2.times_ns.len() as u32).sum();
        assert!(spent <= 8 * 16 / 2, "{spent}");
        let mut m = fake(&cost, &[5]);
        assert_eq!(grid(8, 16, &mut m, &verdict).unwrap().best, Some(3));
        // Nothing verifies: no answer.
        let mut m = fake(&cost, &[0, 1, 2, 3, 4, 5, 6, 7]);
        let out = halving(8, 16, &mut m, &verdict).unwrap();
        assert_eq!(out.best, None);
    }
}
