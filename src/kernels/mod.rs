//! Compute kernels: matmul, rmsnorm, softmax, rope, swiglu, geglu,
//! attention,
//! elementwise row updates.
//!
//! Each kernel validates every shape before writing anything, so an `Err`
//! leaves its outputs untouched. The arithmetic of each is written down in
//! `docs/ARITHMETIC.md` (operation order, roundings).

pub mod attention;
pub mod elementwise;
pub mod geglu;
pub mod matmul;
pub mod rmsnorm;
pub mod rope;
pub mod softmax;
pub mod swiglu;

pub use attention::attention;
pub use elementwise::{add_assign, mul_assign};
pub use geglu::geglu;
pub use matmul::{matmul, matmul_scratch_len};
pub use rmsnorm::rmsnorm;
pub use rope::{RopeAngles, RopeStyle, rope, rope_apply, rope_theta_scale};
pub use softmax::softmax;
pub use swiglu::swiglu;

use crate::{Error, Result};

/// `Err(ShapeMismatch)` unless `found == expected`.
#[inline]
pub(crate) fn check_len(expected: usize, found: usize) -> Result<()> {
    if expected == found {
        Ok(())
    } else {
        Err(Error::ShapeMismatch { expected, found })
    }
}
