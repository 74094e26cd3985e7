//! `silu` and `sin_cos` bit-identity properties, and `silu` against an
//! independent evaluation: the host's IEEE f32 divide and add (correctly
//! rounded, no FMA in Rust) around CORE-MATH `expf`.
#![cfg(feature = "oracle")]

use crate::support;
use support::math::*;

use detllm::F32;
use detllm::math::silu;
use proptest::prelude::*;

fn oracle_silu(x: u32) -> u32 {
    let xf = f32::from_bits(x);
    canon((xf / (1.0 + core_math::expf(-xf))).to_bits())
}

#[test]
fn silu_sample_matches_oracle() {
    let got = sample_mismatches(|x| silu(F32::from_bits(x)).to_bits(), oracle_silu);
    assert_eq!(got, Vec::<(u32, u32, u32)>::new());
}

/// Golden bits (from the oracle above): specials and typical activations.
const GOLDEN: &[(u32, u32)] = &[
    (0x0000_0000, 0x0000_0000), // silu(0) = 0
    (0x7F80_0000, 0x7F80_0000), // silu(+inf) = +inf / 1
    (0xFF80_0000, 0x7FC0_0000), // -inf / (1 + inf) = NaN
    (0x7FC0_0000, 0x7FC0_0000),
];

#[test]
fn silu_golden() {
    for &(x, want) in GOLDEN {
        assert_eq!(silu(F32::from_bits(x)).to_bits(), want, "silu({x:#010x})");
        assert_eq!(oracle_silu(x), want, "oracle disagrees at {x:#010x}");
    }
}

proptest! {
    #[test]
    fn silu_is_its_formula(bits in any::<u32>()) {
        let x = F32::from_bits(bits);
        prop_assert_eq!(silu(x).to_bits(), (x / (F32::ONE + (-x).exp())).to_bits());
        prop_assert_eq!(silu(x).to_bits(), oracle_silu(bits));
    }

    #[test]
    fn sin_cos_is_one_reduction_of_sin_and_cos(bits in any::<u32>()) {
        let x = F32::from_bits(bits);
        let (s, c) = x.sin_cos();
        prop_assert_eq!(s.to_bits(), x.sin().to_bits());
        prop_assert_eq!(c.to_bits(), x.cos().to_bits());
    }
}
