//! SiLU (swish) activation.

#![forbid(unsafe_code)]

use crate::F32;

/// SiLU: `x / (1 + exp(-x))`, evaluated as three soft operations in exactly
/// that order (negate, correctly rounded `exp`, add 1, divide), each rounded
/// to nearest even, so the result is the same on every target. Not itself
/// correctly rounded as a function of `x` (two roundings before the divide).
pub fn silu(x: F32) -> F32 {
    x / (F32::ONE + (-x).exp())
}
