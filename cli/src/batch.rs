//! [`run_prompts_batched`]: several prompts prefilled and decoded together
//! as one continuous batch.
//!
//! Schedule. Prefill packs the prompts' remaining tokens into steps of at
//! most `max_step_tokens` tokens, prompt by prompt in order, so a step may
//! end one prompt and start the next. Each prompt's first token is sampled
//! from the logits of its last prompt position. Then every unfinished
//! sequence advances one token per step until it samples an
//! end-of-generation token or has `max_tokens` tokens.
//!
//! Each result equals its solo run: the engine's logits do not depend on
//! the batch composition or on the prefill chunking (the determinism
//! contract), and every sequence samples from its own generator seeded with
//! `params.seed` over its own history. `cli/tests/cli.rs` checks it through
//! `generate --json`.
//!
//! With a [`Constraint`] ([`run_prompts_constrained`]), prompt `i` is the
//! library's completion (request `i`, index 0): before each token its mask
//! is applied to the row (−∞ outside it), and that masked row is what is
//! sampled, digested and passed to `on_token`; an empty mask ends the run
//! (`dead_end`).

#![forbid(unsafe_code)]

use crate::error::{CliError, CliResult};
use crate::session::Session;
use detllm::F32;
use detllm::audit::{DigestChain, hash_logits};
use detllm::constraint::{Completion, Constraint, TokenMask};
use detllm::kv::SeqId;
use detllm::model::Entry;
use detllm::sample::{SamplingParams, SplitMix64};
use detllm::sched::RequestId;
use sha2::{Digest, Sha256};
use std::time::Instant;

/// One prompt's generation.
pub struct PromptRun {
    pub seq: SeqId,
    pub prompt_ids: Vec<u32>,
    /// Generated ids, the end-of-generation token included if one was sampled.
    pub ids: Vec<u32>,
    /// SHA-256 over every logits row a token was sampled from.
    pub digest: Sha256,
    /// Audit chain (see `detllm::audit`), and its value after each step.
    pub chain: DigestChain,
    pub step_digests: Vec<[u8; 32]>,
    pub rng: SplitMix64,
    pub done: bool,
    /// The constraint allowed no next token (the run ended there).
    pub dead_end: bool,
    /// Wall time of the whole batch's prefill (seconds).
    pub prefill_s: f64,
    /// Wall time of the whole batch's decode (seconds).
    pub decode_s: f64,
}

impl PromptRun {
    /// A run of `prompt_ids` on `seq` that has produced nothing yet.
    pub fn new(seq: SeqId, prompt_ids: &[u32], params: &SamplingParams) -> PromptRun {
        PromptRun {
            seq,
            prompt_ids: prompt_ids.to_vec(),
            ids: Vec::new(),
            digest: Sha256::new(),
            chain: DigestChain::new(params),
            step_digests: Vec::new(),
            rng: SplitMix64::new(params.seed),
            done: false,
            dead_end: false,
            prefill_s: 0.0,
            decode_s: 0.0,
        }
    }
}

/// Runs `prompts` as one continuous batch (module docs) and returns one run
/// per prompt, in order. `on_token(session, i, id, logits_row)` is called as
/// prompt `i` produces token `id` from `logits_row`. The sequences are freed
/// at the end, also when a step fails.
pub fn run_prompts_batched(
    session: &mut Session<'_>,
    prompts: &[Vec<u32>],
    params: &SamplingParams,
    max_tokens: usize,
    on_token: impl FnMut(&Session<'_>, usize, u32, &[F32]),
) -> CliResult<Vec<PromptRun>> {
    run_prompts_constrained(session, prompts, params, max_tokens, None, on_token)
}

/// [`run_prompts_batched`] with every prompt sampled under `constraint`
/// (when given; see the module docs).
pub fn run_prompts_constrained(
    session: &mut Session<'_>,
    prompts: &[Vec<u32>],
    params: &SamplingParams,
    max_tokens: usize,
    mut constraint: Option<&mut dyn Constraint>,
    mut on_token: impl FnMut(&Session<'_>, usize, u32, &[F32]),
) -> CliResult<Vec<PromptRun>> {
    let mut runs = Vec::with_capacity(prompts.len());
    let mut sample = Sample {
        params,
        max_tokens,
        constraint: &mut constraint,
        on_token: &mut on_token,
    };
    let result = start_runs(session, prompts, params, &mut runs)
        .and_then(|()| prefill_and_decode(session, &mut runs, &mut sample));
    for run in &runs {
        let freed = session.engine.free(run.seq);
        if result.is_ok() {
            freed?;
        }
    }
    result.map(|()| runs)
}

/// One sequence per prompt, pushed to `runs`.
fn start_runs(
    session: &mut Session<'_>,
    prompts: &[Vec<u32>],
    params: &SamplingParams,
    runs: &mut Vec<PromptRun>,
) -> CliResult<()> {
    for prompt in prompts {
        if prompt.is_empty() {
            return Err(CliError::EmptyPrompt);
        }
        let seq = session.engine.new_seq()?;
        runs.push(PromptRun::new(seq, prompt, params));
    }
    Ok(())
}

/// How each token is sampled and reported.
struct Sample<'s, 'c, F> {
    params: &'s SamplingParams,
    max_tokens: usize,
    constraint: &'s mut Option<&'c mut dyn Constraint>,
    on_token: &'s mut F,
}

fn prefill_and_decode<F: FnMut(&Session<'_>, usize, u32, &[F32])>(
    session: &mut Session<'_>,
    runs: &mut [PromptRun],
    sample: &mut Sample<'_, '_, F>,
) -> CliResult<()> {
    let start = Instant::now();
    let last_logits = prefill_packed(session, runs)?;
    let prefill_s = start.elapsed().as_secs_f64();
    // The first token of each, from its prefill logits.
    for (i, (run, row)) in runs.iter_mut().zip(last_logits).enumerate() {
        run.prefill_s = prefill_s;
        let row = row.ok_or(CliError::NoPrefillLogits)?;
        sample_next(session, run, i, &row, sample)?;
    }
    let start = Instant::now();
    decode_together(session, runs, sample)?;
    let decode_s = start.elapsed().as_secs_f64();
    for run in runs.iter_mut() {
        run.decode_s = decode_s;
    }
    Ok(())
}

/// Feeds every prompt to its sequence, packing chunks of several prompts
/// into each step; returns each prompt's logits at its last position.
fn prefill_packed(
    session: &mut Session<'_>,
    runs: &[PromptRun],
) -> CliResult<Vec<Option<Vec<F32>>>> {
    let vocab = session.vocab_size();
    let budget = session.engine.limits().max_step_tokens;
    let mut fed = vec![0usize; runs.len()];
    let mut last_logits = vec![None; runs.len()];
    while runs
        .iter()
        .zip(&fed)
        .any(|(run, &f)| f < run.prompt_ids.len())
    {
        let mut entries = Vec::new();
        // (prompt index, whether this chunk ends the prompt), per entry.
        let mut ends = Vec::new();
        let mut room = budget;
        for (i, run) in runs.iter().enumerate() {
            let prompt = &run.prompt_ids;
            if fed[i] < prompt.len() && room > 0 {
                let n = (prompt.len() - fed[i]).min(room);
                entries.push(Entry {
                    seq: run.seq,
                    tokens: &prompt[fed[i]..fed[i] + n],
                    all_logits: false,
                });
                ends.push((i, fed[i] + n == prompt.len()));
                fed[i] += n;
                room -= n;
            }
        }
        let logits = session.step(&entries)?;
        for (row, &(i, ends_prompt)) in logits.chunks_exact(vocab).zip(&ends) {
            if ends_prompt {
                last_logits[i] = Some(row.to_vec());
            }
        }
    }
    Ok(last_logits)
}

/// Advances every unfinished sequence one token per step until all are done.
fn decode_together<F: FnMut(&Session<'_>, usize, u32, &[F32])>(
    session: &mut Session<'_>,
    runs: &mut [PromptRun],
    sample: &mut Sample<'_, '_, F>,
) -> CliResult<()> {
    let vocab = session.vocab_size();
    loop {
        let active: Vec<usize> = (0..runs.len()).filter(|&i| !runs[i].done).collect();
        if active.is_empty() {
            return Ok(());
        }
        let last: Vec<u32> = active
            .iter()
            .map(|&i| *runs[i].ids.last().unwrap_or(&0))
            .collect();
        let entries: Vec<Entry> = active
            .iter()
            .zip(&last)
            .map(|(&i, id)| Entry {
                seq: runs[i].seq,
                tokens: std::slice::from_ref(id),
                all_logits: false,
            })
            .collect();
        let logits = session.step(&entries)?.to_vec();
        for (row, &i) in logits.chunks_exact(vocab).zip(&active) {
            sample_next(session, &mut runs[i], i, row, sample)?;
        }
    }
}

/// Samples prompt `i`'s next token from `logits` (masked by the constraint
/// if there is one) and records it: the row in the run's digest, the id,
/// and the audit chain's new value; reports it and marks the run done at an
/// end-of-generation token, at `max_tokens`, or when the mask is empty.
fn sample_next<F: FnMut(&Session<'_>, usize, u32, &[F32])>(
    session: &mut Session<'_>,
    run: &mut PromptRun,
    i: usize,
    logits: &[F32],
    sample: &mut Sample<'_, '_, F>,
) -> CliResult<()> {
    let masked;
    let logits = match sample.constraint.as_deref_mut() {
        None => logits,
        Some(c) => {
            let mut words = vec![0u32; TokenMask::words_for(logits.len())];
            let mut mask = TokenMask::new(&mut words, logits.len())?;
            let who = Completion {
                request: RequestId(i as u64),
                index: 0,
            };
            c.fill(who, &run.ids, &mut mask);
            if mask.is_empty() {
                run.done = true;
                run.dead_end = true;
                return Ok(());
            }
            let mut out = vec![F32::ZERO; logits.len()];
            mask.apply(logits, &mut out)?;
            masked = out;
            &masked
        }
    };
    let params = sample.params;
    hash_logits(&mut run.digest, logits);
    let mut recent = run.prompt_ids.clone();
    recent.extend_from_slice(&run.ids);
    let id = session
        .sampler
        .sample(logits, params, &recent, &mut run.rng)?;
    run.ids.push(id);
    run.step_digests.push(run.chain.step(logits, id));
    if let Some(c) = sample.constraint.as_deref_mut() {
        let who = Completion {
            request: RequestId(i as u64),
            index: 0,
        };
        c.commit(who, id);
    }
    (sample.on_token)(session, i, id, logits);
    run.done = session.tokenizer.is_eog(id) || run.ids.len() >= sample.max_tokens;
    Ok(())
}
