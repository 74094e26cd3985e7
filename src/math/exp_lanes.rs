//! `e^x` without branches, for loops that vectorize: [`exp_try`].
//!
//! Contract: `exp_try(x)` is `(F32::exp(x), true)` or `(unspecified,
//! false)`; the caller recomputes a declined element with [`F32::exp`]. It
//! declines NaN and the inputs whose result is below 2^-126 or near it
//! (`x < -87.3`); every other input is answered (`|x| < 2^-25` gives 1,
//! `x > 88.72` gives +inf, `x < -104` gives +0), and a result declines only
//! where the approximation is too close to a rounding boundary (none found,
//! see "Verified"). `exp` is correctly rounded, so a result that passes the
//! rounding test below is the same bits as [`F32::exp`] whatever the
//! algorithm.
//!
//! Every step is an operation that LLVM vectorizes in `u64` lanes (in the
//! `crate::simd::multiversion!` AVX2 and AVX-512 builds): 32×32→64
//! products (`vpmuludq`, see [`mul32`]), shifts, additions, compares,
//! selects and one table read (a gather). No `u128`, no 64×64 products.
//!
//! Algorithm: `x = j · L + r` with `L = ln 2 / 256`, `j` an integer and
//! `r ≥ 0`, so `e^x = 2^(j >> 8) · 2^((j & 255)/256) · e^r`.
//!
//! 1. `|x| · 2^48` is exact in a `u64` (`|x|` clamped to `[2^-25, 104]`).
//!    `j = floor(x / L - 2^-10)` from a 31-bit product of `|x| · 2^24` and
//!    `log2 e · 2^31` (error below `2^-14.8` in units of `j`, so
//!    `x / L - j` is in `(2^-10 - 2^-14.8, 1 + 2^-10 + 2^-14.8)`).
//! 2. `r = x - j · L` in Q72, exactly modulo 2^64 from `x · 2^72` and
//!    `|j| · floor(ln 2 · 2^64)` (two 32×32 products): `r` is in
//!    `(0, 2^-8.527)`, and the truncated constant moves it by less than
//!    `|j| · 2^-72 < 2^-56`.
//! 3. `e^r - 1 = r + r²/2 + r³ · (1/6 + r/24 + r²/120)` in Q64, `r²` from
//!    the high and low 32-bit halves of `r`.
//! 4. `m = T + T · p` in Q63 with `T = 2^(i/256)` ([`EXP2_TABLE_256`]),
//!    the product from three 32×32 partial products. A carry out of the
//!    64 bits (`T · (1 + p) ≥ 2`, where `i = 255` and `r ≥ L`) shifts `m`
//!    right by one into `[2^63, 2^64)` and adds one to `k`; `m` is then
//!    rounded to 24 bits.
//!
//! Error of `m` against the exact `2^(i/256) · e^r · 2^63`, in units of its
//! last bit (every step truncates, so the polynomial errs low):
//! - the reduction's `|δr| < 2^-56`: `< 2^64 · 2^-55.99 < 258`;
//! - the polynomial (argument `r' < 2^-8.527` as computed), in 2^-64 of
//!   `e^r'`: `r` truncated to Q64 (1), `r²/2` (1.01), `r³` from its
//!   truncated halves (`2^-54.87` absolute, times `1/6` and more: 93.5),
//!   the cubic's coefficient `b` (three truncations of 2^-34, times
//!   `r³ < 2^-25.56`: 66), the last shift (1), the series from degree 6
//!   (`r^6/720 · 1.01 < 10.2`): `< 173` units of 2^-64, times `T < 2`:
//!   `< 173` units of 2^-63;
//! - the table (round to nearest, `0.5 · (1 + p)`): `< 0.51`;
//! - the product `T · p` (two truncated partial products and the omitted
//!   low one): `< 3`.
//!
//! In all `< 435 < 2^9` (after a carry's shift, half that plus the lost
//! bit), taken as [`EXP_LANES_ERR`] `= 2^10`. If the
//! dropped 40 bits are farther than that from the half-way point, `m` and
//! the exact value (never a midpoint: `e^x` is irrational for `x ≠ 0`)
//! round to the same `q`; above `2^64 - 2^10` both round up to `2^64`,
//! encoded as the next binade by the carry of `q` into the exponent field.
//!
//! Verified: equal to [`F32::exp`] (itself checked on all 2^32 inputs
//! against CORE-MATH) on every answered input of all 2^32, 2026-12-06:
//! 0 mismatches, 18 961 327 declined: the 16 777 214 NaNs and the
//! 2 184 113 inputs from -104 up to 0xC2AEAC50, the first below
//! `-126 · ln 2` (results below 2^-126), none for the rounding test; the
//! same in
//! the release profile (91 s on two threads) and in the test profile with
//! overflow checks on (41 s):
//! `DETLLM_EXP_LANES_STRIDE=1 cargo test --release --features std --lib answers_equal_exp -- --nocapture`.
//! The default run checks every 97th input. Planting an error bigger than
//! the bound (dropping the cross term of `r²`, about 2^16 units; or the
//! partial product `T_lo · p_hi`) fails the sweep (5 mismatches on all
//! inputs; 13 at the default stride).

#![forbid(unsafe_code)]

use super::tables::{EXP2_TABLE_256, LN2_Q128, LOG2E_Q63};
use crate::F32;

/// The low 32 bits of a `u64`.
const LOW32: u64 = 0xFFFF_FFFF;
/// Smallest `|x|` computed, 2^-25: below it `e^x` rounds to 1.
const TINY_BITS: u32 = 0x3300_0000;
/// Largest `|x|` computed, 104: below `-104` `e^x` rounds to +0.
const HUGE_BITS: u32 = 0x42D0_0000;
/// Largest binary32 whose exponential is finite: 0x42B17217 = 88.72283.
const EXP_OVERFLOW_BITS: u32 = 0x42B1_7217;
/// `floor(log2 e · 2^31)`.
const LOG2E_Q31: u64 = LOG2E_Q63 >> 32;
/// `floor(ln 2 · 2^64)` = `floor(L · 2^72)`, `L = ln 2 / 256`, in two halves.
const LN2_Q64: u64 = (LN2_Q128 >> 64) as u64;
const LN2_Q64_HI: u64 = LN2_Q64 >> 32;
const LN2_Q64_LO: u64 = LN2_Q64 & LOW32;
/// `floor(2^34 / 6)`, `floor(2^32 / 24)`, `floor(2^32 / 120)`.
const INV6_Q34: u64 = (1 << 34) / 6;
const INV24_Q32: u64 = (1 << 32) / 24;
const INV120_Q32: u64 = (1 << 32) / 120;
/// Bias of the biased `j`: `jb = j + 2^16` (`|j| < 38412`).
const J_BIAS: u64 = 1 << 16;
/// Error bound of `m` in units of its last bit (derivation in the header).
const EXP_LANES_ERR: u64 = 1 << 10;

/// `a · b` of the low 32 bits of each: the 32×32→64 product (`vpmuludq`).
#[inline(always)]
fn mul32(a: u64, b: u64) -> u64 {
    (a & LOW32) * (b & LOW32)
}

/// `x` with its sign flipped where `mask` is all ones (`mask` 0 or !0).
#[inline(always)]
fn negate_if(x: u64, mask: u64) -> u64 {
    (x ^ mask).wrapping_sub(mask)
}

/// `(e^x, true)` with the bits of [`F32::exp`], or `(unspecified, false)`
/// (NaN, results below or near 2^-126, or a result the approximation
/// cannot decide); branch-free. See the module header.
#[inline(always)]
pub(crate) fn exp_try(x: F32) -> (F32, bool) {
    let bits = x.to_bits();
    let abs = bits & 0x7FFF_FFFF;
    let neg = bits >> 31 == 1;
    let neg_mask = 0u64.wrapping_sub(neg as u64);

    // |x| clamped to [2^-25, 104], times 2^48: exact, < 2^55.
    let a = abs.clamp(TINY_BITS, HUGE_BITS);
    let mx = ((a & 0x007F_FFFF) | 0x0080_0000) as u64;
    let x_q48 = mx << ((a >> 23) - 102);

    // jb = j + 2^16, j = floor(x / L - 2^-10); x / L · 2^47 from below.
    let x_over_l = mul32(x_q48 >> 24, LOG2E_Q31); // < 2^62.3
    let shifted = negate_if(x_over_l, neg_mask)
        .wrapping_add(1 << 63)
        .wrapping_sub(1 << 37);
    let jb = shifted >> 47; // in [2^16 - 38412, 2^16 + 38412]

    // r = x - j · L in Q72, exact modulo 2^64 (the true value is in
    // (0, 2^63.6)).
    let j_abs = jb.abs_diff(J_BIAS);
    let j_mask = 0u64.wrapping_sub((jb < J_BIAS) as u64);
    let j_l = (mul32(j_abs, LN2_Q64_HI) << 32).wrapping_add(mul32(j_abs, LN2_Q64_LO));
    let x_q72 = negate_if(x_q48 << 24, neg_mask);
    let r_q72 = x_q72.wrapping_sub(negate_if(j_l, j_mask));

    let p_q64 = exp_m1_q64(r_q72);

    // m = T · (1 + p) in Q63, T = 2^(i/256).
    let t = EXP2_TABLE_256[(jb & 255) as usize];
    let (t_hi, t_lo) = (t >> 32, t & LOW32);
    let (p_hi, p_lo) = (p_q64 >> 32, p_q64 & LOW32);
    let t_p = mul32(t_hi, p_hi) + (mul32(t_hi, p_lo) >> 32) + (mul32(t_lo, p_hi) >> 32);
    // A carry (T · (1 + p) ≥ 2: i = 255, r ≥ L) moves m to the next binade.
    let (m, carry) = t.overflowing_add(t_p);
    let carry = carry as u64;
    let m = (m >> carry) | (carry << 63); // [2^63, 2^64)

    // Rounding test and encoding (as `exp_fast` in `exp.rs`).
    let rem = m & ((1 << 40) - 1);
    let half = 1u64 << 39;
    let undecided = rem.abs_diff(half) <= EXP_LANES_ERR;
    let q = (m >> 40) as u32 + (rem > half) as u32; // [2^23, 2^24]
    let kb = ((jb >> 8) + carry) as u32; // k + 256
    let normal = kb >= 130; // k >= -126
    let computed = (kb.wrapping_sub(130) << 23).wrapping_add(q);
    let computed_ok = normal & !undecided;

    // Inputs outside the computed range.
    let is_nan = abs > 0x7F80_0000;
    let tiny = abs < TINY_BITS;
    let overflow = !neg & (abs > EXP_OVERFLOW_BITS) & !is_nan;
    let underflow = neg & (abs > HUGE_BITS) & !is_nan;
    let r = if tiny {
        F32::ONE.to_bits()
    } else if overflow {
        F32::INFINITY.to_bits()
    } else if underflow {
        F32::ZERO.to_bits()
    } else {
        computed
    };
    let ok = !is_nan & (tiny | overflow | underflow | computed_ok);
    (F32::from_bits(r), ok)
}

/// `e^r - 1` in Q64, truncated (error below 173 units, see the module
/// header), for `r = r_q72 · 2^-72` in `(0, 2^-8.527)`:
/// `r + r²/2 + r³ · (1/6 + r/24 + r²/120)`.
#[inline(always)]
fn exp_m1_q64(r_q72: u64) -> u64 {
    let r_q40 = r_q72 >> 32; // < 2^31.5
    let r_lo = r_q72 & LOW32;
    let r2_q80 = mul32(r_q40, r_q40) + (mul32(r_q40, r_lo) >> 31); // < 2^63
    let r2_q48 = r2_q80 >> 32; // < 2^31
    let r3_q88 = mul32(r2_q48, r_q40); // < 2^62.6
    let b_q34 = INV6_Q34 + (mul32(r_q40, INV24_Q32) >> 38) + (mul32(r2_q48, INV120_Q32) >> 46);
    (r_q72 >> 8) + (r2_q80 >> 17) + (mul32(r3_q88 >> 32, b_q34) >> 26)
}

#[cfg(test)]
mod tests {
    //! The sweep takes every `DETLLM_EXP_LANES_STRIDE`-th binary32 (default
    //! 97; `DETLLM_EXP_LANES_STRIDE=1` is all 2^32 inputs, under a minute
    //! on two threads):
    //! `DETLLM_EXP_LANES_STRIDE=1 cargo test --release --features std --lib exp_lanes -- --nocapture`
    use super::*;

    /// Mismatches and declines of [`exp_try`] against [`F32::exp`] over
    /// every `stride`-th input from `start` (`start + i · stride < 2^32`).
    fn sweep(start: u64, stride: u64) -> (u64, u64) {
        let (mut mismatches, mut declined) = (0, 0);
        let mut bits = start;
        while bits <= u32::MAX as u64 {
            let x = F32::from_bits(bits as u32);
            match exp_try(x) {
                (r, true) if r != x.exp() => mismatches += 1,
                (_, true) => {}
                (_, false) => declined += 1,
            }
            bits += stride;
        }
        (mismatches, declined)
    }

    /// The stride of the sweep (`DETLLM_EXP_LANES_STRIDE`, default 97).
    fn stride() -> u64 {
        #[cfg(feature = "std")]
        if let Some(s) = std::env::var("DETLLM_EXP_LANES_STRIDE")
            .ok()
            .and_then(|s| s.parse().ok())
        {
            return s;
        }
        97
    }

    /// Every answered input is the bits of `F32::exp` (on every
    /// `stride`-th binary32, all 2^32 with stride 1), and the declined
    /// ones are NaN or results below 2^-126 or near it: at most the
    /// inputs in `[-104, -87]` (0xC2AE_0000..=0xC2D0_0000) and the NaNs.
    #[test]
    fn answers_equal_exp() {
        let stride = stride().max(1);
        #[cfg(feature = "std")]
        let (mismatches, declined) = {
            let threads = std::thread::available_parallelism().map_or(1, |n| n.get()) as u64;
            std::thread::scope(|s| {
                let parts: std::vec::Vec<_> = (0..threads)
                    .map(|t| s.spawn(move || sweep(t * stride, threads * stride)))
                    .collect();
                parts.into_iter().fold((0, 0), |(m, d), p| {
                    let (pm, pd) = p.join().unwrap();
                    (m + pm, d + pd)
                })
            })
        };
        #[cfg(not(feature = "std"))]
        let (mismatches, declined) = sweep(0, stride);
        let n = (1u64 << 32).div_ceil(stride);
        // NaNs: 2 · (2^23 - 1); subnormal-range results: x in [-104, -87.3].
        let expected_declines = (2 * ((1 << 23) - 1) + (0xC2D0_0000u64 - 0xC2AE_0000)) / stride;
        #[cfg(feature = "std")]
        std::println!(
            "exp_try: {n} inputs (stride {stride}), {mismatches} mismatches, {declined} declined"
        );
        assert_eq!(mismatches, 0);
        assert!(
            declined <= expected_declines + 2,
            "{declined} declined of {n}"
        );
    }
}
