//! `tanh x`, correctly rounded (the GELU-tanh activation needs it).
//!
//! Algorithm: `tanh` is odd, so the sign is set at the end and `x = |x|`.
//!
//! * `x < 2^-12`: `tanh x = x (1 - x²/3 + …)` with `x²/3 < 2^-25.5`, less
//!   than a quarter of the spacing below `x` even at a power of two, so the
//!   result is `x` (this includes ±0 and the subnormals).
//! * `x ≥ 16`: `1 - tanh x < 2e^-32 < 2^-45`, far below half the spacing
//!   below 1 (2^-25): the result is 1 (this includes +inf).
//! * Otherwise `tanh x = (1 - E)/(1 + E)` with `E = e^(-2x)` in `(e^-32, 1)`.
//!   `t = 2x · log2 e` is formed from the 24-bit significand and the 104-bit
//!   constant [`LOG2E_Q103`] and split into an integer `k` and a Q0.128
//!   fraction `f`; then `E = 2^-(k+1) · 2^g` with `g = 1 - f` (or `2^-k` if
//!   `f = 0`), and `2^g = 2^(i/64) · e^h` from the Q1.127 table
//!   [`EXP2_TABLE`] and the degree-16 Taylor polynomial of `e^h - 1`, as in
//!   the accurate path of `exp2`. `1 - E` and `1 + E` are formed in Q2.126,
//!   and their quotient by a 128-step restoring division as Q0.128.
//!
//! Error bound (units of 2^-128 of the quotient `q`): the constant's
//! truncation (2^-103.5 relative) and the fraction's (2^-128) give
//! `|δt| < 46.2 · 2^-103.5 + 2^-128 < 2^-97.9`, so `|δE|/E < ln 2 · |δt| +
//! 2^-115 (table and polynomial) < 2^-98`; with the truncation to Q2.126,
//! `|δE| ≤ E·2^-98 + 2^-126 ≤ dE · 2^-126` with `dE = ⌊E·2^30⌋ + 2`. The
//! quotient `(1 - E)/(1 + E)` then moves by at most `2·|δE|/(1 + E) ≤
//! 8·dE` units of 2^-128, and the division truncates by less than one:
//! `err = 8·dE + 2`. Since `q ≥ tanh 2^-12 · 2^128 > 2^115` and `dE ≤
//! 2^30 + 2`, the relative error is below 2^-81. A result whose interval
//! `q ± err` holds a rounding boundary is rounded from `q` itself (nearest
//! value of the approximation); `tanh` of a binary32 other than 0 is never a
//! binary32 midpoint (it is transcendental), so only such inputs could be
//! misrounded, and the comparison with CORE-MATH below would find them.
//!
//! Cost: the division is bit-serial (128 shift-compare-subtract steps) and
//! there is no fast path yet; one can come when GELU is on a hot path.
//!
//! Verified: correctly rounded, checked on all 2^32 inputs against CORE-MATH
//! 1.4 `tanhf` on 2026-12-04: 0 mismatches (`tests/float/tanh.rs`,
//! `tanh_exhaustive`, command in `docs/sections/models.md`); by default the
//! same file checks the sample, a dense sweep of `[2^-13, 17]` and golden
//! values.

#![forbid(unsafe_code)]

use super::tables::{EXP2_TABLE, LN2_Q128, LOG2E_Q103};
use super::{INV_FACT_Q128, decode, mul128, round_checked, round_pack};
use crate::F32;

/// 2^-12: below it, `tanh x` rounds to `x`.
const TINY_BITS: u32 = 0x3980_0000;
/// 16: from it on, `tanh x` rounds to 1.
const SATURATE_BITS: u32 = 0x4180_0000;
/// Degree of the Taylor polynomial of `e^h - 1`, `|h| < 2^-6 · ln 2`:
/// truncation below `h^17/17! < 2^-150`.
const DEGREE: usize = 16;

impl F32 {
    /// `tanh x`, correctly rounded (ties to even); `tanh(±inf) = ±1`,
    /// `tanh(±0) = ±0`, `tanh NaN` is the canonical NaN.
    pub fn tanh(self) -> F32 {
        let bits = self.to_bits();
        let abs = bits & 0x7FFF_FFFF;
        let neg = bits >> 31 == 1;
        if abs > 0x7F80_0000 {
            return F32::NAN;
        }
        if abs < TINY_BITS {
            return self;
        }
        if abs >= SATURATE_BITS {
            return if neg { F32::NEG_ONE } else { F32::ONE };
        }
        tanh_mid(neg, abs)
    }
}

/// `tanh` of `±abs` (sign `neg`) for `abs` in `[2^-12, 16)`.
fn tanh_mid(neg: bool, abs: u32) -> F32 {
    let e = exp_minus_2x_q126(abs);
    let one = 1u128 << 126;
    let num = one - e; // 1 - E > 2^-11.6
    let den = one + e; // in (1, 2)
    let q = div_q128(num, den);
    let d_e = (e >> 96) + 2;
    let err = 8 * d_e + 2;
    match round_checked(neg, q, -128, err) {
        Some(r) => r,
        // Not reached for any binary32 input (checked exhaustively).
        None => round_pack(neg, q, -128),
    }
}

/// `E = e^(-2x)` as Q2.126 (truncated), for `x = abs` in `[2^-12, 16)`:
/// within `E·2^-98 + 2^-126` of the exact value (module header).
fn exp_minus_2x_q126(abs: u32) -> u128 {
    let (mx, ex) = decode(abs); // ex in [-35, -20]
    // t = 2x · log2 e = p · 2^-n, p < 2^24 · 2^104.
    let p = mx as u128 * LOG2E_Q103;
    let n = (102 - ex) as u32; // 122..=137
    let (k, f) = if n >= 128 {
        (0u32, p >> (n - 128))
    } else {
        ((p >> n) as u32, p << (128 - n))
    };
    // 2^-t = 2^-(k+1) · 2^(1-f), or 2^-k when f = 0.
    let (shift, g) = if f == 0 {
        (k, 0)
    } else {
        (k + 1, f.wrapping_neg())
    };
    let i = (g >> 122) as usize & 63;
    let r = g & ((1u128 << 122) - 1); // < 2^-6
    let h = mul128(r, LN2_Q128);
    let mut a = INV_FACT_Q128[DEGREE];
    let mut j = DEGREE - 1;
    while j >= 2 {
        a = INV_FACT_Q128[j] + mul128(h, a);
        j -= 1;
    }
    let em1 = h + mul128(mul128(h, h), a); // e^h - 1, Q0.128
    let t = EXP2_TABLE[i]; // 2^(i/64), Q1.127
    let pow = t.saturating_add(mul128(t, em1)); // 2^g, Q1.127
    // Q1.127 → Q2.126 is one more bit; shift ≤ 47.
    pow >> (shift + 1)
}

/// `⌊num · 2^128 / den⌋` for `num < den ≤ 2^127`: restoring division.
#[inline]
fn div_q128(num: u128, den: u128) -> u128 {
    let mut rem = num;
    let mut q = 0u128;
    for _ in 0..128 {
        rem <<= 1; // rem < den ≤ 2^127: no overflow
        q <<= 1;
        if rem >= den {
            rem -= den;
            q |= 1;
        }
    }
    q
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;

    /// `tanh` agrees with the host's f64 `tanh` rounded to binary32 on a
    /// sweep of the mid range (f64's error, about 2^-52, decides the
    /// rounding except within 2^-28 ulp of a midpoint, which the exact
    /// CORE-MATH comparison in `tests/float/tanh.rs` covers) and on the
    /// edges of the three ranges.
    #[test]
    fn tanh_matches_f64_rounded() {
        let mut n = 0u32;
        for abs in (TINY_BITS - 4096..SATURATE_BITS + 4096).step_by(251) {
            for neg in [false, true] {
                let bits = abs | (neg as u32) << 31;
                let x = f32::from_bits(bits) as f64;
                let exact = x.tanh();
                let want = (exact as f32).to_bits();
                let got = F32::from_bits(bits).tanh().to_bits();
                if got != want {
                    // Only an f64 value within 2^-40 of a midpoint may disagree.
                    let mid = (f32::from_bits(got) as f64 + f32::from_bits(want) as f64) / 2.0;
                    let close = (exact - mid).abs() <= exact.abs() * 2f64.powi(-40);
                    assert!(close && got.abs_diff(want) == 1, "tanh({bits:#010x})");
                }
                n += 1;
            }
        }
        assert!(n > 1_000_000);
    }

    #[test]
    fn specials() {
        let t = |b: u32| F32::from_bits(b).tanh().to_bits();
        assert_eq!(t(0x0000_0000), 0x0000_0000);
        assert_eq!(t(0x8000_0000), 0x8000_0000);
        assert_eq!(t(0x0000_0001), 0x0000_0001);
        assert_eq!(t(0x7F80_0000), 0x3F80_0000);
        assert_eq!(t(0xFF80_0000), 0xBF80_0000);
        assert_eq!(t(0x7FC0_0000), 0x7FC0_0000);
        assert_eq!(t(0xFFC1_2345), 0x7FC0_0000);
        assert_eq!(t(0x4180_0000), 0x3F80_0000);
    }

    #[test]
    fn division_is_exact_floor() {
        // ⌊num · 2^128 / den⌋ = num·a + ⌊num·b / den⌋ with 2^128 = a·den + b.
        for (num, den) in [(1u128, 2u128), (1, 3), (5, 7), (999, 1000), (12, 1 << 20)] {
            let (mut a, mut b) = (u128::MAX / den, u128::MAX % den + 1);
            if b == den {
                (a, b) = (a + 1, 0);
            }
            assert_eq!(div_q128(num, den), num * a + num * b / den, "{num}/{den}");
        }
        // Large operands: q·den ≤ num·2^128 < (q + 1)·den, via the remainder.
        let (num, den) = ((1u128 << 126) - 12345, (1u128 << 126) + 67891);
        let q = div_q128(num, den);
        assert_eq!(q >> 127, 1); // num/den > 1/2
        assert!(q < u128::MAX);
    }
}
