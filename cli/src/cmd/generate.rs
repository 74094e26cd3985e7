//! `detllm generate`: text for one or more prompts. One prompt streams its
//! text as it is produced; several run as one continuous batch
//! ([`crate::batch`]) and print one block (or JSON object) each. Each
//! prompt's tokens/s and digest go to stderr (or into its JSON object).

#![forbid(unsafe_code)]

use crate::args::{ModelArgs, SamplingArgs};
use crate::batch::{PromptRun, run_prompts_batched};
#[cfg(feature = "constrain")]
use crate::constrain::{Compiler, Grammars, Spec};
use crate::error::{CliError, CliResult};
use crate::model_file::{ModelFile, existing_model};
use crate::output::{hex, round1};
use crate::prompt::{chat_prompt, template_of};
use crate::session::{MAX_PROMPT_BYTES, Session, Shape};
use crate::speculate::{self, SpecArgs};
use crate::transcript;
use crate::utf8_stream::Utf8Stream;
use clap::Args;
use detllm::sample::SamplingParams;
use detllm::spec::DraftSource;
use detllm::tokenizer::Tokenizer;
use sha2::Digest;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(Args)]
pub struct GenerateArgs {
    #[command(flatten)]
    pub model_args: ModelArgs,
    #[command(flatten)]
    pub sampling: SamplingArgs,
    /// Prompt text (repeatable).
    #[arg(long)]
    pub prompt: Vec<String>,
    /// File holding a prompt (repeatable).
    #[arg(long)]
    pub prompt_file: Vec<PathBuf>,
    /// Wrap each prompt in the model's chat template (and sample with
    /// llama.cpp's defaults unless flags say otherwise).
    #[arg(long)]
    pub chat: bool,
    /// Most tokens to generate per prompt.
    #[arg(long, default_value_t = 128)]
    pub max_tokens: usize,
    /// One JSON object per prompt instead of streamed text.
    #[arg(long)]
    pub json: bool,
    /// Write an audit transcript (single prompt).
    #[arg(long)]
    pub transcript: Option<PathBuf>,
    /// Constrain the output to this JSON schema (a file).
    #[cfg(feature = "constrain")]
    #[arg(long, conflicts_with = "grammar")]
    pub json_schema: Option<PathBuf>,
    /// Constrain the output to this grammar (a file, llguidance's Lark syntax;
    /// GBNF, llama.cpp's, when the name ends in `.gbnf`).
    #[cfg(feature = "constrain")]
    #[arg(long)]
    pub grammar: Option<PathBuf>,
    #[command(flatten)]
    pub spec: SpecArgs,
}

/// Positions per sequence: prompt plus generated tokens.
const MAX_SEQ_LEN: usize = 2048;

/// The prompts as the model sees them: the text (chat-wrapped with
/// `--chat`) and its token ids.
struct Prompts {
    texts: Vec<String>,
    ids: Vec<Vec<u32>>,
}

/// Speculation under a token constraint is not built yet (the verify rows
/// would each need the mask of the tokens before them).
const SPECULATE_WITH_CONSTRAINT: CliError = CliError::Usage(
    "--speculate cannot be combined with --json-schema or --grammar (not supported yet)",
);

pub fn run(args: GenerateArgs) -> CliResult<ExitCode> {
    let path = existing_model(args.model_args.model.as_deref())?;
    let model = ModelFile::open_for_run(&path)?;
    let texts = prompt_texts(&args)?;
    let shape = Shape {
        max_seqs: texts.len(),
        max_seq_len: MAX_SEQ_LEN,
        max_step_tokens: 256,
        max_prompt_bytes: MAX_PROMPT_BYTES,
    };
    args.spec.validate()?;
    if args.spec.speculate.is_some() && constraint_spec(&args)?.is_some() {
        return Err(SPECULATE_WITH_CONSTRAINT);
    }
    let draft_file = args.spec.open_draft()?;
    let threads = args.model_args.threads;
    let mut arena_buf = Vec::new();
    let extra = args.spec.extra_rows();
    let mut session = Session::load_with_rows(&model, &mut arena_buf, shape, extra, threads)?;
    let mut draft_buf = Vec::new();
    let draft = draft_file.as_ref();
    let mut draft = speculate::source(
        &args.spec,
        draft,
        &mut draft_buf,
        &session,
        MAX_SEQ_LEN,
        threads,
    )?;
    let prompts = encode_prompts(&mut session, texts, &args)?;
    // Chat prompts sample as llama.cpp does by default (greedy decoding
    // loops on small chat models); raw continuations stay greedy.
    let defaults = if args.chat {
        SamplingParams::LLAMA_DEFAULTS
    } else {
        SamplingParams::GREEDY
    };
    let sampling = args.sampling.params(&defaults)?;
    sampling.report_seed();
    let params = sampling.params;
    let stream = !args.json && prompts.ids.len() == 1;
    let constraint = constraint_spec(&args)?;
    let runs = match (draft.as_deref_mut(), constraint.as_ref()) {
        (None, constraint) => generate(
            &mut session,
            &prompts.ids,
            &params,
            args.max_tokens,
            constraint,
            stream,
        )?,
        (Some(draft), None) => {
            let ask = (&params, args.max_tokens, args.spec.draft_max);
            generate_speculative(&mut session, draft, &prompts.ids, ask, stream)?
        }
        (Some(_), Some(_)) => return Err(SPECULATE_WITH_CONSTRAINT),
    };
    for (i, (run, text)) in runs.iter().zip(&prompts.texts).enumerate() {
        report(&session, i, run, &args, stream);
        if let Some(transcript_path) = &args.transcript {
            let t = Transcribe {
                model: &model,
                prompt_text: text,
                params: &params,
                constraint: constraint.as_ref(),
            };
            write_transcript(transcript_path, &session, run, &t, &args)?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// What a transcript records besides the run.
struct Transcribe<'t> {
    model: &'t ModelFile,
    prompt_text: &'t str,
    params: &'t SamplingParams,
    constraint: Option<&'t Spec>,
}

/// Writes the audit transcript of `run` to `path`.
fn write_transcript(
    path: &Path,
    session: &Session<'_>,
    run: &PromptRun,
    t: &Transcribe<'_>,
    args: &GenerateArgs,
) -> CliResult<()> {
    let info = transcript::ModelInfo::of(
        t.model.path(),
        t.model.sha256(),
        &session.file,
        session.engine.config(),
    );
    let text = transcript::to_text(
        &info,
        &transcript::Run {
            params: t.params,
            max_tokens: args.max_tokens,
            prompt: t.prompt_text,
            prompt_ids: &run.prompt_ids,
            ids: &run.ids,
            digests: &run.step_digests,
            constraint: t.constraint.map(constraint_record),
        },
    );
    std::fs::write(path, text).map_err(CliError::at(path))
}

/// The constraint the flags give, read from its file.
#[cfg(feature = "constrain")]
fn constraint_spec(args: &GenerateArgs) -> CliResult<Option<Spec>> {
    use crate::constrain::Kind;
    let (kind, path) = match (&args.json_schema, &args.grammar) {
        (Some(p), _) => (Kind::JsonSchema, p),
        (None, Some(p)) => (Kind::Lark, p),
        (None, None) => return Ok(None),
    };
    let mut text = std::fs::read_to_string(path).map_err(CliError::at(path))?;
    if kind == Kind::Lark && path.extension().is_some_and(|e| e == "gbnf") {
        text = crate::gbnf::to_lark(&text)
            .map_err(|e| CliError::Constraint(format!("{}: {e}", path.display())))?;
    }
    Ok(Some(Spec { kind, text }))
}

#[cfg(not(feature = "constrain"))]
fn constraint_spec(_: &GenerateArgs) -> CliResult<Option<Spec>> {
    Ok(None)
}

/// The `--prompt` texts, then the contents of each `--prompt-file`.
fn prompt_texts(args: &GenerateArgs) -> CliResult<Vec<String>> {
    let mut texts = args.prompt.clone();
    for path in &args.prompt_file {
        texts.push(std::fs::read_to_string(path).map_err(CliError::at(path))?);
    }
    if texts.is_empty() {
        return Err(CliError::Usage(
            "give at least one --prompt or --prompt-file",
        ));
    }
    Ok(texts)
}

/// Each text chat-wrapped if asked and encoded; fails if a prompt and
/// `--max-tokens` do not fit [`MAX_SEQ_LEN`].
fn encode_prompts(
    session: &mut Session<'_>,
    texts: Vec<String>,
    args: &GenerateArgs,
) -> CliResult<Prompts> {
    let mut prompts = Prompts {
        texts: Vec::with_capacity(texts.len()),
        ids: Vec::with_capacity(texts.len()),
    };
    for text in texts {
        let text = if args.chat {
            chat_prompt(template_of(&session.tokenizer), None, &text)?
        } else {
            text
        };
        let ids = session.encode(&text)?;
        if ids.len() + args.max_tokens > MAX_SEQ_LEN {
            return Err(CliError::PromptTooLong {
                prompt_tokens: ids.len(),
                max_tokens: args.max_tokens,
                max_seq_len: MAX_SEQ_LEN,
            });
        }
        prompts.ids.push(ids);
        prompts.texts.push(text);
    }
    Ok(prompts)
}

/// Runs the prompts as one batch; with `stream`, prints the (single)
/// prompt's text to stdout as it is produced.
fn generate(
    session: &mut Session<'_>,
    prompts: &[Vec<u32>],
    params: &SamplingParams,
    max_tokens: usize,
    spec: Option<&Spec>,
    stream: bool,
) -> CliResult<Vec<PromptRun>> {
    let mut out = std::io::stdout();
    let mut text = Utf8Stream::default();
    let on_token = |session: &Session<'_>, _, id, _: &[detllm::F32]| {
        if stream && !session.tokenizer.is_eog(id) {
            let _ = write!(out, "{}", text.push(session.token_bytes(id)));
            let _ = out.flush();
        }
    };
    let runs = match spec {
        None => run_prompts_batched(session, prompts, params, max_tokens, on_token)?,
        Some(spec) => constrained(session, prompts, params, max_tokens, spec, on_token)?,
    };
    if stream {
        println!("{}", text.finish());
    }
    Ok(runs)
}

/// Runs the prompts one after another with speculation (the output is
/// the batched plain run's); with `stream`, prints the (single) prompt's
/// text as it is produced. What speculation did goes to stderr.
fn generate_speculative(
    session: &mut Session<'_>,
    draft: &mut dyn DraftSource,
    prompts: &[Vec<u32>],
    (params, max_tokens, draft_max): (&SamplingParams, usize, usize),
    stream: bool,
) -> CliResult<Vec<PromptRun>> {
    let mut runs = Vec::with_capacity(prompts.len());
    for prompt in prompts {
        let mut out = std::io::stdout();
        let mut text = Utf8Stream::default();
        let mut on_token = |tokenizer: &Tokenizer<'_>, id: u32| {
            if stream && !tokenizer.is_eog(id) {
                let piece = tokenizer.piece(id, false).unwrap_or_default();
                let _ = write!(out, "{}", text.push(piece));
                let _ = out.flush();
            }
        };
        let (run, stats) = speculate::run_prompt(
            session,
            draft,
            prompt,
            params,
            max_tokens,
            draft_max,
            &mut on_token,
        )?;
        if stream {
            println!("{}", text.finish());
        }
        eprintln!("{}", speculate::describe(&stats));
        runs.push(run);
    }
    Ok(runs)
}

/// Prints run `i`: its text (unless it was streamed), then its token counts,
/// tokens/s and digest — or all of it as one JSON object with `--json`.
fn report(session: &Session<'_>, i: usize, run: &PromptRun, args: &GenerateArgs, stream: bool) {
    let text = generated_text(session, run);
    let digest = hex(&run.digest.clone().finalize());
    let prefill_tok_s = run.prompt_ids.len() as f64 / run.prefill_s.max(1e-9);
    // The first token comes from the prefill logits, so decode made one fewer.
    let decode_tok_s = run.ids.len().saturating_sub(1) as f64 / run.decode_s.max(1e-9);
    if args.json {
        let object = serde_json::json!({
            "prompt_ids": run.prompt_ids, "ids": run.ids, "text": text, "digest": digest,
            "prefill_tok_s": round1(prefill_tok_s), "decode_tok_s": round1(decode_tok_s),
        });
        println!("{object}");
        return;
    }
    if !stream {
        println!("--- prompt {i} ---\n{text}");
    }
    eprintln!(
        "[{} prompt tokens, {} generated] prefill {prefill_tok_s:.1} tok/s, decode {decode_tok_s:.1} tok/s\ndigest {digest}",
        run.prompt_ids.len(),
        run.ids.len(),
    );
}

/// The generated text without end-of-generation tokens; bytes that are not
/// UTF-8 become U+FFFD.
fn generated_text(session: &Session<'_>, run: &PromptRun) -> String {
    let bytes: Vec<u8> = run
        .ids
        .iter()
        .filter(|&&id| !session.tokenizer.is_eog(id))
        .flat_map(|&id| session.token_bytes(id).iter().copied())
        .collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

/// Without the `constrain` feature there are no constraints to give.
#[cfg(not(feature = "constrain"))]
pub enum Spec {}

/// Runs the prompts, each under its own matcher of `spec`.
#[cfg(feature = "constrain")]
fn constrained(
    session: &mut Session<'_>,
    prompts: &[Vec<u32>],
    params: &SamplingParams,
    max_tokens: usize,
    spec: &Spec,
    on_token: impl FnMut(&Session<'_>, usize, u32, &[detllm::F32]),
) -> CliResult<Vec<PromptRun>> {
    let grammar = Compiler::new(&session.tokenizer, session.vocab_size())
        .and_then(|c| c.compile(spec))
        .map_err(|e| CliError::Constraint(e.0))?;
    let mut grammars = Grammars::new();
    for i in 0..prompts.len() {
        grammars.attach(i as u64, 0, &grammar);
    }
    let runs = crate::batch::run_prompts_constrained(
        session,
        prompts,
        params,
        max_tokens,
        Some(&mut grammars),
        on_token,
    )?;
    let (n, p50, p99) = grammars.mask_times();
    eprintln!("masks: {n}, p50 {p50:.1} us, p99 {p99:.1} us");
    for (i, run) in runs.iter().enumerate() {
        if run.dead_end {
            let why = grammars.error(i as u64, 0).unwrap_or("no token allowed");
            eprintln!("prompt {i}: the constraint ended the output: {why}");
        }
    }
    Ok(runs)
}

#[cfg(not(feature = "constrain"))]
fn constrained(
    _: &mut Session<'_>,
    _: &[Vec<u32>],
    _: &SamplingParams,
    _: usize,
    spec: &Spec,
    _: impl FnMut(&Session<'_>, usize, u32, &[detllm::F32]),
) -> CliResult<Vec<PromptRun>> {
    match *spec {}
}

/// How a transcript records `spec`.
#[cfg(feature = "constrain")]
fn constraint_record(spec: &Spec) -> transcript::ConstraintRecord<'_> {
    spec.record()
}

#[cfg(not(feature = "constrain"))]
fn constraint_record(spec: &Spec) -> transcript::ConstraintRecord<'_> {
    match *spec {}
}
