//! Generating one sequence: prefill in chunks, then sample token by token,
//! folding every step into an audit [`DigestChain`]. No allocation: the
//! caller lends the token history buffer.

#![forbid(unsafe_code)]

use super::engine::{Engine, Entry, KvBuild};
use crate::audit::DigestChain;
use crate::kv::SeqId;
use crate::sample::{Sampler, SamplingParams, SplitMix64};
use crate::{Error, F32, Parallel, Result};

/// What one generation produced.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Generated {
    /// Tokens generated (the end-of-generation token included if reached).
    pub n_tokens: usize,
    /// The audit chain after the last step.
    pub chain: DigestChain,
}

/// Runs `prompt` through `seq` (which must be empty or hold the context the
/// prompt continues), then samples up to `max_tokens` tokens, stopping after
/// a token for which `is_eog` is true. `history` receives prompt and
/// generated tokens (its length bounds the run: `prompt.len() + max_tokens`
/// must fit). `on_step(step, token, digest)` is called after each sample.
///
/// Errors: [`Error::EmptyPrompt`]; [`Error::BufferTooSmall`] when `history`
/// cannot hold `prompt.len() + max_tokens` tokens; [`Error::SizeOverflow`];
/// those of `SamplingParams::validate` and `Sampler::sample`; those of
/// [`Engine::step`] (the sequence then holds the steps that succeeded).
#[allow(clippy::too_many_arguments)]
pub fn generate<'a, K: KvBuild<'a>, P: Parallel>(
    engine: &mut Engine<'a, K>,
    par: &P,
    sampler: &mut Sampler<'_>,
    seq: SeqId,
    prompt: &[u32],
    params: &SamplingParams,
    max_tokens: usize,
    history: &mut [u32],
    is_eog: &dyn Fn(u32) -> bool,
    on_step: &mut dyn FnMut(usize, u32, &[u8; 32]),
) -> Result<Generated> {
    let mut n_hist = start_history(prompt, params, max_tokens, history)?;
    let vocab = engine.config().vocab_size;
    let chunk = engine.limits().max_step_tokens;
    let mut rng = SplitMix64::new(params.seed);
    let mut chain = DigestChain::new(params);
    // Prefill; only the last chunk's logits are used.
    let mut chunks = prompt.chunks(chunk).peekable();
    let mut n = 0;
    while let Some(c) = chunks.next() {
        let logits = engine.step(
            par,
            &[Entry {
                seq,
                tokens: c,
                all_logits: false,
            }],
        )?;
        if chunks.peek().is_none() {
            if max_tokens == 0 {
                break;
            }
            let row = first_row(logits, vocab)?;
            let tok = sampler.sample(row, params, &history[..n_hist], &mut rng)?;
            let d = chain.step(row, tok);
            history[n_hist] = tok;
            n_hist += 1;
            n = 1;
            on_step(0, tok, &d);
        }
    }
    while n > 0 && n < max_tokens && !is_eog(history[n_hist - 1]) {
        let last = history[n_hist - 1];
        let logits = engine.step(
            par,
            &[Entry {
                seq,
                tokens: &[last],
                all_logits: false,
            }],
        )?;
        let row = first_row(logits, vocab)?;
        let tok = sampler.sample(row, params, &history[..n_hist], &mut rng)?;
        let d = chain.step(row, tok);
        history[n_hist] = tok;
        n_hist += 1;
        on_step(n, tok, &d);
        n += 1;
    }
    Ok(Generated { n_tokens: n, chain })
}

/// The first `vocab` logits of a step (its one logit row).
fn first_row(logits: &[F32], vocab: usize) -> Result<&[F32]> {
    logits.get(..vocab).ok_or(Error::BufferTooSmall {
        needed: vocab,
        available: logits.len(),
    })
}

/// Checks a generation request — valid parameters, a non-empty prompt, room
/// in `history` for the prompt and `max_tokens` more — and copies the prompt
/// into `history`; the number of history entries filled. Shared by plain and
/// speculative generation (`crate::spec`), which must refuse the same requests.
pub(crate) fn start_history(
    prompt: &[u32],
    params: &SamplingParams,
    max_tokens: usize,
    history: &mut [u32],
) -> Result<usize> {
    params.validate()?;
    let total = prompt
        .len()
        .checked_add(max_tokens)
        .ok_or(Error::SizeOverflow)?;
    if prompt.is_empty() {
        return Err(Error::EmptyPrompt);
    }
    if total > history.len() {
        return Err(Error::BufferTooSmall {
            needed: total,
            available: history.len(),
        });
    }
    history[..prompt.len()].copy_from_slice(prompt);
    Ok(prompt.len())
}
