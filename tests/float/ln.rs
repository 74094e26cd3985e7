//! `ln` against CORE-MATH: specials, golden bits, a large random sample, and
//! (ignored, extended) the exhaustive 2^32 sweep.
#![cfg(feature = "oracle")]

use crate::support;
use support::math::*;

use detllm::F32;

fn ln(x: u32) -> u32 {
    F32::from_bits(x).ln().to_bits()
}
fn cm_ln(x: u32) -> u32 {
    canon(core_math::logf(f32::from_bits(x)).to_bits())
}

#[test]
fn ln_sample_matches_core_math() {
    assert_eq!(sample_mismatches(ln, cm_ln), Vec::<(u32, u32, u32)>::new());
}

/// (input, expected) bits: C99 Annex F specials and edge inputs. Regenerate
/// the finite values by printing `core_math::logf` of each input.
const GOLDEN: &[(u32, u32)] = &[
    (0x0000_0000, 0xFF80_0000), // ln(+0) = -inf
    (0x8000_0000, 0xFF80_0000), // ln(-0) = -inf
    (0xBF80_0000, 0x7FC0_0000), // ln(-1) = NaN
    (0xFF80_0000, 0x7FC0_0000), // ln(-inf) = NaN
    (0x7F80_0000, 0x7F80_0000), // ln(+inf) = +inf
    (0x3F80_0000, 0x0000_0000), // ln(1) = +0
    (0x7FC0_0001, 0x7FC0_0000), // NaN canonical
];

#[test]
fn golden() {
    for &(x, want) in GOLDEN {
        assert_eq!(ln(x), want, "ln({x:#010x})");
        assert_eq!(cm_ln(x), want, "oracle disagrees at {x:#010x}");
    }
    for &x in EDGES {
        assert_eq!(ln(x), cm_ln(x), "ln({x:#010x})");
    }
}

/// Smallest subnormal, largest finite, neighbours of 1 and of √2 (the bin
/// split), e.
const EDGES: &[u32] = &[
    0x0000_0001,
    0x007F_FFFF,
    0x0080_0000,
    0x7F7F_FFFF,
    0x3F7F_FFFF,
    0x3F80_0001,
    0x3FB5_04F3,
    0x3FB5_04F4,
    0x3F35_04F3,
    0x402D_F854,
];

/// EXTENDED: all 2^32 inputs (minutes). Run:
/// `cargo test --release --features std,oracle --test float -- --ignored --nocapture ln::`
#[test]
#[ignore]
fn ln_exhaustive() {
    assert_eq!(exhaustive("ln", ln, cm_ln), 0);
}

/// Hard cases: inputs where `libm` 0.2.16 `logf` is not correctly rounded
/// (the first ten of an LCG sweep: state = state·6364136223846793005 +
/// 1442695040888963407, input = state >> 32, seed 0x9E3779B9), with the
/// correctly rounded result from CORE-MATH `logf`. Regenerate by running that
/// sweep and printing `core_math::logf` where the two differ.
const HARD_LN: &[(u32, u32)] = &[
    (0x45556cdb, 0x41022c8b),
    (0x3bae4df1, 0xc0a7909f),
    (0x422a910b, 0x40702e63),
    (0x332c250b, 0xc188424d),
    (0x3e4c1404, 0xbfce75c1),
    (0x40b0d01f, 0x3fdacc33),
    (0x3fb78979, 0x3eb88485),
    (0x3f9a84c4, 0x3e40cd9b),
    (0x36a99f7c, 0xc1431f23),
    (0x40228bf4, 0x3f6e9cf1),
];

#[test]
fn ln_hard_cases() {
    for &(x, want) in HARD_LN {
        assert_eq!(ln(x), want, "ln({x:#010x})");
        assert_eq!(cm_ln(x), want, "oracle disagrees at {x:#010x}");
    }
}
