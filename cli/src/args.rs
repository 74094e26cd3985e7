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

/// How each next token is chosen. Flags not given take the command's
/// defaults: greedy for `generate`, llama.cpp's default sampler
/// ([`SamplingParams::LLAMA_DEFAULTS`]) for `chat` and `generate --chat`.
#[derive(Args, Clone)]
pub struct SamplingArgs {
    /// 0 = greedy [default: 0.8 for chat and generate --chat, else 0]
    #[arg(long)]
    pub temperature: Option<f32>,
    /// 0 = off [default: 40 for chat and generate --chat, else 0]
    #[arg(long)]
    pub top_k: Option<u32>,
    /// 1 = off [default: 0.95 for chat and generate --chat, else 1]
    #[arg(long)]
    pub top_p: Option<f32>,
    /// 0 = off [default: 0.05 for chat and generate --chat, else 0]
    #[arg(long)]
    pub min_p: Option<f32>,
    /// 1 = off [default: 1]
    #[arg(long)]
    pub repeat_penalty: Option<f32>,
    /// Seed of each sequence's SplitMix64 generator. When sampling without
    /// one, a random seed is chosen and printed on stderr
    /// ("seed N (--seed N reproduces)"); greedy runs use 0.
    #[arg(long)]
    pub seed: Option<u64>,
}

/// The sampling parameters of a run and whether the seed was chosen here
/// (the caller then reports it).
pub struct Sampling {
    pub params: SamplingParams,
    pub seed_chosen: bool,
}

impl SamplingArgs {
    /// The library's parameters: each flag given, else the field of
    /// `defaults`; each float's bits as given (only parsing uses hardware
    /// floats), validated by the library. Without `--seed`, a sampled run
    /// gets a random seed.
    pub fn params(&self, defaults: &SamplingParams) -> Result<Sampling, detllm::Error> {
        let soft = |x: Option<f32>, d: F32| x.map_or(d, |x| F32::from_bits(x.to_bits()));
        let mut params = SamplingParams {
            temperature: soft(self.temperature, defaults.temperature),
            top_k: self.top_k.unwrap_or(defaults.top_k),
            top_p: soft(self.top_p, defaults.top_p),
            min_p: soft(self.min_p, defaults.min_p),
            repeat_penalty: soft(self.repeat_penalty, defaults.repeat_penalty),
            penalty_last_n: defaults.penalty_last_n,
            seed: self.seed.unwrap_or(defaults.seed),
        };
        params.validate()?;
        let seed_chosen = self.seed.is_none() && !params.temperature.is_zero();
        if seed_chosen {
            params.seed = random_seed();
        }
        Ok(Sampling {
            params,
            seed_chosen,
        })
    }
}

impl Sampling {
    /// Tells stderr the seed when it was chosen here, so the run can be
    /// repeated with `--seed`.
    pub fn report_seed(&self) {
        if self.seed_chosen {
            eprintln!("seed {0} (--seed {0} reproduces)", self.params.seed);
        }
    }
}

/// A seed from the standard library's per-process random hasher keys and
/// the clock, below 2^63 (as the server's, so JSON readers keep it exact
/// as a signed integer too).
fn random_seed() -> u64 {
    use std::hash::{BuildHasher, RandomState};
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    RandomState::new().hash_one((std::process::id(), now)) >> 1
}
