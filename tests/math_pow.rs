//! `powf` against CORE-MATH: the full grid of special values, exact cases,
//! every RoPE `theta_scale`, and a large random sample of pairs.
#![cfg(feature = "oracle")]

mod math_common;
use math_common::*;

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
