//! `detllm perplexity`: how well the model predicts a text, measured as
//! llama.cpp's `llama-perplexity` measures it, so the two can be compared.
//!
//! The recipe (llama.cpp `tools/perplexity/perplexity.cpp`): the whole text
//! is tokenized once, with BOS in front if the vocabulary adds one; the
//! tokens are cut into `n = tokens / ctx` chunks of `ctx` tokens (the tail
//! is dropped; at least two chunks are required). Each chunk is evaluated
//! from an empty KV cache with its first token replaced by BOS (when the
//! model adds one), and only its second half is scored: the logits at
//! positions `j = ctx/2 ..= ctx - 2` predict token `j + 1`, i.e.
//! `ctx - 1 - ctx/2` tokens per chunk. Perplexity is `exp(mean NLL)`, and
//! its ± is llama.cpp's: `ppl · sqrt((mean(NLL²) - mean(NLL)²) / (N - 1))`.
//!
//! Each NLL is computed by the library in soft float
//! ([`detllm::model::eval::nll_of`]) and summed exactly
//! ([`detllm::model::eval::NllSum`]), so the figures do not depend on the
//! target, `--threads` or `--batch`; `exp` of the mean is the library's
//! correctly rounded one. Only the ± (a square root of the variance) and
//! the printing use hardware floats.
//!
//! `--dump-logits FILE` (hidden; for `scripts/perplexity-vs-llamacpp.py`)
//! writes each scored position's logits row, in order, as raw
//! little-endian f32.

#![forbid(unsafe_code)]

use crate::args::ModelArgs;
use crate::error::{CliError, CliResult};
use crate::model_file::{ModelFile, existing_model};
use crate::session::Pool;
use crate::vocab;
use clap::Args;
use detllm::gguf::File;
use detllm::kv::{KvType, PagedCache};
use detllm::model::eval::{NllSum, nll_of};
use detllm::model::{Config, Engine, Entry, Limits, Model};
use detllm::tokenizer::{EncodeOptions, Workspace};
use detllm::{Arena, F32};
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Args)]
pub struct PerplexityArgs {
    #[command(flatten)]
    pub model_args: ModelArgs,
    /// Text file to score (UTF-8).
    #[arg(long)]
    pub file: PathBuf,
    /// Tokens per chunk (llama.cpp's `-c`); the second half of each is scored.
    #[arg(long, default_value_t = 512)]
    pub ctx: usize,
    /// Tokens per engine step (the results do not depend on it).
    #[arg(long, default_value_t = 128)]
    pub batch: usize,
    /// Score at most this many chunks (llama.cpp's `--chunks`).
    #[arg(long)]
    pub chunks: Option<usize>,
    /// Print one JSON object instead of text.
    #[arg(long)]
    pub json: bool,
    /// Write each scored position's logits as raw little-endian f32 rows.
    #[arg(long, hide = true)]
    pub dump_logits: Option<PathBuf>,
}

/// Tokens per KV cache page.
const PAGE_SIZE: usize = 16;

pub fn run(args: PerplexityArgs) -> CliResult<ExitCode> {
    if args.ctx < 4 || args.batch == 0 {
        return Err(CliError::Usage(
            "--ctx must be at least 4 and --batch at least 1",
        ));
    }
    let text = std::fs::read_to_string(&args.file).map_err(CliError::at(&args.file))?;
    let path = existing_model(args.model_args.model.as_deref())?;
    let model = ModelFile::open_for_run(&path)?;
    let file = File::parse(model.bytes()).map_err(|error| CliError::MalformedModel {
        path: path.clone(),
        error,
    })?;
    let limits = Limits {
        max_seqs: 1,
        max_seq_len: args.ctx,
        max_step_tokens: args.batch,
        max_logit_rows: args.batch,
        kv_type: KvType::F16,
        page_size: PAGE_SIZE,
        n_pages: args.ctx.div_ceil(PAGE_SIZE),
    };
    let mut arena_buf = vec![0u8; arena_bytes(&file, model.bytes(), &limits, text.len())?];
    let mut arena = Arena::new(arena_buf.as_mut_slice());
    let weights = Model::from_gguf(&file, model.bytes(), &mut arena)?;
    let tokenizer = vocab::tokenizer(&file, &mut arena)?;
    let mut work = Workspace::new(&mut arena, text.len())?;
    let mut engine: Engine<PagedCache> = Engine::new(weights, limits, &mut arena)?;
    let pool = Pool::new(args.model_args.threads)?;

    // The whole text, BOS first if the vocabulary adds one; specials not parsed.
    let mut tokens = vec![0u32; text.len() + 2];
    let opts = EncodeOptions {
        parse_special: false,
        add_special: true,
    };
    let n = tokenizer.encode_with(&text, opts, &mut work, &mut tokens)?;
    tokens.truncate(n);
    let bos = tokenizer.bos().filter(|_| tokenizer.add_bos());

    let ctx = args.ctx;
    let available = tokens.len() / ctx;
    if available < 2 {
        eprintln!(
            "detllm: {} tokenizes to {} tokens; --ctx {ctx} needs at least {}",
            args.file.display(),
            tokens.len(),
            2 * ctx
        );
        return Err(CliError::Usage("the text is too short for two chunks"));
    }
    let n_chunks = args.chunks.map_or(available, |c| c.clamp(1, available));
    let first = ctx / 2;
    let mut dump = match &args.dump_logits {
        Some(p) => Some(std::io::BufWriter::new(
            std::fs::File::create(p).map_err(CliError::at(p))?,
        )),
        None => None,
    };

    let vocab_size = engine.config().vocab_size;
    let mut total = NllSum::new();
    let start_time = std::time::Instant::now();
    for chunk in 0..n_chunks {
        let original = &tokens[chunk * ctx..(chunk + 1) * ctx];
        let mut input = original.to_vec();
        if let Some(b) = bos {
            input[0] = b;
        }
        let seq = engine.new_seq()?;
        let mut pos = 0;
        while pos < ctx {
            // Steps never straddle `first`: rows before it need no logits.
            let end = if pos < first {
                (pos + args.batch).min(first)
            } else {
                (pos + args.batch).min(ctx)
            };
            let scored = pos >= first;
            let entry = Entry {
                seq,
                tokens: &input[pos..end],
                all_logits: scored,
            };
            let logits = match &pool {
                Pool::Serial => engine.step(&detllm::Serial, &[entry])?,
                Pool::Threads(p) => engine.step(p, &[entry])?,
            };
            if scored {
                for (row, j) in logits.chunks_exact(vocab_size).zip(pos..end) {
                    if j + 1 >= ctx {
                        break;
                    }
                    total.add(nll_of(row, original[j + 1] as usize)?);
                    if let Some(out) = dump.as_mut() {
                        write_row(out, row).map_err(CliError::Io)?;
                    }
                }
            }
            pos = end;
        }
        engine.free(seq)?;
        progress(chunk + 1, n_chunks, &total, start_time);
    }
    eprintln!();
    if let Some(mut out) = dump {
        out.flush().map_err(CliError::Io)?;
    }
    report(&args, &total, n_chunks)?;
    Ok(ExitCode::SUCCESS)
}

/// Appends `row` as little-endian f32.
fn write_row(out: &mut impl Write, row: &[F32]) -> std::io::Result<()> {
    let bytes: Vec<u8> = row.iter().flat_map(|x| x.to_bits().to_le_bytes()).collect();
    out.write_all(&bytes)
}

/// `exp(mean NLL)` in soft float; infinite or NaN if the mean is.
fn perplexity(total: &NllSum) -> F32 {
    total.mean().exp()
}

/// The progress line on stderr, rewritten in place.
fn progress(done: usize, of: usize, total: &NllSum, start: std::time::Instant) {
    const WIDTH: usize = 30;
    let filled = WIDTH * done / of;
    let secs = start.elapsed().as_secs_f64();
    let eta = secs / done as f64 * (of - done) as f64;
    eprint!(
        "\r[{}{}] chunk {done}/{of}  ppl {:.4}  {:.0} s, ETA {:.0} s ",
        "#".repeat(filled),
        " ".repeat(WIDTH - filled),
        host(perplexity(total)),
        secs,
        eta
    );
}

fn host(x: F32) -> f64 {
    f32::from_bits(x.to_bits()) as f64
}

/// Prints the result (text or `--json`). The ± is llama.cpp's formula,
/// evaluated in f64 from the exact sums rounded to binary32.
fn report(args: &PerplexityArgs, total: &NllSum, n_chunks: usize) -> CliResult<()> {
    let ppl = host(perplexity(total));
    let count = total.count() as f64;
    let mean = host(total.mean());
    let variance = host(total.sum_sq()) / count - mean * mean;
    let ppl_err = if variance > 0.0 && count > 1.0 {
        (variance / (count - 1.0)).sqrt() * ppl
    } else {
        f64::NAN
    };
    if args.json {
        let value = serde_json::json!({
            "ppl": ppl,
            "ppl_err": ppl_err,
            "nll_mean": mean,
            "tokens": total.count(),
            "chunks": n_chunks,
            "ctx": args.ctx,
        });
        println!("{}", serde_json::to_string(&value)?);
    } else {
        println!(
            "perplexity: {ppl:.4} ± {ppl_err:.5} (mean NLL {mean:.6}) over {} tokens: {n_chunks} chunks of {}, second half scored",
            total.count(),
            args.ctx
        );
    }
    Ok(())
}

/// Arena bytes for the weights, the tokenizer, an encode workspace for
/// `text_bytes` and an engine with `limits` (the engine's size depends on
/// the bound model, so the model is first bound in a scratch arena).
fn arena_bytes(
    file: &File<'_>,
    bytes: &[u8],
    limits: &Limits,
    text_bytes: usize,
) -> CliResult<usize> {
    let cfg = Config::from_gguf(file)?;
    let model_bytes = Model::bytes_required(&cfg).ok_or(CliError::SizeOverflow)?;
    let engine_bytes = {
        let mut scratch = vec![0u8; model_bytes];
        let mut arena = Arena::new(&mut scratch);
        let model = Model::from_gguf(file, bytes, &mut arena)?;
        Engine::<PagedCache>::bytes_required(&model, limits)?
    };
    let parts = [
        model_bytes,
        vocab::tokenizer_bytes(file)?,
        Workspace::bytes_required(text_bytes).ok_or(CliError::SizeOverflow)?,
        engine_bytes,
    ];
    parts
        .iter()
        .try_fold(0usize, |sum, &n| sum.checked_add(n))
        .ok_or(CliError::SizeOverflow)
}
