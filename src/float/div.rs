//! Division.
//!
//! Fast path (both operands normal, result exponent normal): one `u64`
//! division `(ma << 26) / mb` of the 24-bit significands gives a 26- or
//! 27-bit quotient; a non-zero remainder becomes a sticky bit, the quotient
//! is normalised to 26 bits (24 kept, a half bit and the sticky bit) and
//! rounded to nearest even by adding `1 + lsb` and dropping two bits.
//!
//! Everything else goes to [`div_general`]: a 40-bit quotient with sticky
//! bit and one [`round_pack`] (subnormal and overflowing results, zeros, ∞,
//! NaN).
//!
//! [`div_try`] is the fast path without branches and without the hardware
//! division, for loops that vectorize: the same quotient from a reciprocal
//! by integer Newton steps (32×32→64 products only), checked exactly: the
//! remainder `rem = num - q · den` is computed exactly (modulo 2^64), so
//! `rem < den` proves that `q` is the floor quotient; otherwise the element
//! declines and the caller divides with `/`. It never declines for want
//! of accuracy: the reciprocal is at most 3 units below `floor(2^54 / mb)`
//! and never above, checked on every one of the 2^23 significands `mb`
//! (the tests below), which puts the first quotient within the two
//! correction steps for every dividend.

#![forbid(unsafe_code)]

use super::pack::{ABS_MASK, IMPLICIT, decode_norm, is_nan_bits, is_normal_mag, round_pack};
use super::{EXP_MASK, F32, SIG_MASK, SIGN_MASK};
use core::ops::Div;

/// Correctly rounded `a / b`.
#[inline]
pub(super) fn div(a: F32, b: F32) -> F32 {
    let (x, y) = (a.0, b.0);
    let (ax, ay) = (x & ABS_MASK, y & ABS_MASK);
    if !(is_normal_mag(ax) & is_normal_mag(ay)) {
        return div_general(a, b);
    }
    let num = (((ax & SIG_MASK) | IMPLICIT) as u64) << 26; // [2^49, 2^50)
    let den = ((ay & SIG_MASK) | IMPLICIT) as u64; // [2^23, 2^24)
    let q = num / den; // (2^25, 2^27)
    match round_quotient(x, y, q, q * den != num) {
        (r, true) => r,
        _ => div_general(a, b), // result exponent outside 1..=254
    }
}

/// The end of [`div`] and [`div_try`], without branches: the quotient of two normal
/// numbers `x / y` (bits) from the floor
/// quotient `q` of their significands (`ma · 2^26 / mb`, in
/// `(2^25, 2^27)`) and whether the remainder is non-zero: rounded to
/// nearest even and packed, with `true` when the result exponent is
/// normal (else the bits are unspecified).
#[inline(always)]
fn round_quotient(x: u32, y: u32, q: u64, inexact: bool) -> (F32, bool) {
    let (ax, ay) = (x & ABS_MASK, y & ABS_MASK);
    let sign = (x ^ y) & SIGN_MASK;
    let hi = (q >> 26) as u32 & 1; // quotient of the significands >= 1
    let q = q | inexact as u64;
    let q = (q >> hi) | (q & hi as u64); // [2^25, 2^26), bit 0 sticky
    // Biased result exponent + 127: ex - ey + 127 (-1 if the quotient < 1).
    let e = ((ax >> 23) + 253).wrapping_sub(ay >> 23).wrapping_add(hi);
    let in_range = e.wrapping_sub(128) < 254; // result exponent in 1..=254
    let m = ((q + 1 + ((q >> 2) & 1)) >> 2) as u32; // [2^23, 2^24]
    let r = (e.wrapping_sub(128) << 23).wrapping_add(m);
    (F32(r.min(EXP_MASK) | sign), in_range)
}

/// The fast path of `a / b` without branches or a hardware division:
/// `(quotient, true)` when both operands are normal, the result exponent
/// is normal and the quotient of the significands passed its exact check
/// (the quotient is then correctly rounded, the bits of `/`), else
/// `(unspecified, false)`. Loops over slices call it for every element
/// and redo the block with `/` if any was false, so that they vectorize.
#[inline(always)]
pub fn div_try(a: F32, b: F32) -> (F32, bool) {
    let (x, y) = (a.0, b.0);
    let normal = is_normal_mag(x & ABS_MASK) & is_normal_mag(y & ABS_MASK);
    let ma = ((x & SIG_MASK) | IMPLICIT) as u64; // [2^23, 2^24)
    let mb = ((y & SIG_MASK) | IMPLICIT) as u64;
    let (q, rem) = sig_quotient(ma, mb);
    let exact = rem < mb; // else q is not the floor quotient
    let (r, in_range) = round_quotient(x, y, q, rem != 0);
    (r, normal & exact & in_range)
}

/// `a · b` of the low 32 bits of each: the 32×32→64 product (`vpmuludq`).
#[inline(always)]
fn mul32(a: u64, b: u64) -> u64 {
    const LOW32: u64 = 0xFFFF_FFFF;
    (a & LOW32) * (b & LOW32)
}

/// `(q, ma · 2^26 - q · mb)` (the remainder modulo 2^64) with `q` the floor
/// of `ma · 2^26 / mb` whenever the remainder is below `mb` (the caller
/// checks), for significands `ma`, `mb` in `[2^23, 2^24)`: `q0 = ma · y /
/// 2^28` from [`recip_q54`] is at most 2 below the floor quotient
/// (`y ≤ 2^54 / mb` with relative error below 2^-28, and `q0 < 2^27`),
/// and two conditional steps of `q += 1, rem -= mb` finish it. Only
/// 32×32→64 products.
#[inline(always)]
fn sig_quotient(ma: u64, mb: u64) -> (u64, u64) {
    let q = mul32(ma, recip_q54(mb)) >> 28; // (2^25, 2^27)
    let mut rem = (ma << 26).wrapping_sub(mul32(q, mb));
    let mut q = q;
    for _ in 0..2 {
        let up = (rem >= mb) as u64;
        q += up;
        rem = rem.wrapping_sub(mb & up.wrapping_neg());
    }
    (q, rem)
}

/// `floor(2^54 / mb)` or at most [`RECIP_SLACK`] + 2 below it, for `mb` in
/// `[2^23, 2^24)` (the Q30 reciprocal of `d = mb / 2^24`, in `(1, 2]`):
/// the linear start `48/17 - 32/17 · d` (relative error `≤ 1/17`), three
/// Newton steps `y += y · (1 - d · y)` (each squares the error, to the
/// Q30 truncations), less `RECIP_SLACK` units so that the result is
/// never above `2^54 / mb`. The tests check the bounds on every `mb`
/// (at most 3 below, never above).
#[inline(always)]
fn recip_q54(mb: u64) -> u64 {
    const START_0: u64 = (48 << 30) / 17; // 48/17 in Q30
    const START_1: u64 = (32 << 30) / 17; // 32/17 in Q30
    let mut y = START_0 - (mul32(mb, START_1) >> 24); // Q30, in (1, 2)
    for _ in 0..3 {
        // d · y in Q54; e = |1 - d · y| in Q32, then y ± y · e.
        let dy = mul32(mb, y);
        let e = dy.abs_diff(1 << 54) >> 22;
        let step = mul32(y, e) >> 32;
        y = if dy <= 1 << 54 { y + step } else { y - step };
    }
    y - RECIP_SLACK
}

/// Units taken off [`recip_q54`]'s Newton result so that it never exceeds
/// `2^54 / mb`.
const RECIP_SLACK: u64 = 2;

/// Every case: specials, zeros, subnormals, underflow and overflow.
#[cold]
#[inline(never)]
fn div_general(a: F32, b: F32) -> F32 {
    let (x, y) = (a.0, b.0);
    let (ax, ay) = (x & ABS_MASK, y & ABS_MASK);
    let sign = (x ^ y) & SIGN_MASK;
    if is_nan_bits(x) || is_nan_bits(y) {
        return F32::NAN;
    }
    if ax == EXP_MASK {
        return if ay == EXP_MASK {
            F32::NAN
        } else {
            F32(sign | EXP_MASK)
        };
    }
    if ay == EXP_MASK {
        return F32(sign);
    }
    if ay == 0 {
        return if ax == 0 {
            F32::NAN
        } else {
            F32(sign | EXP_MASK)
        };
    }
    if ax == 0 {
        return F32(sign);
    }
    let (ma, ea) = decode_norm(x);
    let (mb, eb) = decode_norm(y);
    // ma << 40 < 2^64; the quotient has at least 39 bits, plenty for rounding.
    let num = (ma as u64) << 40;
    let q = num / mb as u64;
    let r = num % mb as u64;
    let sig = ((q as u128) << 1) | (r != 0) as u128;
    round_pack(sign != 0, sig, ea - eb - 41)
}

impl Div for F32 {
    type Output = F32;
    #[inline]
    fn div(self, rhs: F32) -> F32 {
        div(self, rhs)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// On every significand `mb`: `recip_q54` is at most `floor(2^54 /
    /// mb)` and at most `RECIP_SLACK + 2` below it, and `sig_quotient`
    /// gives the floor quotient and remainder for the extreme and some
    /// spread `ma` (so `div_try` never declines for want of accuracy).
    #[test]
    fn reciprocal_and_quotient_on_every_divisor() {
        let (mut below_max, mut above_max) = (0u64, 0u64);
        for mb in (1u64 << 23)..(1 << 24) {
            let exact = (1u64 << 54) / mb;
            let y = recip_q54(mb);
            above_max = above_max.max(y.saturating_sub(exact));
            below_max = below_max.max(exact.saturating_sub(y));
            for ma in [
                1 << 23,
                (1 << 24) - 1,
                mb,
                mb ^ 0x5A_5A5A,
                (mb * 7919) % (1 << 23) + (1 << 23),
            ] {
                let num = ma << 26;
                assert_eq!(
                    sig_quotient(ma, mb),
                    (num / mb, num % mb),
                    "{ma:#x} / {mb:#x}"
                );
            }
        }
        #[cfg(feature = "std")]
        std::println!("recip_q54: at most {below_max} below, {above_max} above");
        assert_eq!(above_max, 0);
        assert!(below_max <= RECIP_SLACK + 2, "{below_max}");
    }

    /// `div_try` answers with the bits of `/` and declines exactly the
    /// operands outside the fast path (zeros, subnormals, ∞, NaN, results
    /// outside the normal range), on random bit patterns and on moderate
    /// values.
    #[test]
    fn div_try_is_div() {
        let mut next = crate::testutil::lcg(0xD1F7_0000_1234_5678);
        for round in 0..2_000_000u32 {
            let (r1, r2) = (next(), next());
            let (x, y) = if round % 2 == 0 {
                (r1, r2)
            } else {
                (
                    (r1 & 0x8000_0000) | (0x3000_0000 + r1 % 0x1800_0000),
                    (r2 & 0x8000_0000) | (0x3000_0000 + r2 % 0x1800_0000),
                )
            };
            let (a, b) = (F32(x), F32(y));
            let (fast, fast_ok) = div_try(a, b);
            let want = a / b;
            let (ax, ay) = (x & ABS_MASK, y & ABS_MASK);
            let e = ((ax >> 23) + 253).wrapping_sub(ay >> 23);
            let plain = is_normal_mag(ax) & is_normal_mag(ay);
            if fast_ok {
                assert_eq!(fast, want, "{x:#010x} / {y:#010x}");
            } else {
                // Only outside the fast path: non-normal operands or an
                // exponent at the edge of the range.
                assert!(
                    !plain || e.wrapping_sub(128) >= 253,
                    "{x:#010x} / {y:#010x}"
                );
            }
        }
    }
}
