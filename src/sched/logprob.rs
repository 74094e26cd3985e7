//! Log-probabilities of a sampled token and of the most likely tokens, in
//! soft arithmetic (the same bits on every target).
//!
//! ## Which distribution
//!
//! The one the token was drawn from before truncation: the logits after the
//! repetition penalty (exactly as [`Sampler`](crate::sample::Sampler) applies
//! it) divided by the temperature, soft-maxed over the **whole vocabulary**.
//! This is what llama.cpp's server and OpenAI report (after temperature);
//! top-k / top-p / min-p are not applied, so a log-probability does not jump
//! to `-inf` when a cut moves. Greedy requests (`temperature = 0`) report the
//! distribution at temperature 1.
//!
//! ## Formula
//!
//! With `v_i` the penalized logits (a NaN logit counts as `-inf`), `t` the
//! temperature (1 when greedy) and `max` the largest `v_i`:
//! `z_i = v_i / t - max / t` (the sampler's rounding steps; the division is
//! skipped at `t = 1`, where it is exact), `sum = Σ exp(z_i)` **added
//! exactly and rounded once** ([`ExpSum`]: the same bits in any order, and
//! at most half an ulp from the true sum of the rounded exps), and
//! `logprob_i = z_i - ln(sum)`, with the correctly rounded [`F32::exp`] and
//! [`F32::ln`]. The top tokens are the largest `z_i`, ties to the lowest id.
//!
//! ## How it is verified
//!
//! `tests/engine/sched_props.rs`: logprobs within `1e-5` of an `f64` log-softmax
//! of the same `z` over random rows, temperatures and penalties; the top
//! tokens the `k` largest with ties to the lowest id, each equal to its own
//! logprob; typed errors. The unit tests here hold [`ExpSum`] against a
//! 256-bit reference sum over values of every exponent, and the staged
//! `z` against the scalar definition element by element.

#![deny(unsafe_code)]

use crate::float::add_try;
use crate::kernels::elementwise::map_try;
use crate::sample::SamplingParams;
use crate::{Error, F32, Result};
use core::cmp::Ordering;

/// Most top log-probabilities a request may ask for (OpenAI's limit).
pub const MAX_TOP_LOGPROBS: usize = 20;

/// A token and its log-probability.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TopLogprob {
    /// The token id.
    pub token: u32,
    /// Its log-probability (≤ 0, or NaN if the logits hold +∞).
    pub logprob: F32,
}

/// A NaN logit counts as `-inf` (the sampler's key).
fn key(v: F32) -> F32 {
    if v.is_nan() { F32::NEG_INFINITY } else { v }
}

/// The repetition penalty of [`Sampler::sample`](crate::sample::Sampler::sample):
/// each distinct token of the last `penalty_last_n` of `recent` once, a logit
/// `l > 0` becomes `l / penalty`, otherwise `l * penalty`.
fn penalize(vals: &mut [F32], params: &SamplingParams, recent: &[u32]) {
    if params.repeat_penalty == F32::ONE {
        return;
    }
    let window = &recent[recent.len().saturating_sub(params.penalty_last_n)..];
    for (j, &t) in window.iter().enumerate() {
        if window[..j].contains(&t) {
            continue;
        }
        if let Some(l) = vals.get_mut(t as usize) {
            *l = if l.gt(F32::ZERO) {
                *l / params.repeat_penalty
            } else {
                *l * params.repeat_penalty
            };
        }
    }
}

/// The log-probability of `token` under `logits` as sampled with `params`
/// after the history `recent` (see the module docs), and the `top.len()`
/// most likely tokens written to `top` (most likely first). Returns
/// `(logprob, tokens written to top)`; `work` is scratch of at least
/// `logits.len()` values.
///
/// Errors: [`Error::InvalidSampling`] for parameters
/// [`SamplingParams::validate`] rejects, [`Error::TokenOutOfRange`] if
/// `token` is not an index of `logits`, [`Error::InvalidLimit`] (`"logits"`)
/// for more than 2^32 logits, [`Error::BufferTooSmall`] if `work` is shorter
/// than `logits`.
///
/// ```
/// use detllm::sched::{TopLogprob, logprobs};
/// use detllm::sample::SamplingParams;
/// use detllm::F32;
/// let logits = [F32::ZERO, F32::ONE, F32::ONE];
/// let (mut work, mut top) = ([F32::ZERO; 3], [TopLogprob::default(); 2]);
/// let (lp, n) = logprobs(&logits, &SamplingParams::GREEDY, &[], 2, &mut work, &mut top).unwrap();
/// assert_eq!(n, 2);
/// assert_eq!((top[0].token, top[1].token), (1, 2)); // a tie goes to the lowest id
/// assert_eq!(top[1].logprob, lp);
/// ```
pub fn logprobs(
    logits: &[F32],
    params: &SamplingParams,
    recent: &[u32],
    token: u32,
    work: &mut [F32],
    top: &mut [TopLogprob],
) -> Result<(F32, usize)> {
    params.validate()?;
    let n = logits.len();
    if token as usize >= n {
        return Err(Error::TokenOutOfRange {
            token,
            vocab_size: n,
        });
    }
    if n as u64 > MAX_LOGITS {
        return Err(Error::InvalidLimit {
            name: "logits",
            value: n,
        });
    }
    let available = work.len();
    let z = work.get_mut(..n).ok_or(Error::BufferTooSmall {
        needed: n,
        available,
    })?;
    z.copy_from_slice(logits);
    penalize(z, params, recent);
    let t = if params.temperature.is_zero() {
        F32::ONE
    } else {
        params.temperature
    };
    let lse = normalize_builds::best(z, t);
    let filled = top_k(z, top);
    for c in top[..filled].iter_mut() {
        c.logprob = c.logprob - lse;
    }
    Ok((z[token as usize] - lse, filled))
}

/// Most logits [`logprobs`] takes: [`ExpSum`]'s bound.
const MAX_LOGITS: u64 = 1 << 32;

crate::simd::multiversion! {
    /// Builds of [`normalize`].
    mod normalize_builds = normalize(z: &mut [F32], t: F32) -> F32;
}

/// The penalized logits `z` become `z_i` ([`shift_scaled`]); returns
/// `ln(Σ exp(z_i))` ([`ExpSum`]). Compiled per SIMD level: the same
/// operations, so the same bits.
#[inline(always)]
fn normalize(z: &mut [F32], t: F32) -> F32 {
    shift_scaled(z, t);
    let mut sum = ExpSum::default();
    for &v in z.iter() {
        sum.add(v.exp());
    }
    sum.finish().ln()
}

/// `z_i = key(v_i) / t - max / t` in place, `max` the largest `key(v_i)`,
/// stage by stage (the division skipped when `t = 1`: `x / 1 = x`, NaN
/// aside, which `key` has removed); each element gets the scalar
/// definition's operations, so the same bits.
#[inline(always)]
fn shift_scaled(z: &mut [F32], t: F32) {
    // The largest penalized logit (the sampler's first candidate).
    let max = z.iter().fold(F32::NEG_INFINITY, |m, &v| {
        if key(v).total_cmp(m) == Ordering::Greater {
            key(v)
        } else {
            m
        }
    });
    if t == F32::ONE {
        for v in z.iter_mut() {
            *v = key(*v);
        }
    } else {
        for v in z.iter_mut() {
            *v = key(*v) / t;
        }
    }
    let max_t = max / t;
    let neg = -max_t;
    map_try(z, |v| add_try(v, neg), |v| v - max_t);
}

/// The best `top.len()` of `z` by (value descending, id ascending), by
/// insertion; returns how many were written (`min(top.len(), z.len())`).
/// A value not above the current last of a full list is skipped at once.
fn top_k(z: &[F32], top: &mut [TopLogprob]) -> usize {
    let k = top.len().min(z.len());
    let mut filled = 0;
    for (id, &v) in z.iter().enumerate() {
        let v = key(v);
        if filled == k && (k == 0 || v.total_cmp(top[k - 1].logprob) != Ordering::Greater) {
            continue;
        }
        let at = top[..filled]
            .iter()
            .position(|c| v.total_cmp(c.logprob) == Ordering::Greater)
            .unwrap_or(filled);
        let end = (filled + 1).min(k);
        top.copy_within(at..end - 1, at + 1);
        top[at] = TopLogprob {
            token: id as u32,
            logprob: v,
        };
        filled = end;
    }
    filled
}

/// The exact sum of up to 2^32 values in `[0, 2)` (the exps of
/// non-positive `z`), rounded once; NaN if any value is ±∞ or NaN.
///
/// A value `m · 2^(e − 150)` (`e` its biased exponent, at least 1; `m` its
/// significand with the hidden bit) is a whole number of units 2^-149
/// below `2^87` units when `e < 64`, and of units 2^-86 below `2^88` units
/// otherwise: each goes to the `u128` of its units, `lo` or `hi`. 2^32 of
/// them stay below 2^120, so neither can overflow. The sign bit is ignored
/// (the exps have none).
#[derive(Clone, Copy, Debug, Default)]
struct ExpSum {
    /// Values with `e < 64`, in units 2^-149.
    lo: u128,
    /// Values with `e ≥ 64`, in units 2^-86.
    hi: u128,
    /// A value was ±∞ or NaN.
    nonfinite: bool,
}

impl ExpSum {
    /// Adds `v`.
    #[inline(always)]
    fn add(&mut self, v: F32) {
        let bits = v.to_bits() & 0x7FFF_FFFF;
        let e = bits >> 23;
        let m = (bits & 0x7F_FFFF) | (u32::from(e != 0) << 23);
        self.nonfinite |= e == 0xFF;
        if e >= 64 {
            self.hi += u128::from(m) << ((e - 64) & 127);
        } else {
            self.lo += u128::from(m) << (e.max(1) - 1);
        }
    }

    /// The sum rounded to nearest, ties to even (NaN if a value was not
    /// finite).
    fn finish(self) -> F32 {
        if self.nonfinite {
            return F32::NAN;
        }
        // lo = carry · 2^63 + rest: the carry is units 2^-86.
        let hi = self.hi + (self.lo >> 63);
        let rest = self.lo & ((1 << 63) - 1);
        if hi < 1 << 64 {
            // (hi · 2^63 + rest) < 2^127 units 2^-149: exact in an i128.
            F32::from_i128_scaled(((hi << 63) | rest) as i128, -149)
        } else {
            // hi ≥ 2^64 has more than 40 bits below binary32's last: `rest`
            // (less than one unit) only needs to make the lowest one sticky.
            F32::from_i128_scaled((hi | u128::from(rest != 0)) as i128, -86)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `Σ v` exactly in 256 bits (little-endian `u64` limbs, units 2^-149)
    /// for finite non-negative `v`, rounded once: the top 126 bits with a
    /// sticky bit, by an independent split.
    fn reference_sum(vals: &[F32]) -> F32 {
        let mut acc = [0u64; 4];
        for v in vals {
            let bits = v.to_bits() & 0x7FFF_FFFF;
            let e = bits >> 23;
            assert!(e < 0xFF);
            let m = u64::from((bits & 0x7F_FFFF) | (u32::from(e != 0) << 23));
            let sh = e.max(1) - 1; // units 2^-149
            let (limb, bit) = ((sh / 64) as usize, sh % 64);
            let wide = u128::from(m) << bit;
            let mut carry = 0u128;
            for (i, part) in [wide as u64, (wide >> 64) as u64].into_iter().enumerate() {
                let s = u128::from(acc[limb + i]) + u128::from(part) + carry;
                acc[limb + i] = s as u64;
                carry = s >> 64;
            }
            let mut i = limb + 2;
            while carry != 0 {
                let s = u128::from(acc[i]) + carry;
                acc[i] = s as u64;
                carry = s >> 64;
                i += 1;
            }
        }
        // Shift right until below 2^126, keeping a sticky bit.
        let top = (0..4).rev().find(|&i| acc[i] != 0);
        let Some(top) = top else { return F32::ZERO };
        let width = top as u32 * 64 + (64 - acc[top].leading_zeros());
        let shift = width.saturating_sub(126);
        let mut sticky = false;
        let mut out = 0u128;
        for bit in 0..width {
            let set = acc[(bit / 64) as usize] >> (bit % 64) & 1 == 1;
            if bit < shift {
                sticky |= set;
            } else if set {
                out |= 1 << (bit - shift);
            }
        }
        F32::from_i128_scaled((out | u128::from(sticky)) as i128, -149 + shift as i32)
    }

    /// A value in [0, 2) of a random exponent (every one of 0..=127 is
    /// reached, subnormals and zero among them) and random fraction.
    fn value(next: &mut impl FnMut() -> u32) -> F32 {
        let e = next() % 128;
        F32::from_bits((e << 23) | (next() & 0x7F_FFFF))
    }

    #[test]
    fn exp_sum_equals_a_256_bit_sum() {
        let mut next = crate::testutil::lcg(0x005E_ED0F_E4B5);
        for round in 0..3000 {
            let n = 1 + round % 97;
            // Some rounds keep to a few nearby exponents (long carries and
            // ties), others take any.
            let near = round % 3 == 0;
            let base = next() % 120;
            let vals: [F32; 97] = core::array::from_fn(|_| {
                if near {
                    let e = base + next() % 8;
                    F32::from_bits((e << 23) | (next() & 0x7F_FFFF))
                } else {
                    value(&mut next)
                }
            });
            let vals = &vals[..n];
            let mut sum = ExpSum::default();
            for &v in vals {
                sum.add(v);
            }
            let (have, want) = (sum.finish(), reference_sum(vals));
            assert_eq!(have.to_bits(), want.to_bits(), "round {round}: {vals:?}");
            // In any order: the same bits.
            let mut rev = ExpSum::default();
            for &v in vals.iter().rev() {
                rev.add(v);
            }
            assert_eq!(rev.finish().to_bits(), have.to_bits());
        }
    }

    #[test]
    fn exp_sum_edges() {
        let sum_of = |vals: &[F32]| {
            let mut s = ExpSum::default();
            vals.iter().for_each(|&v| s.add(v));
            s.finish()
        };
        assert_eq!(sum_of(&[]).to_bits(), 0);
        // The smallest subnormal, alone and beside 1 (far below half an
        // ulp of 1: it rounds away).
        assert_eq!(sum_of(&[F32::from_bits(1)]).to_bits(), 1);
        assert_eq!(sum_of(&[F32::ONE, F32::from_bits(1)]), F32::ONE);
        // 1 + half an ulp of 1 (2^-24) is a tie: to even, 1; plus the
        // smallest subnormal it rounds up.
        let half_ulp = F32::from_bits((127 - 24) << 23);
        assert_eq!(sum_of(&[F32::ONE, half_ulp]), F32::ONE);
        assert_eq!(
            sum_of(&[F32::ONE, half_ulp, F32::from_bits(1)]).to_bits(),
            F32::ONE.to_bits() + 1
        );
        // A value of e = 63 (lo) and one of e = 64 (hi), summed across.
        let (a, b) = (F32::from_bits(63 << 23), F32::from_bits(64 << 23));
        assert_eq!(sum_of(&[a, a]), b);
        for bad in [F32::NAN, F32::INFINITY] {
            assert!(sum_of(&[F32::ONE, bad]).is_nan());
        }
    }

    #[test]
    fn staged_shift_equals_the_scalar_definition() {
        let mut next = crate::testutil::lcg(0x5_41F7);
        let temps = [
            F32::ONE,
            F32::from_bits(0x3F4C_CCCD),
            F32::from_bits(0x4000_0000),
        ];
        for round in 0..600 {
            let n = round % 300;
            let row: [F32; 300] = core::array::from_fn(|_| match next() % 50 {
                0 => F32::NAN,
                1 => F32::NEG_INFINITY,
                2 => F32::INFINITY,
                3 => F32::from_bits(next() & 0x807F_FFFF), // subnormal or zero
                _ => F32::from_bits(next() & 0xC1FF_FFFF), // moderate
            });
            let t = temps[round % 3];
            let row = &row[..n];
            let mut have = [F32::ZERO; 300];
            have[..n].copy_from_slice(row);
            shift_scaled(&mut have[..n], t);
            let max = row.iter().fold(F32::NEG_INFINITY, |m, &v| {
                if key(v).total_cmp(m) == Ordering::Greater {
                    key(v)
                } else {
                    m
                }
            });
            for (i, &v) in row.iter().enumerate() {
                let want = key(v) / t - max / t;
                assert_eq!(have[i].to_bits(), want.to_bits(), "round {round}, i {i}");
            }
        }
    }

    /// Every SIMD build of [`normalize`] gives the portable body's bits.
    #[test]
    fn normalize_builds_equal_the_body() {
        let mut next = crate::testutil::lcg(0xB1D5);
        for round in 0..200 {
            let n = 1 + round % 300;
            let row: [F32; 300] = core::array::from_fn(|_| match next() % 40 {
                0 => F32::NEG_INFINITY,
                1 => F32::from_bits(next() & 0x807F_FFFF),
                _ => F32::from_bits(next() & 0xC17F_FFFF),
            });
            let t = [F32::ONE, F32::from_bits(0x3F4C_CCCD)][round % 2];
            let mut want_z = row;
            let want = normalize(&mut want_z[..n], t);
            for build in normalize_builds::builds().into_iter().flatten() {
                let mut z = row;
                assert_eq!(build(&mut z[..n], t).to_bits(), want.to_bits());
                assert!(
                    z[..n]
                        .iter()
                        .zip(&want_z[..n])
                        .all(|(a, b)| a.to_bits() == b.to_bits())
                );
            }
        }
    }

    #[test]
    fn top_k_keeps_the_largest_ties_to_the_lowest_id() {
        let mut next = crate::testutil::lcg(0x70_9C);
        for round in 0..500 {
            let n = round % 60;
            let z: [F32; 60] = core::array::from_fn(|_| F32::from_i32((next() % 9) as i32 - 4));
            let z = &z[..n];
            let k = round % 7;
            let mut top = [TopLogprob::default(); 7];
            let filled = top_k(z, &mut top[..k]);
            // The reference: ids sorted by (value descending, id ascending).
            let mut ids: [usize; 60] = core::array::from_fn(|i| i);
            ids[..n].sort_by(|&a, &b| z[b].total_cmp(z[a]).then(a.cmp(&b)));
            assert_eq!(filled, k.min(n));
            for (c, &id) in top[..filled].iter().zip(&ids[..filled]) {
                assert_eq!((c.token as usize, c.logprob), (id, z[id]));
            }
        }
    }
}
