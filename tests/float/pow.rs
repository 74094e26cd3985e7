//! `powf` against CORE-MATH: the full grid of special values, exact cases,
//! every RoPE `theta_scale`, and a large random sample of pairs.
#![cfg(feature = "oracle")]

use crate::support;
use support::math::*;

use detllm::F32;

fn pow(x: u32, y: u32) -> u32 {
    F32::from_bits(x).powf(F32::from_bits(y)).to_bits()
}
fn cm_pow(x: u32, y: u32) -> u32 {
    canon(core_math::powf(f32::from_bits(x), f32::from_bits(y)).to_bits())
}

/// Special and edge values for both arguments.
const SPECIALS: &[u32] = &[
    0x0000_0000,
    0x8000_0000,
    0x7F80_0000,
    0xFF80_0000,
    0x7FC0_0000,
    0xFFC0_1234,
    0x3F80_0000,
    0xBF80_0000,
    0x3F00_0000,
    0xBF00_0000,
    0x4000_0000,
    0xC000_0000,
    0x4040_0000,
    0xC040_0000,
    0x3FC0_0000,
    0xBFC0_0000,
    0x0000_0001,
    0x8000_0001,
    0x7F7F_FFFF,
    0xFF7F_FFFF,
    0x3F7F_FFFF,
    0x3F80_0001,
    0x4B00_0001,
    0xCB00_0001,
    0x4B80_0000,
    0x4F00_0000,
    0x42FE_0000,
    0xC316_0000,
    0x4316_0000,
    0x3400_0000,
    0x461C_4000,
    0x402D_F854,
    0x3E80_0000,
    0x4110_0000,
    0xC110_0000,
];

#[test]
fn specials_grid() {
    for &x in SPECIALS {
        for &y in SPECIALS {
            assert_eq!(pow(x, y), cm_pow(x, y), "pow({x:#010x}, {y:#010x})");
        }
    }
}

/// RoPE: theta_scale = base^(-2/n_rot), and the per-dimension powers.
#[test]
fn rope_bases() {
    for base in [10000u32, 100000, 500000, 1000000, 10000000] {
        let b = F32::from_u32(base);
        for n_rot in 1..=512u32 {
            let e = F32::from_i32(-2) / F32::from_u32(n_rot);
            assert_eq!(
                pow(b.to_bits(), e.to_bits()),
                cm_pow(b.to_bits(), e.to_bits()),
                "{base} {n_rot}"
            );
            for i in 0..n_rot / 2 {
                let e = F32::from_i32(-2 * i as i32) / F32::from_u32(n_rot);
                assert_eq!(
                    pow(b.to_bits(), e.to_bits()),
                    cm_pow(b.to_bits(), e.to_bits())
                );
            }
        }
    }
}

/// Exact results, including binary32 midpoints: integer powers, powers of
/// two, square and fourth roots of squares.
#[test]
fn exact_cases() {
    let mut s = 7u64;
    for _ in 0..200_000 {
        let r = splitmix(&mut s);
        // A small odd significand and exponent, squared or not.
        let sig = (r as u32 & 0xFFF) | 1;
        let e = ((r >> 12) as i32 & 31) - 16;
        let x = F32::from_i128_scaled(sig as i128, e);
        let x2 = x * x;
        let ys: [u32; 8] = [
            0x4000_0000,
            0x4040_0000,
            0x3FC0_0000,
            0x3F00_0000,
            0x4020_0000,
            0x3E80_0000,
            0x40A0_0000,
            0xC000_0000,
        ];
        for y in ys {
            for xb in [x.to_bits(), x2.to_bits(), (-x).to_bits()] {
                assert_eq!(pow(xb, y), cm_pow(xb, y), "pow({xb:#010x}, {y:#010x})");
            }
        }
    }
}

#[test]
fn random_pairs() {
    let mut s = 0xC0FFEE_u64;
    for i in 0..1_500_000u32 {
        let r = splitmix(&mut s);
        let (x, y) = match i % 3 {
            // Anything.
            0 => (r as u32, (r >> 32) as u32),
            // Positive x in [2^-16, 2^16], |y| < 16: results mostly finite.
            1 => (
                0x3780_0000 + (r as u32 % 0x1000_0000),
                ((r >> 32) as u32 % 0x4180_0000) | ((r >> 63) as u32) << 31,
            ),
            // x near 1, large |y|.
            _ => (
                0x3F80_0000 - 0x8000 + (r as u32 & 0xFFFF),
                (0x4000_0000 + ((r >> 32) as u32 % 0x0B00_0000)) | (((r >> 63) as u32) << 31),
            ),
        };
        assert_eq!(pow(x, y), cm_pow(x, y), "pow({x:#010x}, {y:#010x})");
    }
}

/// Pinned RoPE `theta_scale = base^(-2/n_rot)` bits: (base, exponent, result).
/// Exponents are the binary32 quotients `-2/n_rot`; results from CORE-MATH
/// `powf` (regenerate by printing `core_math::powf(base, -2.0 / n as f32)`).
const ROPE_GOLDEN: &[(u32, u32, u32)] = &[
    (0x461c4000, 0xbd800000, 0x3f0ff59a), // 10000^(-2/32)
    (0x461c4000, 0xbd000000, 0x3f3ff911), // 10000^(-2/64)
    (0x461c4000, 0xbccccccd, 0x3f4b5918), // 10000^(-2/80)
    (0x461c4000, 0xbc800000, 0x3f5dafd7), // 10000^(-2/128)
    (0x461c4000, 0xbc000000, 0x3f6e39f8), // 10000^(-2/256)
    (0x47c35000, 0xbd800000, 0x3ef953cf), // 100000^(-2/32)
    (0x47c35000, 0xbd000000, 0x3f32a506), // 100000^(-2/64)
    (0x47c35000, 0xbccccccd, 0x3f3ff911), // 100000^(-2/80)
    (0x47c35000, 0xbc800000, 0x3f55da52), // 100000^(-2/128)
    (0x47c35000, 0xbc000000, 0x3f69fab4), // 100000^(-2/256)
    (0x48f42400, 0xbd800000, 0x3ee177bb), // 500000^(-2/32)
    (0x48f42400, 0xbd000000, 0x3f29e1c5), // 500000^(-2/64)
    (0x48f42400, 0xbccccccd, 0x3f3866ec), // 500000^(-2/80)
    (0x48f42400, 0xbc800000, 0x3f508ac1), // 500000^(-2/128)
    (0x48f42400, 0xbc000000, 0x3f670e45), // 500000^(-2/256)
];

#[test]
fn rope_golden() {
    for &(b, e, want) in ROPE_GOLDEN {
        assert_eq!(pow(b, e), want, "pow({b:#010x}, {e:#010x})");
        assert_eq!(
            cm_pow(b, e),
            want,
            "oracle disagrees at ({b:#010x}, {e:#010x})"
        );
    }
}
