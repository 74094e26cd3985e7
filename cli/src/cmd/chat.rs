//! `detllm chat`: an interactive conversation on one sequence. The KV cache
//! keeps every earlier turn, so each turn prefills only its own tokens.
//! Replies stream to stdout; the prompt, notices and tokens/s go to stderr.
//! With `--speculate` each reply continues the conversation's PRNG and
//! history through [`detllm::spec::continue_speculative`]: the same bytes.

#![forbid(unsafe_code)]

use crate::args::{ModelArgs, SamplingArgs};
use crate::error::CliResult;
use crate::model_file::{ModelFile, existing_model};
use crate::prompt::{chat_prompt, next_user_turn, template_of};
use crate::session::{MAX_PROMPT_BYTES, Pool, Session, Shape};
use crate::speculate::{self, SpecArgs};
use crate::utf8_stream::Utf8Stream;
use clap::Args;
use detllm::F32;
use detllm::kv::SeqId;
use detllm::model::Entry;
use detllm::sample::{SamplingParams, SplitMix64};
use detllm::spec::{self, Ask, DraftSource, SpecStats};
use std::io::{BufRead, Write};
use std::process::ExitCode;
use std::time::Instant;

#[derive(Args)]
pub struct ChatArgs {
    #[command(flatten)]
    pub model_args: ModelArgs,
    #[command(flatten)]
    pub sampling: SamplingArgs,
    /// Most tokens per reply (at least 1).
    #[arg(long, default_value_t = 256, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..))]
    pub max_tokens: usize,
    /// System prompt (default: the template's).
    #[arg(long)]
    pub system: Option<String>,
    #[command(flatten)]
    pub spec: SpecArgs,
}

/// The conversation's sequence and what its sampling depends on.
struct Conversation {
    seq: SeqId,
    params: SamplingParams,
    rng: SplitMix64,
    /// Every token of the conversation so far (the repetition penalty's window).
    history: Vec<u32>,
    max_tokens: usize,
}

pub fn run(args: ChatArgs) -> CliResult<ExitCode> {
    let path = existing_model(args.model_args.model.as_deref())?;
    let model = ModelFile::open_for_run(&path)?;
    let shape = Shape {
        max_seqs: 1,
        max_seq_len: 4096,
        max_step_tokens: 256,
        max_prompt_bytes: MAX_PROMPT_BYTES,
    };
    args.spec.validate()?;
    let draft_file = args.spec.open_draft()?;
    let threads = args.model_args.threads;
    let mut arena_buf = Vec::new();
    let extra = args.spec.extra_rows();
    let mut session = Session::load_with_rows(&model, &mut arena_buf, shape, extra, threads)?;
    let mut draft_buf = Vec::new();
    let mut draft = speculate::source(
        &args.spec,
        draft_file.as_ref(),
        &mut draft_buf,
        &session,
        shape.max_seq_len,
        threads,
    )?;
    let sampling = args.sampling.params(&SamplingParams::LLAMA_DEFAULTS)?;
    sampling.report_seed();
    let params = sampling.params;
    let mut chat = Conversation {
        seq: session.engine.new_seq()?,
        params,
        rng: SplitMix64::new(params.seed),
        history: Vec::new(),
        max_tokens: args.max_tokens,
    };
    let template = template_of(&session.tokenizer);
    eprintln!("detllm chat — empty line or Ctrl-D to quit");
    let mut first = true;
    while let Some(line) = read_user_line()? {
        // Render only the new turn; the cache holds everything before it.
        let turn = if first {
            chat_prompt(template, args.system.as_deref(), &line)?
        } else {
            next_user_turn(template, &line)?
        };
        first = false;
        let ids = session.encode(&turn)?;
        let len = session.engine.seq_len(chat.seq)?;
        if len + ids.len() + chat.max_tokens > shape.max_seq_len {
            eprintln!("(context full; start a new chat)");
            break;
        }
        if let Some(draft) = draft.as_deref_mut() {
            let draft_max = args.spec.draft_max;
            reply_speculative(&mut session, &mut chat, &ids, draft, draft_max)?;
            continue;
        }
        let logits = prefill_turn(&mut session, chat.seq, &ids, shape.max_step_tokens)?;
        chat.history.extend_from_slice(&ids);
        reply(&mut session, &mut chat, logits)?;
    }
    Ok(ExitCode::SUCCESS)
}

/// Prompts with `> ` and reads one line; `None` at end of input or on an
/// empty line.
fn read_user_line() -> CliResult<Option<String>> {
    eprint!("> ");
    let mut line = String::new();
    if std::io::stdin().lock().read_line(&mut line)? == 0 {
        return Ok(None);
    }
    let line = line.trim_end_matches(['\n', '\r']);
    Ok((!line.is_empty()).then(|| line.to_string()))
}

/// Feeds a turn's tokens in chunks of `max_step_tokens`; the logits at its
/// last position.
fn prefill_turn(
    session: &mut Session<'_>,
    seq: SeqId,
    ids: &[u32],
    max_step_tokens: usize,
) -> CliResult<Vec<F32>> {
    let mut logits = Vec::new();
    for chunk in ids.chunks(max_step_tokens) {
        logits = one_step(session, seq, chunk)?.to_vec();
    }
    Ok(logits)
}

fn one_step<'s>(session: &'s mut Session<'_>, seq: SeqId, tokens: &[u32]) -> CliResult<&'s [F32]> {
    session.step(&[Entry {
        seq,
        tokens,
        all_logits: false,
    }])
}

/// Samples and streams the reply from `logits` until an end-of-generation
/// token or `max_tokens`; the last sampled token goes into the cache too (it
/// is not printed), then the tokens/s line.
fn reply(
    session: &mut Session<'_>,
    chat: &mut Conversation,
    mut logits: Vec<F32>,
) -> CliResult<()> {
    let vocab = session.vocab_size();
    let mut text = Utf8Stream::default();
    let start = Instant::now();
    let mut n = 0;
    loop {
        let row = logits.get(..vocab).unwrap_or(&logits);
        let id = session
            .sampler
            .sample(row, &chat.params, &chat.history, &mut chat.rng)?;
        chat.history.push(id);
        n += 1;
        if session.tokenizer.is_eog(id) || n >= chat.max_tokens {
            // Keep the end-of-turn token in the cache.
            one_step(session, chat.seq, &[id])?;
            break;
        }
        print!("{}", text.push(session.token_bytes(id)));
        std::io::stdout().flush().ok();
        logits = one_step(session, chat.seq, &[id])?.to_vec();
    }
    println!("{}", text.finish());
    eprintln!(
        "[{n} tokens, {:.1} tok/s]",
        n as f64 / start.elapsed().as_secs_f64().max(1e-9)
    );
    Ok(())
}

/// [`reply`] with speculation: the turn `ids` prefilled and the reply
/// generated by the library from the conversation's PRNG and history (so
/// the same tokens), printed as [`reply`] prints them; the tokens/s line
/// adds what speculation did.
fn reply_speculative(
    session: &mut Session<'_>,
    chat: &mut Conversation,
    ids: &[u32],
    draft: &mut dyn DraftSource,
    draft_max: usize,
) -> CliResult<()> {
    let Session {
        engine,
        sampler,
        pool,
        tokenizer,
        ..
    } = session;
    let tokenizer = &*tokenizer;
    let mut history = std::mem::take(&mut chat.history);
    let len = history.len();
    history.resize(len + ids.len() + chat.max_tokens, 0);
    let mut conv = spec::Conversation {
        history: &mut history,
        len,
        rng: chat.rng,
    };
    let (max_tokens, seq) = (chat.max_tokens, chat.seq);
    let mut text = Utf8Stream::default();
    let start = Instant::now();
    let mut n = 0;
    let mut on_step = |step: usize, id: u32, _: &[u8; 32], _: &[F32]| {
        n = step + 1;
        // As `reply`: the last token (end of turn or the limit) is not printed.
        if !tokenizer.is_eog(id) && n < max_tokens {
            print!(
                "{}",
                text.push(tokenizer.piece(id, false).unwrap_or_default())
            );
            std::io::stdout().flush().ok();
        }
    };
    let is_eog = |t: u32| tokenizer.is_eog(t);
    let ask = Ask {
        params: &chat.params,
        max_tokens,
        is_eog: &is_eog,
        on_step: &mut on_step,
    };
    let result: detllm::Result<(_, SpecStats)> = match pool {
        Pool::Serial => {
            let parts = (&mut *engine, &detllm::Serial, &mut *sampler, seq);
            spec::continue_speculative(parts, &mut conv, ids, ask, draft, draft_max)
        }
        Pool::Threads(p) => {
            let parts = (&mut *engine, &*p, &mut *sampler, seq);
            spec::continue_speculative(parts, &mut conv, ids, ask, draft, draft_max)
        }
    };
    let (_, stats) = result?;
    let (end, rng) = (conv.len, conv.rng);
    history.truncate(end);
    let last = history.last().copied();
    (chat.history, chat.rng) = (history, rng);
    // Keep the last token in the cache, as `reply` does.
    if let Some(last) = last {
        one_step(session, seq, &[last])?;
    }
    println!("{}", text.finish());
    eprintln!(
        "[{n} tokens, {:.1} tok/s, {}]",
        n as f64 / start.elapsed().as_secs_f64().max(1e-9),
        speculate::describe(&stats)
    );
    Ok(())
}
