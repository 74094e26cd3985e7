//! `exp` and `exp2` against CORE-MATH: specials, golden bits, a large random
//! sample, and (ignored, extended) the exhaustive 2^32 sweep.
#![cfg(feature = "oracle")]

use crate::support;
use support::math::*;

use detllm::F32;

fn exp(x: u32) -> u32 {
    F32::from_bits(x).exp().to_bits()
}
fn exp2(x: u32) -> u32 {
    F32::from_bits(x).exp2().to_bits()
}
fn cm_exp(x: u32) -> u32 {
    canon(core_math::expf(f32::from_bits(x)).to_bits())
}
fn cm_exp2(x: u32) -> u32 {
    canon(core_math::exp2f(f32::from_bits(x)).to_bits())
}

#[test]
fn exp_sample_matches_core_math() {
    assert_eq!(
        sample_mismatches(exp, cm_exp),
        Vec::<(u32, u32, u32)>::new()
    );
}

#[test]
fn exp2_sample_matches_core_math() {
    assert_eq!(
        sample_mismatches(exp2, cm_exp2),
        Vec::<(u32, u32, u32)>::new()
    );
}

/// (input, expected) bits; expected values from CORE-MATH `expf`
/// (regenerate: print `core_math::expf` of each input) and C99 Annex F.
const EXP_GOLDEN: &[(u32, u32)] = &[
    (0x0000_0000, 0x3F80_0000), // exp(+0) = 1
    (0x8000_0000, 0x3F80_0000), // exp(-0) = 1
    (0x7F80_0000, 0x7F80_0000), // exp(+inf) = +inf
    (0xFF80_0000, 0x0000_0000), // exp(-inf) = +0
    (0x7FC0_0000, 0x7FC0_0000), // NaN
    (0xFFC0_0001, 0x7FC0_0000), // NaN payload is canonicalized
    (0x3F80_0000, 0x402D_F854), // e
    (0x42B1_7217, 0x7F7F_FF84), // largest finite result
    (0x42B1_7218, 0x7F80_0000), // overflow
    (0xC2CF_F1B4, 0x0000_0001), // rounds up to the smallest subnormal
    (0xC2CF_F1B5, 0x0000_0000), // rounds down to +0
];

#[test]
fn exp_golden() {
    for &(x, want) in EXP_GOLDEN {
        assert_eq!(exp(x), want, "exp({x:#010x})");
        assert_eq!(cm_exp(x), want, "oracle disagrees with table at {x:#010x}");
    }
}

const EXP2_GOLDEN: &[(u32, u32)] = &[
    (0x0000_0000, 0x3F80_0000),
    (0xFF80_0000, 0x0000_0000),
    (0x7F80_0000, 0x7F80_0000),
    (0x4300_0000, 0x7F80_0000), // 2^128 overflows
    (0x42FE_0000, 0x7F00_0000), // 2^127 exact
    (0xC315_0000, 0x0000_0001), // 2^-149 exact
    (0xC316_0000, 0x0000_0000), // 2^-150: tie to even 0
    (0x3F00_0000, 0x3FB5_04F3), // sqrt 2
];

#[test]
fn exp2_golden() {
    for &(x, want) in EXP2_GOLDEN {
        assert_eq!(exp2(x), want, "exp2({x:#010x})");
        assert_eq!(cm_exp2(x), want, "oracle disagrees with table at {x:#010x}");
    }
}

/// EXTENDED: all 2^32 inputs (minutes). Run:
/// `cargo test --release --features std,oracle --test float -- --ignored --nocapture exp::`
#[test]
#[ignore]
fn exp_exhaustive() {
    assert_eq!(exhaustive("exp", exp, cm_exp), 0);
}

/// EXTENDED: all 2^32 inputs (minutes); run as above.
#[test]
#[ignore]
fn exp2_exhaustive() {
    assert_eq!(exhaustive("exp2", exp2, cm_exp2), 0);
}

/// Hard cases: inputs where `libm` 0.2.16 `expf` is not correctly rounded
/// (the first ten of an LCG sweep: state = state·6364136223846793005 +
/// 1442695040888963407, input = state >> 32, seed 0x9E3779B9), with the
/// correctly rounded result from CORE-MATH `expf`. Regenerate by running that
/// sweep and printing `core_math::expf` where the two differ.
const HARD_EXP: &[(u32, u32)] = &[
    (0x3f6181fc, 0x401a6f57),
    (0xbfdc9316, 0x3e36c555),
    (0xc0d57423, 0x3aa62e3d),
    (0xbc4cb974, 0x3f7cd233),
    (0xc03e3e2d, 0x3d519ab1),
    (0xbed8ea9f, 0x3f2796b1),
    (0x42756aa8, 0x6bb6f43b),
    (0x40fe2ec0, 0x4530060b),
    (0x427b28dd, 0x6cc03abb),
    (0x407753c6, 0x423eb727),
];

#[test]
fn exp_hard_cases() {
    for &(x, want) in HARD_EXP {
        assert_eq!(exp(x), want, "exp({x:#010x})");
        assert_eq!(cm_exp(x), want, "oracle disagrees at {x:#010x}");
    }
}

/// Hard cases: inputs where `libm` 0.2.16 `exp2f` is not correctly rounded
/// (the first ten of an LCG sweep: state = state·6364136223846793005 +
/// 1442695040888963407, input = state >> 32, seed 0x9E3779B9), with the
/// correctly rounded result from CORE-MATH `exp2f`. Regenerate by running that
/// sweep and printing `core_math::exp2f` where the two differ.
const HARD_EXP2: &[(u32, u32)] = &[
    (0x3db1d4e3, 0x3f87f0c6),
    (0xbeec8e48, 0x3f39d903),
    (0x3e9a66c1, 0x3f9dc1ef),
    (0x3c84acfc, 0x3f8171ed),
    (0xc1c08f40, 0x3373e269),
    (0xbf2cb846, 0x3f206038),
    (0x422363e8, 0x53e654bc),
    (0xbd035c10, 0x3f7a5f3f),
    (0x408f0f75, 0x41b15f4f),
    (0xc040bcb6, 0x3dfdf6de),
];

#[test]
fn exp2_hard_cases() {
    for &(x, want) in HARD_EXP2 {
        assert_eq!(exp2(x), want, "exp2({x:#010x})");
        assert_eq!(cm_exp2(x), want, "oracle disagrees at {x:#010x}");
    }
}
