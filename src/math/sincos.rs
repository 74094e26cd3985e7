//! `sin`, `cos` and `sin_cos`, correctly rounded, over one exact reduction.
//!
//! Reduction (Payne–Hanek, integer only): `|x| = mx · 2^ex` with a 24-bit
//! `mx`. `x · 2/π` is needed modulo 4 only, so the bits of 2/π of weight
//! above `2^(1-ex)` (whose products with `mx` are multiples of 4) are
//! skipped: a 192-bit window of 2/π starting there is multiplied by `mx`
//! (three 64×64 products) into a 256-bit fixed-point value whose top two
//! bits are the quadrant `q` and whose rest is the fraction, known to
//! 2^-166 absolute. Rounding the fraction to the nearest quadrant leaves
//! `f` in `[-1/2, 1/2]`, so `|x| ≡ (q + f) · π/2 (mod 2π)`; `|f|` is then
//! normalized (leading zeros counted), so even the binary32 input closest to
//! a multiple of π/2 keeps over 120 significant bits. The 2/π table is 448
//! bits.
//!
//! Evaluation on `z = |f| · π/2 ≤ π/4`, with `u = z²`:
//! `sin z = z · (1 - u·S(u))`, `cos z = 1 - u·C(u)`, `S` and `C` the Taylor
//! series of `(z - sin z)/z^3` and `(1 - cos z)/z^2` in `u`, evaluated by
//! Horner with only subtractions of positive terms (the series alternate and
//! each term is below a twentieth of the previous one). The fast path works
//! in Q0.64 to degree 19/18 (relative error below 2^-60, tested against
//! 2^-58); the accurate path in Q0.128 to degree 33/32 (error below
//! 2^-100). `sin` keeps relative precision for tiny `z` because `z`'s
//! significand and exponent are carried separately.
//!
//! Quadrant map (`a = ±z`, the sign of `f`): `sin(qπ/2 + a)` is `sin a`,
//! `cos a`, `-sin a`, `-cos a` for `q = 0..3`; `cos(qπ/2 + a)` is `cos a`,
//! `-sin a`, `-cos a`, `sin a`. `sin` is odd, `cos` even. For |x| < 2^-12,
//! `sin x` rounds to `x` and `cos x` to 1 (the correction is below half an
//! ulp); no other binary32 input has a result at a rounding boundary.
//!
//! Verified: correctly rounded, checked on all 2^32 inputs against CORE-MATH 1.4
//! `sinf` and `cosf` on 2026-12-02: 0 mismatches (command in `docs/sections/math.md`).

#![forbid(unsafe_code)]

use super::tables::{PIO2_Q127, TWO_OVER_PI};
use super::{INV_FACT_Q64, INV_FACT_Q128, decode, mul64, mul128, round_checked, round_pack};
use crate::F32;

/// π/2 as Q1.63 (top half of the Q1.127 constant, truncated).
const PIO2_Q63: u64 = (PIO2_Q127 >> 64) as u64;
/// Magnitudes below 2^-12 (0x39800000): sin x rounds to x, cos x to 1.
const TINY_BITS: u32 = 0x3980_0000;

/// `|x| ≡ (q + f) · π/2 (mod 2π)` with `|f| = nf · 2^(-128 - lz)`.
struct Reduced {
    /// Quadrant, 0..=3.
    q: u32,
    /// Sign of `f`.
    f_neg: bool,
    /// `|f|` normalized: top bit set (0 only for a degenerate input).
    nf: u128,
    /// Leading zeros removed from `|f|` (Q0.256), at least 1.
    lz: u32,
}

/// Bits of 2/π as a 64-bit word starting at bit `j` (1-based, weight 2^-j).
#[inline]
fn two_over_pi_word(word: usize, offset: u32) -> u64 {
    let hi = TWO_OVER_PI.get(word).copied().unwrap_or(0);
    if offset == 0 {
        return hi;
    }
    let lo = TWO_OVER_PI.get(word + 1).copied().unwrap_or(0);
    (hi << offset) | (lo >> (64 - offset))
}

/// Payne–Hanek reduction of `|x| = mx · 2^ex`, `ex` in `[-35, 104]`.
fn reduce(mx: u32, ex: i32) -> Reduced {
    // Window of 192 bits of 2/π from bit s (earlier bits give multiples of 4).
    let s = if ex - 1 > 1 { ex - 1 } else { 1 };
    let word = ((s - 1) / 64) as usize;
    let offset = ((s - 1) % 64) as u32;
    let w0 = two_over_pi_word(word, offset);
    let w1 = two_over_pi_word(word + 1, offset);
    let w2 = two_over_pi_word(word + 2, offset);
    // mx · (w0, w1, w2) as four 64-bit limbs, most significant first.
    let m = mx as u128;
    let p2 = m * w2 as u128;
    let p1 = m * w1 as u128 + (p2 >> 64);
    let p0 = m * w0 as u128 + (p1 >> 64);
    let hi = p0; // limbs 0 (top) and 1
    let lo = ((p1 as u64 as u128) << 64) | (p2 as u64 as u128); // limbs 2, 3
    // The product is x·2/π · 2^(s + 191 - ex); bit b0 = s + 191 - ex has
    // weight 1. Shift it to bit 254 of the 256-bit value (sh in [27, 64]).
    let b0 = s + 191 - ex;
    let sh = (254 - b0) as u32;
    let hs = (hi << sh) | (lo >> (128 - sh));
    let ls = lo << sh;
    let mut q = (hs >> 126) as u32 & 3;
    let mut fh = (hs << 2) | (ls >> 126);
    let mut fl = ls << 2;
    let mut f_neg = false;
    if fh >> 127 == 1 {
        // f >= 1/2: round to the next quadrant, f -= 1.
        q = (q + 1) & 3;
        f_neg = true;
        fl = (!fl).wrapping_add(1);
        fh = (!fh).wrapping_add((fl == 0) as u128);
    }
    let (nf, lz) = if fh != 0 {
        let lz = fh.leading_zeros();
        let nf = if lz == 0 {
            fh
        } else {
            (fh << lz) | (fl >> (128 - lz))
        };
        (nf, lz)
    } else {
        let lz = fl.leading_zeros();
        (fl << (lz & 127), 128 + lz)
    };
    Reduced { q, f_neg, nf, lz }
}

/// `±sin z` (`want_sin`) or `±cos z` for the reduced argument, rounded.
fn eval(r: &Reduced, want_sin: bool, neg: bool) -> F32 {
    if r.nf == 0 {
        // Unreachable for binary32 inputs (π is irrational); keep it total.
        return if want_sin { F32::ZERO } else { F32::ONE };
    }
    match eval_fast(r, want_sin, neg) {
        Some(v) => v,
        None => eval_accurate(r, want_sin, neg),
    }
}

/// Fast path of [`eval`] (`r.nf != 0`): `None` when its rounding test fails.
#[inline]
fn eval_fast(r: &Reduced, want_sin: bool, neg: bool) -> Option<F32> {
    let lz = r.lz;
    // Fast path. z = zm · 2^(-63 - lz), zm in [2^62.6, 2^63.7).
    let zm = mul64((r.nf >> 64) as u64, PIO2_Q63);
    let zq = zm.checked_shr(lz - 1).unwrap_or(0); // z as Q0.64
    let u = mul64(zq, zq);
    if want_sin {
        let mut a = INV_FACT_Q64[19];
        let mut n = 17;
        while n >= 3 {
            a = INV_FACT_Q64[n] - mul64(u, a);
            n -= 2;
        }
        let ps = (1u64 << 63) - (mul64(u, a) >> 1); // 1 - u·S, Q1.63
        let m = zm as u128 * ps as u128; // sin z · 2^(126 + lz)
        round_checked(neg, m, -126 - lz as i32, m >> 58)
    } else {
        let mut a = INV_FACT_Q64[18];
        let mut n = 16;
        while n >= 2 {
            a = INV_FACT_Q64[n] - mul64(u, a);
            n -= 2;
        }
        let pc = (1u64 << 63) - (mul64(u, a) >> 1); // cos z, Q1.63
        round_checked(neg, pc as u128, -63, 32)
    }
}

/// Accurate path of [`eval`] (`r.nf != 0`).
fn eval_accurate(r: &Reduced, want_sin: bool, neg: bool) -> F32 {
    let lz = r.lz;
    // Accurate path. z = zm · 2^(-127 - lz), zm in [2^126.6, 2^127.7).
    let zm = mul128(r.nf, PIO2_Q127);
    let zq = zm.checked_shr(lz - 1).unwrap_or(0); // z as Q0.128
    let u = mul128(zq, zq);
    let (m, e, err) = if want_sin {
        let mut a = INV_FACT_Q128[33];
        let mut n = 31;
        while n >= 3 {
            a = INV_FACT_Q128[n] - mul128(u, a);
            n -= 2;
        }
        let ps = (1u128 << 127) - (mul128(u, a) >> 1);
        let m = mul128(zm, ps); // sin z · 2^(126 + lz)
        (m, -126 - lz as i32, (m >> 100) + 4)
    } else {
        let mut a = INV_FACT_Q128[32];
        let mut n = 30;
        while n >= 2 {
            a = INV_FACT_Q128[n] - mul128(u, a);
            n -= 2;
        }
        let pc = (1u128 << 127) - (mul128(u, a) >> 1);
        (pc, -127, 1u128 << 12)
    };
    match round_checked(neg, m, e, err) {
        Some(v) => v,
        // Not reached for any binary32 input (checked exhaustively).
        None => round_pack(neg, m, e),
    }
}

/// Which of `sin z`, `cos z` gives `sin x`, and its sign, for `x >= 0`.
#[inline]
fn sin_of(r: &Reduced) -> (bool, bool) {
    match r.q {
        0 => (true, r.f_neg),
        1 => (false, false),
        2 => (true, !r.f_neg),
        _ => (false, true),
    }
}

/// Which of `sin z`, `cos z` gives `cos x`, and its sign.
#[inline]
fn cos_of(r: &Reduced) -> (bool, bool) {
    match r.q {
        0 => (false, false),
        1 => (true, !r.f_neg),
        2 => (false, true),
        _ => (true, r.f_neg),
    }
}

impl F32 {
    /// Sine, correctly rounded (ties to even); `sin(±inf)` and `sin(NaN)` are
    /// the canonical NaN, `sin(±0) = ±0`.
    pub fn sin(self) -> F32 {
        let bits = self.to_bits();
        let abs = bits & 0x7FFF_FFFF;
        if abs >= 0x7F80_0000 {
            return F32::NAN;
        }
        if abs < TINY_BITS {
            return self;
        }
        let (mx, ex) = decode(bits);
        let r = reduce(mx, ex);
        let (want_sin, neg) = sin_of(&r);
        eval(&r, want_sin, neg ^ (bits >> 31 == 1))
    }

    /// Cosine, correctly rounded (ties to even); `cos(±inf)` and `cos(NaN)`
    /// are the canonical NaN, `cos(±0) = 1`.
    pub fn cos(self) -> F32 {
        let bits = self.to_bits();
        let abs = bits & 0x7FFF_FFFF;
        if abs >= 0x7F80_0000 {
            return F32::NAN;
        }
        if abs < TINY_BITS {
            return F32::ONE;
        }
        let (mx, ex) = decode(bits);
        let r = reduce(mx, ex);
        let (want_sin, neg) = cos_of(&r);
        eval(&r, want_sin, neg)
    }

    /// `(sin x, cos x)` from one argument reduction; each component is
    /// bit-identical to [`F32::sin`] and [`F32::cos`].
    pub fn sin_cos(self) -> (F32, F32) {
        let bits = self.to_bits();
        let abs = bits & 0x7FFF_FFFF;
        if abs >= 0x7F80_0000 {
            return (F32::NAN, F32::NAN);
        }
        if abs < TINY_BITS {
            return (self, F32::ONE);
        }
        let (mx, ex) = decode(bits);
        let r = reduce(mx, ex);
        let (ws, ns) = sin_of(&r);
        let (wc, nc) = cos_of(&r);
        (eval(&r, ws, ns ^ (bits >> 31 == 1)), eval(&r, wc, nc))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The accurate path (never needed by a binary32 input: the fast path's
    /// rounding test decides all 2^32) agrees with the fast path wherever
    /// the latter decides, on a spread of arguments and both functions.
    #[test]
    fn accurate_path_agrees_with_fast_path() {
        let mut seed = 0x1234_5678_9ABC_DEF0u64;
        for _ in 0..200_000 {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let bits = (seed as u32 & 0x7FFF_FFFF).clamp(TINY_BITS, 0x7F7F_FFFF);
            let (mx, ex) = decode(bits);
            let r = reduce(mx, ex);
            for want_sin in [true, false] {
                if let Some(fast) = eval_fast(&r, want_sin, false) {
                    let acc = eval_accurate(&r, want_sin, false);
                    assert_eq!(
                        acc.to_bits(),
                        fast.to_bits(),
                        "x={bits:#010x} sin={want_sin}"
                    );
                }
            }
        }
    }
}
