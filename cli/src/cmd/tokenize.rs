//! `detllm tokenize`: the token ids of a text, or of each `{"text": …}`
//! line on stdin with `--jsonl`. Only the tokenizer is built, from the
//! mapped file (no weights are read).

#![forbid(unsafe_code)]

use crate::args::ModelArgs;
use crate::error::{CliError, CliResult};
use crate::model_file::{ModelFile, existing_model};
use crate::session::MAX_PROMPT_BYTES;
use clap::Args;
use detllm::Arena;
use detllm::gguf::File;
use detllm::tokenizer::{Tokenizer, Workspace};
use std::io::BufRead;
use std::process::ExitCode;

#[derive(Args)]
pub struct TokenizeArgs {
    #[command(flatten)]
    pub model_args: ModelArgs,
    /// Print a JSON array.
    #[arg(long)]
    pub json: bool,
    /// Read lines {"text": ...} from stdin, write lines {"ids": [...]}.
    #[arg(long)]
    pub jsonl: bool,
    /// Do not parse special tokens such as <|im_start|>.
    #[arg(long)]
    pub no_special: bool,
    /// The text.
    pub text: Option<String>,
}

/// A tokenizer and its workspace, and whether special tokens are parsed.
struct Encoder<'a> {
    tokenizer: Tokenizer<'a>,
    work: Workspace<'a>,
    parse_special: bool,
}

impl Encoder<'_> {
    fn encode(&mut self, text: &str) -> CliResult<Vec<u32>> {
        let mut ids = vec![0u32; text.len() + 8];
        let n = self
            .tokenizer
            .encode(text, self.parse_special, &mut self.work, &mut ids)?;
        ids.truncate(n);
        Ok(ids)
    }
}

pub fn run(args: TokenizeArgs) -> CliResult<ExitCode> {
    let path = existing_model(args.model_args.model.as_deref())?;
    let model = ModelFile::open_mapped(&path)?;
    let file = File::parse(model.bytes()).map_err(|error| CliError::MalformedModel {
        path: path.clone(),
        error,
    })?;
    let need = Tokenizer::bytes_required_gguf(&file)?
        + Workspace::bytes_required(MAX_PROMPT_BYTES).ok_or(CliError::SizeOverflow)?;
    let mut arena_buf = vec![0u8; need];
    let mut arena = Arena::new(&mut arena_buf);
    let mut encoder = Encoder {
        tokenizer: Tokenizer::from_gguf(&file, &mut arena)?,
        work: Workspace::new(&mut arena, MAX_PROMPT_BYTES)?,
        parse_special: !args.no_special,
    };
    if args.jsonl {
        return tokenize_json_lines(&mut encoder);
    }
    let text = args.text.ok_or(CliError::Usage("give TEXT or --jsonl"))?;
    let ids = encoder.encode(&text)?;
    if args.json {
        println!("{}", serde_json::json!(ids));
    } else {
        let ids: Vec<String> = ids.iter().map(|id| id.to_string()).collect();
        println!("{}", ids.join(" "));
    }
    Ok(ExitCode::SUCCESS)
}

/// For each non-blank stdin line `{"text": …}`, prints `{"ids": […]}`.
fn tokenize_json_lines(encoder: &mut Encoder<'_>) -> CliResult<ExitCode> {
    for line in std::io::stdin().lock().lines() {
        let line = line?;
        if line.trim().is_empty() {
            continue;
        }
        let v: serde_json::Value = serde_json::from_str(&line).map_err(CliError::JsonLine)?;
        let text = v
            .get("text")
            .and_then(|t| t.as_str())
            .ok_or(CliError::JsonLineWithoutText)?;
        println!("{}", serde_json::json!({ "ids": encoder.encode(text)? }));
    }
    Ok(ExitCode::SUCCESS)
}
