//! `exp` and `exp2` against CORE-MATH: specials, golden bits, a large random
//! sample, and (ignored, extended) the exhaustive 2^32 sweep.
#![cfg(feature = "oracle")]

mod math_common;
use math_common::*;

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
/// `cargo test --release --features std,oracle --test math_exp -- --ignored --nocapture`
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
