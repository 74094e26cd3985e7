//! Re-executes a [`Job`] as `detllm verify` does: the model's SHA-256
//! first, then one sequence prefilled with the prompt and decoded step by
//! step, each step sampled from the re-computed logits with the
//! transcript's parameters and seed and folded into the audit chain; the
//! first step whose token or digest differs from the record ends the run.
//!
//! The engine is the library's, over one arena sized up front
//! ([`arena_bytes`]): an f16 paged KV cache with room for the prompt and
//! every step, as the CLI's session has. By the determinism contract the
//! prefill chunk size, the cache layout and the target change no bit, so a
//! verdict here equals the CLI's (`tests/verify.rs` runs both on the same
//! transcripts).

#![forbid(unsafe_code)]

use crate::job::Job;
use detllm::audit::DigestChain;
use detllm::gguf::File;
use detllm::kv::{KvType, PagedCache, SeqId};
use detllm::model::{Config, Engine, Entry, Limits, Model};
use detllm::sample::{Sampler, SplitMix64};
use detllm::tokenizer::Tokenizer;
use detllm::{Arena, F32, Serial};
use sha2::{Digest, Sha256};
use std::fmt;

/// Prompt tokens per prefill step.
const PREFILL_CHUNK: usize = 64;
/// KV cache page size (positions per page).
const PAGE_SIZE: usize = 16;

/// Why verification could not run (a verdict is not an error).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VerifyError {
    /// The model bytes or the engine rejected something.
    Engine(detllm::Error),
    /// The memory for the arena could not be had.
    OutOfMemory {
        /// Bytes asked for.
        bytes: usize,
    },
    /// A prompt or recorded id is not in the model's vocabulary.
    TokenOutsideVocab {
        /// The id.
        id: u32,
        /// The model's vocabulary size.
        vocab_size: usize,
    },
}

impl fmt::Display for VerifyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            VerifyError::Engine(e) => write!(f, "engine: {e}"),
            VerifyError::OutOfMemory { bytes } => write!(
                f,
                "out of memory: the arena needs {bytes} bytes ({} MiB) and the browser would not give them",
                bytes >> 20
            ),
            VerifyError::TokenOutsideVocab { id, vocab_size } => {
                write!(f, "token id {id} is outside the vocabulary ({vocab_size})")
            }
        }
    }
}

impl std::error::Error for VerifyError {}

impl From<detllm::Error> for VerifyError {
    fn from(e: detllm::Error) -> Self {
        VerifyError::Engine(e)
    }
}

impl From<detllm::gguf::GgufError> for VerifyError {
    fn from(e: detllm::gguf::GgufError) -> Self {
        VerifyError::Engine(e.into())
    }
}

/// Where a re-run differs from the record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Divergence {
    /// The step (0-based) that differs.
    pub step: usize,
    /// The token the transcript records there.
    pub recorded: u32,
    /// The token the re-run sampled there.
    pub recomputed: u32,
    /// The digest the transcript records there.
    pub recorded_digest: [u8; 32],
    /// The digest the re-run computed there.
    pub recomputed_digest: [u8; 32],
}

/// The outcome of a verification.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Every step's token and digest, and the final digest, match.
    Verified {
        /// Steps re-executed.
        steps: usize,
        /// The final digest.
        digest: [u8; 32],
    },
    /// The model file is not the one the transcript was written with;
    /// nothing ran.
    WrongModel {
        /// SHA-256 of the file given.
        sha256: [u8; 32],
    },
    /// The first step whose token or digest differs.
    Diverged(Divergence),
    /// Step `step` sampled an end-of-generation token, so the original run
    /// stopped there, yet the transcript records more steps.
    EndedEarly {
        /// The step whose token ends generation.
        step: usize,
        /// That token.
        id: u32,
    },
    /// Every step matches but `final_digest` is not the last step's digest.
    FinalDigest {
        /// The last step's digest.
        last: [u8; 32],
    },
}

/// What the verifier reports as it runs.
pub trait Observer {
    /// The text of token `id` (special tokens in their written form; empty
    /// when the model has no vocabulary): each prompt id and each recorded
    /// id before the run, and the recomputed id of a divergent step.
    fn token_text(&mut self, id: u32, text: &[u8]);
    /// The model's hash checked (`ok`) or not.
    fn hashed(&mut self, ok: bool);
    /// The prompt's `n` tokens prefilled.
    fn prefilled(&mut self, n: usize);
    /// Step `step` re-executed (its recomputed token).
    fn step(&mut self, step: usize, id: u32);
}

/// SHA-256 of `bytes`.
pub fn sha256(bytes: &[u8]) -> [u8; 32] {
    Sha256::digest(bytes).into()
}

/// The engine limits for `job`: one sequence with room for the prompt and
/// every recorded step.
pub fn limits(job: &Job) -> Limits {
    let max_seq_len = job.prompt_ids.len() + job.steps.len() + 1;
    Limits {
        max_seqs: 1,
        max_seq_len,
        max_step_tokens: PREFILL_CHUNK,
        max_logit_rows: 1,
        kv_type: KvType::F16,
        page_size: PAGE_SIZE,
        n_pages: max_seq_len.div_ceil(PAGE_SIZE),
    }
}

/// Whether `file` carries a vocabulary (the synthetic test model has none).
fn has_vocab(file: &File<'_>) -> bool {
    file.get("tokenizer.ggml.tokens").is_some()
}

/// Arena bytes a verification of `job` over `model` needs.
pub fn arena_bytes(model: &[u8], job: &Job) -> Result<usize, VerifyError> {
    let file = File::parse(model)?;
    let cfg = Config::from_gguf(&file)?;
    let model_bytes = Model::bytes_required(&cfg).ok_or(detllm::Error::SizeOverflow)?;
    let mut scratch = zeroed(model_bytes)?;
    let mut arena = Arena::new(&mut scratch);
    let weights = Model::from_gguf(&file, model, &mut arena)?;
    let engine = Engine::<PagedCache>::bytes_required(&weights, &limits(job))?;
    let tokenizer = if has_vocab(&file) {
        Tokenizer::bytes_required_gguf(&file)?
    } else {
        0
    };
    let sampler = Sampler::bytes_required(cfg.vocab_size).ok_or(detllm::Error::SizeOverflow)?;
    [model_bytes, engine, tokenizer, sampler]
        .iter()
        .try_fold(0usize, |sum, &n| sum.checked_add(n))
        .ok_or(VerifyError::Engine(detllm::Error::SizeOverflow))
}

/// `n` zero bytes, or [`VerifyError::OutOfMemory`].
fn zeroed(n: usize) -> Result<Vec<u8>, VerifyError> {
    let mut buf = Vec::new();
    buf.try_reserve_exact(n)
        .map_err(|_| VerifyError::OutOfMemory { bytes: n })?;
    buf.resize(n, 0);
    Ok(buf)
}

/// Everything a run needs, bound to one arena.
struct Run<'a> {
    engine: Engine<'a, PagedCache<'a>>,
    sampler: Sampler<'a>,
    tokenizer: Option<Tokenizer<'a>>,
}

impl<'a> Run<'a> {
    fn load(
        file: &File<'a>,
        model: &'a [u8],
        job: &Job,
        arena: &mut Arena<'a>,
    ) -> Result<Self, VerifyError> {
        let weights = Model::from_gguf(file, model, arena)?;
        let vocab_size = weights.cfg.vocab_size;
        let engine = Engine::new(weights, limits(job), arena)?;
        let tokenizer = if has_vocab(file) {
            Some(Tokenizer::from_gguf(file, arena)?)
        } else {
            None
        };
        let sampler = Sampler::new(arena, vocab_size)?;
        Ok(Run {
            engine,
            sampler,
            tokenizer,
        })
    }

    fn text(&self, id: u32) -> &'a [u8] {
        self.tokenizer
            .as_ref()
            .and_then(|t| t.piece(id, true))
            .unwrap_or_default()
    }

    fn is_eog(&self, id: u32) -> bool {
        self.tokenizer.as_ref().is_some_and(|t| t.is_eog(id))
    }
}

/// Verifies `job` against `model`: the verdict, or why it could not run.
pub fn verify(model: &[u8], job: &Job, obs: &mut impl Observer) -> Result<Verdict, VerifyError> {
    verify_hashed(model, sha256(model), job, obs)
}

/// [`verify`] with the model's SHA-256 computed by the caller (the page
/// uses the browser's own SHA-256 where it has one: several times faster
/// than this module's).
pub fn verify_hashed(
    model: &[u8],
    sha: [u8; 32],
    job: &Job,
    obs: &mut impl Observer,
) -> Result<Verdict, VerifyError> {
    obs.hashed(sha == job.model_sha256);
    if sha != job.model_sha256 {
        return Ok(Verdict::WrongModel { sha256: sha });
    }
    let need = arena_bytes(model, job)?;
    let mut buf = zeroed(need)?;
    let mut arena = Arena::over_zeroed(&mut buf);
    let file = File::parse(model)?;
    let mut run = Run::load(&file, model, job, &mut arena)?;
    check_vocab(job, run.engine.config().vocab_size)?;
    for id in job.prompt_ids.iter().chain(job.steps.iter().map(|s| &s.id)) {
        obs.token_text(*id, run.text(*id));
    }
    let seq = run.engine.new_seq()?;
    let verdict = replay(&mut run, seq, job, obs);
    run.engine.free(seq)?;
    verdict
}

/// Fails if a prompt or recorded id is not in the vocabulary.
fn check_vocab(job: &Job, vocab_size: usize) -> Result<(), VerifyError> {
    let ids = job.prompt_ids.iter().chain(job.steps.iter().map(|s| &s.id));
    match ids.copied().find(|&id| id as usize >= vocab_size) {
        Some(id) => Err(VerifyError::TokenOutsideVocab { id, vocab_size }),
        None => Ok(()),
    }
}

/// Prefills the prompt in chunks; the logits of its last position.
fn prefill(run: &mut Run<'_>, seq: SeqId, prompt: &[u32]) -> Result<Vec<F32>, VerifyError> {
    let mut last = Vec::new();
    for chunk in prompt.chunks(PREFILL_CHUNK) {
        let entry = Entry {
            seq,
            tokens: chunk,
            all_logits: false,
        };
        last = run.engine.step(&Serial, &[entry])?.to_vec();
    }
    Ok(last)
}

/// Prefill, then each recorded step re-sampled and compared.
fn replay(
    run: &mut Run<'_>,
    seq: SeqId,
    job: &Job,
    obs: &mut impl Observer,
) -> Result<Verdict, VerifyError> {
    let mut logits = prefill(run, seq, &job.prompt_ids)?;
    obs.prefilled(job.prompt_ids.len());
    let mut chain = DigestChain::new(&job.params);
    let mut rng = SplitMix64::new(job.params.seed);
    let mut recent = job.prompt_ids.clone();
    for (i, rec) in job.steps.iter().enumerate() {
        let id = run
            .sampler
            .sample(&logits, &job.params, &recent, &mut rng)?;
        let digest = chain.step(&logits, id);
        obs.step(i, id);
        if id != rec.id || digest != rec.digest {
            obs.token_text(id, run.text(id));
            return Ok(Verdict::Diverged(Divergence {
                step: i,
                recorded: rec.id,
                recomputed: id,
                recorded_digest: rec.digest,
                recomputed_digest: digest,
            }));
        }
        if i + 1 == job.steps.len() {
            break;
        }
        if run.is_eog(id) {
            return Ok(Verdict::EndedEarly { step: i, id });
        }
        recent.push(id);
        let entry = Entry {
            seq,
            tokens: core::slice::from_ref(&rec.id),
            all_logits: false,
        };
        logits.copy_from_slice(run.engine.step(&Serial, &[entry])?);
    }
    let last = chain.digest();
    Ok(if last == job.final_digest {
        Verdict::Verified {
            steps: job.steps.len(),
            digest: last,
        }
    } else {
        Verdict::FinalDigest { last }
    })
}
