//! Argument groups shared by several commands.

#![forbid(unsafe_code)]

use clap::Args;
use detllm::F32;
use detllm::sample::SamplingParams;
use std::path::PathBuf;

/// Which model, and how many threads run it.
#[derive(Args, Clone)]
pub struct ModelArgs {
    /// GGUF model (default: SmolLM2-135M-Instruct Q4_1 in the per-user cache).
    #[arg(long)]
    pub model: Option<PathBuf>,
    /// Worker threads (results do not depend on it).
    #[arg(long, default_value_t = 1)]
    pub threads: usize,
}

/// How each next token is chosen.
#[derive(Args, Clone)]
pub struct SamplingArgs {
    /// 0 = greedy.
    #[arg(long, default_value = "0")]
    pub temperature: f32,
    /// 0 = off.
    #[arg(long, default_value_t = 0)]
    pub top_k: u32,
    /// 1 = off.
    #[arg(long, default_value = "1")]
    pub top_p: f32,
    /// 0 = off.
    #[arg(long, default_value = "0")]
    pub min_p: f32,
    /// 1 = off.
    #[arg(long, default_value = "1")]
    pub repeat_penalty: f32,
    /// Seed of each sequence's SplitMix64 generator.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
}

/// Tokens before the current one that the repetition penalty looks at.
const PENALTY_LAST_N: usize = 64;

impl SamplingArgs {
    /// The library's parameters: each float's bits as given (only parsing
    /// uses hardware floats), validated by the library.
    pub fn params(&self) -> Result<SamplingParams, detllm::Error> {
        let soft = |x: f32| F32::from_bits(x.to_bits());
        let params = SamplingParams {
            temperature: soft(self.temperature),
            top_k: self.top_k,
            top_p: soft(self.top_p),
            min_p: soft(self.min_p),
            repeat_penalty: soft(self.repeat_penalty),
            penalty_last_n: PENALTY_LAST_N,
            seed: self.seed,
        };
        params.validate()?;
        Ok(params)
    }
}
