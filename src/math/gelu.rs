//! GELU, tanh approximation (the activation of Gemma's gated FFN).
//!
//! The function is the one llama.cpp's `ggml_gelu` names,
//! `gelu(x) = 0.5·x·(1 + tanh(√(2/π)·x·(1 + 0.044715·x²)))`. It is evaluated
//! through the identity `0.5·(1 + tanh u) = 1/(1 + e^(-2u))`:
//!
//! ```text
//! gelu(x) = x / (1 + exp(-(K · (x · (1 + A · (x · x))))))
//!           K = 2·√(2/π) rounded to binary32 (0x3FCC422A), A = 0.044715 (0x3D372713)
//! ```
//!
//! as seven soft operations in exactly that order (`x·x`, `A·`, `1 +`, `x·`,
//! `K·`, negate, correctly rounded [`F32::exp`], `1 +`, divide), each rounded
//! to nearest even, so the result is the same on every target. The form
//! `0.5·x·(1 + tanh u)` with the correctly rounded [`F32::tanh`] was rejected:
//! for `x < 0`, `1 + tanh u` cancels (at `x = -5`, `tanh u ≈ -0.9997`, so the
//! half-ulp rounding of `tanh` alone is ~2^11 ulp of the result), while the
//! quotient form keeps a relative error proportional to `|u|`.
//!
//! Error bound (against the real function with the exact constants √(2/π)
//! and 0.044715, evaluated in f64): the function is ill-conditioned for
//! negative `x` (its relative condition number grows like `4·0.0447·√(2/π)·
//! |x|³`), so no fixed bound in ulps holds everywhere. Measured on every
//! binary32 of `[-10, 10]` (`tests/float/gelu.rs` with
//! `DETLLM_GELU_STRIDE=1`, 2026-12-05), the largest errors are 2.13 ulp on
//! `[0, 10]`, 3.41 on `[-1, 0]`, 19.5 on `[-3, -1]` and 225 on `[-10, -3]`
//! (where the result is below 0.004 and the function itself amplifies a
//! half-ulp change of `x` by up to ~300). The default test holds every
//! 1001st input to those bounds; the proptest holds all inputs to the
//! operation order above (bit-identical with the host's IEEE ops).
//!
//! Specials: `gelu(±0) = ±0`, `gelu(+inf) = +inf`, `gelu(NaN)` is the
//! canonical NaN, and, as for [`super::silu`], `gelu(-inf)` is NaN
//! (`-inf / inf`); large finite negative inputs give `-0`.
#![forbid(unsafe_code)]

use crate::F32;
use crate::float::{add_same_sign_try, mul_try};
use crate::kernels::elementwise::BLOCK;

/// `2·√(2/π)` rounded to binary32.
pub const GELU_K: F32 = F32::from_bits(0x3FCC_422A);
/// `0.044715` rounded to binary32.
pub const GELU_A: F32 = F32::from_bits(0x3D37_2713);

/// `-(K · x · (1 + A·x²))`, the exponent of the quotient form (`-2u`).
#[inline(always)]
pub(crate) fn gelu_neg_2u(x: F32) -> F32 {
    -(GELU_K * (x * (F32::ONE + GELU_A * (x * x))))
}

/// [`gelu_neg_2u`] of every `x` into `t` (over the common length), in one
/// branch-free pass per block of [`BLOCK`]: each element's `x·x`, `A·s`,
/// `1 + s`, `x·s`, `K·s` and negation by the operations' fast paths
/// ([`mul_try`], [`add_same_sign_try`]: `A·x² > 0`, so `1 + s` adds
/// like-signed values), their flags ANDed into one; a block where any
/// element declined is redone by [`gelu_neg_2u`] (the operators). Each
/// element gets [`gelu_neg_2u`]'s operations with its operands in its
/// order, so the same bits (the GEGLU kernel's tests check it).
#[inline(always)]
pub(crate) fn gelu_neg_2u_block(x: &[F32], t: &mut [F32]) {
    let n = x.len().min(t.len());
    for (xb, tb) in x[..n].chunks(BLOCK).zip(t[..n].chunks_mut(BLOCK)) {
        let mut ok = true;
        for (t, &v) in tb.iter_mut().zip(xb) {
            let (s, k1) = mul_try(v, v);
            let (s, k2) = mul_try(GELU_A, s);
            let (s, k3) = add_same_sign_try(F32::ONE, s);
            let (s, k4) = mul_try(v, s);
            let (s, k5) = mul_try(GELU_K, s);
            *t = -s;
            ok &= k1 & k2 & k3 & k4 & k5;
        }
        if !ok {
            for (t, &v) in tb.iter_mut().zip(xb) {
                *t = gelu_neg_2u(v);
            }
        }
    }
}

/// GELU (tanh approximation), see the module header for the exact order of
/// operations and the measured error.
pub fn gelu(x: F32) -> F32 {
    x / (F32::ONE + gelu_neg_2u(x).exp())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// [`gelu_neg_2u_block`] equals [`gelu_neg_2u`] element by element on
    /// rows of moderate values (every element on the fast path) and on
    /// rows with one value the fast path declines (zero, subnormal, ∞,
    /// NaN, `x²` underflowing or overflowing) at any position of a block,
    /// over lengths that end mid-block.
    #[test]
    fn block_equals_elementwise() {
        const DECLINED: [u32; 9] = [
            0xD580_0000, // -2^44: K·s overflows (every stage before it answers)
            0x0000_0000, // +0
            0x8000_0000, // -0
            0x0000_1234, // subnormal
            0xFF80_0000, // -∞
            0x7FC0_0000, // NaN
            0x1F80_0000, // 2^-64: x·x underflows
            0x5F80_0000, // 2^64: x·x overflows
            0xA000_0000, // -2^-63: x·x is subnormal
        ];
        let mut next = crate::testutil::lcg(0x5DEE_CE66_D1CE_4E5Bu64);
        const N: usize = 3 * BLOCK + 5;
        for round in 0..200 {
            let n = N - round % (BLOCK + 7);
            let mut x: [F32; N] = core::array::from_fn(|_| {
                let r = next();
                F32::from_bits((r & 0x8000_0000) | (0x3A00_0000 + r % 0x0900_0000))
            });
            if round % 4 != 0 {
                let at = next() as usize % n;
                x[at] = F32::from_bits(DECLINED[round % DECLINED.len()]);
            }
            let mut got = [F32::ZERO; N];
            gelu_neg_2u_block(&x[..n], &mut got[..n]);
            for i in 0..n {
                let want = gelu_neg_2u(x[i]);
                assert_eq!(got[i].to_bits(), want.to_bits(), "round {round}, x[{i}]");
            }
        }
    }
}
