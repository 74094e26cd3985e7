//! Audit transcripts (format: docs/TRANSCRIPT.md): the one module that
//! builds them ([`to_text`]) and reads them ([`parse`]).
//!
//! `generate --transcript` writes [`to_text`]'s bytes to a file, the
//! server's worker keeps the same bytes for `GET /v1/transcripts/{id}`,
//! and `verify` reads either with [`parse`]; [`TranscriptError`] says which
//! field is wrong. Because both writers call [`to_text`], a CLI transcript
//! and a server transcript of the same run are the same bytes (the format
//! has no per-run field): `cli/tests/serve.rs` checks it on SmolLM2, and the
//! unit tests below check a round trip through [`parse`].
//!
//! Dependencies flow one way: this module uses the library, serde_json and
//! the leaf `output::hex` only; `error::CliError` wraps [`TranscriptError`].

#![forbid(unsafe_code)]

use crate::output::hex;
use detllm::F32;
use detllm::gguf::File;
use detllm::model::Config;
use detllm::sample::SamplingParams;
use serde_json::{Value, json};
use std::fmt;
use std::path::Path;

/// Transcript format version.
const FORMAT: u32 = 1;

/// What is wrong with a transcript (printed after `transcript: `).
#[derive(Debug)]
pub enum TranscriptError {
    /// The file is not JSON.
    NotJson(serde_json::Error),
    /// `format` is missing or not [`FORMAT`].
    UnknownFormat,
    /// `profile` is not this crate's arithmetic profile.
    WrongProfile,
    /// A required field is missing or has the wrong JSON type.
    Missing(&'static str),
    /// `sampling.{name}.bits` is missing.
    MissingBits(&'static str),
    /// `sampling.{name}.bits` is not hexadecimal.
    BitsNotHex(&'static str),
    /// A field holds a value out of range or of the wrong shape (the text says which).
    Invalid(&'static str),
    /// Step `step` has no `id`, or it is not a u32.
    StepId { step: usize },
    /// Step `step` has no `digest` string.
    StepDigest { step: usize },
    /// The sampling parameters are rejected by the library.
    Sampling(detllm::Error),
    /// A prompt or step id is not in the model's vocabulary.
    TokenOutsideVocab { id: u32, vocab_size: usize },
}

impl fmt::Display for TranscriptError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TranscriptError::NotJson(e) => write!(f, "not JSON: {e}"),
            TranscriptError::UnknownFormat => f.write_str("unknown or missing format version"),
            TranscriptError::WrongProfile => write!(f, "profile is not {}", detllm::PROFILE),
            TranscriptError::Missing(field) => write!(f, "{field} missing"),
            TranscriptError::MissingBits(name) => write!(f, "sampling.{name}.bits missing"),
            TranscriptError::BitsNotHex(name) => write!(f, "sampling.{name}.bits is not hex"),
            TranscriptError::Invalid(what) => f.write_str(what),
            TranscriptError::StepId { step } => {
                write!(f, "steps[{step}].id missing or not a u32")
            }
            TranscriptError::StepDigest { step } => write!(f, "steps[{step}].digest missing"),
            TranscriptError::Sampling(e) => write!(f, "sampling parameters: {e}"),
            TranscriptError::TokenOutsideVocab { id, vocab_size } => {
                write!(f, "token id {id} is outside the vocabulary ({vocab_size})")
            }
        }
    }
}

impl std::error::Error for TranscriptError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            TranscriptError::NotJson(e) => Some(e),
            TranscriptError::Sampling(e) => Some(e),
            _ => None,
        }
    }
}

type Parse<T> = Result<T, TranscriptError>;

/// An `F32` as the transcript stores it: its bits and (for reading) its value.
fn f32_json(x: F32) -> Value {
    json!({ "bits": format!("{:#010x}", x.to_bits()), "value": f32::from_bits(x.to_bits()) })
}

/// What a transcript says about the model file.
#[derive(Clone, Debug)]
pub struct ModelInfo {
    /// The file's name (without its directory).
    pub file: Option<String>,
    /// SHA-256 of the file, lowercase hex.
    pub sha256: String,
    /// `general.architecture` (empty if the file has none).
    pub architecture: String,
    pub vocab_size: usize,
    pub dim: usize,
    pub n_layers: usize,
}

impl ModelInfo {
    /// The model at `path` with SHA-256 `sha256`, parsed as `gguf` into `cfg`.
    pub fn of(path: &Path, sha256: String, gguf: &File<'_>, cfg: &Config) -> ModelInfo {
        let architecture = gguf.get_str("general.architecture").ok().flatten();
        ModelInfo {
            file: path.file_name().map(|f| f.to_string_lossy().into_owned()),
            sha256,
            architecture: architecture.unwrap_or("").to_string(),
            vocab_size: cfg.vocab_size,
            dim: cfg.dim,
            n_layers: cfg.n_layers,
        }
    }
}

/// One generated sequence, as a transcript records it.
pub struct Run<'a> {
    /// The sampling parameters, the sequence's own seed included.
    pub params: &'a SamplingParams,
    /// The step bound the run was given (a re-run stops there too).
    pub max_tokens: usize,
    /// The prompt text (after any chat template); empty for token prompts.
    pub prompt: &'a str,
    pub prompt_ids: &'a [u32],
    /// Generated ids, the end-of-generation token included if one was sampled.
    pub ids: &'a [u32],
    /// The audit chain's digest after each step (`d_1 .. d_N`).
    pub digests: &'a [[u8; 32]],
    /// The token constraint the run was sampled under, if any.
    pub constraint: Option<ConstraintRecord<'a>>,
}

/// A token constraint as a transcript records it (`"constraint"`): its
/// kind (`json_schema`, `lark`), its text and the text's SHA-256 (hex).
pub struct ConstraintRecord<'a> {
    pub kind: &'a str,
    pub text: &'a str,
    pub sha256: String,
}

/// The transcript of `run` on `model`: pretty-printed JSON and a newline,
/// the bytes of a transcript file.
pub fn to_text(model: &ModelInfo, run: &Run<'_>) -> String {
    let params = run.params;
    let steps: Vec<Value> = run
        .ids
        .iter()
        .zip(run.digests)
        .map(|(id, digest)| json!({ "id": id, "digest": hex(digest) }))
        .collect();
    let mut transcript = json!({
        "format": FORMAT,
        "profile": detllm::PROFILE,
        "crate_version": env!("CARGO_PKG_VERSION"),
        "model": {
            "file": model.file,
            "sha256": model.sha256,
            "architecture": model.architecture,
            "vocab_size": model.vocab_size, "dim": model.dim, "n_layers": model.n_layers,
        },
        "sampling": {
            "temperature": f32_json(params.temperature), "top_k": params.top_k,
            "top_p": f32_json(params.top_p), "min_p": f32_json(params.min_p),
            "repeat_penalty": f32_json(params.repeat_penalty),
            "penalty_last_n": params.penalty_last_n, "seed": params.seed,
        },
        "max_tokens": run.max_tokens,
        "prompt": run.prompt,
        "prompt_ids": run.prompt_ids,
        "steps": steps,
        "final_digest": run.digests.last().map(|d| hex(d)),
    });
    if let Some(c) = &run.constraint {
        transcript["constraint"] = json!({ "kind": c.kind, "text": c.text, "sha256": c.sha256 });
    }
    // A `Value` built from strings and integers always serializes.
    serde_json::to_string_pretty(&transcript).unwrap_or_default() + "\n"
}

/// What `verify` needs from a transcript.
pub struct Transcript {
    pub sha256: String,
    /// File name of the model it was written with.
    pub model_file: Option<String>,
    pub params: SamplingParams,
    pub max_tokens: usize,
    pub prompt_ids: Vec<u32>,
    /// `(id, digest)` of each step; digests lowercase hex.
    pub steps: Vec<(u32, String)>,
    pub final_digest: String,
    /// The recorded constraint's SHA-256 (lowercase hex), if the run had one
    /// (signed receipts cover it).
    #[cfg_attr(not(feature = "audit"), allow(dead_code))]
    pub constraint_sha256: Option<String>,
}

/// Reads the transcript in `text`, checking every field `verify` uses.
pub fn parse(text: &str) -> Parse<Transcript> {
    let v: Value = serde_json::from_str(text).map_err(TranscriptError::NotJson)?;
    if v.get("format").and_then(|f| f.as_u64()) != Some(FORMAT as u64) {
        return Err(TranscriptError::UnknownFormat);
    }
    if v.get("profile").and_then(|p| p.as_str()) != Some(detllm::PROFILE) {
        return Err(TranscriptError::WrongProfile);
    }
    let model = field(&v, "model", "model")?;
    let sha256 = field(model, "sha256", "model.sha256")?
        .as_str()
        .ok_or(TranscriptError::Missing("model.sha256"))?
        .to_string();
    let model_file = model
        .get("file")
        .and_then(|x| x.as_str())
        .map(str::to_string);
    let params = parse_sampling(field(&v, "sampling", "sampling")?)?;
    let max_tokens = u64_field(&v, "max_tokens")? as usize;
    let prompt_ids = parse_ids(field(&v, "prompt_ids", "prompt_ids")?)?;
    let steps = parse_steps(&v)?;
    if steps.is_empty() || steps.len() > max_tokens {
        return Err(TranscriptError::Invalid(
            "step count does not fit max_tokens",
        ));
    }
    let final_digest = v
        .get("final_digest")
        .and_then(|d| d.as_str())
        .filter(|d| is_digest_hex(d))
        .ok_or(TranscriptError::Invalid(
            "final_digest missing or not 64 hex digits",
        ))?
        .to_ascii_lowercase();
    let constraint_sha256 = match v.get("constraint").filter(|c| !c.is_null()) {
        None => None,
        Some(c) => Some(
            c.get("sha256")
                .and_then(|d| d.as_str())
                .filter(|d| is_digest_hex(d))
                .ok_or(TranscriptError::Invalid(
                    "constraint.sha256 missing or not 64 hex digits",
                ))?
                .to_ascii_lowercase(),
        ),
    };
    Ok(Transcript {
        sha256,
        model_file,
        params,
        max_tokens,
        prompt_ids,
        steps,
        final_digest,
        constraint_sha256,
    })
}

/// `v[key]`; `name` is the field's path for the error.
fn field<'v>(v: &'v Value, key: &str, name: &'static str) -> Parse<&'v Value> {
    v.get(key).ok_or(TranscriptError::Missing(name))
}

/// `v[key]` as a u64.
fn u64_field(v: &Value, key: &'static str) -> Parse<u64> {
    v.get(key)
        .and_then(|x| x.as_u64())
        .ok_or(TranscriptError::Missing(key))
}

/// `sampling.{name}.bits` as an `F32`.
fn f32_field(sampling: &Value, name: &'static str) -> Parse<F32> {
    let bits = sampling
        .get(name)
        .and_then(|x| x.get("bits"))
        .and_then(|b| b.as_str())
        .ok_or(TranscriptError::MissingBits(name))?;
    let bits = u32::from_str_radix(bits.trim_start_matches("0x"), 16)
        .map_err(|_| TranscriptError::BitsNotHex(name))?;
    Ok(F32::from_bits(bits))
}

fn parse_sampling(sampling: &Value) -> Parse<SamplingParams> {
    let params = SamplingParams {
        temperature: f32_field(sampling, "temperature")?,
        top_k: u32::try_from(u64_field(sampling, "top_k")?)
            .map_err(|_| TranscriptError::Invalid("top_k too large"))?,
        top_p: f32_field(sampling, "top_p")?,
        min_p: f32_field(sampling, "min_p")?,
        repeat_penalty: f32_field(sampling, "repeat_penalty")?,
        penalty_last_n: u64_field(sampling, "penalty_last_n")? as usize,
        seed: u64_field(sampling, "seed")?,
    };
    params.validate().map_err(TranscriptError::Sampling)?;
    Ok(params)
}

fn parse_ids(ids: &Value) -> Parse<Vec<u32>> {
    ids.as_array()
        .ok_or(TranscriptError::Invalid("ids must be an array"))?
        .iter()
        .map(|id| {
            id.as_u64()
                .and_then(|id| u32::try_from(id).ok())
                .ok_or(TranscriptError::Invalid("id is not a u32"))
        })
        .collect()
}

fn parse_steps(v: &Value) -> Parse<Vec<(u32, String)>> {
    let steps = v
        .get("steps")
        .and_then(|s| s.as_array())
        .ok_or(TranscriptError::Missing("steps"))?;
    let mut parsed = Vec::with_capacity(steps.len());
    for (step, st) in steps.iter().enumerate() {
        let id = st
            .get("id")
            .and_then(|i| i.as_u64())
            .and_then(|i| u32::try_from(i).ok())
            .ok_or(TranscriptError::StepId { step })?;
        let digest = st
            .get("digest")
            .and_then(|d| d.as_str())
            .ok_or(TranscriptError::StepDigest { step })?;
        if !is_digest_hex(digest) {
            return Err(TranscriptError::Invalid("step digest is not 64 hex digits"));
        }
        parsed.push((id, digest.to_ascii_lowercase()));
    }
    Ok(parsed)
}

/// A SHA-256 digest in hex: 64 hex digits.
fn is_digest_hex(d: &str) -> bool {
    d.len() == 64 && d.bytes().all(|c| c.is_ascii_hexdigit())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn model() -> ModelInfo {
        ModelInfo {
            file: Some("m.gguf".into()),
            sha256: "ab".repeat(32),
            architecture: "llama".into(),
            vocab_size: 96,
            dim: 64,
            n_layers: 2,
        }
    }

    #[test]
    fn what_to_text_writes_parse_reads_back() {
        let params = SamplingParams {
            seed: 9,
            ..SamplingParams::LLAMA_DEFAULTS
        };
        let digests = [[1u8; 32], [2u8; 32]];
        let run = Run {
            params: &params,
            max_tokens: 5,
            prompt: "hi",
            prompt_ids: &[1, 2, 3],
            ids: &[7, 8],
            digests: &digests,
            constraint: None,
        };
        let text = to_text(&model(), &run);
        assert!(text.ends_with("}\n"));
        let t = parse(&text).expect("parses");
        assert_eq!(t.sha256, model().sha256);
        assert_eq!(t.model_file.as_deref(), Some("m.gguf"));
        assert_eq!(t.params.seed, 9);
        assert_eq!(t.params.temperature.to_bits(), params.temperature.to_bits());
        assert_eq!(t.max_tokens, 5);
        assert_eq!(t.prompt_ids, [1, 2, 3]);
        let steps = [(7, hex(&[1u8; 32])), (8, hex(&[2u8; 32]))];
        assert_eq!(t.steps, steps);
        assert_eq!(t.final_digest, hex(&[2u8; 32]));
        let v: Value = serde_json::from_str(&text).expect("JSON");
        assert_eq!(v["model"]["architecture"], "llama");
    }
}
