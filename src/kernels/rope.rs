//! x (n_heads, head_dim) rotated in place for position `pos`; dims `≥ n_rot` unchanged.
//!
//! llama.cpp's angle recurrence (`ggml_rope_cache_init`, no scaling):
//! `theta = f32(pos)`, and for pair `i = 0..n_rot/2`:
//! `(sin_i, cos_i) = sin_cos(theta)`; then `theta = theta · theta_scale`
//! (repeated f32 multiplication, not a fresh `pow` per pair), with
//! `theta_scale = base ^ (−2 / n_rot)` ([`rope_theta_scale`]).
//!
//! Rotation of a pair `(x0, x1)`, each product rounded, no FMA:
//! `x0' = x0·cos − x1·sin`, `x1' = x0·sin + x1·cos`. Pairs are
//! `(x[2i], x[2i+1])` for [`RopeStyle::Norm`] and `(x[i], x[i + n_rot/2])`
//! for [`RopeStyle::Neox`].

use super::check_len;
use crate::float::{add_zero_try, mul_zero_try};
use crate::{Error, F32, Result};

/// Which elements form a rotated pair.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RopeStyle {
    /// Adjacent pairs `(2i, 2i+1)` — GGUF llama (Q/K rows are permuted at conversion).
    Norm,
    /// Half split `(i, i + n_rot/2)` — qwen2, gpt-neox.
    Neox,
}

/// `theta_scale = base ^ (−2 / n_rot)`: `f32(−2) / f32(n_rot)` rounded, then
/// [`F32::powf`].
pub fn rope_theta_scale(base: F32, n_rot: usize) -> F32 {
    let e = F32::from_i32(-2) / F32::from_u32(n_rot as u32);
    base.powf(e)
}

/// Rotates every head of `x` (n_heads, head_dim) for position `pos`:
/// [`RopeAngles`] for `pos`, applied once. `n_rot` must be even, at most
/// `head_dim` and at most `2 · MAX_ROPE_PAIRS` (else `Err(InvalidRope)`);
/// `x` must hold `n_heads · head_dim` (else `Err(ShapeMismatch)`).
pub fn rope(
    x: &mut [F32],
    n_heads: usize,
    head_dim: usize,
    n_rot: usize,
    pos: usize,
    theta_scale: F32,
    style: RopeStyle,
) -> Result<()> {
    check_len(
        n_heads.checked_mul(head_dim).ok_or(Error::SizeOverflow)?,
        x.len(),
    )?;
    if n_rot > head_dim {
        return Err(Error::InvalidRope { n_rot, head_dim });
    }
    RopeAngles::new(n_rot, pos, theta_scale)?.apply(x, n_heads, head_dim, style)
}

/// Most rotated pairs ([`RopeAngles`] capacity): `n_rot / 2` for head
/// dimensions up to 256.
pub const MAX_ROPE_PAIRS: usize = 128;

/// The `(sin, cos)` of every pair for one position, computed once and applied
/// to several tensors (a row's Q and K): [`rope`] with the angles reused, the
/// same bits.
#[derive(Clone, Copy, Debug)]
pub struct RopeAngles {
    sin: [F32; MAX_ROPE_PAIRS],
    cos: [F32; MAX_ROPE_PAIRS],
    half: usize,
}

impl RopeAngles {
    /// The angles of position `pos` ([`rope`]'s recurrence);
    /// `Err(InvalidRope)` (with `head_dim` = `2 · MAX_ROPE_PAIRS`, the
    /// widest head the angles could serve) if `n_rot` is odd or above that.
    pub fn new(n_rot: usize, pos: usize, theta_scale: F32) -> Result<Self> {
        Self::with_factors(n_rot, pos, theta_scale, &[])
    }

    /// The angles of position `pos` with frequency factors (Llama 3.x's
    /// `rope_freqs`): pair `i` turns by `theta_i / factors[i]` (one more
    /// rounded division, as llama.cpp's `theta / freq_factor`), where
    /// `theta_i` is [`RopeAngles::new`]'s recurrence. Empty `factors`: the
    /// same bits as [`RopeAngles::new`].
    ///
    /// Errors: as [`RopeAngles::new`]; [`Error::ShapeMismatch`] if `factors`
    /// is neither empty nor `n_rot / 2` long.
    pub fn with_factors(
        n_rot: usize,
        pos: usize,
        theta_scale: F32,
        factors: &[F32],
    ) -> Result<Self> {
        if !n_rot.is_multiple_of(2) || n_rot / 2 > MAX_ROPE_PAIRS {
            // No head yet: the largest head these angles could serve.
            let head_dim = 2 * MAX_ROPE_PAIRS;
            return Err(Error::InvalidRope { n_rot, head_dim });
        }
        let half = n_rot / 2;
        if !factors.is_empty() {
            super::check_len(half, factors.len())?;
        }
        let mut a = RopeAngles {
            sin: [F32::ZERO; MAX_ROPE_PAIRS],
            cos: [F32::ZERO; MAX_ROPE_PAIRS],
            half,
        };
        let mut theta = F32::from_i64(pos as i64);
        for i in 0..half {
            let angle = match factors.get(i) {
                Some(&f) => theta / f,
                None => theta,
            };
            (a.sin[i], a.cos[i]) = angle.sin_cos();
            theta = theta * theta_scale;
        }
        Ok(a)
    }

    /// Rotates every head of `x` (n_heads, head_dim) as [`rope`] would.
    pub fn apply(
        &self,
        x: &mut [F32],
        n_heads: usize,
        head_dim: usize,
        style: RopeStyle,
    ) -> Result<()> {
        rope_apply(self.sin(), self.cos(), x, n_heads, head_dim, style)
    }

    /// `sin` of the `n_rot / 2` angles.
    pub fn sin(&self) -> &[F32] {
        &self.sin[..self.half]
    }

    /// `cos` of the `n_rot / 2` angles.
    pub fn cos(&self) -> &[F32] {
        &self.cos[..self.half]
    }
}

/// Rotates every head of `x` (n_heads, head_dim) by angles given as their
/// `sin` and `cos` (`n_rot / 2` each, as [`RopeAngles::sin`] and
/// [`RopeAngles::cos`] return): the same rotation as [`RopeAngles::apply`],
/// for callers that keep the angles of many positions in a buffer. Runs
/// `rope_apply_body` compiled for the CPU's SIMD where there is such a
/// build ([`crate::simd`]; the same code, the same bits).
pub fn rope_apply(
    sin: &[F32],
    cos: &[F32],
    x: &mut [F32],
    n_heads: usize,
    head_dim: usize,
    style: RopeStyle,
) -> Result<()> {
    rope_builds::best(sin, cos, x, n_heads, head_dim, style)
}

crate::simd::multiversion! {
    /// Builds of [`rope_apply_body`].
    mod rope_builds = rope_apply_body(
        sin: &[F32],
        cos: &[F32],
        x: &mut [F32],
        n_heads: usize,
        head_dim: usize,
        style: RopeStyle,
    ) -> Result<()>;
}

/// The portable body of [`rope_apply`]: per head, every pair through the
/// branch-free [`mul_zero_try`] / [`add_zero_try`] fast paths (so the loop
/// vectorizes), the head redone with the soft operators if any element
/// needed their general path.
#[inline(always)]
pub(crate) fn rope_apply_body(
    sin: &[F32],
    cos: &[F32],
    x: &mut [F32],
    n_heads: usize,
    head_dim: usize,
    style: RopeStyle,
) -> Result<()> {
    check_len(
        n_heads.checked_mul(head_dim).ok_or(Error::SizeOverflow)?,
        x.len(),
    )?;
    check_len(sin.len(), cos.len())?;
    let half = sin.len();
    if 2 * half > head_dim || half > MAX_ROPE_PAIRS {
        return Err(Error::InvalidRope {
            n_rot: 2 * half,
            head_dim,
        });
    }
    let (sin, cos) = (&sin[..half], &cos[..half]);
    for head in x.chunks_exact_mut(head_dim) {
        let mut y0 = [F32::ZERO; MAX_ROPE_PAIRS];
        let mut y1 = [F32::ZERO; MAX_ROPE_PAIRS];
        let (y0, y1) = (&mut y0[..half], &mut y1[..half]);
        let ok = match style {
            RopeStyle::Norm => {
                // The pairs as two arrays (x0 of every pair, x1 of every pair).
                let mut x0 = [F32::ZERO; MAX_ROPE_PAIRS];
                let mut x1 = [F32::ZERO; MAX_ROPE_PAIRS];
                let pairs = head.chunks_exact(2).take(half);
                for ((a, b), p) in x0.iter_mut().zip(x1.iter_mut()).zip(pairs) {
                    (*a, *b) = (p[0], p[1]);
                }
                rotate_try(&x0[..half], &x1[..half], sin, cos, y0, y1)
            }
            RopeStyle::Neox => {
                let (x0, x1) = head[..2 * half].split_at(half);
                rotate_try(x0, x1, sin, cos, y0, y1)
            }
        };
        match (ok, style) {
            (true, RopeStyle::Norm) => {
                for ((&a, &b), p) in y0.iter().zip(y1.iter()).zip(head.chunks_exact_mut(2)) {
                    (p[0], p[1]) = (a, b);
                }
            }
            (true, RopeStyle::Neox) => {
                head[..half].copy_from_slice(y0);
                head[half..2 * half].copy_from_slice(y1);
            }
            (false, _) => rotate_pairs(head, sin, cos, style),
        }
    }
    Ok(())
}

/// `y0[i] = x0[i]·cos[i] − x1[i]·sin[i]`, `y1[i] = x0[i]·sin[i] +
/// x1[i]·cos[i]` over the common length, each operation by its branch-free
/// fast path ([`mul_zero_try`], [`add_zero_try`], so the loop vectorizes);
/// `true` if every element answered (`y` then holds the rotation), else
/// `y` is unspecified.
#[inline(always)]
fn rotate_try(
    x0: &[F32],
    x1: &[F32],
    sin: &[F32],
    cos: &[F32],
    y0: &mut [F32],
    y1: &mut [F32],
) -> bool {
    let mut ok = true;
    let pairs = x0.iter().zip(x1).zip(sin.iter().zip(cos));
    for (((&x0, &x1), (&sin, &cos)), (y0, y1)) in pairs.zip(y0.iter_mut().zip(y1.iter_mut())) {
        let (a, k1) = mul_zero_try(x0, cos);
        let (b, k2) = mul_zero_try(x1, sin);
        let (c, k3) = mul_zero_try(x0, sin);
        let (d, k4) = mul_zero_try(x1, cos);
        let (r0, k5) = add_zero_try(a, -b);
        let (r1, k6) = add_zero_try(c, d);
        (*y0, *y1) = (r0, r1);
        ok &= k1 & k2 & k3 & k4 & k5 & k6;
    }
    ok
}

/// One head rotated pair by pair with the soft operators (the general
/// path, every input).
fn rotate_pairs(head: &mut [F32], sin: &[F32], cos: &[F32], style: RopeStyle) {
    let half = sin.len().min(cos.len());
    for (i, (&s, &c)) in sin.iter().zip(cos).enumerate() {
        let (a, b) = match style {
            RopeStyle::Norm => (2 * i, 2 * i + 1),
            RopeStyle::Neox => (i, i + half),
        };
        let (x0, x1) = (head[a], head[b]);
        head[a] = x0 * c - x1 * s;
        head[b] = x0 * s + x1 * c;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// [`rope_apply_body`] and every SIMD build of it equal the pair-by-pair
    /// soft-float rotation, both styles, `n_rot` up to `head_dim`, values of
    /// every kind (moderate, any bits, zeros, subnormals, ∞, NaN, zeros of
    /// both signs among moderate values, an exact cancellation).
    #[test]
    fn builds_equal_pairwise_rotation() {
        type RopeFn = rope_builds::Build;
        let simd = rope_builds::builds();
        let mut next = crate::testutil::lcg(0x9E37_79B9_7F4A_7C15u64);
        const HD: usize = 64;
        const NH: usize = 3;
        for round in 0..400 {
            let style = if round % 2 == 0 {
                RopeStyle::Norm
            } else {
                RopeStyle::Neox
            };
            let half = 1 + (round / 2) % (HD / 2);
            let kind = (round / 7) % 4;
            let val = |next: &mut dyn FnMut() -> u32| {
                let r = next();
                F32::from_bits(match (kind, r % 50) {
                    (0, _) => r,
                    (1, 0) => 0,
                    (1, 1) => r & 0x807F_FFFF,
                    (1, 2) => 0x7F80_0000 | (r & 0x8000_0000),
                    (1, 3) => 0x7FC0_0000,
                    (1, 4) => 0x8000_0000,
                    // Zeros of both signs among moderate values (the
                    // zero-aware fast path), whole heads of zeros at times.
                    (3, z) if z < 12 || round % 5 == 0 => r & 0x8000_0000,
                    _ => (r & 0x8000_0000) | (0x3800_0000 + r % 0x1000_0000),
                })
            };
            let mut x: [F32; NH * HD] = core::array::from_fn(|_| val(&mut next));
            let sin: [F32; HD / 2] = core::array::from_fn(|_| val(&mut next));
            let mut cos: [F32; HD / 2] = core::array::from_fn(|_| val(&mut next));
            if kind == 2 && round % 3 == 0 {
                // One exact cancellation (x0·cos = x1·sin, so x0' = +0) in
                // a head of moderate values.
                let i = (round / 3) % half;
                let (a, b) = match style {
                    RopeStyle::Norm => (2 * i, 2 * i + 1),
                    RopeStyle::Neox => (i, i + half),
                };
                cos[i] = sin[i];
                x[HD + b] = x[HD + a];
            }
            let (sin, cos) = (&sin[..half], &cos[..half]);
            let mut want = x;
            for head in want.chunks_exact_mut(HD) {
                for i in 0..half {
                    let (a, b) = match style {
                        RopeStyle::Norm => (2 * i, 2 * i + 1),
                        RopeStyle::Neox => (i, i + half),
                    };
                    let (x0, x1) = (head[a], head[b]);
                    head[a] = x0 * cos[i] - x1 * sin[i];
                    head[b] = x0 * sin[i] + x1 * cos[i];
                }
            }
            let mut builds: [Option<RopeFn>; 3] = [Some(rope_apply_body), None, None];
            for (slot, f) in builds[1..].iter_mut().zip(simd) {
                *slot = f;
            }
            for f in builds.into_iter().flatten() {
                let mut got = x;
                f(sin, cos, &mut got, NH, HD, style).unwrap();
                assert!(
                    got.map(F32::to_bits) == want.map(F32::to_bits),
                    "round {round}"
                );
            }
        }
    }

    /// Angles computed once and applied give `rope`'s bits, both styles.
    #[test]
    fn angles_equal_rope() {
        let ts = rope_theta_scale(F32::from_u32(10000), 64);
        for style in [RopeStyle::Norm, RopeStyle::Neox] {
            for pos in [0usize, 1, 7, 100, 4095, 100_000] {
                let x: [F32; 3 * 64] = core::array::from_fn(|i| {
                    F32::from_i32((i as i32 * 37 + pos as i32) % 101 - 50) / F32::from_i32(7)
                });
                let (mut a, mut b) = (x, x);
                rope(&mut a, 3, 64, 64, pos, ts, style).unwrap();
                let ang = RopeAngles::new(64, pos, ts).unwrap();
                ang.apply(&mut b, 3, 64, style).unwrap();
                assert!(a.iter().zip(&b).all(|(p, q)| p.to_bits() == q.to_bits()));
            }
        }
        assert!(RopeAngles::new(3, 0, ts).is_err());
        assert!(RopeAngles::new(2 * MAX_ROPE_PAIRS + 2, 0, ts).is_err());
    }
}
