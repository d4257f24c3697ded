//! Floating-point comparison for kernels whose results legitimately differ
//! in the last bits (other thread counts, FMA contraction, another device).
//!
//! The whole arena is read as little-endian `f32` or `f64` elements from its
//! base. An element passes when both are NaN, bit-identical, or
//! `|actual - expected| <= atol + rtol * |expected|` (numpy's `isclose`),
//! and, with `max_ulp`, at most that many units in the last place apart.
//! Trailing bytes that do not fill an element are compared exactly.

use serde::Serialize;

use crate::error::ReplayError;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum DType {
    F32,
    F64,
}

impl DType {
    pub fn size(self) -> usize {
        match self {
            DType::F32 => 4,
            DType::F64 => 8,
        }
    }
}

impl std::str::FromStr for DType {
    type Err = ReplayError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "f32" | "float" => Ok(DType::F32),
            "f64" | "double" => Ok(DType::F64),
            _ => Err(ReplayError::Tolerance(format!(
                "unknown --dtype `{s}`: use f32 or f64"
            ))),
        }
    }
}

/// Bounds of tolerance mode.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Tolerance {
    pub dtype: DType,
    pub rtol: f64,
    pub atol: f64,
    pub max_ulp: Option<u64>,
}

impl Tolerance {
    pub fn validate(&self) -> Result<(), ReplayError> {
        for (name, v) in [("--rtol", self.rtol), ("--atol", self.atol)] {
            if !(v >= 0.0 && v.is_finite()) {
                return Err(ReplayError::Tolerance(format!(
                    "{name} must be a finite number >= 0, got {v}"
                )));
            }
        }
        Ok(())
    }
}

/// Result of a tolerance comparison.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ToleranceReport {
    pub dtype: DType,
    pub elements: u64,
    /// Elements whose bits differ.
    pub differing: u64,
    /// Elements outside the bounds.
    pub out_of_bounds: u64,
    pub max_abs_error: f64,
    pub max_rel_error: f64,
    pub max_ulp: u64,
    /// Elements where exactly one side is NaN.
    pub nan_mismatches: u64,
    /// Arena offset of the first element outside the bounds.
    pub first_out_of_bounds: Option<u64>,
    /// Trailing bytes (not a whole element) that differ.
    pub tail_bytes_differing: u64,
    pub passed: bool,
}

/// Streaming tolerance comparer; feed pieces whose length is a multiple of
/// the element size except for the last one.
pub struct ToleranceComparer {
    tol: Tolerance,
    pos: u64,
    r: ToleranceReport,
}

/// Sign-magnitude bits mapped onto a line where adjacent floats differ by 1.
fn ordered(bits: u64, sign: u64) -> i128 {
    if bits & sign != 0 {
        -((bits & !sign) as i128)
    } else {
        bits as i128
    }
}

impl ToleranceComparer {
    pub fn new(tol: Tolerance) -> ToleranceComparer {
        ToleranceComparer {
            tol,
            pos: 0,
            r: ToleranceReport {
                dtype: tol.dtype,
                elements: 0,
                differing: 0,
                out_of_bounds: 0,
                max_abs_error: 0.0,
                max_rel_error: 0.0,
                max_ulp: 0,
                nan_mismatches: 0,
                first_out_of_bounds: None,
                tail_bytes_differing: 0,
                passed: false,
            },
        }
    }

    pub fn feed(&mut self, actual: &[u8], expected: &[u8]) {
        let n = actual.len().min(expected.len());
        let es = self.tol.dtype.size();
        let whole = n / es * es;
        let fast = actual[..whole] == expected[..whole];
        for (i, (a, e)) in actual[..whole]
            .chunks_exact(es)
            .zip(expected[..whole].chunks_exact(es))
            .enumerate()
        {
            self.r.elements += 1;
            if fast || a == e {
                continue;
            }
            self.element(self.pos + (i * es) as u64, a, e);
        }
        self.r.tail_bytes_differing += actual[whole..n]
            .iter()
            .zip(&expected[whole..n])
            .filter(|(x, y)| x != y)
            .count() as u64;
        self.pos += n as u64;
    }

    fn element(&mut self, off: u64, a: &[u8], e: &[u8]) {
        self.r.differing += 1;
        let (av, ev, ulp) = match self.tol.dtype {
            DType::F32 => {
                let (ab, eb) = (
                    u32::from_le_bytes([a[0], a[1], a[2], a[3]]),
                    u32::from_le_bytes([e[0], e[1], e[2], e[3]]),
                );
                let s = 1u64 << 31;
                let ulp = (ordered(ab.into(), s) - ordered(eb.into(), s)).unsigned_abs();
                (f32::from_bits(ab) as f64, f32::from_bits(eb) as f64, ulp)
            }
            DType::F64 => {
                let mut ab = [0u8; 8];
                let mut eb = [0u8; 8];
                ab.copy_from_slice(a);
                eb.copy_from_slice(e);
                let (ab, eb) = (u64::from_le_bytes(ab), u64::from_le_bytes(eb));
                let s = 1u64 << 63;
                let ulp = (ordered(ab, s) - ordered(eb, s)).unsigned_abs();
                (f64::from_bits(ab), f64::from_bits(eb), ulp)
            }
        };
        if av.is_nan() && ev.is_nan() {
            return;
        }
        let ulp = u64::try_from(ulp).unwrap_or(u64::MAX);
        let (abs, rel, ok) = if av.is_nan() || ev.is_nan() {
            self.r.nan_mismatches += 1;
            (f64::INFINITY, f64::INFINITY, false)
        } else {
            let abs = (av - ev).abs();
            let rel = if ev == 0.0 {
                f64::INFINITY
            } else {
                abs / ev.abs()
            };
            let within = abs <= self.tol.atol + self.tol.rtol * ev.abs();
            let ulp_ok = self.tol.max_ulp.is_none_or(|m| ulp <= m);
            (abs, rel, within && ulp_ok)
        };
        // Infinite relative error of a zero expected value within atol is
        // not informative; only record it when the element fails.
        if ok || rel.is_finite() {
            self.r.max_rel_error =
                self.r
                    .max_rel_error
                    .max(if rel.is_finite() { rel } else { 0.0 });
        } else {
            self.r.max_rel_error = f64::INFINITY;
        }
        self.r.max_abs_error = self.r.max_abs_error.max(abs);
        self.r.max_ulp = self.r.max_ulp.max(ulp);
        if !ok {
            self.r.out_of_bounds += 1;
            self.r.first_out_of_bounds.get_or_insert(off);
        }
    }

    pub fn finish(mut self) -> ToleranceReport {
        self.r.passed = self.r.out_of_bounds == 0 && self.r.tail_bytes_differing == 0;
        self.r
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f32s(v: &[f32]) -> Vec<u8> {
        v.iter().flat_map(|x| x.to_le_bytes()).collect()
    }

    fn tol(rtol: f64, atol: f64, max_ulp: Option<u64>) -> Tolerance {
        Tolerance {
            dtype: DType::F32,
            rtol,
            atol,
            max_ulp,
        }
    }

    #[test]
    fn one_ulp_apart_passes_within_rtol_and_reports_errors() {
        let e = f32s(&[1.0, 2.0, 0.0, f32::NAN]);
        let a = f32s(&[f32::from_bits(1.0f32.to_bits() + 1), 2.0, 0.0, f32::NAN]);
        let mut c = ToleranceComparer::new(tol(1e-6, 0.0, Some(1)));
        c.feed(&a[..6], &e[..6]);
        c.feed(&a[6..], &e[6..]);
        let r = c.finish();
        // the first feed ends mid-element: its 2 trailing bytes count as tail
        assert_eq!(r.elements, 1 + 2);
        let mut c = ToleranceComparer::new(tol(1e-6, 0.0, Some(1)));
        c.feed(&a, &e);
        let r = c.finish();
        assert!(r.passed, "{r:?}");
        assert_eq!(r.differing, 1);
        assert_eq!(r.max_ulp, 1);
        assert!(r.max_rel_error > 1e-8 && r.max_rel_error < 2e-7);
    }

    #[test]
    fn out_of_bounds_nan_and_ulp_limit_fail() {
        let e = f32s(&[1.0, 5.0, 1.0]);
        let a = f32s(&[1.1, f32::NAN, f32::from_bits(1.0f32.to_bits() + 3)]);
        let mut c = ToleranceComparer::new(tol(1e-3, 0.0, Some(2)));
        c.feed(&a, &e);
        let r = c.finish();
        assert!(!r.passed);
        assert_eq!(r.out_of_bounds, 3);
        assert_eq!(r.nan_mismatches, 1);
        assert_eq!(r.first_out_of_bounds, Some(0));
        assert_eq!(r.max_abs_error, f64::INFINITY);
    }

    #[test]
    fn f64_across_zero_and_atol() {
        let e: Vec<u8> = [0.0f64, -1e-12]
            .iter()
            .flat_map(|x| x.to_le_bytes())
            .collect();
        let a: Vec<u8> = [1e-12f64, 1e-12]
            .iter()
            .flat_map(|x| x.to_le_bytes())
            .collect();
        let t = Tolerance {
            dtype: DType::F64,
            rtol: 0.0,
            atol: 1e-11,
            max_ulp: None,
        };
        let mut c = ToleranceComparer::new(t);
        c.feed(&a, &e);
        let r = c.finish();
        assert!(r.passed, "{r:?}");
        assert!(r.max_ulp > 1 << 60, "sign change is far in ULPs");
        assert!(
            ToleranceComparer::new(Tolerance { atol: 1e-13, ..t })
                .tap(&a, &e)
                .out_of_bounds
                == 2
        );
        assert!("f16".parse::<DType>().is_err());
        assert!(Tolerance { rtol: -1.0, ..t }.validate().is_err());
    }

    impl ToleranceComparer {
        fn tap(mut self, a: &[u8], e: &[u8]) -> ToleranceReport {
            self.feed(a, e);
            self.finish()
        }
    }
}
