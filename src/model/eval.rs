//! Scoring a model on text: the negative log-likelihood of a token under a
//! logits row, and an exact accumulator of those values (perplexity).
//!
//! Contract: every result is a function of the input bits alone, on every
//! target and for every thread count, because each step is a soft-float
//! operation rounded to nearest even in a fixed order, or an exact integer
//! sum (whose order does not matter). [`nll_of`] computes, for a row `l`
//! and a token `t`,
//!
//! ```text
//!   m   = max_i l[i]                          (exact)
//!   e_i = exp(l[i] - m)                       (subtract rounded, exp correctly rounded)
//!   S   = Σ e_i                               (exact, then rounded once to binary32)
//!   nll = (m - l[t]) + ln(S)                  (subtract, ln, add: each rounded)
//! ```
//!
//! the same formula llama.cpp's `llama-perplexity` evaluates in hardware
//! floats (`max + log(Σ exp(l - max)) - l[t]`, summed in double). `S ≥ 1`
//! (the maximum's own term is exactly 1), so `nll ≥ 0` for finite logits; a
//! NaN or infinite logit makes the result NaN.
//!
//! [`NllSum`] adds those values exactly (and their squares, for the
//! uncertainty) in wide fixed point, so the perplexity of a text does not
//! depend on how its chunks were scheduled.
//!
//! Verified: unit tests below against an f64 reference computed
//! independently in the test, and for order independence.

#![forbid(unsafe_code)]

use crate::float::round_pack;
use crate::{Error, F32, Result};

/// `-ln p(token | logits)`: the negative log-likelihood of `token` under
/// the softmax of `logits`, evaluated as the module header states.
/// `TokenOutOfRange` if `token` is not an index of `logits`. NaN if a logit
/// is NaN or infinite.
pub fn nll_of(logits: &[F32], token: usize) -> Result<F32> {
    let target = *logits.get(token).ok_or(Error::TokenOutOfRange {
        token: u32::try_from(token).unwrap_or(u32::MAX),
        vocab_size: logits.len(),
    })?;
    let mut max = target;
    for &l in logits {
        if l.gt(max) {
            max = l;
        }
    }
    // Σ exp(l - max), exactly: each term is in [0, 1] (NaN otherwise).
    let mut sum = Wide::<EXP_SUM_WORDS>::ZERO;
    for &l in logits {
        let e = (l - max).exp();
        if !e.le(F32::ONE) {
            return Ok(F32::NAN);
        }
        let (m, shift) = split(e);
        sum.add_shifted(m as u64, shift);
    }
    let s = sum.rounded(-149);
    Ok((max - target) + s.ln())
}

/// Words of the exact sum of `exp` terms: each term is below 2^1 with its
/// quantum 2^-149 (151 bits) and up to 2^32 of them are added: 183 < 192.
const EXP_SUM_WORDS: usize = 3;
/// Words of the exact sum of binary32 values below 2^128 (quantum 2^-149:
/// 277 bits) over up to 2^64 additions: 341 < 384.
const SUM_WORDS: usize = 6;
/// Words of the exact sum of their squares (below 2^256, quantum 2^-298:
/// 554 bits) over up to 2^64 additions: 618 < 640.
const SUM_SQ_WORDS: usize = 10;

/// Exact sum of the negative log-likelihoods of the scored tokens, their
/// squares and their count. Non-finite (or negative) values are not added
/// but counted; any of them makes [`NllSum::mean`] NaN.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NllSum {
    sum: Wide<SUM_WORDS>,
    sum_sq: Wide<SUM_SQ_WORDS>,
    count: u64,
    invalid: u64,
}

impl Default for NllSum {
    fn default() -> Self {
        Self::new()
    }
}

impl NllSum {
    /// No tokens yet.
    pub const fn new() -> NllSum {
        NllSum {
            sum: Wide::ZERO,
            sum_sq: Wide::ZERO,
            count: 0,
            invalid: 0,
        }
    }

    /// Adds one token's negative log-likelihood (exactly).
    pub fn add(&mut self, nll: F32) {
        self.count += 1;
        let bits = nll.to_bits();
        if bits >= 0x7F80_0000 {
            // Negative (sign bit set), infinite or NaN; -0 counts as +0.
            if bits != 0x8000_0000 {
                self.invalid += 1;
            }
            return;
        }
        let (m, shift) = split(nll);
        self.sum.add_shifted(m as u64, shift);
        let m = m as u64;
        // nll² = m² · 2^(2·(shift - 149)): its quantum is 2^-298.
        self.sum_sq.add_shifted(m * m, 2 * shift);
    }

    /// Adds every value counted in `other` (the sums are exact, so the
    /// order in which partial sums are merged does not matter).
    pub fn merge(&mut self, other: &NllSum) {
        self.sum.add_wide(&other.sum);
        self.sum_sq.add_wide(&other.sum_sq);
        self.count += other.count;
        self.invalid += other.invalid;
    }

    /// Values added so far (including invalid ones).
    pub fn count(&self) -> u64 {
        self.count
    }

    /// Values that were NaN, infinite or negative.
    pub fn invalid(&self) -> u64 {
        self.invalid
    }

    /// The sum, rounded once to binary32.
    pub fn sum(&self) -> F32 {
        self.sum.rounded(-149)
    }

    /// The sum of squares, rounded once to binary32.
    pub fn sum_sq(&self) -> F32 {
        self.sum_sq.rounded(-298)
    }

    /// The mean `sum / count`: the rounded sum divided by the count (two
    /// roundings). NaN when nothing was added or a value was invalid.
    pub fn mean(&self) -> F32 {
        if self.count == 0 || self.invalid != 0 {
            return F32::NAN;
        }
        self.sum() / F32::from_i64(self.count as i64)
    }
}

/// `(m, shift)` with `x = m · 2^(shift - 149)`, `m < 2^24`, for a finite
/// nonnegative binary32 `x` (the sign bit is ignored).
#[inline]
fn split(x: F32) -> (u32, u32) {
    let bits = x.to_bits() & 0x7FFF_FFFF;
    let biased = bits >> 23;
    let frac = bits & 0x007F_FFFF;
    if biased == 0 {
        (frac, 0)
    } else {
        (frac | 0x0080_0000, biased - 1)
    }
}

/// An unsigned fixed-point integer of `N` 64-bit words, little-endian.
/// Additions past the top word are lost; the callers size `N` so that
/// cannot happen for the counts they document.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Wide<const N: usize>([u64; N]);

impl<const N: usize> Wide<N> {
    const ZERO: Wide<N> = Wide([0; N]);

    /// Adds `m · 2^shift`.
    #[inline]
    fn add_shifted(&mut self, m: u64, shift: u32) {
        let word = (shift / 64) as usize;
        let v = (m as u128) << (shift % 64);
        self.add_at(word, v as u64);
        self.add_at(word + 1, (v >> 64) as u64);
    }

    /// Adds `v · 2^(64·word)`, carrying upward.
    #[inline]
    fn add_at(&mut self, word: usize, v: u64) {
        let mut carry = v;
        let mut i = word;
        while carry != 0 {
            let Some(w) = self.0.get_mut(i) else { return };
            let (s, c) = w.overflowing_add(carry);
            *w = s;
            carry = c as u64;
            i += 1;
        }
    }

    /// Adds another accumulator of the same width.
    fn add_wide(&mut self, other: &Wide<N>) {
        for (i, &v) in other.0.iter().enumerate() {
            self.add_at(i, v);
        }
    }

    /// The value `self · 2^lsb_exp` rounded once to binary32: the top 128
    /// bits from the highest nonzero word, with a sticky bit for the rest.
    fn rounded(&self, lsb_exp: i32) -> F32 {
        let Some(top) = self.0.iter().rposition(|&w| w != 0) else {
            return F32::ZERO;
        };
        let hi = self.0[top] as u128;
        if top == 0 {
            return round_pack(false, hi, lsb_exp);
        }
        let lo = self.0[top - 1] as u128;
        let sticky = self.0[..top - 1].iter().any(|&w| w != 0) as u128;
        // `hi` is nonzero, so bit 0 lies at least 64 bits below the leading
        // one: the sticky bit there cannot change a 24-bit rounding.
        let sig = (hi << 64) | lo | sticky;
        round_pack(false, sig, lsb_exp + 64 * (top as i32 - 1))
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use std::vec::Vec;

    fn splitmix(s: &mut u64) -> u64 {
        *s = s.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = *s;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// `n` logits in about `[-scale, scale]`, as bits of host f32.
    fn random_row(seed: u64, n: usize, scale: f32) -> Vec<F32> {
        let mut s = seed;
        (0..n)
            .map(|_| {
                let u = (splitmix(&mut s) >> 40) as f32 / (1u64 << 24) as f32;
                F32::from_bits(((2.0 * u - 1.0) * scale).to_bits())
            })
            .collect()
    }

    fn host(x: F32) -> f64 {
        f32::from_bits(x.to_bits()) as f64
    }

    /// The reference: the same formula in f64 (hardware, independent of
    /// the soft-float code), max first for stability.
    fn nll_f64(row: &[F32], token: usize) -> f64 {
        let l: Vec<f64> = row.iter().map(|&x| host(x)).collect();
        let max = l.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
        let s: f64 = l.iter().map(|&x| (x - max).exp()).sum();
        max + s.ln() - l[token]
    }

    #[test]
    fn nll_matches_f64_reference() {
        for (seed, n, scale) in [
            (1u64, 1usize, 3.0f32),
            (2, 2, 1.0),
            (3, 1000, 10.0),
            (4, 49_152, 20.0),
            (5, 4096, 0.001),
            (6, 32_000, 80.0),
        ] {
            let row = random_row(seed, n, scale);
            for token in [0, n / 3, n - 1] {
                let got = host(nll_of(&row, token).unwrap());
                let want = nll_f64(&row, token);
                // Each soft step is rounded to 2^-24 relative; the rounded
                // subtractions `l - m` carry |l - m| ≤ 2·scale into exp.
                let tol = 1e-6 * (1.0 + want.abs() + 2.0 * scale as f64);
                assert!(
                    (got - want).abs() <= tol,
                    "seed {seed} n {n} token {token}: {got} vs {want}"
                );
                assert!(got >= 0.0);
            }
        }
    }

    #[test]
    fn nll_of_a_certain_token_is_zero_and_uniform_is_ln_n() {
        // One logit far above the rest: probability 1 within binary32.
        let mut row = [F32::ZERO; 100];
        row[7] = F32::from_i32(200);
        assert_eq!(nll_of(&row, 7).unwrap(), F32::ZERO);
        // Uniform over n: -ln(1/n) = ln n, exactly the rounded ln of n.
        let row = [F32::from_i32(3); 49_152];
        assert_eq!(nll_of(&row, 5).unwrap(), F32::from_i32(49_152).ln());
    }

    #[test]
    fn nll_does_not_depend_on_the_order_of_the_other_logits() {
        let mut row = random_row(11, 5000, 15.0);
        let token = 1234;
        let want = nll_of(&row, token).unwrap();
        let target = row[token];
        row.reverse();
        let token = row.len() - 1 - token;
        assert_eq!(row[token], target);
        assert_eq!(nll_of(&row, token).unwrap(), want);
        row.swap(0, 4000);
        let token = if token == 0 {
            4000
        } else if token == 4000 {
            0
        } else {
            token
        };
        assert_eq!(nll_of(&row, token).unwrap(), want);
    }

    #[test]
    fn nll_errors_and_nan() {
        let row = random_row(7, 10, 1.0);
        assert_eq!(
            nll_of(&row, 10),
            Err(Error::TokenOutOfRange {
                token: 10,
                vocab_size: 10
            })
        );
        assert!(nll_of(&[], 0).is_err());
        let mut bad = row.clone();
        bad[3] = F32::NAN;
        assert!(nll_of(&bad, 0).unwrap().is_nan());
        bad[3] = F32::INFINITY;
        assert!(nll_of(&bad, 0).unwrap().is_nan());
    }

    #[test]
    fn nll_sum_is_exact_and_order_free() {
        let values: Vec<F32> = random_row(21, 3000, 12.0)
            .into_iter()
            .map(|x| F32::from_bits(x.to_bits() & 0x7FFF_FFFF))
            .chain([
                F32::MIN_POSITIVE_SUBNORMAL,
                F32::ZERO,
                F32::from_i32(1 << 20),
            ])
            .collect();
        let mut forward = NllSum::new();
        values.iter().for_each(|&v| forward.add(v));
        let mut backward = NllSum::new();
        values.iter().rev().for_each(|&v| backward.add(v));
        assert_eq!(forward, backward);
        // Merged halves equal the whole.
        let (a, b) = values.split_at(1000);
        let (mut x, mut y) = (NllSum::new(), NllSum::new());
        a.iter().for_each(|&v| x.add(v));
        b.iter().for_each(|&v| y.add(v));
        x.merge(&y);
        assert_eq!(x, forward);
        // These values need at most 24 + 20 + 24 + 12 bits: exact in f64
        // would need 80, so compare with a tolerance of one binary32 ulp.
        let sum: f64 = values.iter().map(|&v| host(v)).sum();
        let got = host(forward.sum());
        assert!((got - sum).abs() <= sum * 2f64.powi(-23), "{got} vs {sum}");
        let sq: f64 = values.iter().map(|&v| host(v) * host(v)).sum();
        let got_sq = host(forward.sum_sq());
        assert!(
            (got_sq - sq).abs() <= sq * 2f64.powi(-23),
            "{got_sq} vs {sq}"
        );
        assert_eq!(forward.count(), values.len() as u64);
        let mean = host(forward.mean());
        assert!((mean - sum / values.len() as f64).abs() <= mean * 2f64.powi(-22));
    }

    #[test]
    fn nll_sum_exact_small_cases_and_invalid() {
        let mut s = NllSum::new();
        assert!(s.mean().is_nan());
        s.add(F32::from_i32(3));
        s.add(F32::HALF);
        assert_eq!(s.sum(), F32::from_bits(3.5f32.to_bits()));
        assert_eq!(s.sum_sq(), F32::from_bits(9.25f32.to_bits()));
        assert_eq!(s.mean(), F32::from_bits(1.75f32.to_bits()));
        // 2^-149 + 2^100: exact inside, rounded to 2^100 once.
        let mut t = NllSum::new();
        t.add(F32::MIN_POSITIVE_SUBNORMAL);
        t.add(F32::from_bits(0x7180_0000));
        assert_eq!(t.sum(), F32::from_bits(0x7180_0000));
        t.add(F32::NAN);
        t.add(F32::NEG_ONE);
        assert_eq!(t.invalid(), 2);
        assert!(t.mean().is_nan());
    }
}
