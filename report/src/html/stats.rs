//! Summary statistics of kernel times (min, median, mean, standard
//! deviation), over all repetitions of the runs they describe.

#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Spread {
    pub n: usize,
    pub min: f64,
    pub median: f64,
    pub max: f64,
    pub mean: f64,
    /// Sample standard deviation (0 for a single value).
    pub sd: f64,
}

/// None for no values.
pub fn spread(values: &[f64]) -> Option<Spread> {
    if values.is_empty() {
        return None;
    }
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    let median = if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    };
    let mean = v.iter().sum::<f64>() / n as f64;
    let sd = if n > 1 {
        (v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1) as f64).sqrt()
    } else {
        0.0
    };
    Some(Spread {
        n,
        min: v[0],
        median,
        max: v[n - 1],
        mean,
        sd,
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn spread_of_known_values() {
        let s = super::spread(&[4.0, 1.0, 3.0, 2.0]).unwrap();
        assert_eq!(
            (s.n, s.min, s.median, s.max, s.mean),
            (4, 1.0, 2.5, 4.0, 2.5)
        );
        assert!((s.sd - 1.2909944).abs() < 1e-6);
        assert_eq!(super::spread(&[7.0]).unwrap().sd, 0.0);
        assert!(super::spread(&[]).is_none());
    }
}
