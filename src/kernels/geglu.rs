//! gate (n), up (n) -> gate (n): `gate_i = gelu(gate_i) · up_i` (GEGLU,
//! Gemma's gated feed-forward).
//!
//! `gelu` is [`crate::math::gelu`] (`x / (1 + exp(-(K·x·(1 + A·x²))))`),
//! then one soft multiplication. As in [`super::swiglu()`], the body works in
//! blocks, stage by stage (the exponent `-(K·(x·(1 + A·(x·x))))` of every
//! element in one pass, then every `exp`, every `1 + e`, every quotient),
//! so that independent operations overlap and the products and sums
//! vectorize; each element still gets exactly `gelu`'s operations in its
//! order, so the same bits (checked below against `gelu(g) · u` for the
//! portable body and every SIMD build).
//! On x86-64 with `std` it runs compiled for AVX2 or AVX-512
//! ([`crate::simd`]).
// `deny`, not `forbid`: the multiversion macro allows its own `unsafe`
// (the target-feature calls); this file writes none.
#![deny(unsafe_code)]

use super::check_len;
use super::elementwise::{BLOCK, mul_assign_body, sigmoid_gate_block};
use crate::math::gelu::gelu_neg_2u_block;
use crate::{F32, Result};

/// GEGLU in place over `gate`.
///
/// Errors: [`crate::Error::ShapeMismatch`] if `gate` and `up` differ in
/// length (nothing written).
pub fn geglu(gate: &mut [F32], up: &[F32]) -> Result<()> {
    check_len(gate.len(), up.len())?;
    geglu_builds::best(gate, up);
    Ok(())
}

crate::simd::multiversion! {
    /// Builds of [`geglu_body`].
    mod geglu_builds = geglu_body(gate: &mut [F32], up: &[F32]);
}

/// The portable body of [`geglu`] (`gate` and `up` of equal length).
#[inline(always)]
pub(crate) fn geglu_body(gate: &mut [F32], up: &[F32]) {
    for g in gate.chunks_mut(BLOCK) {
        sigmoid_gate_block(
            g,
            #[inline(always)]
            |x: &[F32], t: &mut [F32]| gelu_neg_2u_block(x, t),
        );
    }
    mul_assign_body(gate, up);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::math::gelu;

    /// The portable body and every SIMD build equal `gelu(g) · u` element
    /// by element, on rows of every length up to 200 with gate values of
    /// every kind (moderate, any bits, zeros, subnormals, ±∞, NaN, ±100).
    #[test]
    fn builds_equal_elementwise() {
        crate::testutil::check_gated_builds(
            geglu_body,
            geglu_builds::builds(),
            gelu,
            0x6E1E_CE66_D1CE_4E5Bu64,
        );
    }
}
