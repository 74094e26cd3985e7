//! Cases of the groups `f32` (the soft operations), `conv` (conversions)
//! and `math` (elementary functions): one sweep each, hashed as described
//! in [`crate::selftest`].

#![forbid(unsafe_code)]

use super::inputs::{BinarySweep, Digest, I32Sweep, UnarySweep};
use crate::{F32, Result};
use core::cmp::Ordering;
use sha2::{Digest as _, Sha256};

// ---------------------------------------------------------------- helpers

fn finish(h: Sha256) -> Result<Digest> {
    Ok(h.finalize().into())
}

fn unary_f32(op: fn(F32) -> F32) -> Result<Digest> {
    let mut h = Sha256::new();
    for x in UnarySweep::new() {
        h.update(op(x).to_bits().to_le_bytes());
    }
    finish(h)
}

fn binary_f32(op: fn(F32, F32) -> F32) -> Result<Digest> {
    let mut h = Sha256::new();
    for (x, y) in BinarySweep::new() {
        h.update(op(x, y).to_bits().to_le_bytes());
    }
    finish(h)
}

fn unary_i32(op: fn(F32) -> i32) -> Result<Digest> {
    let mut h = Sha256::new();
    for x in UnarySweep::new() {
        h.update(op(x).to_le_bytes());
    }
    finish(h)
}

fn unary_u16(op: fn(F32) -> u16) -> Result<Digest> {
    let mut h = Sha256::new();
    for x in UnarySweep::new() {
        h.update(op(x).to_le_bytes());
    }
    finish(h)
}

fn all_u16(op: fn(u16) -> F32) -> Result<Digest> {
    let mut h = Sha256::new();
    for v in 0..=u16::MAX {
        h.update(op(v).to_bits().to_le_bytes());
    }
    finish(h)
}

/// `Ordering` (or unordered) as one byte: 0 less, 1 equal, 2 greater, 3 unordered.
pub fn ordering_byte(o: Option<Ordering>) -> u8 {
    match o {
        Some(Ordering::Less) => 0,
        Some(Ordering::Equal) => 1,
        Some(Ordering::Greater) => 2,
        None => 3,
    }
}

// ------------------------------------------------------------ group f32

pub(super) fn f32_add(_: &mut [u8]) -> Result<Digest> {
    binary_f32(|x, y| x + y)
}

pub(super) fn f32_sub(_: &mut [u8]) -> Result<Digest> {
    binary_f32(|x, y| x - y)
}

pub(super) fn f32_mul(_: &mut [u8]) -> Result<Digest> {
    binary_f32(|x, y| x * y)
}

pub(super) fn f32_div(_: &mut [u8]) -> Result<Digest> {
    binary_f32(|x, y| x / y)
}

pub(super) fn f32_sqrt(_: &mut [u8]) -> Result<Digest> {
    unary_f32(F32::sqrt)
}

/// Per pair: `min(x, y)` then `max(x, y)`.
pub(super) fn f32_min_max(_: &mut [u8]) -> Result<Digest> {
    let mut h = Sha256::new();
    for (x, y) in BinarySweep::new() {
        h.update(x.min(y).to_bits().to_le_bytes());
        h.update(x.max(y).to_bits().to_le_bytes());
    }
    finish(h)
}

/// Per pair: [`ordering_byte`] of `partial_cmp`, then of `total_cmp`.
pub(super) fn f32_cmp(_: &mut [u8]) -> Result<Digest> {
    let mut h = Sha256::new();
    for (x, y) in BinarySweep::new() {
        h.update([
            ordering_byte(x.partial_cmp(y)),
            ordering_byte(Some(x.total_cmp(y))),
        ]);
    }
    finish(h)
}

// ----------------------------------------------------------- group conv

pub(super) fn conv_f16_to_f32(_: &mut [u8]) -> Result<Digest> {
    all_u16(F32::from_f16_bits)
}

pub(super) fn conv_f32_to_f16(_: &mut [u8]) -> Result<Digest> {
    unary_u16(F32::to_f16_bits)
}

pub(super) fn conv_bf16_to_f32(_: &mut [u8]) -> Result<Digest> {
    all_u16(F32::from_bf16_bits)
}

pub(super) fn conv_f32_to_bf16(_: &mut [u8]) -> Result<Digest> {
    unary_u16(F32::to_bf16_bits)
}

pub(super) fn conv_i32_to_f32(_: &mut [u8]) -> Result<Digest> {
    let mut h = Sha256::new();
    for v in I32Sweep::new() {
        h.update(F32::from_i32(v).to_bits().to_le_bytes());
    }
    finish(h)
}

pub(super) fn conv_to_i32_trunc(_: &mut [u8]) -> Result<Digest> {
    unary_i32(F32::to_i32_trunc)
}

pub(super) fn conv_to_i32_ties_away(_: &mut [u8]) -> Result<Digest> {
    unary_i32(F32::to_i32_round_ties_away)
}

pub(super) fn conv_to_i32_ties_even(_: &mut [u8]) -> Result<Digest> {
    unary_i32(F32::to_i32_round_ties_even)
}

pub(super) fn conv_round_ties_away(_: &mut [u8]) -> Result<Digest> {
    unary_f32(F32::round_ties_away)
}

// ----------------------------------------------------------- group math

pub(super) fn math_exp(_: &mut [u8]) -> Result<Digest> {
    unary_f32(F32::exp)
}

pub(super) fn math_exp2(_: &mut [u8]) -> Result<Digest> {
    unary_f32(F32::exp2)
}

pub(super) fn math_ln(_: &mut [u8]) -> Result<Digest> {
    unary_f32(F32::ln)
}

pub(super) fn math_sin(_: &mut [u8]) -> Result<Digest> {
    unary_f32(F32::sin)
}

pub(super) fn math_cos(_: &mut [u8]) -> Result<Digest> {
    unary_f32(F32::cos)
}

/// Per input: `sin` then `cos` from the shared reduction.
pub(super) fn math_sin_cos(_: &mut [u8]) -> Result<Digest> {
    let mut h = Sha256::new();
    for x in UnarySweep::new() {
        let (s, c) = x.sin_cos();
        h.update(s.to_bits().to_le_bytes());
        h.update(c.to_bits().to_le_bytes());
    }
    finish(h)
}

pub(super) fn math_powf(_: &mut [u8]) -> Result<Digest> {
    binary_f32(F32::powf)
}

pub(super) fn math_silu(_: &mut [u8]) -> Result<Digest> {
    unary_f32(crate::math::silu)
}

pub(super) fn math_tanh(_: &mut [u8]) -> Result<Digest> {
    unary_f32(F32::tanh)
}

pub(super) fn math_gelu(_: &mut [u8]) -> Result<Digest> {
    unary_f32(crate::math::gelu)
}
