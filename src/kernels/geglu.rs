//! gate (n), up (n) -> gate (n): `gate_i = gelu(gate_i) · up_i` (GEGLU,
//! Gemma's gated feed-forward).
//!
//! `gelu` is [`crate::math::gelu`] (`x / (1 + exp(-(K·x·(1 + A·x²))))`),
//! then one soft multiplication. As in [`super::swiglu()`], the body works in
//! blocks, stage by stage (every exponent, every `exp`, every `1 + e`, every
//! quotient), so that independent operations overlap; each element still
//! gets exactly `gelu`'s operations in its order, so the same bits (checked
//! below against `gelu(g) · u` for the portable body and every SIMD build).
//! On x86-64 with `std` it runs compiled for AVX2 or AVX-512
//! ([`crate::simd`]).
// `deny`, not `forbid`: the multiversion macro allows its own `unsafe`
// (the target-feature calls); this file writes none.
#![deny(unsafe_code)]

use super::check_len;
use super::elementwise::{BLOCK, map_try, mul_assign_body};
use crate::float::add_same_sign_try;
use crate::math::gelu::gelu_neg_2u;
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
        gelu_block(g);
    }
    mul_assign_body(gate, up);
}

/// `x = gelu(x)` over at most [`BLOCK`] elements: every exponent and its
/// `exp`, then every `1 + e` ([`map_try`]; `e ≥ 0`, so the same-sign fast
/// path answers whenever `e` is normal), then every quotient.
#[inline(always)]
fn gelu_block(x: &mut [F32]) {
    let mut den = [F32::ZERO; BLOCK];
    let den = &mut den[..x.len().min(BLOCK)];
    for (d, &v) in den.iter_mut().zip(x.iter()) {
        *d = gelu_neg_2u(v).exp();
    }
    map_try(den, |e| add_same_sign_try(F32::ONE, e), |e| F32::ONE + e);
    for (v, &d) in x.iter_mut().zip(den.iter()) {
        *v = *v / d;
    }
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
        type Fn2 = fn(&mut [F32], &[F32]);
        let simd = geglu_builds::builds();
        let mut next = crate::testutil::lcg(0x6E1E_CE66_D1CE_4E5Bu64);
        const N: usize = 200;
        for round in 0..400 {
            let n = round % (N + 1);
            let kind = round % 3;
            let g: [F32; N] = core::array::from_fn(|_| {
                let r = next();
                F32::from_bits(match (kind, r % 53) {
                    (0, _) => r,
                    (1, 0) => 0,
                    (1, 1) => r & 0x807F_FFFF,
                    (1, 2) => 0x7F80_0000 | (r & 0x8000_0000),
                    (1, 3) => 0x7FC0_0000,
                    (1, 4) => (r & 0x8000_0000) | 0x42C8_0000, // ±100
                    _ => (r & 0x8000_0000) | (0x3A00_0000 + r % 0x0900_0000),
                })
            });
            let u: [F32; N] = core::array::from_fn(|_| {
                let r = next();
                F32::from_bits((r & 0x8000_0000) | (0x3A00_0000 + r % 0x0900_0000))
            });
            let want: [F32; N] =
                core::array::from_fn(|i| if i < n { gelu(g[i]) * u[i] } else { g[i] });
            let mut builds: [Option<Fn2>; 3] = [Some(geglu_body), None, None];
            for (slot, f) in builds[1..].iter_mut().zip(simd) {
                *slot = f;
            }
            for f in builds.into_iter().flatten() {
                let mut got = g;
                f(&mut got[..n], &u[..n]);
                assert!(
                    got.map(F32::to_bits) == want.map(F32::to_bits),
                    "round {round}"
                );
            }
        }
    }
}
