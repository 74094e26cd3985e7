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
//! [`sqrt_half_round`] computes `(r + 1) >> 1` directly: `s ≈ sqrt(M)` by
//! quadratic interpolation in a 192-entry table (error below 0.2, so
//! `floor(s)` is `r - 1`, `r` or `r + 1`), and one comparison of
//! `(2q + 1)²` with `M` fixes the last bit. The unit test checks it on every
//! `M` the function can receive (2^25 values); the oracle suite checks all
//! 2^32 inputs.

#![forbid(unsafe_code)]

use super::pack::{ABS_MASK, IMPLICIT, decode_norm, is_nan_bits};
use super::{EXP_MASK, F32, SIG_MASK, SIGN_MASK};

/// Fraction bits of the table's coefficients (units of `sqrt(M)`).
const FRAC: u32 = 12;
/// `M`'s bits below the table index: a bucket spans `2^42` values of `M`.
const BUCKET: u32 = 42;
/// Bits of the position `u` inside a bucket used by the polynomial.
const POS: u32 = 25;

/// `SQRT[i]` for `i` in `64..256` (entries below 64 unused): the quadratic
/// `A + B·u + C·u²` through `sqrt(M)` at `u = 0, ½, 1`, where
/// `M = (i + u) · 2^42`, coefficients in units of `2^-12`. Word 0 is
/// `A · 2^25` (below 2^62, so `A` shares the scale of `B · u` with `u` in
/// 25-bit fixed point); word 1 packs `B` (low 32 bits, below 2^30) and `C`
/// (high 32 bits, signed, above -2^22; the parabola is concave).
///
/// Interpolation error at most `max|f'''| / 6 · max|u (u - ½)(u - 1)|`
/// with `f'''` taken in `u`: `(3/8) · 2^126 / 2^120 / 6 · 0.0482` ≈ 0.19 at
/// the bottom of the range; rounded nodes and the truncated product add
/// below 2^-8. 4 KiB (3 KiB used).
static SQRT: [[u64; 2]; 256] = sqrt_table();

/// `sqrt((2i + k) · 2^41)` in units of `2^-12`, rounded to nearest.
const fn node(i: usize, k: u128) -> i64 {
    // Two extra bits below the unit, then round.
    let v = ((2 * i as u128 + k) << (41 + 2 * FRAC + 4)).isqrt();
    ((v + 2) >> 2) as i64
}

const fn sqrt_table() -> [[u64; 2]; 256] {
    let mut t = [[0u64; 2]; 256];
    let mut i = 64;
    while i < 256 {
        let (f0, fh, f1) = (node(i, 0), node(i, 1), node(i, 2));
        let b = 4 * fh - 3 * f0 - f1;
        let c = 2 * f0 - 4 * fh + 2 * f1;
        t[i] = [(f0 as u64) << POS, (b as u64) | ((c as u64) << 32)];
        i += 1;
    }
    t
}

/// `floor(A + B·u + C·u²)` for `m` in `[2^48, 2^50)`: within one of
/// `floor(sqrt(m))`.
#[inline(always)]
fn sqrt_approx(m: u64) -> u64 {
    let [a, bc] = SQRT[(m >> BUCKET) as usize & 255];
    let u = (m >> (BUCKET - POS)) & ((1 << POS) - 1); // position, 25 bits
    let b = bc as u32 as i64;
    let c = (bc as i64) >> 32;
    // A + B·u + C·u² at the scale 2^-(12 + 25): the two products are
    // independent (Estrin), so the dependency chain is two multiplies deep.
    let lin = b as u64 * u; // below 2^55
    let quad = c * ((u * u) >> POS) as i64; // in (-2^47, 0]
    (a + lin).wrapping_add(quad as u64) >> (FRAC + POS)
}

/// `(floor(sqrt(m)) + 1) >> 1`, i.e. `sqrt(m) / 2` rounded to nearest
/// (never a tie), for `m` in `[2^48, 2^50)`.
///
/// `s = floor(A + B·u + C·u²)` from [`SQRT`] is within one of
/// `r = floor(sqrt(m))`. Then `q = s >> 1` is the answer or one below it,
/// and `(2q + 1)² <= m` decides which (right for every `s` in
/// `r - 1 ..= r + 1`).
#[inline(always)]
fn sqrt_half_round(m: u64) -> u32 {
    let s = sqrt_approx(m);
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
    use super::{sqrt_approx, sqrt_half_round};

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

    /// The interpolation's margin: `floor(s)` must stay within one of
    /// `floor(sqrt(m))` on the whole domain `[2^48, 2^50)` (every multiple
    /// of 2^25, the table's node points and their neighbours), not only on
    /// the reachable inputs; and it is `r - 1` or `r + 1` on few of them.
    #[test]
    fn approximation_within_one_everywhere() {
        let mut off = 0u64;
        let mut n = 0u64;
        let mut check = |v: u64| {
            let (s, r) = (sqrt_approx(v), v.isqrt());
            assert!(s + 1 >= r && s <= r + 1, "{v:#x}: s {s} r {r}");
            off += (s != r) as u64;
            n += 1;
        };
        for k in (1u64 << 23)..(1 << 25) {
            check(k << 25);
            check((k << 25) | ((1 << 25) - 1));
        }
        for i in 64u64..256 {
            for d in [0u64, 1, 1 << 41] {
                check((i << 42) + d);
                check((i << 42) + (1 << 42) - 1 - d);
            }
        }
        assert!(off * 20 < n, "{off} of {n} off by one");
    }
}
