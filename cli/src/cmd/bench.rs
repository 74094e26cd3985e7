//! `detllm bench`: prefill and decode speed of one sequence, aggregate
//! decode speed of `--batch` sequences stepping together, and peak RSS.
//! Each figure is the best of `--reps` repetitions; decoding is greedy.

#![forbid(unsafe_code)]

use crate::args::ModelArgs;
use crate::error::CliResult;
use crate::model_file::{ModelFile, existing_model};
use crate::output::{mib, round1};
use crate::prompt::render_chat;
use crate::session::{Session, Shape};
use clap::Args;
use detllm::F32;
use detllm::kv::{PagedCache, SeqId};
use detllm::model::Entry;
use detllm::tokenizer::chat::{Message, Template};
use std::process::ExitCode;
use std::time::Instant;

#[derive(Args)]
pub struct BenchArgs {
    #[command(flatten)]
    pub model_args: ModelArgs,
    /// Prompt length in tokens.
    #[arg(long, default_value_t = 37)]
    pub prompt_tokens: usize,
    /// Tokens generated per sequence.
    #[arg(long, default_value_t = 64)]
    pub gen_tokens: usize,
    /// Sequences decoding together.
    #[arg(long, default_value_t = 1)]
    pub batch: usize,
    /// Repetitions (best is reported).
    #[arg(long, default_value_t = 3)]
    pub reps: usize,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
    /// With --speculate: the prompt (default: a short chat prompt).
    #[arg(long)]
    pub prompt_file: Option<std::path::PathBuf>,
    /// With --speculate: plain against speculative decode instead.
    #[command(flatten)]
    pub spec: crate::speculate::SpecArgs,
}

/// Best tokens/s over the repetitions.
#[derive(Default)]
struct Speeds {
    prefill: f64,
    decode: f64,
    aggregate: f64,
}

/// What the report prints besides the speeds.
struct Sizes {
    prompt_tokens: usize,
    peak_rss: u64,
    model_bytes: usize,
    kv_bytes: usize,
}

/// A prompt of `len` ids: the chat prompt's, repeated; for a model whose
/// vocabulary cannot encode it (a synthetic model, or the stand-in
/// vocabulary `scripts/bench-formats.sh` gives one for llama.cpp), the ids
/// 4, 5, 6, … (past the stand-in's four special tokens), wrapped at the
/// vocabulary's size.
fn bench_prompt(session: &mut Session<'_>, text: &str, len: usize) -> Vec<u32> {
    match session.encode(text) {
        Ok(base) if !base.is_empty() => base.iter().copied().cycle().take(len).collect(),
        _ => {
            let vocab = session.vocab_size().max(5);
            (0..len).map(|i| (4 + i % (vocab - 4)) as u32).collect()
        }
    }
}

pub fn run(args: BenchArgs) -> CliResult<ExitCode> {
    if args.spec.speculate.is_some() {
        return super::bench_spec::run(&args);
    }
    let path = existing_model(args.model_args.model.as_deref())?;
    let model = ModelFile::open_for_run(&path)?;
    let batch = args.batch.max(1);
    // The only text the bench encodes; the tokenizer workspace is sized for it.
    // The model's chat template, read before the session is sized.
    let file = detllm::gguf::File::parse(model.bytes()).map_err(detllm::Error::from)?;
    let template = Template::of_gguf(&file).unwrap_or(Template::SmolLm2);
    let text = render_chat(
        template,
        &[Message {
            role: "user",
            content: "What is the capital of France?",
        }],
        true,
    )?;
    let shape = Shape {
        max_seqs: batch,
        max_seq_len: args.prompt_tokens + args.gen_tokens + 1,
        max_step_tokens: args.prompt_tokens.max(batch),
        max_prompt_bytes: text.len(),
    };
    let mut arena_buf = Vec::new();
    let mut session = Session::load(&model, &mut arena_buf, shape, args.model_args.threads)?;
    let prompt = bench_prompt(&mut session, &text, args.prompt_tokens.max(1));
    let mut best = Speeds::default();
    for _ in 0..args.reps.max(1) {
        let (prefill, decode) = measure_solo(&mut session, &prompt, args.gen_tokens)?;
        best.prefill = best.prefill.max(prefill);
        best.decode = best.decode.max(decode);
        best.aggregate = if batch > 1 {
            let aggregate = measure_batched(&mut session, &prompt, args.gen_tokens, batch)?;
            best.aggregate.max(aggregate)
        } else {
            best.decode
        };
    }
    let sizes = Sizes {
        prompt_tokens: prompt.len(),
        peak_rss: peak_rss(),
        model_bytes: model.bytes().len(),
        kv_bytes: PagedCache::bytes_required(&shape.limits().kv_config(session.engine.config()))
            .unwrap_or(0),
    };
    print_report(&args, batch, &best, &sizes);
    Ok(ExitCode::SUCCESS)
}

/// Greedy choice from row `row` of `logits` (no copy).
fn greedy(logits: &[F32], row: usize, vocab: usize) -> u32 {
    logits
        .get(row * vocab..(row + 1) * vocab)
        .and_then(detllm::sample::argmax)
        .unwrap_or(0)
}

fn one_step<'s>(session: &'s mut Session<'_>, seq: SeqId, tokens: &[u32]) -> CliResult<&'s [F32]> {
    session.step(&[Entry {
        seq,
        tokens,
        all_logits: false,
    }])
}

/// One sequence alone: prefill tokens/s of `prompt`, then decode tokens/s
/// over `gen_tokens` greedy steps.
fn measure_solo(
    session: &mut Session<'_>,
    prompt: &[u32],
    gen_tokens: usize,
) -> CliResult<(f64, f64)> {
    let vocab = session.vocab_size();
    let seq = session.engine.new_seq()?;
    let start = Instant::now();
    one_step(session, seq, prompt)?;
    let prefill = prompt.len() as f64 / start.elapsed().as_secs_f64();
    let mut id = greedy(one_step(session, seq, &prompt[..1])?, 0, vocab);
    let start = Instant::now();
    for _ in 0..gen_tokens {
        id = greedy(one_step(session, seq, &[id])?, 0, vocab);
    }
    let decode = gen_tokens as f64 / start.elapsed().as_secs_f64();
    session.engine.free(seq)?;
    Ok((prefill, decode))
}

/// `batch` sequences of one prompt token each, decoding `gen_tokens` greedy
/// steps together: aggregate tokens/s.
fn measure_batched(
    session: &mut Session<'_>,
    prompt: &[u32],
    gen_tokens: usize,
    batch: usize,
) -> CliResult<f64> {
    let vocab = session.vocab_size();
    let seqs: Vec<SeqId> = (0..batch)
        .map(|_| session.engine.new_seq())
        .collect::<Result<_, _>>()?;
    for &seq in &seqs {
        one_step(session, seq, &prompt[..1])?;
    }
    let mut ids = vec![prompt[0]; batch];
    let start = Instant::now();
    for _ in 0..gen_tokens {
        let entries: Vec<Entry> = seqs
            .iter()
            .zip(&ids)
            .map(|(&seq, id)| Entry {
                seq,
                tokens: std::slice::from_ref(id),
                all_logits: false,
            })
            .collect();
        let logits = session.step(&entries)?;
        ids = (0..batch).map(|row| greedy(logits, row, vocab)).collect();
    }
    let aggregate = (gen_tokens * batch) as f64 / start.elapsed().as_secs_f64();
    for seq in seqs {
        session.engine.free(seq)?;
    }
    Ok(aggregate)
}

fn print_report(args: &BenchArgs, batch: usize, best: &Speeds, sizes: &Sizes) {
    let threads = args.model_args.threads;
    if args.json {
        println!(
            "{}",
            serde_json::json!({
                "prefill_tok_s": round1(best.prefill), "decode_tok_s": round1(best.decode),
                "aggregate_tok_s": round1(best.aggregate), "batch": batch, "threads": threads,
                "peak_rss_bytes": sizes.peak_rss, "prompt_tokens": sizes.prompt_tokens,
                "gen_tokens": args.gen_tokens, "model_bytes": sizes.model_bytes,
                "kv_bytes": sizes.kv_bytes,
            })
        );
    } else {
        println!(
            "prefill {:.1} tok/s ({} tokens) | decode {:.1} tok/s per sequence | aggregate {:.1} tok/s at batch {} | threads {} | peak RSS {:.1} MiB (model {:.1} MiB + KV {:.1} MiB)",
            best.prefill,
            sizes.prompt_tokens,
            best.decode,
            best.aggregate,
            batch,
            threads,
            mib(sizes.peak_rss),
            mib(sizes.model_bytes as u64),
            mib(sizes.kv_bytes as u64)
        );
    }
}

/// The process's peak resident set size (`VmHWM`), 0 where unknown.
fn peak_rss() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|kb| kb.parse::<u64>().ok())
        })
        .map(|kb| kb * 1024)
        .unwrap_or(0)
}
