//! Elementwise soft-float updates of rows: `x += y`, `x *= y`.
//!
//! Each element is the one correctly rounded `+` or `*`, so the result is
//! the same bits as the obvious loop. The bodies call the operations' own
//! branch-free fast paths (`float::add_try`, `float::mul_try`) so that they
//! vectorize, and redo the whole row with the scalar operation if any
//! element needed the general path (zeros, subnormals, ∞, NaN, exact
//! cancellation). On x86-64 with `std` the bodies run compiled for AVX2 or
//! AVX-512 ([`crate::simd`]), the same code.

use crate::F32;
use crate::float::{add_same_sign_try, add_try, div_try, mul_try};
use crate::math::exp_try;

/// `x[i] = x[i] + y[i]` over the common length.
pub fn add_assign(x: &mut [F32], y: &[F32]) {
    add_builds::best(x, y)
}

/// `x[i] = x[i] * y[i]` over the common length.
pub fn mul_assign(x: &mut [F32], y: &[F32]) {
    mul_builds::best(x, y)
}

crate::simd::multiversion! {
    /// Builds of [`add_assign_body`].
    mod add_builds = add_assign_body(x: &mut [F32], y: &[F32]);
}

crate::simd::multiversion! {
    /// Builds of [`mul_assign_body`].
    mod mul_builds = mul_assign_body(x: &mut [F32], y: &[F32]);
}

/// The portable body of [`add_assign`].
#[inline(always)]
pub(crate) fn add_assign_body(x: &mut [F32], y: &[F32]) {
    apply(x, y, add_try, |a, b| a + b);
}

/// The portable body of [`mul_assign`].
#[inline(always)]
pub(crate) fn mul_assign_body(x: &mut [F32], y: &[F32]) {
    apply(x, y, mul_try, |a, b| a * b);
}

/// `x[i] = op(x[i], y[i])`, by blocks: `fast` on every element of a block
/// (branch-free, so the loop vectorizes), the block committed if every
/// element's flag is set, else redone with `op`.
#[inline(always)]
pub(crate) fn apply(
    x: &mut [F32],
    y: &[F32],
    fast: impl Fn(F32, F32) -> (F32, bool),
    op: impl Fn(F32, F32) -> F32,
) {
    let n = x.len().min(y.len());
    let (x, y) = (&mut x[..n], &y[..n]);
    let mut out = [F32::ZERO; BLOCK];
    for (xb, yb) in x.chunks_mut(BLOCK).zip(y.chunks(BLOCK)) {
        let mut ok = true;
        for ((o, &a), &b) in out.iter_mut().zip(xb.iter()).zip(yb) {
            let (r, k) = fast(a, b);
            *o = r;
            ok &= k;
        }
        if ok {
            xb.copy_from_slice(&out[..xb.len()]);
        } else {
            for (a, &b) in xb.iter_mut().zip(yb) {
                *a = op(*a, b);
            }
        }
    }
}

/// `x[i] = op(x[i])`, by blocks: `fast` on every element of a block
/// (branch-free, so the loop vectorizes), the block committed if every
/// element's flag is set, else redone with `op`. The unary form of
/// [`apply`], for the kernels' own stage-by-stage loops.
#[inline(always)]
pub(crate) fn map_try(x: &mut [F32], fast: impl Fn(F32) -> (F32, bool), op: impl Fn(F32) -> F32) {
    let mut out = [F32::ZERO; BLOCK];
    for xb in x.chunks_mut(BLOCK) {
        let mut ok = true;
        for (o, &a) in out.iter_mut().zip(xb.iter()) {
            let (r, k) = fast(a);
            *o = r;
            ok &= k;
        }
        if ok {
            xb.copy_from_slice(&out[..xb.len()]);
        } else {
            for a in xb.iter_mut() {
                *a = op(*a);
            }
        }
    }
}

/// `x = x / (1 + exp(t(x)))` over at most [`BLOCK`] elements, stage by
/// stage: every `t(x)` (`t_block` writes them), every `exp` ([`map_try`] over
/// [`exp_try`], which answers every input but NaN and `t < -87.3` with the
/// bits of [`F32::exp`]), then every `1 + e` ([`map_try`]; `e ≥ 0`, so the
/// same-sign fast path answers whenever `e` is normal), then every
/// quotient ([`apply`] over [`div_try`], which answers normal operands
/// with a normal quotient). Each element gets exactly the
/// operations of the scalar `x / (1 + exp(t(x)))` in that order, so the
/// same bits; the stages let independent operations overlap and the
/// exponentials, additions and quotients vectorize. SiLU is `t(x) = -x`, GELU-tanh `t(x) = -2u(x)`
/// ([`crate::math::gelu::gelu_neg_2u_block`]).
#[inline(always)]
pub(crate) fn sigmoid_gate_block(x: &mut [F32], t_block: impl Fn(&[F32], &mut [F32])) {
    let mut den = [F32::ZERO; BLOCK];
    let n = x.len().min(BLOCK);
    let den = &mut den[..n];
    t_block(&x[..n], den);
    map_try(den, exp_try, F32::exp);
    map_try(den, |e| add_same_sign_try(F32::ONE, e), |e| F32::ONE + e);
    apply(x, den, div_try, |v, d| v / d);
}

/// Elements per try-then-commit block (the fallback redoes one block).
pub(crate) const BLOCK: usize = 64;

#[cfg(test)]
mod tests {
    use super::*;

    /// Both bodies and every SIMD build equal the element-by-element `+`
    /// and `*` on rows of every length up to 300, with values of every kind
    /// (moderate, any bits, exact cancellations, zeros, subnormals, ∞, NaN).
    #[test]
    fn builds_equal_elementwise() {
        type Fns = [fn(&mut [F32], &[F32]); 2];
        let simd: [Option<Fns>; 2] = {
            let (a, m) = (add_builds::builds(), mul_builds::builds());
            [0, 1].map(|i| a[i].zip(m[i]).map(|(a, m)| [a, m]))
        };
        let mut next = crate::testutil::lcg(0x2545_F491_4F6C_DD1Du64);
        const N: usize = 300;
        for round in 0..600 {
            let n = round % (N + 1);
            let kind = round % 4;
            let x: [F32; N] = core::array::from_fn(|_| {
                let r = next();
                F32::from_bits(match (kind, r % 97) {
                    (0, _) => r,
                    (1, 0) => 0,
                    (1, 1) => r & 0x807F_FFFF,
                    (1, 2) => 0x7F80_0000 | (r & 0x8000_0000),
                    (1, 3) => 0x7FC0_0000,
                    _ => (r & 0x8000_0000) | (0x3000_0000 + r % 0x1800_0000),
                })
            });
            let y: [F32; N] = core::array::from_fn(|i| {
                let r = next();
                if kind == 3 && r.is_multiple_of(7) {
                    -x[i] // exact cancellation
                } else {
                    F32::from_bits((r & 0x8000_0000) | (0x3000_0000 + r % 0x1800_0000))
                }
            });
            let mut want_add = x;
            let mut want_mul = x;
            for i in 0..n {
                want_add[i] = x[i] + y[i];
                want_mul[i] = x[i] * y[i];
            }
            let mut builds: [Option<Fns>; 3] =
                [Some([add_assign_body, mul_assign_body]), None, None];
            for (slot, f) in builds[1..].iter_mut().zip(simd) {
                *slot = f;
            }
            for [add, mul] in builds.into_iter().flatten() {
                let (mut a, mut m) = (x, x);
                add(&mut a[..n], &y[..n]);
                mul(&mut m[..n], &y[..n]);
                assert!(
                    a.map(F32::to_bits) == want_add.map(F32::to_bits),
                    "add, round {round}"
                );
                assert!(
                    m.map(F32::to_bits) == want_mul.map(F32::to_bits),
                    "mul, round {round}"
                );
            }
        }
    }
}
