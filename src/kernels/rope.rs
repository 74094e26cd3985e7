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

/// Rotates every head of `x` (n_heads, head_dim) for position `pos`.
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
    if n_rot > head_dim || !n_rot.is_multiple_of(2) {
        return Err(Error::InvalidConfig);
    }
    let half = n_rot / 2;
    let mut theta = F32::from_i64(pos as i64);
    for i in 0..half {
        let (sin, cos) = theta.sin_cos();
        let (a, b) = match style {
            RopeStyle::Norm => (2 * i, 2 * i + 1),
            RopeStyle::Neox => (i, i + half),
        };
        for head in x.chunks_exact_mut(head_dim) {
            let (x0, x1) = (head[a], head[b]);
            head[a] = x0 * cos - x1 * sin;
            head[b] = x0 * sin + x1 * cos;
        }
        theta = theta * theta_scale;
    }
    Ok(())
}
