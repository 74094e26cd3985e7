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
/// `head_dim` and at most `2 · MAX_ROPE_PAIRS`.
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
        return Err(Error::InvalidConfig);
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
    /// The angles of position `pos` ([`rope`]'s recurrence); `Err` if
    /// `n_rot` is odd or above `2 · MAX_ROPE_PAIRS`.
    pub fn new(n_rot: usize, pos: usize, theta_scale: F32) -> Result<Self> {
        if !n_rot.is_multiple_of(2) || n_rot / 2 > MAX_ROPE_PAIRS {
            return Err(Error::InvalidConfig);
        }
        let half = n_rot / 2;
        let mut a = RopeAngles {
            sin: [F32::ZERO; MAX_ROPE_PAIRS],
            cos: [F32::ZERO; MAX_ROPE_PAIRS],
            half,
        };
        let mut theta = F32::from_i64(pos as i64);
        for i in 0..half {
            (a.sin[i], a.cos[i]) = theta.sin_cos();
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
/// for callers that keep the angles of many positions in a buffer.
pub fn rope_apply(
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
    if 2 * half > head_dim {
        return Err(Error::InvalidConfig);
    }
    for (i, (&s, &c)) in sin.iter().zip(cos).enumerate() {
        rotate_pair(x, head_dim, i, half, s, c, style);
    }
    Ok(())
}

/// Rotates pair `i` of every head by `(sin, cos)`.
#[inline(always)]
fn rotate_pair(
    x: &mut [F32],
    head_dim: usize,
    i: usize,
    half: usize,
    sin: F32,
    cos: F32,
    style: RopeStyle,
) {
    let (a, b) = match style {
        RopeStyle::Norm => (2 * i, 2 * i + 1),
        RopeStyle::Neox => (i, i + half),
    };
    for head in x.chunks_exact_mut(head_dim) {
        let (x0, x1) = (head[a], head[b]);
        head[a] = x0 * cos - x1 * sin;
        head[b] = x0 * sin + x1 * cos;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
