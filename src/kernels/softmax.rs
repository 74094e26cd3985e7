//! s (n) -> p (n) in place: `p_i = e_i · (1 / Σ_{j<n_valid} e_j)`,
//! `e_i = exp(s_i·scale − max_j s_j·scale)` for `i < n_valid`, `p_i = 0` beyond
//! (the causal mask).
//!
//! Order: `t_i = s_i · scale`; `max` = the largest `t_i` (a NaN `t_i` is not a
//! maximum; it still makes the sum NaN); `e_i = exp(t_i − max)`;
//! `sum = +0; sum = sum + e_i` left to right; `inv = 1 / sum`;
//! `p_i = e_i · inv`. llama.cpp accumulates the sum in a double and rounds
//! `1.0/sum` to f32; this profile keeps the sum in f32.

use crate::{Error, F32, Result};

/// Scaled, masked softmax of `s[..n_valid]`; `s[n_valid..]` become +0.
pub fn softmax(s: &mut [F32], scale: F32, n_valid: usize) -> Result<()> {
    if n_valid > s.len() {
        return Err(Error::ShapeMismatch {
            expected: s.len(),
            found: n_valid,
        });
    }
    let (live, masked) = s.split_at_mut(n_valid);
    let mut max = F32::NEG_INFINITY;
    for v in live.iter_mut() {
        *v = *v * scale;
        if v.gt(max) {
            max = *v;
        }
    }
    let mut sum = F32::ZERO;
    for v in live.iter_mut() {
        *v = (*v - max).exp();
        sum = sum + *v;
    }
    let inv = F32::ONE / sum;
    for v in live.iter_mut() {
        *v = *v * inv;
    }
    masked.fill(F32::ZERO);
    Ok(())
}
