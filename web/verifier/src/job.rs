//! The job the page hands the verifier: a transcript's fields as numbers
//! and bytes (the page parses the JSON; `web/verifier.js` writes this
//! layout). All integers little-endian.
//!
//! | offset | bytes | field |
//! |---|---|---|
//! | 0 | 4 | magic `DVJ1` |
//! | 4 | 4 | `n_prompt`: prompt ids |
//! | 8 | 4 | `n_steps`: recorded steps |
//! | 12 | 4 | `max_tokens` |
//! | 16 | 8 | `sampling.seed` |
//! | 24 | 4 × 5 | bits of temperature, top_k, bits of top_p, min_p, repeat_penalty |
//! | 44 | 4 | `penalty_last_n` |
//! | 48 | 32 | `model.sha256` |
//! | 80 | 32 | `final_digest` |
//! | 112 | 4 × n_prompt | `prompt_ids` |
//! | … | 36 × n_steps | each step: `id` (4), `digest` (32) |
//!
//! [`Job::decode`] checks the length exactly and the sampling parameters
//! with the library's own `validate`, so every field the verifier uses is
//! known good before anything runs.

#![forbid(unsafe_code)]

use detllm::F32;
use detllm::sample::SamplingParams;
use std::fmt;

/// The job's magic, first four bytes.
pub const MAGIC: &[u8; 4] = b"DVJ1";
/// Bytes before the prompt ids.
pub const HEADER_BYTES: usize = 112;
/// Bytes per recorded step.
pub const STEP_BYTES: usize = 36;

/// What is wrong with a job's bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum JobError {
    /// The first four bytes are not [`MAGIC`].
    BadMagic,
    /// The length is not what the header's counts imply.
    Length {
        /// Bytes the counts imply (saturated on overflow).
        expected: usize,
        /// Bytes given.
        got: usize,
    },
    /// No steps, or more than `max_tokens`.
    StepCount {
        /// Recorded steps.
        steps: usize,
        /// The transcript's `max_tokens`.
        max_tokens: usize,
    },
    /// The prompt has no ids.
    EmptyPrompt,
    /// The sampling parameters are rejected by the library.
    Sampling(detllm::Error),
}

impl fmt::Display for JobError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            JobError::BadMagic => f.write_str("job: not a verifier job (magic)"),
            JobError::Length { expected, got } => {
                write!(f, "job: {got} bytes, the header implies {expected}")
            }
            JobError::StepCount { steps, max_tokens } => {
                write!(f, "job: {steps} steps do not fit max_tokens {max_tokens}")
            }
            JobError::EmptyPrompt => f.write_str("job: the prompt has no ids"),
            JobError::Sampling(e) => write!(f, "job: sampling parameters: {e}"),
        }
    }
}

impl std::error::Error for JobError {}

/// One recorded step: the token and the audit chain's digest after it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Step {
    /// The token the transcript says was sampled.
    pub id: u32,
    /// `d_i` (see `detllm::audit`).
    pub digest: [u8; 32],
}

/// A transcript as the verifier needs it.
#[derive(Clone, Debug, PartialEq)]
pub struct Job {
    /// SHA-256 of the model file the transcript was written with.
    pub model_sha256: [u8; 32],
    /// Sampling parameters, the sequence's seed included.
    pub params: SamplingParams,
    /// The step bound of the original run.
    pub max_tokens: usize,
    /// The prompt's token ids.
    pub prompt_ids: Vec<u32>,
    /// The recorded steps, in order.
    pub steps: Vec<Step>,
    /// The transcript's `final_digest`.
    pub final_digest: [u8; 32],
}

/// Little-endian reads at fixed offsets of a slice already length-checked.
struct Reader<'b>(&'b [u8]);

impl Reader<'_> {
    fn u32(&self, at: usize) -> u32 {
        let mut w = [0u8; 4];
        w.copy_from_slice(&self.0[at..at + 4]);
        u32::from_le_bytes(w)
    }

    fn u64(&self, at: usize) -> u64 {
        let mut w = [0u8; 8];
        w.copy_from_slice(&self.0[at..at + 8]);
        u64::from_le_bytes(w)
    }

    fn digest(&self, at: usize) -> [u8; 32] {
        let mut d = [0u8; 32];
        d.copy_from_slice(&self.0[at..at + 32]);
        d
    }
}

impl Job {
    /// Reads a job from `bytes` (layout in the module docs).
    pub fn decode(bytes: &[u8]) -> Result<Job, JobError> {
        if bytes.len() < HEADER_BYTES || &bytes[..4] != MAGIC {
            return Err(JobError::BadMagic);
        }
        let r = Reader(bytes);
        let n_prompt = r.u32(4) as usize;
        let n_steps = r.u32(8) as usize;
        let expected = n_prompt
            .checked_mul(4)
            .and_then(|p| n_steps.checked_mul(STEP_BYTES)?.checked_add(p))
            .and_then(|b| b.checked_add(HEADER_BYTES))
            .unwrap_or(usize::MAX);
        if bytes.len() != expected {
            return Err(JobError::Length {
                expected,
                got: bytes.len(),
            });
        }
        let max_tokens = r.u32(12) as usize;
        if n_steps == 0 || n_steps > max_tokens {
            return Err(JobError::StepCount {
                steps: n_steps,
                max_tokens,
            });
        }
        if n_prompt == 0 {
            return Err(JobError::EmptyPrompt);
        }
        let params = SamplingParams {
            seed: r.u64(16),
            temperature: F32::from_bits(r.u32(24)),
            top_k: r.u32(28),
            top_p: F32::from_bits(r.u32(32)),
            min_p: F32::from_bits(r.u32(36)),
            repeat_penalty: F32::from_bits(r.u32(40)),
            penalty_last_n: r.u32(44) as usize,
        };
        params.validate().map_err(JobError::Sampling)?;
        let prompt_ids = (0..n_prompt).map(|i| r.u32(HEADER_BYTES + 4 * i)).collect();
        let steps_at = HEADER_BYTES + 4 * n_prompt;
        let steps = (0..n_steps)
            .map(|i| {
                let at = steps_at + STEP_BYTES * i;
                Step {
                    id: r.u32(at),
                    digest: r.digest(at + 4),
                }
            })
            .collect();
        Ok(Job {
            model_sha256: r.digest(48),
            params,
            max_tokens,
            prompt_ids,
            steps,
            final_digest: r.digest(80),
        })
    }

    /// The job's bytes (what the page writes); `decode(encode(j)) == j`.
    /// Fails if a count or `penalty_last_n` does not fit a u32.
    pub fn encode(&self) -> Option<Vec<u8>> {
        let n_prompt = u32::try_from(self.prompt_ids.len()).ok()?;
        let n_steps = u32::try_from(self.steps.len()).ok()?;
        let mut out = Vec::with_capacity(
            HEADER_BYTES + 4 * self.prompt_ids.len() + STEP_BYTES * self.steps.len(),
        );
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&n_prompt.to_le_bytes());
        out.extend_from_slice(&n_steps.to_le_bytes());
        out.extend_from_slice(&u32::try_from(self.max_tokens).ok()?.to_le_bytes());
        out.extend_from_slice(&self.params.seed.to_le_bytes());
        let p = &self.params;
        for w in [
            p.temperature.to_bits(),
            p.top_k,
            p.top_p.to_bits(),
            p.min_p.to_bits(),
            p.repeat_penalty.to_bits(),
            u32::try_from(p.penalty_last_n).ok()?,
        ] {
            out.extend_from_slice(&w.to_le_bytes());
        }
        out.extend_from_slice(&self.model_sha256);
        out.extend_from_slice(&self.final_digest);
        for id in &self.prompt_ids {
            out.extend_from_slice(&id.to_le_bytes());
        }
        for s in &self.steps {
            out.extend_from_slice(&s.id.to_le_bytes());
            out.extend_from_slice(&s.digest);
        }
        Some(out)
    }
}
