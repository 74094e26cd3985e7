//! [`generate_speculative`]: `model::generate` with verify steps (the
//! exactness argument is in the module docs of [`super`]).

#![forbid(unsafe_code)]

use super::accept::{Drew, Rows, accept};
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
    let mut conv = Conversation {
        history,
        len: 0,
        rng: SplitMix64::new(params.seed),
    };
    let ask = Ask {
        params,
        max_tokens,
        is_eog,
        on_step,
    };
    let parts = (engine, par, sampler, seq);
    continue_speculative(parts, &mut conv, prompt, ask, draft, draft_max)
}

/// A sequence's sampling state carried from one generation to the next (the
/// turns of a chat): every token so far — the repetition penalty's window
/// and the draft sources' text — and the PRNG as the last draw left it.
pub struct Conversation<'h> {
    /// Room for the whole conversation; `history[..len]` holds it so far.
    pub history: &'h mut [u32],
    /// Tokens so far.
    pub len: usize,
    /// The PRNG after the conversation's draws so far.
    pub rng: SplitMix64,
}

/// How a generation is asked for: its parameters, the token limit, the
/// end-of-generation test and the per-token callback
/// `(step, token, digest, row)`.
pub struct Ask<'c> {
    /// Sampling parameters (their seed is not used: the PRNG is the
    /// conversation's).
    pub params: &'c SamplingParams,
    /// Tokens to generate at most.
    pub max_tokens: usize,
    /// Whether a token ends the generation (it is generated, then it stops).
    pub is_eog: &'c dyn Fn(u32) -> bool,
    /// Called after each token with its step, digest and logits row.
    pub on_step: &'c mut OnStep<'c>,
}

/// Continues `conv` with speculation: feeds `turn` (chunked as prefill is)
/// to `seq`, which must hold the KV rows of all of `conv.history[..len]`,
/// then generates exactly the tokens a plain loop would — each drawn with
/// `conv.rng` as the previous draws left it and the whole conversation as
/// the penalty window, checked row by row against `draft`'s proposals — up
/// to `ask.max_tokens` or an end-of-generation token. Afterwards `conv`
/// holds the turn and the tokens generated, `conv.rng` the PRNG after their
/// draws, and `seq` every row but the last token's (feed it, as plain
/// decoding would, before the next turn). The returned chain is this
/// generation's (started from `ask.params`).
///
/// Errors: as [`generate_speculative`] (`turn` empty, no room in
/// `conv.history` for `turn` and `max_tokens` more); on error `conv` is
/// unchanged and the sequence holds the steps that succeeded.
pub fn continue_speculative<'a, K: KvBuild<'a>, P: Parallel, D: DraftSource + ?Sized>(
    (engine, par, sampler, seq): (&mut Engine<'a, K>, &P, &mut Sampler<'_>, SeqId),
    conv: &mut Conversation<'_>,
    turn: &[u32],
    mut ask: Ask<'_>,
    draft: &mut D,
    draft_max: usize,
) -> Result<(Generated, SpecStats)> {
    let (params, max_tokens, is_eog) = (ask.params, ask.max_tokens, ask.is_eog);
    let available = conv.history.len();
    let room = conv
        .history
        .get_mut(conv.len..)
        .ok_or(Error::BufferTooSmall {
            needed: conv.len,
            available,
        })?;
    let n_turn = crate::model::start_history(turn, params, max_tokens, room)?;
    let mut dec = Decoding {
        history: &mut *conv.history,
        n_hist: conv.len + n_turn,
        n: 0,
        rng: conv.rng,
        chain: DigestChain::new(params),
    };
    let mut stats = SpecStats::default();
    prefill(engine, par, sampler, seq, turn, &mut dec, &mut ask)?;
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
    (conv.len, conv.rng) = (dec.n_hist, dec.rng);
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
    let mut rows = VerifyRows {
        sampler,
        logits,
        vocab,
        k,
        dec,
        ask,
    };
    let walk = accept(&mut rows, k + 1)?;
    // The cache holds the history minus its last token, as plain decoding's.
    if walk.emitted < k + 1 {
        engine.truncate(seq, kv0 + walk.emitted)?;
    }
    Ok((k, walk.kept))
}

/// A verify step's rows: row `i` follows the last token and the first `i`
/// drafts (written after the history).
struct VerifyRows<'v, 's, 'h, 'c> {
    sampler: &'v mut Sampler<'s>,
    logits: &'v [F32],
    vocab: usize,
    k: usize,
    dec: &'v mut Decoding<'h>,
    ask: &'v mut Ask<'c>,
}

impl Rows for VerifyRows<'_, '_, '_, '_> {
    fn proposed(&self, i: usize) -> Option<u32> {
        // Draws so far wrote rows 0..i, so draft i sits right after the history.
        (i < self.k).then(|| self.dec.history[self.dec.n_hist])
    }

    fn draw(&mut self, i: usize) -> Result<Drew> {
        let r = row(self.logits, i, self.vocab)?;
        let tok = draw(self.sampler, r, self.dec, self.ask)?;
        let stop = (self.ask.is_eog)(tok) || self.dec.n >= self.ask.max_tokens;
        Ok(if stop {
            Drew::Last(tok)
        } else {
            Drew::Token(tok)
        })
    }
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
