//! gate (n), up (n) -> gate (n): `gate_i = silu(gate_i) · up_i`.
//!
//! `silu` is [`crate::math::silu`] (`x / (1 + exp(-x))`), then one soft
//! multiplication.

use super::check_len;
use crate::{F32, Result, math::silu};

/// SwiGLU in place over `gate`.
pub fn swiglu(gate: &mut [F32], up: &[F32]) -> Result<()> {
    check_len(gate.len(), up.len())?;
    for g in gate.iter_mut() {
        *g = silu(*g);
    }
    super::mul_assign(gate, up);
    Ok(())
}
