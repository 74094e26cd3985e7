//! [`generate_speculative`]: `model::generate` with verify steps (the
//! exactness argument is in the module docs of [`super`]).

#![forbid(unsafe_code)]

use super::{DraftLen, DraftSource};
use crate::audit::DigestChain;
use crate::kv::SeqId;
use crate::model::{Engine, Entry, Generated, KvBuild};
use crate::sample::{Sampler, SamplingParams, SplitMix64};
use crate::{Error, F32, Parallel, Result};

/// What speculation did during one generation (speed only: the tokens do
/// not depend on it).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SpecStats {
    /// Decode steps run (each a verify step, with or without drafts).
    pub steps: usize,
    /// Draft tokens verified.
    pub drafted: usize,
    /// Draft tokens kept.
    pub accepted: usize,
}

/// The per-token callback: `(step, token, digest after it, its logits row)`.
pub type OnStep<'c> = dyn FnMut(usize, u32, &[u8; 32], &[F32]) + 'c;

/// One generation's sampling state: the history, the PRNG, the audit chain
/// and the tokens produced — what plain decoding keeps.
struct Decoding<'h> {
    history: &'h mut [u32],
    n_hist: usize,
    n: usize,
    rng: SplitMix64,
    chain: DigestChain,
}

/// How the generation is asked for: its parameters, the token limit, the
/// end-of-generation test and the per-token callback.
struct Ask<'c> {
    params: &'c SamplingParams,
    max_tokens: usize,
    is_eog: &'c dyn Fn(u32) -> bool,
    on_step: &'c mut OnStep<'c>,
}

/// [`model::generate`](crate::model::generate) with speculation: the same
/// arguments, the same errors, the same tokens and digests; `draft`
/// proposes up to `draft_max` tokens per step (0: plain decoding, one row
/// per step). `on_step(step, token, digest, row)` also gets the logits row
/// the token was drawn from (for logprobs). Returns the generation and what
/// speculation did.
///
/// Errors: those of `generate`, and those of `draft.propose`.
#[allow(clippy::too_many_arguments)]
pub fn generate_speculative<'a, K: KvBuild<'a>, P: Parallel, D: DraftSource + ?Sized>(
    engine: &mut Engine<'a, K>,
    par: &P,
    sampler: &mut Sampler<'_>,
    seq: SeqId,
    prompt: &[u32],
    params: &SamplingParams,
    max_tokens: usize,
    history: &mut [u32],
    is_eog: &dyn Fn(u32) -> bool,
    draft: &mut D,
    draft_max: usize,
    on_step: &mut OnStep<'_>,
) -> Result<(Generated, SpecStats)> {
    let n_hist = crate::model::start_history(prompt, params, max_tokens, history)?;
    let mut dec = Decoding {
        history,
        n_hist,
        n: 0,
        rng: SplitMix64::new(params.seed),
        chain: DigestChain::new(params),
    };
    let mut ask = Ask {
        params,
        max_tokens,
        is_eog,
        on_step,
    };
    let mut stats = SpecStats::default();
    prefill(engine, par, sampler, seq, prompt, &mut dec, &mut ask)?;
    let mut len = DraftLen::new(draft_max);
    while dec.n > 0 && dec.n < max_tokens && !is_eog(dec.history[dec.n_hist - 1]) {
        let (k, kept) = verify_step(engine, par, sampler, seq, &mut dec, &mut ask, draft, &len)?;
        len.update(k, kept);
        stats.steps += 1;
        stats.drafted += k;
        stats.accepted += kept;
    }
    let generated = Generated {
        n_tokens: dec.n,
        chain: dec.chain,
    };
    Ok((generated, stats))
}

/// Runs the prompt in chunks of `max_step_tokens` and draws the first token
/// from the last chunk's row (as `generate` does).
fn prefill<'a, K: KvBuild<'a>, P: Parallel>(
    engine: &mut Engine<'a, K>,
    par: &P,
    sampler: &mut Sampler<'_>,
    seq: SeqId,
    prompt: &[u32],
    dec: &mut Decoding<'_>,
    ask: &mut Ask<'_>,
) -> Result<()> {
    let vocab = engine.config().vocab_size;
    let chunk = engine.limits().max_step_tokens;
    let mut chunks = prompt.chunks(chunk).peekable();
    while let Some(c) = chunks.next() {
        let entry = Entry {
            seq,
            tokens: c,
            all_logits: false,
        };
        let logits = engine.step(par, &[entry])?;
        if chunks.peek().is_none() && ask.max_tokens > 0 {
            draw(sampler, row(logits, 0, vocab)?, dec, ask)?;
        }
    }
    Ok(())
}

/// Draws the token at the next position from `row`, records it and reports
/// it; returns it.
fn draw(
    sampler: &mut Sampler<'_>,
    row: &[F32],
    dec: &mut Decoding<'_>,
    ask: &mut Ask<'_>,
) -> Result<u32> {
    let recent = &dec.history[..dec.n_hist];
    let tok = sampler.sample(row, ask.params, recent, &mut dec.rng)?;
    let d = dec.chain.step(row, tok);
    dec.history[dec.n_hist] = tok;
    dec.n_hist += 1;
    (ask.on_step)(dec.n, tok, &d, row);
    dec.n += 1;
    Ok(tok)
}

/// One verify step: drafts written after the history, the last token and
/// the drafts run as one all-logits entry, tokens drawn row by row while
/// the drafts match, rejected rows cut from the cache. Returns (drafts
/// verified, drafts kept).
#[allow(clippy::too_many_arguments)]
fn verify_step<'a, K: KvBuild<'a>, P: Parallel, D: DraftSource + ?Sized>(
    engine: &mut Engine<'a, K>,
    par: &P,
    sampler: &mut Sampler<'_>,
    seq: SeqId,
    dec: &mut Decoding<'_>,
    ask: &mut Ask<'_>,
    draft: &mut D,
    len: &DraftLen,
) -> Result<(usize, usize)> {
    let kv0 = engine.seq_len(seq)?;
    let k = draft_room(engine, kv0, dec, ask, len);
    let k = propose(draft, dec, k, engine.config().vocab_size)?;
    let vocab = engine.config().vocab_size;
    let entry = Entry {
        seq,
        tokens: &dec.history[dec.n_hist - 1..dec.n_hist + k],
        all_logits: true,
    };
    let logits = engine.step(par, &[entry])?;
    let mut kept = 0;
    let mut emitted = 0;
    for i in 0..=k {
        let proposed = dec.history[dec.n_hist];
        let tok = draw(sampler, row(logits, i, vocab)?, dec, ask)?;
        emitted += 1;
        let stop = (ask.is_eog)(tok) || dec.n >= ask.max_tokens;
        if i == k || tok != proposed || stop {
            break;
        }
        kept += 1;
    }
    // The cache holds the history minus its last token, as plain decoding's.
    if emitted < k + 1 {
        engine.truncate(seq, kv0 + emitted)?;
    }
    Ok((k, kept))
}

/// Drafts the step may verify: the adaptive length, cut so that the step
/// fits the engine's limits and emits no more than the tokens still allowed.
fn draft_room<'a, K: KvBuild<'a>>(
    engine: &Engine<'a, K>,
    kv0: usize,
    dec: &Decoding<'_>,
    ask: &Ask<'_>,
    len: &DraftLen,
) -> usize {
    let lim = engine.limits();
    len.current()
        .min(ask.max_tokens.saturating_sub(dec.n + 1))
        .min(lim.max_step_tokens.saturating_sub(1))
        .min(lim.max_logit_rows.saturating_sub(1))
        .min(lim.max_seq_len.saturating_sub(kv0 + 1))
}

/// Asks `draft` for up to `k` tokens, written after the history; returns
/// how many, cut at the first one outside the vocabulary.
fn propose<D: DraftSource + ?Sized>(
    draft: &mut D,
    dec: &mut Decoding<'_>,
    k: usize,
    vocab: usize,
) -> Result<usize> {
    if k == 0 {
        return Ok(0);
    }
    let (past, rest) = dec.history.split_at_mut(dec.n_hist);
    let out = &mut rest[..k];
    let n = draft.propose(past, out)?.min(k);
    Ok(out[..n]
        .iter()
        .position(|&t| t as usize >= vocab)
        .unwrap_or(n))
}

/// Row `i` of a step's logits.
fn row(logits: &[F32], i: usize, vocab: usize) -> Result<&[F32]> {
    logits
        .get(i * vocab..(i + 1) * vocab)
        .ok_or(Error::BufferTooSmall {
            needed: (i + 1) * vocab,
            available: logits.len(),
        })
}
