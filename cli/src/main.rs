//! The `detllm` command: generate, chat, tokenize, inspect, bench, verify.
//!
//! Host-side glue only: it maps the model file, sizes one arena, and drives
//! the library. Hardware floats appear here only to parse parameters and to
//! print timings. This file parses the command line and dispatches; each
//! subcommand is a module under `cmd/`, and the pieces they share are
//! modules of their own:
//!
//! * `model_file` — where the model is (`--model`, `$DETLLM_MODEL`, the
//!   cache) and its bytes in memory;
//! * `session` — a model bound to one arena with tokenizer, engine, sampler
//!   and threads (`vocab`: its tokenizer; `prompt`: chat templating);
//! * `batch` — several prompts prefilled and decoded as one continuous batch;
//! * `transcript` — the audit transcript format;
//! * `utf8_stream`, `output` — printing;
//! * `error` — [`error::CliError`], printed as `detllm: …` (exit code 2).

// `unsafe` only where docs/UNSAFE.md lists it (`model_file::map_file`).
#![deny(unsafe_code)]

use clap::{Parser, Subcommand};
use std::process::ExitCode;

mod args;
#[cfg(feature = "audit")]
mod audit;
mod batch;
mod cmd;
#[cfg(feature = "constrain")]
mod constrain;
mod error;
#[cfg(feature = "constrain")]
mod gbnf;
mod model_file;
mod output;
mod prompt;
#[cfg(feature = "serve")]
mod serve;
mod session;
mod speculate;
mod transcript;
mod utf8_stream;
mod vocab;

#[derive(Parser)]
#[command(
    name = "detllm",
    version,
    about = "Deterministic LLaMA-family inference: same bits on every target"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Generate text for one or more prompts (several prompts run as one continuous batch).
    Generate(cmd::generate::GenerateArgs),
    /// Interactive chat; the KV cache is kept between turns. Samples with
    /// llama.cpp's defaults (temperature 0.8, top-k 40, top-p 0.95, min-p
    /// 0.05); without --seed the chosen seed is printed on stderr.
    Chat(cmd::chat::ChatArgs),
    /// Print the token ids of a text (or of JSON lines on stdin with --jsonl).
    Tokenize(cmd::tokenize::TokenizeArgs),
    /// Print a GGUF file's metadata and tensor table.
    Inspect(cmd::inspect::InspectArgs),
    /// Measure prefill and decode speed.
    Bench(cmd::bench::BenchArgs),
    /// Perplexity of a text file, computed as llama.cpp's llama-perplexity does.
    Perplexity(cmd::perplexity::PerplexityArgs),
    /// Re-execute a transcript and compare every step's digest.
    Verify(cmd::verify::VerifyArgs),
    /// Read a server's audit store offline: list, show a transcript, export all.
    #[cfg(feature = "audit")]
    Audit(audit::cmd::AuditArgs),
    /// Write a new Ed25519 key pair for `serve --signing-key` (FILE, mode 0600; FILE.pub).
    #[cfg(feature = "audit")]
    Keygen(audit::cmd::KeygenArgs),
    /// Serve the model over an OpenAI-compatible HTTP API (continuous batching).
    #[cfg(feature = "serve")]
    Serve(serve::ServeArgs),
}

fn main() -> ExitCode {
    let result = match Cli::parse().command {
        Command::Generate(args) => cmd::generate::run(args),
        Command::Chat(args) => cmd::chat::run(args),
        Command::Tokenize(args) => cmd::tokenize::run(args),
        Command::Inspect(args) => cmd::inspect::run(args),
        Command::Bench(args) => cmd::bench::run(args),
        Command::Perplexity(args) => cmd::perplexity::run(args),
        Command::Verify(args) => cmd::verify::run(args),
        #[cfg(feature = "audit")]
        Command::Audit(args) => audit::cmd::run(args),
        #[cfg(feature = "audit")]
        Command::Keygen(args) => audit::cmd::keygen(args),
        #[cfg(feature = "serve")]
        Command::Serve(args) => serve::run(args),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("detllm: {e}");
            ExitCode::from(2)
        }
    }
}
