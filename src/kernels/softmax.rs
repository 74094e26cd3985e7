//! s (n) -> p (n) in place: `p_i = e_i · (1 / Σ_{j<n_valid} e_j)`,
//! `e_i = exp(s_i·scale − max_j s_j·scale)` for `i < n_valid`, `p_i = 0` beyond
//! (the causal mask).
//!
//! Order: `t_i = s_i · scale`; `max` = the largest `t_i` (a NaN `t_i` is not a
//! maximum; it still makes the sum NaN); `e_i = exp(t_i − max)`;
//! `sum = +0; sum = sum + e_i` left to right; `inv = 1 / sum`;
//! `p_i = e_i · inv`. llama.cpp accumulates the sum in a double and rounds
//! `1.0/sum` to f32; this profile keeps the sum in f32.
//!
//! The body runs stage by stage over the row (the products, differences and
//! exponentials branch-free so that they vectorize — `exp` by
//! `math::exp_try` — redone with the scalar operator per block if
//! any element needs the general path; the sum by the unpacked
//! `float::sum_left_to_right`); each element gets the operations above in their
//! order, so the same bits. On x86-64 with `std`
//! it runs compiled for AVX2 or AVX-512 ([`crate::simd`]).

use super::elementwise::map_try;
use crate::float::{add_try, mul_try, sum_left_to_right};
use crate::math::exp_try;
use crate::{Error, F32, Result};

/// `v − max` by [`add_try`] (`v + (−max)`), also answering `v = max`: the
/// exact `+0` of a finite value minus itself, which [`add_try`] declines
/// (every row's largest score would otherwise send its block to the
/// scalar path).
#[inline(always)]
fn minus_max_try(v: F32, max: F32, neg_max: F32) -> (F32, bool) {
    let (d, ok) = add_try(v, neg_max);
    let equal = (v.to_bits() == max.to_bits()) & max.is_finite();
    (if equal { F32::ZERO } else { d }, ok | equal)
}

/// Scaled, masked softmax of `s[..n_valid]`; `s[n_valid..]` become +0.
pub fn softmax(s: &mut [F32], scale: F32, n_valid: usize) -> Result<()> {
    if n_valid > s.len() {
        return Err(Error::ShapeMismatch {
            expected: s.len(),
            found: n_valid,
        });
    }
    softmax_builds::best(s, scale, n_valid);
    Ok(())
}

crate::simd::multiversion! {
    /// Builds of [`softmax_body`].
    mod softmax_builds = softmax_body(s: &mut [F32], scale: F32, n_valid: usize);
}

/// The portable body of [`softmax`] (`n_valid ≤ s.len()`).
#[inline(always)]
pub(crate) fn softmax_body(s: &mut [F32], scale: F32, n_valid: usize) {
    let (live, masked) = s.split_at_mut(n_valid.min(s.len()));
    map_try(live, |v| mul_try(v, scale), |v| v * scale);
    let mut max = F32::NEG_INFINITY;
    for &v in live.iter() {
        if v.gt(max) {
            max = v;
        }
    }
    let neg_max = -max;
    map_try(live, |v| minus_max_try(v, max, neg_max), |v| v - max);
    map_try(live, exp_try, F32::exp);
    let sum = sum_left_to_right(live);
    let inv = F32::ONE / sum;
    map_try(live, |v| mul_try(v, inv), |v| v * inv);
    masked.fill(F32::ZERO);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The element-by-element definition (the module docs' order).
    fn reference(s: &mut [F32], scale: F32, n_valid: usize) {
        let (live, masked) = s.split_at_mut(n_valid);
        let mut max = F32::NEG_INFINITY;
        for v in live.iter_mut() {
            *v = *v * scale;
            if v.gt(max) {
                max = *v;
            }
        }
        let mut sum = F32::ZERO;
        for v in live.iter_mut() {
            *v = (*v - max).exp();
            sum = sum + *v;
        }
        let inv = F32::ONE / sum;
        for v in live.iter_mut() {
            *v = *v * inv;
        }
        masked.fill(F32::ZERO);
    }

    /// The portable body and every SIMD build equal the definition on rows
    /// of every length up to 300 and every `n_valid`, with scores of every
    /// kind (moderate, any bits, zeros, subnormals, ±∞, NaN, ties).
    /// Rows whose largest score is ±∞ (`∞ − ∞` is NaN, not the `+0` of
    /// a finite maximum minus itself), alone or in a block of its own.
    #[test]
    fn infinite_maximum_equals_definition() {
        let (inf, one) = (F32::INFINITY, F32::ONE);
        let rows: [&[F32]; 5] = [&[inf], &[inf, inf], &[-inf, -inf], &[one, inf], &[inf; 70]];
        type Body = fn(&mut [F32], F32, usize);
        let mut builds: [Option<Body>; 3] = [Some(softmax_body), None, None];
        for (slot, f) in builds[1..].iter_mut().zip(softmax_builds::builds()) {
            *slot = f;
        }
        for row in rows {
            let mut want = [F32::ZERO; 70];
            want[..row.len()].copy_from_slice(row);
            reference(&mut want[..row.len()], one, row.len());
            for f in builds.into_iter().flatten() {
                let mut got = [F32::ZERO; 70];
                got[..row.len()].copy_from_slice(row);
                f(&mut got[..row.len()], one, row.len());
                assert!(got.map(F32::to_bits) == want.map(F32::to_bits), "{row:?}");
            }
        }
    }

    #[test]
    fn builds_equal_definition() {
        type Fn3 = fn(&mut [F32], F32, usize);
        let simd = softmax_builds::builds();
        let mut next = crate::testutil::lcg(0x1405_7B7E_F767_814Fu64);
        const N: usize = 300;
        for round in 0..600 {
            let n = (round * 7) % (N + 1);
            let n_valid = if n == 0 { 0 } else { next() as usize % (n + 1) };
            let kind = round % 3;
            let s: [F32; N] = core::array::from_fn(|_| {
                let r = next();
                F32::from_bits(match (kind, r % 61) {
                    (0, _) => r,
                    // ±∞ among moderate values, no NaN (∞ − ∞ in the row).
                    (2, 0) => 0x7F80_0000 | (r & 0x8000_0000),
                    (1, 0) => 0,
                    (1, 1) => r & 0x807F_FFFF,
                    (1, 2) => 0x7F80_0000 | (r & 0x8000_0000),
                    (1, 3) => 0x7FC0_0000,
                    (1, 4) => 0x4000_0000, // ties for the maximum
                    _ => (r & 0x8000_0000) | (0x3C00_0000 + r % 0x0600_0000),
                })
            });
            let scale = F32::from_bits(0x3E00_0000 + next() % 0x0080_0000);
            let mut want = s;
            reference(&mut want[..n], scale, n_valid);
            let mut builds: [Option<Fn3>; 3] = [Some(softmax_body), None, None];
            for (slot, f) in builds[1..].iter_mut().zip(simd) {
                *slot = f;
            }
            for f in builds.into_iter().flatten() {
                let mut got = s;
                f(&mut got[..n], scale, n_valid);
                assert!(
                    got.map(F32::to_bits) == want.map(F32::to_bits),
                    "round {round}"
                );
            }
        }
    }
}
