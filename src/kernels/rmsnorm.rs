//! x (n), w (n) -> out (n): `out_i = (x_i · (1 / sqrt(Σx²/n + eps))) · w_i`.
//!
//! Order: `ss = +0; ss = ss + x_i·x_i` left to right (soft f32, two roundings
//! per element); `mean = ss / n`; `scale = 1 / sqrt(mean + eps)`;
//! `out_i = (x_i · scale) · w_i`. llama.cpp sums the f32 squares in a double;
//! this profile keeps the sum in f32 so no wider float type is needed.

use super::check_len;
use crate::{F32, Result};

/// RMS normalisation of one row (see the module docs for the exact order).
pub fn rmsnorm(x: &[F32], w: &[F32], eps: F32, out: &mut [F32]) -> Result<()> {
    let n = x.len();
    check_len(n, w.len())?;
    check_len(n, out.len())?;
    let mut ss = F32::ZERO;
    for &v in x {
        ss = ss + v * v;
    }
    let mean = ss / F32::from_u32(n as u32);
    let scale = F32::ONE / (mean + eps).sqrt();
    for ((o, &v), &g) in out.iter_mut().zip(x).zip(w) {
        *o = (v * scale) * g;
    }
    Ok(())
}
