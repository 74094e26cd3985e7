//! Whole-model determinism cases for [`crate::selftest`]: a synthetic model
//! run under several schedules, and a seeded sampled generation. No
//! allocation: everything lives in the caller's scratch memory.
//!
//! Every architecture and every weight format of the Q4_K_M/Q5_K_M mixes
//! has its own case, each the digest of [`spec_schedule_digests`] (three
//! schedules, two KV layouts) on one synthetic model:
//!
//! * `model.gemma3`, `model.qwen3`, `model.llama3_rope_freqs`: the specs
//!   [`SynthSpec::GEMMA3`], [`SynthSpec::QWEN3`], [`SynthSpec::LLAMA3`] —
//!   the very files `tests/llamacpp/arch.rs` compares with llama.cpp, so the
//!   logits checked against llama.cpp on the host are bit-identical on
//!   every target;
//! * `model.q5_0`, `model.q4_k`, `model.q5_k`, `model.q6_k`: a one-layer
//!   llama of width 256 (one K-quant super-block per row) with every matrix,
//!   the tied embedding/head included, in that format ([`format_spec`]).
//!
//! `tests/engine/selftest.rs` checks on the host that the schedules of each
//! agree; `scripts/cross-test.sh` that each digest is the same everywhere.

#![forbid(unsafe_code)]

use crate::audit::hash_logits;
use crate::gguf::File;
use crate::kv::{ContiguousCache, KvType, PagedCache, SeqId};
use crate::model::synth::{SynthSpec, synth_sizes, write_synth};
use crate::model::{Arch, Engine, Entry, KvBuild, Limits, Model, generate};
use crate::sample::{Sampler, SamplingParams, SplitMix64};
use crate::{Arena, Error, F32, Result, Serial};
use sha2::{Digest as _, Sha256};

/// Scratch bytes the model cases need.
pub const MODEL_SCRATCH_BYTES: usize = 1 << 20;

const N_SEQS: usize = 3;
const PROMPT_LENS: [usize; N_SEQS] = [5, 3, 7];
const DECODE_STEPS: usize = 3;
const MAX_PROMPT: usize = 7;

/// Builds the synthetic model at the start of `scratch`; returns (model bytes, rest).
fn model_bytes<'s>(spec: &SynthSpec, scratch: &'s mut [u8]) -> Result<(&'s [u8], &'s mut [u8])> {
    let (s, o) = synth_sizes(spec)?;
    if s + o > scratch.len() {
        return Err(Error::BufferTooSmall {
            needed: s + o,
            available: scratch.len(),
        });
    }
    let (tmp, rest) = scratch.split_at_mut(s);
    let (out, rest) = rest.split_at_mut(o);
    let n = write_synth(spec, tmp, out)?;
    Ok((&out[..n], rest))
}

fn prompts(vocab: usize) -> [[u32; MAX_PROMPT]; N_SEQS] {
    let mut rng = SplitMix64::new(0x7365_6c66_7465_7374);
    let mut p = [[0u32; MAX_PROMPT]; N_SEQS];
    for row in p.iter_mut() {
        for t in row.iter_mut() {
            *t = (rng.next_u64() % vocab as u64) as u32;
        }
    }
    p
}

fn limits(page_size: usize) -> Limits {
    Limits {
        max_seqs: N_SEQS,
        max_seq_len: 16,
        max_step_tokens: 16,
        max_logit_rows: 16,
        kv_type: KvType::F16,
        page_size,
        n_pages: N_SEQS * 16,
    }
}

/// The greedy token of one logits row (`ShapeMismatch` only for an empty row).
fn greedy(row: &[F32]) -> Result<u32> {
    crate::sample::argmax(row).ok_or(Error::ShapeMismatch {
        expected: 1,
        found: 0,
    })
}

/// How a schedule feeds the prompts.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Schedule {
    /// Each sequence alone: its whole prompt, then its decode steps.
    Sequential,
    /// All prompts in one step, then all sequences decode together.
    Batched,
    /// Prompts token by token, interleaved, then decode together.
    Chunked,
}

/// Runs one schedule; returns the per-sequence digests of every logits row
/// (prompt positions in order, then decode steps).
fn run<'a, K: KvBuild<'a>>(
    bytes: &'a [u8],
    arena_buf: &'a mut [u8],
    page_size: usize,
    sched: Schedule,
) -> Result<[[u8; 32]; N_SEQS]> {
    let file = File::parse(bytes)?;
    let mut arena = Arena::new(arena_buf);
    let model = Model::from_gguf(&file, bytes, &mut arena)?;
    let vocab = model.cfg.vocab_size;
    let mut eng = Engine::<K>::new(model, limits(page_size), &mut arena)?;
    let p = prompts(vocab);
    let mut h: [Sha256; N_SEQS] = [Sha256::new(), Sha256::new(), Sha256::new()];
    let seqs: [SeqId; N_SEQS] = [eng.new_seq()?, eng.new_seq()?, eng.new_seq()?];
    let mut last = [0u32; N_SEQS];
    // Prefill.
    match sched {
        Schedule::Sequential | Schedule::Batched => {
            let entries: [Entry<'_>; N_SEQS] = core::array::from_fn(|i| Entry {
                seq: seqs[i],
                tokens: &p[i][..PROMPT_LENS[i]],
                all_logits: true,
            });
            let groups: &[&[usize]] = if sched == Schedule::Batched {
                &[&[0, 1, 2]]
            } else {
                &[&[0], &[1], &[2]]
            };
            for g in groups {
                let mut batch = [entries[0]; N_SEQS];
                for (k, &i) in g.iter().enumerate() {
                    batch[k] = entries[i];
                }
                let logits = eng.step(&Serial, &batch[..g.len()])?;
                let mut row = 0;
                for &i in g.iter() {
                    for j in 0..PROMPT_LENS[i] {
                        let r = &logits[row * vocab..(row + 1) * vocab];
                        hash_logits(&mut h[i], r);
                        if j + 1 == PROMPT_LENS[i] {
                            last[i] = greedy(r)?;
                        }
                        row += 1;
                    }
                }
            }
        }
        Schedule::Chunked => {
            for j in 0..MAX_PROMPT {
                for i in 0..N_SEQS {
                    if j < PROMPT_LENS[i] {
                        let e = Entry {
                            seq: seqs[i],
                            tokens: &p[i][j..j + 1],
                            all_logits: true,
                        };
                        let r = eng.step(&Serial, &[e])?;
                        hash_logits(&mut h[i], r);
                        if j + 1 == PROMPT_LENS[i] {
                            last[i] = greedy(r)?;
                        }
                    }
                }
            }
        }
    }
    // Decode, greedy.
    for _ in 0..DECODE_STEPS {
        let toks = last;
        let batch: [Entry<'_>; N_SEQS] = core::array::from_fn(|i| Entry {
            seq: seqs[i],
            tokens: &toks[i..i + 1],
            all_logits: false,
        });
        if sched == Schedule::Sequential {
            for i in 0..N_SEQS {
                let r = eng.step(&Serial, &batch[i..i + 1])?;
                hash_logits(&mut h[i], r);
                last[i] = greedy(r)?;
            }
        } else {
            let logits = eng.step(&Serial, &batch)?;
            for (i, l) in last.iter_mut().enumerate() {
                let r = &logits[i * vocab..(i + 1) * vocab];
                hash_logits(&mut h[i], r);
                *l = greedy(r)?;
            }
        }
    }
    let mut out = [[0u8; 32]; N_SEQS];
    for (o, hi) in out.iter_mut().zip(h) {
        *o = hi.finalize().into();
    }
    Ok(out)
}

/// Per-sequence digests of `[schedule]` for one synthetic model: run
/// sequentially on a contiguous cache, batched on pages of 2 tokens and
/// chunked token by token on pages of 3. All three must agree.
pub fn spec_schedule_digests(
    spec: &SynthSpec,
    scratch: &mut [u8],
) -> Result<[[[u8; 32]; N_SEQS]; 3]> {
    let (bytes, rest) = model_bytes(spec, scratch)?;
    Ok([
        run::<ContiguousCache>(bytes, rest, 16, Schedule::Sequential)?,
        run::<PagedCache>(bytes, rest, 2, Schedule::Batched)?,
        run::<PagedCache>(bytes, rest, 3, Schedule::Chunked)?,
    ])
}

/// SHA-256 over every digest of [`spec_schedule_digests`].
fn spec_case(spec: &SynthSpec, scratch: &mut [u8]) -> Result<[u8; 32]> {
    let all = spec_schedule_digests(spec, scratch)?;
    let mut h = Sha256::new();
    for d in all.iter().flatten() {
        h.update(d);
    }
    Ok(h.finalize().into())
}

/// The model of the format cases: a llama of width and feed-forward width
/// 256 (rows of one K-quant super-block), one layer, 4 query / 2 KV heads
/// of 64, vocabulary 96, every matrix and the tied embedding in `ty`.
pub const fn format_spec(ty: crate::quant::GgmlType) -> SynthSpec {
    SynthSpec {
        dim: 256,
        hidden_dim: 256,
        n_layers: 1,
        n_rot: 64,
        weight_type: ty,
        embd_type: ty,
        seed: 10 + ty as u64,
        ..SynthSpec::TINY
    }
}

/// Weight formats with a `model.<format>` case, in case order.
pub const MODEL_FORMATS: [crate::quant::GgmlType; 4] = [
    crate::quant::GgmlType::Q5_0,
    crate::quant::GgmlType::Q4_K,
    crate::quant::GgmlType::Q5_K,
    crate::quant::GgmlType::Q6_K,
];

/// Architecture specs with a `model.<arch>` case, in case order.
pub const MODEL_ARCHS: [SynthSpec; 3] = [SynthSpec::GEMMA3, SynthSpec::QWEN3, SynthSpec::LLAMA3];

/// `model.gemma3`: [`SynthSpec::GEMMA3`] under the three schedules.
pub fn gemma3(scratch: &mut [u8]) -> Result<[u8; 32]> {
    spec_case(&SynthSpec::GEMMA3, scratch)
}

/// `model.qwen3`: [`SynthSpec::QWEN3`] under the three schedules.
pub fn qwen3(scratch: &mut [u8]) -> Result<[u8; 32]> {
    spec_case(&SynthSpec::QWEN3, scratch)
}

/// `model.llama3_rope_freqs`: [`SynthSpec::LLAMA3`] under the three schedules.
pub fn llama3(scratch: &mut [u8]) -> Result<[u8; 32]> {
    spec_case(&SynthSpec::LLAMA3, scratch)
}

/// `model.q5_0`: [`format_spec`]`(Q5_0)` under the three schedules.
pub fn q5_0(scratch: &mut [u8]) -> Result<[u8; 32]> {
    spec_case(&format_spec(crate::quant::GgmlType::Q5_0), scratch)
}

/// `model.q4_k`: [`format_spec`]`(Q4_K)` under the three schedules.
pub fn q4_k(scratch: &mut [u8]) -> Result<[u8; 32]> {
    spec_case(&format_spec(crate::quant::GgmlType::Q4_K), scratch)
}

/// `model.q5_k`: [`format_spec`]`(Q5_K)` under the three schedules.
pub fn q5_k(scratch: &mut [u8]) -> Result<[u8; 32]> {
    spec_case(&format_spec(crate::quant::GgmlType::Q5_K), scratch)
}

/// `model.q6_k`: [`format_spec`]`(Q6_K)` under the three schedules.
pub fn q6_k(scratch: &mut [u8]) -> Result<[u8; 32]> {
    spec_case(&format_spec(crate::quant::GgmlType::Q6_K), scratch)
}

/// Per-sequence digests of `[model][schedule]`: a tiny llama and a tiny
/// qwen2 (F16 weights, Q4_0 embedding, separate head), each run sequentially
/// on a contiguous cache, batched on pages of 2 tokens and chunked token by
/// token on pages of 3. All three schedules of a model must agree.
pub fn schedule_digests(scratch: &mut [u8]) -> Result<[[[[u8; 32]; N_SEQS]; 3]; 2]> {
    let qwen = SynthSpec {
        arch: Arch::Qwen2,
        weight_type: crate::quant::GgmlType::F16,
        embd_type: crate::quant::GgmlType::Q4_0,
        separate_output: true,
        seed: 2,
        ..SynthSpec::TINY
    };
    let mut out = [[[[0u8; 32]; N_SEQS]; 3]; 2];
    for (m, spec) in [SynthSpec::TINY, qwen].iter().enumerate() {
        let (bytes, rest) = model_bytes(spec, scratch)?;
        out[m][0] = run::<ContiguousCache>(bytes, rest, 16, Schedule::Sequential)?;
        out[m][1] = run::<PagedCache>(bytes, rest, 2, Schedule::Batched)?;
        out[m][2] = run::<PagedCache>(bytes, rest, 3, Schedule::Chunked)?;
    }
    Ok(out)
}

/// SHA-256 over every digest of [`schedule_digests`], so a schedule that
/// differs on some target changes it.
pub fn schedules(scratch: &mut [u8]) -> Result<[u8; 32]> {
    let all = schedule_digests(scratch)?;
    let mut h = Sha256::new();
    for d in all.iter().flatten().flatten() {
        h.update(d);
    }
    Ok(h.finalize().into())
}

/// Sampling parameters of [`sampled`]: temperature 0.8, top-k 20, top-p
/// 0.9, min-p 0.02, repetition penalty 1.1 over 64 tokens, seed 7.
pub const SAMPLED_PARAMS: SamplingParams = SamplingParams {
    temperature: F32::from_bits(0x3F4C_CCCD), // 0.8
    top_k: 20,
    top_p: F32::from_bits(0x3F66_6666),          // 0.9
    min_p: F32::from_bits(0x3CA3_D70A),          // 0.02
    repeat_penalty: F32::from_bits(0x3F8C_CCCD), // 1.1
    penalty_last_n: 64,
    seed: 7,
};

/// Tokens [`sampled`] generates.
pub const SAMPLED_TOKENS: usize = 12;

/// A seeded sampled generation on the tiny llama ([`SAMPLED_PARAMS`],
/// [`SAMPLED_TOKENS`] tokens): the audit chain's final digest.
pub fn sampled(scratch: &mut [u8]) -> Result<[u8; 32]> {
    sampled_steps(scratch, &mut |_, _, _| {})
}

/// [`sampled`], calling `on_step(step, token, digest)` after each step, and
/// the prompt it used ([`sampled_prompt`]). `tests/llamacpp/transcript_synth.rs`
/// records these steps as the committed transcript
/// `tests/data/synth-transcript.json`; every target recomputes its final
/// digest as the `model.sampled` case.
pub fn sampled_steps(
    scratch: &mut [u8],
    on_step: &mut dyn FnMut(usize, u32, &[u8; 32]),
) -> Result<[u8; 32]> {
    let (bytes, rest) = model_bytes(&SynthSpec::TINY, scratch)?;
    let file = File::parse(bytes)?;
    let mut arena = Arena::new(rest);
    let model = Model::from_gguf(&file, bytes, &mut arena)?;
    let vocab = model.cfg.vocab_size;
    let mut eng = Engine::<PagedCache>::new(model, limits(4), &mut arena)?;
    let mut sampler = Sampler::new(&mut arena, vocab)?;
    let params = SAMPLED_PARAMS;
    let p = prompts(vocab);
    let seq = eng.new_seq()?;
    let mut history = [0u32; 32];
    let g = generate(
        &mut eng,
        &Serial,
        &mut sampler,
        seq,
        &p[0][..PROMPT_LENS[0]],
        &params,
        SAMPLED_TOKENS,
        &mut history,
        &|_| false,
        on_step,
    )?;
    Ok(g.chain.digest())
}

/// The prompt [`sampled`] feeds: the first [`SAMPLED_PROMPT_LEN`] ids of
/// the suite's seeded prompts for the tiny llama's vocabulary.
pub fn sampled_prompt() -> [u32; SAMPLED_PROMPT_LEN] {
    let mut out = [0u32; SAMPLED_PROMPT_LEN];
    out.copy_from_slice(&prompts(SynthSpec::TINY.vocab_size)[0][..SAMPLED_PROMPT_LEN]);
    out
}

/// Length of [`sampled_prompt`].
pub const SAMPLED_PROMPT_LEN: usize = PROMPT_LENS[0];
