//! The sampler as it was before its top-k selection: every candidate sorted
//! by (logit descending, NaN as −∞, id ascending) with a comparison sort,
//! then top-k, top-p, min-p, temperature and the draw exactly as
//! `detllm::sample` documents them. `tests/engine/sample.rs` holds the library to
//! it token for token; `benches/sample.rs` times both.

use detllm::F32;
use detllm::sample::{SamplingParams, SplitMix64, argmax};

/// The chain on `logits` (non-empty, parameters valid), allocating its
/// workspace: the token it picks, advancing `rng` once unless greedy.
pub fn sample(
    logits: &[F32],
    params: &SamplingParams,
    recent: &[u32],
    rng: &mut SplitMix64,
) -> u32 {
    let n = logits.len();
    let mut vals = logits.to_vec();
    apply_repeat_penalty(&mut vals, params, recent);
    if params.temperature.is_zero() {
        return argmax(&vals).unwrap();
    }
    let mut ids: Vec<u32> = (0..n as u32).collect();
    ids.sort_unstable_by(|&a, &b| {
        nan_last(vals[b as usize])
            .total_cmp(nan_last(vals[a as usize]))
            .then(a.cmp(&b))
    });
    let kept = &ids[..kept_candidates(&vals, &ids, params)];
    let max = nan_last(vals[ids[0] as usize]);
    let sum = exp_sum(&vals, kept, max, params.temperature);
    let target = rng.next_unit() * sum;
    let mut cum = F32::ZERO;
    for &id in kept {
        cum = cum + temp_exp(nan_last(vals[id as usize]), max, params.temperature);
        if cum.gt(target) {
            return id;
        }
    }
    kept[kept.len() - 1]
}

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

fn nan_last(v: F32) -> F32 {
    if v.is_nan() { F32::NEG_INFINITY } else { v }
}

fn kept_candidates(vals: &[F32], ids: &[u32], params: &SamplingParams) -> usize {
    let mut kept = ids.len();
    if params.top_k > 0 {
        kept = kept.min(params.top_k as usize);
    }
    let max = nan_last(vals[ids[0] as usize]);
    if params.top_p.lt(F32::ONE) {
        let sum = exp_sum(vals, &ids[..kept], max, F32::ONE);
        let inv = F32::ONE / sum;
        let mut cum = F32::ZERO;
        for (j, &id) in ids[..kept].iter().enumerate() {
            cum = cum + (nan_last(vals[id as usize]) - max).exp() * inv;
            if cum.ge(params.top_p) {
                kept = j + 1;
                break;
            }
        }
    }
    if params.min_p.gt(F32::ZERO) {
        let mut m = 1;
        while m < kept
            && (nan_last(vals[ids[m] as usize]) - max)
                .exp()
                .ge(params.min_p)
        {
            m += 1;
        }
        kept = m;
    }
    kept
}

fn temp_exp(l: F32, max: F32, t: F32) -> F32 {
    (l / t - max / t).exp()
}

fn exp_sum(vals: &[F32], ids: &[u32], max: F32, t: F32) -> F32 {
    ids.iter().fold(F32::ZERO, |acc, &id| {
        acc + temp_exp(nan_last(vals[id as usize]), max, t)
    })
}
