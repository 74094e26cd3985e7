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
//! `floor(sqrt(M))` ([`isqrt_48_50`]): a 1024-entry table of
//! `2^40 / sqrt(M)` (10 leading bits of `M`, relative error ≤ 2^-10) gives
//! `s0 = M · y`, two Newton steps `s += (M - s²) · y / 2` bring the error
//! below one unit, and a final comparison of `s²` and `(s + 1)²` with `M`
//! makes it exact. The unit test checks it on every `M` the function can
//! receive (2^25 values); the oracle suite checks all 2^32 inputs.

use super::pack::{ABS_MASK, IMPLICIT, decode_norm, is_nan_bits};
use super::{EXP_MASK, F32, SIG_MASK, SIGN_MASK};

/// `RSQRT[i]` ≈ `2^40 / sqrt((i + ½) · 2^40)` = `sqrt(2^41 / (2i + 1))` for
/// `i` in `256..1024` (entries below 256 are unused), rounded to nearest.
static RSQRT: [u16; 1024] = rsqrt_table();

const fn rsqrt_table() -> [u16; 1024] {
    let mut t = [0u16; 1024];
    let mut i = 256;
    while i < 1024 {
        // 2 · sqrt(2^41 / (2i + 1)), then halve with rounding.
        let twice = ((1u64 << 43) / (2 * i as u64 + 1)).isqrt();
        t[i] = ((twice + 1) >> 1) as u16;
        i += 1;
    }
    t
}

/// `floor(sqrt(m))` for `m` in `[2^48, 2^50)`.
#[inline(always)]
fn isqrt_48_50(m: u64) -> u64 {
    let y = RSQRT[(m >> 40) as usize & 1023] as i64; // ≈ 2^56 / sqrt(m) / 2^16
    let mi = m as i64;
    let s = (((m >> 18) * y as u64) >> 22) as i64; // ≈ sqrt(m), error < 2^16
    let s = s + (((mi - s * s) * y) >> 41); // error < 2^7
    let s = s + (((mi - s * s) * y) >> 41); // error <= 1
    let d = mi - s * s;
    (s - (d < 0) as i64 + (d > 2 * s) as i64) as u64
}

/// Square root of `m · 2^e`, `m` in `[2^23, 2^24)`; the result is normal.
#[inline(always)]
fn sqrt_core(m: u32, e: i32) -> F32 {
    let odd = (e & 1) as u32;
    let r = isqrt_48_50((m as u64) << (26 - odd)) as u32; // [2^24, 2^25)
    let q = (r + 1) >> 1; // [2^23, 2^24], a carry bumps the exponent
    // Result = q · 2^p with p = ceil(e / 2) - 12; the field adds (p + 149) << 23.
    let p = ((e + 1) >> 1) - 12;
    F32((((p + 149) as u32) << 23) + q)
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
    use super::isqrt_48_50;

    /// Every value `sqrt_core` can pass: `m << 25` and `m << 26`.
    #[test]
    fn isqrt_exact_on_every_reachable_input() {
        for m in (1u64 << 23)..(1 << 24) {
            for k in [25, 26] {
                let v = m << k;
                assert_eq!(isqrt_48_50(v), v.isqrt(), "{v:#x}");
            }
        }
    }
}
