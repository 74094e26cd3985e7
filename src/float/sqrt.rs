//! Square root.
//!
//! A normal (or normalised subnormal) input is `m · 2^e`, `m` in
//! `[2^23, 2^24)`. With `k = 26` for even `e` and `k = 25` for odd `e`,
//! `M = m << k` lies in `[2^48, 2^50)` and `e - k` is even, so
//! `sqrt(x) = sqrt(M) · 2^((e - k) / 2)` and `r = floor(sqrt(M))` has 25
//! bits: 24 kept and one half bit. A square root is never exactly half-way
//! between two binary32 values (that would need a 25-bit odd root whose
//! square has 24 significant bits), so rounding to nearest is `(r + 1) >> 1`.
//!
//! [`sqrt_half_round`] computes `(r + 1) >> 1` directly: `y ≈ 1 / sqrt(M)`
//! by linear interpolation in a 384-entry table, `s = M · y`, one Newton
//! step `s += (M - s²) · y / 2` brings the error within ±1, and one
//! comparison of `(2q + 1)²` with `M` fixes the last bit. The unit test checks it on every `M` the function can
//! receive (2^25 values); the oracle suite checks all 2^32 inputs.

use super::pack::{ABS_MASK, IMPLICIT, decode_norm, is_nan_bits};
use super::{EXP_MASK, F32, SIG_MASK, SIGN_MASK};

/// `RSQRT[i]` for `i` in `128..512` (entries below 128 unused): the low
/// half is `A(i) = 2^33.5 / sqrt(i)` = `sqrt(2^67 / i)`, which is
/// `2^54 / sqrt(M)` at `M = i · 2^41`, the high half is `A(i) - A(i + 1)`,
/// the secant slope over the bucket. 4 KiB.
static RSQRT: [u64; 512] = rsqrt_table();

const fn rsqrt_table() -> [u64; 512] {
    let mut t = [0u64; 512];
    let mut i = 128;
    while i < 512 {
        let a = ((1u128 << 67) / i as u128).isqrt() as u64;
        let b = ((1u128 << 67) / (i as u128 + 1)).isqrt() as u64;
        t[i] = a | ((a - b) << 32);
        i += 1;
    }
    t
}

/// `(floor(sqrt(m)) + 1) >> 1`, i.e. `sqrt(m) / 2` rounded to nearest
/// (never a tie), for `m` in `[2^48, 2^50)`.
///
/// `y ≈ 2^54 / sqrt(m)` by linear interpolation in [`RSQRT`] (9 index
/// bits, 16 fraction bits; relative error below 2^-17 since `1/sqrt` is
/// convex and smooth), `s = m · y` (error below 2^9), one Newton step
/// `s += (m - s²) · y / 2^55` (error within ±1). Then `q = s >> 1` is the
/// answer or one below it, and `(2q + 1)² <= m` decides which.
#[inline(always)]
fn sqrt_half_round(m: u64) -> u32 {
    let entry = RSQRT[(m >> 41) as usize & 511];
    let frac = (m >> 25) & 0xFFFF; // position inside the bucket, 16 bits
    let y = (entry & 0xFFFF_FFFF) - (((entry >> 32) * frac) >> 16); // < 2^30
    let mi = m as i64;
    let s = (((m >> 20) * y) >> 34) as i64;
    let s = (s + (((mi - s * s) * (y >> 8) as i64) >> 47)) as u64;
    let t = s | 1; // 2 · (s >> 1) + 1
    ((s >> 1) + (t * t <= m) as u64) as u32
}

/// Square root of `m · 2^e`, `m` in `[2^23, 2^24)`, `e` in `-172..=104`;
/// the result is normal.
#[inline(always)]
fn sqrt_core(m: u32, e: i32) -> F32 {
    let odd = (e & 1) as u32;
    let q = sqrt_half_round((m as u64) << (26 - odd)); // [2^23, 2^24]
    // Result = q · 2^p, p = ceil(e / 2) - 12; the field is (p + 149) << 23,
    // and a carry of q to 2^24 bumps it.
    let field = ((((e + 1) >> 1) + 137) as u32) << 23;
    F32(field + q)
}

/// Correctly rounded square root.
#[inline]
pub(super) fn sqrt(a: F32) -> F32 {
    let x = a.0;
    // Positive normal: the sign bit makes a negative input fail this test.
    if x.wrapping_sub(IMPLICIT) < EXP_MASK - IMPLICIT {
        return sqrt_core((x & SIG_MASK) | IMPLICIT, (x >> 23) as i32 - 150);
    }
    sqrt_special(a)
}

/// Zeros, subnormals, negatives, ∞ and NaN.
#[cold]
#[inline(never)]
fn sqrt_special(a: F32) -> F32 {
    let x = a.0;
    if x & ABS_MASK == 0 {
        return a; // ±0
    }
    if is_nan_bits(x) || x & SIGN_MASK != 0 {
        return F32::NAN;
    }
    if x == EXP_MASK {
        return a;
    }
    let (m, e) = decode_norm(x);
    sqrt_core(m, e)
}

impl F32 {
    /// Square root, correctly rounded; `sqrt(-0) = -0`, a negative input
    /// gives NaN.
    #[inline]
    pub fn sqrt(self) -> F32 {
        sqrt(self)
    }
}

#[cfg(test)]
mod tests {
    use super::sqrt_half_round;

    /// Every value `sqrt_core` can pass: `m << 25` and `m << 26`.
    #[test]
    fn exact_on_every_reachable_input() {
        for m in (1u64 << 23)..(1 << 24) {
            for k in [25, 26] {
                let v = m << k;
                assert_eq!(sqrt_half_round(v) as u64, (v.isqrt() + 1) >> 1, "{v:#x}");
            }
        }
    }
}
