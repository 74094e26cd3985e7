//! Speculative decoding for the text commands (`--speculate ngram|draft`,
//! `--draft-model`, `--draft-max`): the library's
//! [`detllm::spec::generate_speculative`] over a session, with the n-gram
//! draft source or a smaller model of the same vocabulary ([`ModelDraft`]).
//!
//! The output — ids, text, every digest, the transcript — is the same bits
//! as without speculation (the library's contract, checked by
//! `tests/engine/spec_props.rs`; `cli/tests/spec_cli.rs` checks the command's
//! stdout, digest and transcript); only the number of engine steps changes.

#![forbid(unsafe_code)]

use crate::batch::PromptRun;
use crate::error::{CliError, CliResult};
use crate::model_file::ModelFile;
use crate::session::{Pool, Session, Shape};
use clap::{Args, ValueEnum};
use detllm::kv::{PagedCache, SeqId};
use detllm::model::{Engine, Entry};
use detllm::sample::{Sampler, SamplingParams, argmax};
use detllm::spec::{DraftSource, NgramDraft, SpecStats, generate_speculative};
use detllm::tokenizer::Tokenizer;
use detllm::{F32, Parallel};
use std::path::PathBuf;
use std::time::Instant;

/// Speculative decoding options (they change speed, never the output).
#[derive(Args, Clone)]
pub struct SpecArgs {
    /// Speculative decoding: `ngram` drafts from the prompt and the text so
    /// far, `draft` from --draft-model. The output is the same bits as
    /// without it.
    #[arg(long, value_enum)]
    pub speculate: Option<SpecKind>,
    /// The draft model of `--speculate draft` (its vocabulary must be the
    /// model's).
    #[arg(long)]
    pub draft_model: Option<PathBuf>,
    /// Most draft tokens verified per step, 0–32 (the length adapts below it).
    #[arg(long, default_value_t = 8, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(0..=32))]
    pub draft_max: usize,
}

/// Where draft tokens come from.
#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum SpecKind {
    /// Prompt lookup: the text after the latest earlier occurrence of the
    /// last few tokens.
    Ngram,
    /// A smaller model with the same vocabulary, decoding greedily.
    Draft,
}

impl SpecArgs {
    /// Logits rows a verify step needs beyond the plain one (0 when off).
    pub fn extra_rows(&self) -> usize {
        if self.speculate.is_some() {
            self.draft_max
        } else {
            0
        }
    }

    /// Checks the options fit together.
    pub fn validate(&self) -> CliResult<()> {
        match (self.speculate, &self.draft_model) {
            (Some(SpecKind::Draft), None) => Err(CliError::Usage(
                "--speculate draft needs --draft-model FILE",
            )),
            (Some(SpecKind::Ngram) | None, Some(_)) => Err(CliError::Usage(
                "--draft-model is used only with --speculate draft",
            )),
            _ => Ok(()),
        }
    }

    /// The draft model file, opened (`None` unless `--draft-model`).
    pub fn open_draft(&self) -> CliResult<Option<ModelFile>> {
        self.draft_model
            .as_deref()
            .map(ModelFile::open_for_run)
            .transpose()
    }
}

/// A draft model: greedy continuations of the history from a second
/// session. Its cache keeps what it has fed; each proposal cuts it back to
/// what the history still shares and feeds the rest.
pub struct ModelDraft<'d> {
    session: Session<'d>,
    seq: SeqId,
    fed: Vec<u32>,
}

impl<'d> ModelDraft<'d> {
    /// Drafting from `session` for `target`.
    ///
    /// Errors: [`CliError::DraftVocabMismatch`] unless both vocabularies
    /// have the same size and every token the same bytes.
    pub fn new(mut session: Session<'d>, target: &Session<'_>, path: PathBuf) -> CliResult<Self> {
        let (draft_vocab, target_vocab) = (session.vocab_size(), target.vocab_size());
        let differs =
            |id: u32| session.tokenizer.piece(id, true) != target.tokenizer.piece(id, true);
        let first_difference = (0..draft_vocab as u32).find(|&id| differs(id));
        if draft_vocab != target_vocab || first_difference.is_some() {
            return Err(CliError::DraftVocabMismatch {
                draft: path,
                draft_vocab,
                target_vocab,
                first_difference,
            });
        }
        let seq = session.engine.new_seq()?;
        Ok(ModelDraft {
            session,
            seq,
            fed: Vec::new(),
        })
    }

    /// Feeds `tokens` and returns the greedy next token.
    fn feed(&mut self, tokens: &[u32]) -> detllm::Result<u32> {
        let entry = [Entry {
            seq: self.seq,
            tokens,
            all_logits: false,
        }];
        let s = &mut self.session;
        let vocab = s.engine.config().vocab_size;
        let logits = match &s.pool {
            Pool::Serial => s.engine.step(&detllm::Serial, &entry)?,
            Pool::Threads(pool) => s.engine.step(pool, &entry)?,
        };
        let next = argmax(&logits[..logits.len().min(vocab)]).unwrap_or(0);
        self.fed.extend_from_slice(tokens);
        Ok(next)
    }
}

impl DraftSource for ModelDraft<'_> {
    fn propose(&mut self, history: &[u32], out: &mut [u32]) -> detllm::Result<usize> {
        let max_len = self.session.engine.limits().max_seq_len;
        if out.is_empty() || history.is_empty() || history.len() >= max_len {
            return Ok(0);
        }
        let k = out.len().min(max_len - history.len());
        // Keep what the history still shares, at least one token to feed.
        let shared = self.fed.iter().zip(history).take_while(|(a, b)| a == b);
        let keep = shared.count().min(history.len() - 1);
        self.session.engine.truncate(self.seq, keep)?;
        self.fed.truncate(keep);
        let chunk = self.session.engine.limits().max_step_tokens;
        let mut next = 0;
        for c in history[keep..].chunks(chunk) {
            next = self.feed(c)?;
        }
        out[0] = next;
        for i in 1..k {
            out[i] = self.feed(&[out[i - 1]])?;
        }
        Ok(k)
    }
}

/// The draft source `spec` asks for (`None` without `--speculate`): the
/// n-gram source, or a session over `draft_file` (held in `arena_buf`) with
/// room for `max_seq_len` positions, checked against `target`.
pub fn source<'d>(
    spec: &SpecArgs,
    draft_file: Option<&'d ModelFile>,
    arena_buf: &'d mut Vec<u8>,
    target: &Session<'_>,
    max_seq_len: usize,
    threads: usize,
) -> CliResult<Option<Box<dyn DraftSource + 'd>>> {
    spec.validate()?;
    match (spec.speculate, draft_file) {
        (None, _) => Ok(None),
        (Some(SpecKind::Ngram), _) => Ok(Some(Box::new(NgramDraft::DEFAULT))),
        (Some(SpecKind::Draft), None) => Err(CliError::Usage(
            "--speculate draft needs --draft-model FILE",
        )),
        (Some(SpecKind::Draft), Some(file)) => {
            let shape = Shape {
                max_seqs: 1,
                max_seq_len: max_seq_len + spec.draft_max,
                max_step_tokens: 256,
                max_prompt_bytes: 16,
            };
            let session = Session::load(file, arena_buf, shape, threads)?;
            let path = file.path().to_path_buf();
            Ok(Some(Box::new(ModelDraft::new(session, target, path)?)))
        }
    }
}

/// One prompt generated with speculation, as a [`PromptRun`] (the same
/// ids, digests and chain as the batched plain run), and what speculation
/// did. `on_token(tokenizer, id)` is called for each token as it is drawn.
pub fn run_prompt(
    session: &mut Session<'_>,
    draft: &mut dyn DraftSource,
    prompt: &[u32],
    params: &SamplingParams,
    max_tokens: usize,
    draft_max: usize,
    on_token: &mut dyn FnMut(&Tokenizer<'_>, u32),
) -> CliResult<(PromptRun, SpecStats)> {
    if prompt.is_empty() {
        return Err(CliError::EmptyPrompt);
    }
    let seq = session.engine.new_seq()?;
    let mut run = PromptRun::new(seq, prompt, params);
    let ask = Ask {
        params,
        max_tokens,
        draft_max,
    };
    let parts = Parts {
        engine: &mut session.engine,
        sampler: &mut session.sampler,
        tokenizer: &session.tokenizer,
    };
    let result = match &session.pool {
        Pool::Serial => generate(parts, &detllm::Serial, &mut run, draft, &ask, on_token),
        Pool::Threads(pool) => generate(parts, pool, &mut run, draft, &ask, on_token),
    };
    let freed = session.engine.free(seq);
    let stats = result?;
    freed?;
    Ok((run, stats))
}

/// The parts of a session a generation borrows.
struct Parts<'p, 'a> {
    engine: &'p mut Engine<'a, PagedCache<'a>>,
    sampler: &'p mut Sampler<'a>,
    tokenizer: &'p Tokenizer<'a>,
}

/// What is asked of one generation.
struct Ask<'p> {
    params: &'p SamplingParams,
    max_tokens: usize,
    draft_max: usize,
}

/// The library call, recording each token into `run`.
fn generate<P: Parallel>(
    parts: Parts<'_, '_>,
    par: &P,
    run: &mut PromptRun,
    draft: &mut dyn DraftSource,
    ask: &Ask<'_>,
    on_token: &mut dyn FnMut(&Tokenizer<'_>, u32),
) -> CliResult<SpecStats> {
    let prompt = run.prompt_ids.clone();
    let mut history = vec![0u32; prompt.len() + ask.max_tokens];
    let start = Instant::now();
    let mut first_at = None;
    let tokenizer = parts.tokenizer;
    let is_eog = |t: u32| tokenizer.is_eog(t);
    let (mut ids, mut digests, mut hash) = (Vec::new(), Vec::new(), run.digest.clone());
    let mut record = |_: usize, id: u32, digest: &[u8; 32], row: &[F32]| {
        detllm::audit::hash_logits(&mut hash, row);
        ids.push(id);
        digests.push(*digest);
        first_at.get_or_insert_with(|| start.elapsed().as_secs_f64());
        on_token(tokenizer, id);
    };
    let (generated, stats) = generate_speculative(
        parts.engine,
        par,
        parts.sampler,
        run.seq,
        &prompt,
        ask.params,
        ask.max_tokens,
        &mut history,
        &is_eog,
        draft,
        ask.draft_max,
        &mut record,
    )?;
    let total = start.elapsed().as_secs_f64();
    run.prefill_s = first_at.unwrap_or(total);
    run.decode_s = total - run.prefill_s;
    run.ids = ids;
    run.step_digests = digests;
    run.digest = hash;
    run.chain = generated.chain;
    run.done = true;
    Ok(stats)
}

/// A one-line summary of `stats` for stderr.
pub fn describe(stats: &SpecStats) -> String {
    let rate = stats.accepted as f64 / (stats.drafted.max(1)) as f64;
    format!(
        "speculation: {} decode steps, {} drafted, {} accepted ({:.1} %)",
        stats.steps,
        stats.drafted,
        stats.accepted,
        100.0 * rate
    )
}
