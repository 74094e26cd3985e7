//! Elementary functions on [`F32`].
//!
//! TEMPORARY: these bodies call `libm` through hardware floats so that the
//! rest of the crate can be built against the final API. They are replaced
//! by the correctly rounded integer implementations (one file per function).

use crate::F32;

fn via(f: fn(f32) -> f32, x: F32) -> F32 {
    let y = F32::from_bits(f(f32::from_bits(x.to_bits())).to_bits());
    if y.is_nan() { F32::NAN } else { y }
}

impl F32 {
    /// e^x.
    pub fn exp(self) -> F32 {
        via(libm::expf, self)
    }
    /// 2^x.
    pub fn exp2(self) -> F32 {
        via(libm::exp2f, self)
    }
    /// Natural logarithm.
    pub fn ln(self) -> F32 {
        via(libm::logf, self)
    }
    /// Sine.
    pub fn sin(self) -> F32 {
        via(libm::sinf, self)
    }
    /// Cosine.
    pub fn cos(self) -> F32 {
        via(libm::cosf, self)
    }
    /// (sin x, cos x) from one argument reduction.
    pub fn sin_cos(self) -> (F32, F32) {
        (self.sin(), self.cos())
    }
    /// x^y.
    pub fn powf(self, y: F32) -> F32 {
        let r = libm::powf(f32::from_bits(self.to_bits()), f32::from_bits(y.to_bits()));
        let r = F32::from_bits(r.to_bits());
        if r.is_nan() { F32::NAN } else { r }
    }
}

/// SiLU: `x / (1 + exp(-x))`, three soft operations in that order.
pub fn silu(x: F32) -> F32 {
    x / (F32::ONE + (-x).exp())
}
