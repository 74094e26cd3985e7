//! gate (n), up (n) -> gate (n): `gate_i = silu(gate_i) · up_i`.
//!
//! `silu` is [`crate::math::silu`] (`x / (1 + exp(-x))`), then one soft
//! multiplication. The body works in blocks, stage by stage (every
//! `exp(-x)`, every `1 + e`, every quotient), so that independent
//! operations overlap and the additions vectorize; each element still gets
//! exactly `silu`'s operations in its order, so the same bits. On x86-64
//! with `std` it runs compiled for AVX2 or AVX-512 ([`crate::simd`]).

use super::check_len;
use super::elementwise::{BLOCK, mul_assign_body, sigmoid_gate_block};
use crate::{F32, Result};

/// SwiGLU in place over `gate`.
pub fn swiglu(gate: &mut [F32], up: &[F32]) -> Result<()> {
    check_len(gate.len(), up.len())?;
    swiglu_builds::best(gate, up);
    Ok(())
}

crate::simd::multiversion! {
    /// Builds of [`swiglu_body`].
    mod swiglu_builds = swiglu_body(gate: &mut [F32], up: &[F32]);
}

/// The portable body of [`swiglu`] (`gate` and `up` of equal length).
#[inline(always)]
pub(crate) fn swiglu_body(gate: &mut [F32], up: &[F32]) {
    for g in gate.chunks_mut(BLOCK) {
        sigmoid_gate_block(g, |x, t| {
            for (t, &v) in t.iter_mut().zip(x) {
                *t = -v;
            }
        });
    }
    mul_assign_body(gate, up);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::math::silu;

    /// The portable body and every SIMD build equal `silu(g) · u` element
    /// by element, on rows of every length up to 200 with gate values of
    /// every kind (moderate, any bits, zeros, subnormals, ±∞, NaN, and
    /// values where `1 + exp(-x)` is exactly 1 or overflows).
    #[test]
    fn builds_equal_elementwise() {
        crate::testutil::check_gated_builds(
            swiglu_body,
            swiglu_builds::builds(),
            silu,
            0x5DEE_CE66_D1CE_4E5Bu64,
        );
    }
}
