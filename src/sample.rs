//! Sampling: greedy, temperature, top-k, top-p, min-p, repetition penalty,
//! with a named PRNG, all in soft arithmetic — a seeded sampled run gives the
//! same tokens on every target.
//!
//! ## The chain (fixed order, as llama.cpp's default sampler chain)
//! 1. repetition penalty over the last `penalty_last_n` tokens of the
//!    sequence: a logit `l > 0` becomes `l / penalty`, otherwise `l * penalty`
//!    (each distinct token once);
//! 2. `temperature == 0` → greedy: the largest logit, ties to the lowest id;
//! 3. candidates ordered by (logit descending, NaN as −∞, then id
//!    ascending) — a total order, so the result does not depend on the
//!    selection or sort algorithm;
//! 4. top-k keeps the first `k` (0 = off); for `k` up to half the row only
//!    those `k` are put in order (a bounded heap over the row, then a sort
//!    of `k`), so a top-k sample costs about one pass over the logits;
//! 5. top-p: softmax of the kept logits, keep the shortest prefix whose
//!    probability sum (left to right) reaches `p` (1 = off);
//! 6. min-p: keep candidates whose probability ≥ `min_p` × the largest (0 = off);
//! 7. temperature: softmax of `logit / temperature` over what is kept
//!    (`exp(l / t - max / t)`);
//! 8. draw `u` in [0, 1) from the sequence's [`SplitMix64`], scale by the
//!    probability sum, and take the first candidate whose running sum exceeds it.
//!
//! Softmax here is `e_i = exp(l_i - max)`, sum left to right from +0,
//! `p_i = e_i * (1 / sum)` — the same formula the attention softmax uses.
//!
//! Verified in `tests/engine/sample.rs`: the heap selection against the earlier
//! full sort of every candidate (kept there as the reference) on random
//! rows with ties, ±0, ±∞ and NaN under random parameters — the same token
//! and generator state every time; the draw's frequencies against the exact
//! softmax over all 2^24 random inputs it can see.

#![forbid(unsafe_code)]

use crate::{Arena, Error, F32, Result};

/// SplitMix64 (Steele, Lea, Flood 2014): the PRNG of the profile.
///
/// `state += 0x9E3779B97F4A7C15; z = state;
///  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9; z = (z ^ (z >> 27)) * 0x94D049BB133111EB;
///  return z ^ (z >> 31)`. Advanced exactly once per sampled token.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SplitMix64 {
    state: u64,
}

impl SplitMix64 {
    /// A generator seeded with `seed`.
    pub const fn new(seed: u64) -> Self {
        SplitMix64 { state: seed }
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A uniform value in [0, 1): the top 24 bits times 2^-24 (exact).
    pub fn next_unit(&mut self) -> F32 {
        F32::from_i128_scaled((self.next_u64() >> 40) as i128, -24)
    }
}

/// Sampling parameters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SamplingParams {
    /// 0 means greedy.
    pub temperature: F32,
    /// Keep the `top_k` most likely tokens; 0 = off.
    pub top_k: u32,
    /// Nucleus threshold; 1 = off.
    pub top_p: F32,
    /// Minimum probability relative to the most likely token; 0 = off.
    pub min_p: F32,
    /// Repetition penalty; 1 = off.
    pub repeat_penalty: F32,
    /// How many of the most recent tokens the penalty looks at.
    pub penalty_last_n: usize,
    /// Seed of the sequence's PRNG.
    pub seed: u64,
}

impl SamplingParams {
    /// Greedy decoding.
    pub const GREEDY: SamplingParams = SamplingParams {
        temperature: F32::ZERO,
        top_k: 0,
        top_p: F32::ONE,
        min_p: F32::ZERO,
        repeat_penalty: F32::ONE,
        penalty_last_n: 64,
        seed: 0,
    };

    /// llama.cpp's default sampler (`common_params_sampling` in its
    /// `common/common.h`, as of llama-cpp-python 0.3.36): temperature 0.8,
    /// top-k 40, top-p 0.95, min-p 0.05, repetition penalty off (1.0) over the
    /// last 64 tokens; its other samplers (DRY, XTC, typical-p, top-n-σ,
    /// mirostat) are off by default there and absent here. The floats are
    /// the `f32` nearest the decimal (the same bits `0.8f` gives). Seed 0:
    /// callers without a seed of their own choose one and report it.
    pub const LLAMA_DEFAULTS: SamplingParams = SamplingParams {
        temperature: F32::from_bits(0x3F4C_CCCD),
        top_k: 40,
        top_p: F32::from_bits(0x3F73_3333),
        min_p: F32::from_bits(0x3D4C_CCCD),
        repeat_penalty: F32::ONE,
        penalty_last_n: 64,
        seed: 0,
    };

    /// `Err(InvalidSampling { param })` naming the first parameter that is
    /// NaN, negative or infinite (`temperature`, `top_p`, `min_p`,
    /// `repeat_penalty`, checked in that order), or a zero `repeat_penalty`.
    pub fn validate(&self) -> Result<()> {
        let bad = |x: F32| x.is_nan() || x.is_sign_negative() || x.is_infinite();
        let checks = [
            ("temperature", bad(self.temperature)),
            ("top_p", bad(self.top_p)),
            ("min_p", bad(self.min_p)),
            (
                "repeat_penalty",
                bad(self.repeat_penalty) || self.repeat_penalty.is_zero(),
            ),
        ];
        match checks.iter().find(|(_, is_bad)| *is_bad) {
            Some(&(param, _)) => Err(Error::InvalidSampling { param }),
            None => Ok(()),
        }
    }
}

/// Index of the largest value, ties to the lowest index; NaN never wins
/// unless everything is NaN (then 0). `None` for an empty slice.
///
/// Compares integer keys that order the values as `F32::gt` does (±0
/// equal, NaN below everything), one pass for the largest key and one for
/// its first index, so that both vectorize.
pub fn argmax(logits: &[F32]) -> Option<u32> {
    let max = logits.iter().map(|&l| order_key(l)).max()?;
    let i = logits.iter().position(|&l| order_key(l) == max)?;
    u32::try_from(i).ok()
}

/// An `i32` in the order of the values: sign-magnitude bits made two's
/// complement, -0 taken as +0, NaN the smallest key of all.
#[inline(always)]
fn order_key(l: F32) -> i32 {
    let b = l.to_bits();
    let abs = b & 0x7FFF_FFFF;
    let k = b as i32;
    let k = k ^ ((k >> 31) as u32 >> 1) as i32;
    if abs > 0x7F80_0000 {
        i32::MIN
    } else if abs == 0 {
        0
    } else {
        k
    }
}

/// Workspace and state for sampling one sequence at a time.
pub struct Sampler<'a> {
    /// The logits after the repetition penalty.
    vals: &'a mut [F32],
    /// Candidate order: token ids, or (top-k up to half the row) a heap of
    /// [`rank_key`]s, each as two words (high, low).
    work: &'a mut [u32],
}

impl<'a> Sampler<'a> {
    /// Arena bytes a sampler for `vocab_size` needs.
    pub const fn bytes_required(vocab_size: usize) -> Option<usize> {
        match (
            Arena::bytes_for::<u32>(vocab_size),
            Arena::bytes_for::<F32>(vocab_size),
        ) {
            (Some(a), Some(b)) => a.checked_add(b),
            _ => None,
        }
    }

    /// A sampler for vocabularies up to `vocab_size`.
    pub fn new(arena: &mut Arena<'a>, vocab_size: usize) -> Result<Self> {
        let need = Self::bytes_required(vocab_size).ok_or(Error::SizeOverflow)?;
        if need > arena.remaining() {
            return Err(Error::ArenaExhausted {
                requested: need,
                available: arena.remaining(),
            });
        }
        let work = arena.alloc::<u32>(vocab_size)?;
        let vals = arena.alloc::<F32>(vocab_size)?;
        Ok(Sampler { vals, work })
    }

    /// Picks the next token from `logits` (not modified). `recent` holds the
    /// sequence's previous tokens (for the penalty), `rng` its generator,
    /// advanced once unless the choice is greedy.
    ///
    /// Errors: [`Error::InvalidSampling`] for a parameter
    /// [`SamplingParams::validate`] rejects, or with `param: "logits"` for
    /// empty `logits`; [`Error::BufferTooSmall`] if `logits` is longer than
    /// the vocabulary the sampler was carved for.
    pub fn sample(
        &mut self,
        logits: &[F32],
        params: &SamplingParams,
        recent: &[u32],
        rng: &mut SplitMix64,
    ) -> Result<u32> {
        params.validate()?;
        let n = logits.len();
        let empty = Error::InvalidSampling { param: "logits" };
        if n == 0 {
            return Err(empty);
        }
        if n > self.vals.len() {
            return Err(Error::BufferTooSmall {
                needed: n,
                available: self.vals.len(),
            });
        }
        let vals = &mut self.vals[..n];
        vals.copy_from_slice(logits);
        // 1. Repetition penalty.
        apply_repeat_penalty(vals, params, recent);
        // 2. Greedy.
        if params.temperature.is_zero() {
            return argmax(vals).ok_or(empty);
        }
        // 3–4. The first `k` candidates in (logit desc, id asc) order.
        let k = match params.top_k as usize {
            0 => n,
            k => k.min(n),
        };
        let work = &mut self.work[..n];
        if 2 * k <= n {
            let heap = KeyHeap(&mut work[..2 * k]);
            Ok(filter_and_draw(&heap.top(vals), params, rng))
        } else {
            let ids = Ids { ids: work, vals };
            Ok(filter_and_draw(&ids.sorted(k), params, rng))
        }
    }
}

/// Candidates in the chain's order: the `j`-th one's logit (NaN as −∞)
/// and token id.
trait Candidates {
    fn len(&self) -> usize;
    fn get(&self, j: usize) -> (F32, u32);
}

/// Steps 5–8 on the first top-k candidates `c` (non-empty): top-p, min-p,
/// the temperature softmax and the draw.
fn filter_and_draw<C: Candidates>(c: &C, params: &SamplingParams, rng: &mut SplitMix64) -> u32 {
    let kept = kept_candidates(c, params);
    let max = c.get(0).0;
    let sum = exp_sum(c, kept, max, params.temperature);
    let target = rng.next_unit() * sum;
    let mut cum = F32::ZERO;
    for j in 0..kept {
        let (l, id) = c.get(j);
        cum = cum + temp_exp(l, max, params.temperature);
        if cum.gt(target) {
            return id;
        }
    }
    c.get(kept - 1).1
}

/// Step 1: each distinct token among the last `penalty_last_n` of `recent`
/// (and inside the vocabulary) has its logit divided by the penalty if
/// positive, else multiplied by it.
fn apply_repeat_penalty(vals: &mut [F32], params: &SamplingParams, recent: &[u32]) {
    if params.repeat_penalty == F32::ONE {
        return;
    }
    let n = vals.len();
    let window = &recent[recent.len().saturating_sub(params.penalty_last_n)..];
    for (j, &t) in window.iter().enumerate() {
        if (t as usize) >= n || window[..j].contains(&t) {
            continue;
        }
        let l = vals[t as usize];
        vals[t as usize] = if l.gt(F32::ZERO) {
            l / params.repeat_penalty
        } else {
            l * params.repeat_penalty
        };
    }
}

/// A candidate as one `u64` whose ascending order is the chain's candidate
/// order: the high half is the logit (NaN taken as −∞) in IEEE `totalOrder`
/// reversed (so +0 ranks before −0, as `F32::total_cmp` orders them), the
/// low half the token id. Keys are distinct, so any correct selection or
/// sort of them gives one result.
#[inline(always)]
fn rank_key(l: F32, id: u32) -> u64 {
    let b = if l.is_nan() {
        F32::NEG_INFINITY.to_bits()
    } else {
        l.to_bits()
    };
    // totalOrder as a signed integer, then as an unsigned one, reversed.
    let t = (b as i32) ^ (((b as i32 >> 31) as u32) >> 1) as i32;
    let desc = !((t as u32) ^ 0x8000_0000);
    (u64::from(desc) << 32) | u64::from(id)
}

/// The logit a [`rank_key`] holds (NaN comes back as −∞).
#[inline(always)]
fn key_value(key: u64) -> F32 {
    let t = (!((key >> 32) as u32) ^ 0x8000_0000) as i32;
    // The totalOrder map is its own inverse (it keeps the sign bit).
    F32::from_bits((t ^ (((t >> 31) as u32) >> 1) as i32) as u32)
}

/// The token id a [`rank_key`] holds.
#[inline(always)]
fn key_id(key: u64) -> u32 {
    key as u32
}

/// Steps 3–4 for a small `k`: the `k` smallest [`rank_key`]s of a row, as
/// a max-heap of two-word keys while the row is scanned, then sorted.
///
/// Each logit costs one comparison against the heap's worst unless it
/// enters (typically `O(k log(n/k))` times), so a 150k vocabulary costs
/// one pass instead of a full sort.
struct KeyHeap<'w>(&'w mut [u32]);

impl KeyHeap<'_> {
    #[inline(always)]
    fn key(&self, i: usize) -> u64 {
        (u64::from(self.0[2 * i]) << 32) | u64::from(self.0[2 * i + 1])
    }

    #[inline(always)]
    fn set(&mut self, i: usize, key: u64) {
        self.0[2 * i] = (key >> 32) as u32;
        self.0[2 * i + 1] = key as u32;
    }

    /// The first `self.len()` (1 ≤ k < `vals.len()`) candidates of `vals`
    /// in order.
    fn top(mut self, vals: &[F32]) -> Self {
        let k = self.0.len() / 2;
        for (i, &v) in vals.iter().enumerate().take(k) {
            self.set(i, rank_key(v, i as u32));
        }
        for i in (0..k / 2).rev() {
            self.sift_down(i, k);
        }
        for (i, &v) in vals.iter().enumerate().skip(k) {
            let key = rank_key(v, i as u32);
            if key < self.key(0) {
                self.set(0, key);
                self.sift_down(0, k);
            }
        }
        // Heapsort: move the largest behind the shrinking heap.
        for end in (1..k).rev() {
            let (top, last) = (self.key(0), self.key(end));
            self.set(0, last);
            self.set(end, top);
            self.sift_down(0, end);
        }
        self
    }

    /// Restores the max-heap property of the first `len` keys below `i`.
    fn sift_down(&mut self, mut i: usize, len: usize) {
        loop {
            let l = 2 * i + 1;
            if l >= len {
                return;
            }
            let r = l + 1;
            let c = if r < len && self.key(r) > self.key(l) {
                r
            } else {
                l
            };
            let (kc, ki) = (self.key(c), self.key(i));
            if kc <= ki {
                return;
            }
            self.set(i, kc);
            self.set(c, ki);
            i = c;
        }
    }
}

impl Candidates for KeyHeap<'_> {
    fn len(&self) -> usize {
        self.0.len() / 2
    }

    fn get(&self, j: usize) -> (F32, u32) {
        let key = self.key(j);
        (key_value(key), key_id(key))
    }
}

/// Steps 3–4 for a large `k` (or none): every token id ordered by its
/// [`rank_key`], then cut to `k`.
struct Ids<'w> {
    ids: &'w mut [u32],
    vals: &'w [F32],
}

impl<'w> Ids<'w> {
    /// The first `k` (1 ≤ k ≤ `vals.len()`) ids in order.
    fn sorted(self, k: usize) -> Self {
        for (i, id) in self.ids.iter_mut().enumerate() {
            *id = i as u32;
        }
        let vals = self.vals;
        self.ids
            .sort_unstable_by_key(|&id| rank_key(vals[id as usize], id));
        Ids {
            ids: &mut self.ids[..k],
            vals,
        }
    }
}

impl Candidates for Ids<'_> {
    fn len(&self) -> usize {
        self.ids.len()
    }

    fn get(&self, j: usize) -> (F32, u32) {
        let id = self.ids[j];
        let l = self.vals[id as usize];
        (if l.is_nan() { F32::NEG_INFINITY } else { l }, id)
    }
}

/// Steps 5–6: how many of the ordered candidates `c` (non-empty, already
/// cut to top-k) top-p, then min-p keep (at least one).
fn kept_candidates<C: Candidates>(c: &C, params: &SamplingParams) -> usize {
    let mut kept = c.len();
    // Probabilities of the kept candidates at temperature 1, in order.
    let max = c.get(0).0;
    // 5. Top-p.
    if params.top_p.lt(F32::ONE) {
        let sum = exp_sum(c, kept, max, F32::ONE);
        let inv = F32::ONE / sum;
        let mut cum = F32::ZERO;
        for j in 0..kept {
            cum = cum + (c.get(j).0 - max).exp() * inv;
            if cum.ge(params.top_p) {
                kept = j + 1;
                break;
            }
        }
    }
    // 6. Min-p: p_i >= min_p * p_max  <=>  exp(l_i - max) >= min_p.
    if params.min_p.gt(F32::ZERO) {
        let mut m = 1;
        while m < kept && (c.get(m).0 - max).exp().ge(params.min_p) {
            m += 1;
        }
        kept = m;
    }
    kept
}

/// `exp(l / t - max / t)` (llama.cpp divides the logits by the temperature,
/// then takes the softmax).
fn temp_exp(l: F32, max: F32, t: F32) -> F32 {
    (l / t - max / t).exp()
}

/// Σ exp((l_i - max) / t) over the first `kept` candidates, left to right
/// from +0.
fn exp_sum<C: Candidates>(c: &C, kept: usize, max: F32, t: F32) -> F32 {
    (0..kept).fold(F32::ZERO, |acc, j| acc + temp_exp(c.get(j).0, max, t))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn validate_names_the_first_bad_parameter() {
        let ok = SamplingParams::GREEDY;
        assert_eq!(ok.validate(), Ok(()));
        let cases = [
            (
                SamplingParams {
                    temperature: F32::NAN,
                    top_p: F32::NAN,
                    ..ok
                },
                "temperature",
            ),
            (
                SamplingParams {
                    top_p: F32::NEG_ONE,
                    ..ok
                },
                "top_p",
            ),
            (
                SamplingParams {
                    min_p: F32::INFINITY,
                    ..ok
                },
                "min_p",
            ),
            (
                SamplingParams {
                    repeat_penalty: F32::ZERO,
                    ..ok
                },
                "repeat_penalty",
            ),
        ];
        for (params, param) in cases {
            assert_eq!(params.validate(), Err(Error::InvalidSampling { param }));
        }
    }
}
