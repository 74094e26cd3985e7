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
//! binary32 of `[-10, 10]` (`tests/math_gelu.rs` with
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
use crate::float::{add_try, mul_try};
use crate::kernels::elementwise::{apply, map_try};

/// `2·√(2/π)` rounded to binary32.
pub const GELU_K: F32 = F32::from_bits(0x3FCC_422A);
/// `0.044715` rounded to binary32.
pub const GELU_A: F32 = F32::from_bits(0x3D37_2713);

/// `-(K · x · (1 + A·x²))`, the exponent of the quotient form (`-2u`).
#[inline(always)]
pub(crate) fn gelu_neg_2u(x: F32) -> F32 {
    -(GELU_K * (x * (F32::ONE + GELU_A * (x * x))))
}

/// [`gelu_neg_2u`] of every `x` into `t` (over the common length), stage
/// by stage: every `x·x`, `A·s`, `1 + s`, `x·s`, `K·s`, then the negation,
/// each stage by its branch-free fast path ([`mul_try`], [`add_try`]) with
/// the block redone by the operator where an element needs the general
/// path. Each element gets [`gelu_neg_2u`]'s operations with its operands
/// in its order, so the same bits (the GEGLU kernel's tests check it).
#[inline(always)]
pub(crate) fn gelu_neg_2u_block(x: &[F32], t: &mut [F32]) {
    let n = x.len().min(t.len());
    let (x, t) = (&x[..n], &mut t[..n]);
    apply(t, x, |_, v| mul_try(v, v), |_, v| v * v);
    map_try(t, |s| mul_try(GELU_A, s), |s| GELU_A * s);
    map_try(t, |s| add_try(F32::ONE, s), |s| F32::ONE + s);
    apply(t, x, |s, v| mul_try(v, s), |s, v| v * s);
    map_try(t, |s| mul_try(GELU_K, s), |s| GELU_K * s);
    for s in t.iter_mut() {
        *s = -*s;
    }
}

/// GELU (tanh approximation), see the module header for the exact order of
/// operations and the measured error.
pub fn gelu(x: F32) -> F32 {
    x / (F32::ONE + gelu_neg_2u(x).exp())
}
