//! `tanh` against CORE-MATH: specials, golden bits, the default sample
//! (every exponent's edges, a dense sweep around 1, 2^21 random inputs), a
//! dense sweep of the range where it computes, and (ignored, extended) the
//! exhaustive 2^32 sweep.
#![cfg(feature = "oracle")]

use crate::support;
use support::math::*;

use detllm::F32;

fn tanh(x: u32) -> u32 {
    F32::from_bits(x).tanh().to_bits()
}
fn cm_tanh(x: u32) -> u32 {
    canon(core_math::tanhf(f32::from_bits(x)).to_bits())
}

#[test]
fn tanh_sample_matches_core_math() {
    assert_eq!(
        sample_mismatches(tanh, cm_tanh),
        Vec::<(u32, u32, u32)>::new()
    );
}

/// Every 61st input of `[2^-13, 17]` (both signs), the range around the
/// computed one, plus the 4096 inputs at each of its edges.
#[test]
fn tanh_mid_range_sweep_matches_core_math() {
    let (lo, hi) = (0x3900_0000u32, 0x4188_0000u32);
    let edges = [0x3980_0000u32, 0x4180_0000];
    let inputs = (lo..hi)
        .step_by(61)
        .chain(edges.iter().flat_map(|&e| e - 2048..e + 2048));
    let mut bad = Vec::new();
    for abs in inputs {
        for x in [abs, abs | 0x8000_0000] {
            if tanh(x) != cm_tanh(x) && bad.len() < 20 {
                bad.push((x, tanh(x), cm_tanh(x)));
            }
        }
    }
    assert_eq!(bad, Vec::<(u32, u32, u32)>::new());
}

/// (input, expected) bits; expected values from CORE-MATH `tanhf`
/// (checked against the oracle in the test) and C99 Annex F.
const TANH_GOLDEN: &[(u32, u32)] = &[
    (0x0000_0000, 0x0000_0000), // tanh(+0) = +0
    (0x8000_0000, 0x8000_0000), // tanh(-0) = -0
    (0x7F80_0000, 0x3F80_0000), // tanh(+inf) = 1
    (0xFF80_0000, 0xBF80_0000), // tanh(-inf) = -1
    (0x7FC0_0000, 0x7FC0_0000), // NaN
    (0xFFC0_0001, 0x7FC0_0000), // NaN payload is canonicalized
    (0x0000_0001, 0x0000_0001), // smallest subnormal
    (0x3F80_0000, 0x3F42_F7D6), // tanh 1
    (0xBF80_0000, 0xBF42_F7D6), // tanh -1
    (0x3F00_0000, 0x3EEC_9A9F), // tanh 1/2
    (0x4110_0000, 0x3F7F_FFFF), // tanh 9: just below 1
    (0x4120_0000, 0x3F80_0000), // tanh 10 rounds to 1
];

#[test]
fn tanh_golden() {
    for &(x, want) in TANH_GOLDEN {
        assert_eq!(cm_tanh(x), want, "oracle disagrees with table at {x:#010x}");
        assert_eq!(tanh(x), want, "tanh({x:#010x})");
    }
}

#[test]
fn tanh_is_odd() {
    let mut s = 0x7A_u64;
    for _ in 0..100_000 {
        let x = splitmix(&mut s) as u32 & 0x7FFF_FFFF;
        if x > 0x7F80_0000 {
            continue;
        }
        assert_eq!(tanh(x | 0x8000_0000), tanh(x) ^ 0x8000_0000, "{x:#010x}");
    }
}

/// EXTENDED: all 2^32 inputs (minutes). Run:
/// `cargo test --release --features std,oracle --test float -- --ignored --nocapture tanh::`
#[test]
#[ignore]
fn tanh_exhaustive() {
    assert_eq!(exhaustive("tanh", tanh, cm_tanh), 0);
}
