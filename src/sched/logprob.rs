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
//! ## Formula (fixed order)
//!
//! With `v_i` the penalized logits (a NaN logit counts as `-inf`), `t` the
//! temperature (1 when greedy) and `max` the largest `v_i`:
//! `z_i = v_i / t - max / t` (the sampler's rounding steps), `sum = Σ exp(z_i)`
//! over ids in increasing order from +0, and `logprob_i = z_i - ln(sum)`, with
//! the correctly rounded [`F32::exp`] and [`F32::ln`]. The top tokens are the
//! largest `z_i`, ties to the lowest id.

#![forbid(unsafe_code)]

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
/// Errors: [`Error::TokenOutOfRange`] if `token` is not an index of
/// `logits`, [`Error::BufferTooSmall`] if `work` is shorter than `logits`.
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
    let n = logits.len();
    if token as usize >= n {
        return Err(Error::TokenOutOfRange {
            token,
            vocab_size: n,
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
    // The largest penalized logit (the sampler's first candidate).
    let max = z.iter().fold(F32::NEG_INFINITY, |m, &v| {
        if key(v).total_cmp(m) == Ordering::Greater {
            key(v)
        } else {
            m
        }
    });
    let max_t = max / t;
    for v in z.iter_mut() {
        *v = key(*v) / t - max_t;
    }
    let sum = z.iter().fold(F32::ZERO, |acc, &v| acc + v.exp());
    let lse = sum.ln();
    // The best `k` by (z descending, id ascending): insertion into `top`.
    let k = top.len().min(n);
    let mut filled = 0;
    for (id, &v) in z.iter().enumerate() {
        let v = key(v);
        let at = top[..filled]
            .iter()
            .position(|c| v.total_cmp(c.logprob) == Ordering::Greater)
            .unwrap_or(filled);
        if at < k {
            let end = (filled + 1).min(k);
            top.copy_within(at..end - 1, at + 1);
            top[at] = TopLogprob {
                token: id as u32,
                logprob: v,
            };
            filled = end;
        }
    }
    for c in top[..filled].iter_mut() {
        c.logprob = c.logprob - lse;
    }
    Ok((z[token as usize] - lse, filled))
}
