//! `sin`, `cos`, `sin_cos` against CORE-MATH: specials, golden bits, a large
//! random sample, and (ignored, extended) the exhaustive 2^32 sweeps.
#![cfg(feature = "oracle")]

use crate::support;
use support::math::*;

use detllm::F32;

fn sin(x: u32) -> u32 {
    F32::from_bits(x).sin().to_bits()
}
fn cos(x: u32) -> u32 {
    F32::from_bits(x).cos().to_bits()
}
fn cm_sin(x: u32) -> u32 {
    canon(core_math::sinf(f32::from_bits(x)).to_bits())
}
fn cm_cos(x: u32) -> u32 {
    canon(core_math::cosf(f32::from_bits(x)).to_bits())
}

#[test]
fn sin_sample_matches_core_math() {
    assert_eq!(
        sample_mismatches(sin, cm_sin),
        Vec::<(u32, u32, u32)>::new()
    );
}

#[test]
fn cos_sample_matches_core_math() {
    assert_eq!(
        sample_mismatches(cos, cm_cos),
        Vec::<(u32, u32, u32)>::new()
    );
}

#[test]
fn sin_cos_is_sin_and_cos() {
    for x in sample_inputs() {
        let (s, c) = F32::from_bits(x).sin_cos();
        assert_eq!((s.to_bits(), c.to_bits()), (sin(x), cos(x)), "x={x:#010x}");
    }
}

/// RoPE-like arguments: positions 0..4096 times frequencies base^(-2i/d).
#[test]
fn rope_angles_match_core_math() {
    let base = F32::from_u32(10000);
    for n_rot in [32u32, 64, 128] {
        let scale = base.powf(F32::from_i32(-2) / F32::from_u32(n_rot));
        for pos in 0..4096u32 {
            let mut theta = F32::from_u32(pos);
            for _ in 0..n_rot / 2 {
                let t = theta.to_bits();
                assert_eq!(sin(t), cm_sin(t), "sin({t:#010x})");
                assert_eq!(cos(t), cm_cos(t), "cos({t:#010x})");
                theta = theta * scale;
            }
        }
    }
}

/// (input, sin, cos) bits: specials per C99 Annex F, tiny arguments, the
/// largest finite input, and inputs close to multiples of π/2. Values from
/// CORE-MATH `sinf`/`cosf` (regenerate by printing them for each input).
const GOLDEN: &[(u32, u32, u32)] = &[
    (0x0000_0000, 0x0000_0000, 0x3F80_0000),
    (0x8000_0000, 0x8000_0000, 0x3F80_0000),
    (0x0000_0001, 0x0000_0001, 0x3F80_0000),
    (0x7F80_0000, 0x7FC0_0000, 0x7FC0_0000),
    (0xFF80_0000, 0x7FC0_0000, 0x7FC0_0000),
    (0x7FC0_0000, 0x7FC0_0000, 0x7FC0_0000),
];

#[test]
fn golden() {
    for &(x, s, c) in GOLDEN {
        assert_eq!((sin(x), cos(x)), (s, c), "x={x:#010x}");
        assert_eq!(
            (cm_sin(x), cm_cos(x)),
            (s, c),
            "oracle disagrees at {x:#010x}"
        );
    }
    for &x in HARD {
        assert_eq!(sin(x), cm_sin(x), "sin({x:#010x})");
        assert_eq!(cos(x), cm_cos(x), "cos({x:#010x})");
    }
}

/// Inputs next to multiples of π/2 (π/2, π rounded), the largest finite
/// magnitudes, a large argument, 2^24; compared against the oracle.
const HARD: &[u32] = &[
    0x3FC9_0FDB,
    0x4049_0FDB,
    0x7F7F_FFFF,
    0xFF7F_FFFF,
    0x5D3B_BC42,
    0x4B80_0000,
];

/// EXTENDED: all 2^32 inputs (minutes). Run:
/// `cargo test --release --features std,oracle --test float -- --ignored --nocapture sincos::`
#[test]
#[ignore]
fn sin_exhaustive() {
    assert_eq!(exhaustive("sin", sin, cm_sin), 0);
}

/// EXTENDED: all 2^32 inputs (minutes); run as above.
#[test]
#[ignore]
fn cos_exhaustive() {
    assert_eq!(exhaustive("cos", cos, cm_cos), 0);
}

/// Hard cases: inputs where `libm` 0.2.16 `sinf` is not correctly rounded
/// (the first ten of an LCG sweep: state = state·6364136223846793005 +
/// 1442695040888963407, input = state >> 32, seed 0x9E3779B9), with the
/// correctly rounded result from CORE-MATH `sinf`. Regenerate by running that
/// sweep and printing `core_math::sinf` where the two differ.
const HARD_SIN: &[(u32, u32)] = &[
    (0xf1917da3, 0x3f65db75),
    (0x546b5228, 0xbf79814b),
    (0x4b40c49f, 0xbf76dd00),
    (0x4b902a07, 0xbf5901a0),
    (0xedf954c6, 0x3f62a96d),
    (0xe8d69ccb, 0x3f63bc72),
    (0x44c34f0f, 0xbf64095f),
    (0xfec86457, 0xbf7ac168),
    (0xf9bb7b68, 0x3f6c8553),
    (0xc6006d35, 0xbf47cb31),
];

#[test]
fn sin_hard_cases() {
    for &(x, want) in HARD_SIN {
        assert_eq!(sin(x), want, "sin({x:#010x})");
        assert_eq!(cm_sin(x), want, "oracle disagrees at {x:#010x}");
    }
}

/// Hard cases: inputs where `libm` 0.2.16 `cosf` is not correctly rounded
/// (the first ten of an LCG sweep: state = state·6364136223846793005 +
/// 1442695040888963407, input = state >> 32, seed 0x9E3779B9), with the
/// correctly rounded result from CORE-MATH `cosf`. Regenerate by running that
/// sweep and printing `core_math::cosf` where the two differ.
const HARD_COS: &[(u32, u32)] = &[
    (0x48861910, 0x3f3ab76c),
    (0x65c20b28, 0xbf68489b),
    (0x714df5ca, 0x3f3f2bd6),
    (0xcc80887e, 0x3f7a88d7),
    (0x5db344a6, 0x3f6a05db),
    (0xe55e7f67, 0x3f7a916a),
    (0x67abb2ac, 0x3f559bb5),
    (0xe5b3f640, 0xbf66200e),
    (0xfdf44170, 0xbf7d3b4e),
    (0xdf18908a, 0xbf3e76b8),
];

#[test]
fn cos_hard_cases() {
    for &(x, want) in HARD_COS {
        assert_eq!(cos(x), want, "cos({x:#010x})");
        assert_eq!(cm_cos(x), want, "oracle disagrees at {x:#010x}");
    }
}
