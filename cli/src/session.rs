//! [`Session`]: a model bound to one arena with everything a run needs —
//! tokenizer, encode workspace, engine with a paged KV cache, sampler and
//! worker threads.
//!
//! A session borrows the model's bytes (a [`ModelFile`]) and one arena
//! buffer, both owned by the caller: a command keeps them on its stack; a
//! long-running owner (a server) keeps them for as long as it serves and
//! drives the one session from its request loop. [`Shape`] fixes the sizes
//! up front; [`Session::load`] computes the arena size from it, so the arena
//! is allocated once and nothing grows afterwards.

#![forbid(unsafe_code)]

use crate::error::{CliError, CliResult};
use crate::model_file::ModelFile;
use crate::vocab;
use detllm::gguf::File;
use detllm::kv::{KvType, PagedCache};
use detllm::model::{Config, Engine, Entry, Limits, Model};
use detllm::parallel::ThreadPool;
use detllm::sample::Sampler;
use detllm::tokenizer::{Tokenizer, Workspace};
use detllm::{Arena, F32};

/// Longest prompt text the text commands accept (bytes).
pub const MAX_PROMPT_BYTES: usize = 1 << 16;

/// KV cache page size (positions per page).
const PAGE_SIZE: usize = 16;

/// How big a session is.
#[derive(Clone, Copy)]
pub struct Shape {
    /// Sequences alive at once.
    pub max_seqs: usize,
    /// Positions per sequence (prompt + generated).
    pub max_seq_len: usize,
    /// Tokens per engine step, summed over the step's entries.
    pub max_step_tokens: usize,
    /// Longest text (bytes) the session's tokenizer workspace encodes; the
    /// workspace costs about 75 bytes per byte (4.9 MB for 64 KiB).
    pub max_prompt_bytes: usize,
}

impl Shape {
    /// The engine limits: an f16 paged KV cache with room for every
    /// sequence at full length, one logits row per sequence.
    pub fn limits(&self) -> Limits {
        Limits {
            max_seqs: self.max_seqs,
            max_seq_len: self.max_seq_len,
            max_step_tokens: self.max_step_tokens,
            max_logit_rows: self.max_seqs,
            kv_type: KvType::F16,
            page_size: PAGE_SIZE,
            n_pages: self.max_seqs * self.max_seq_len.div_ceil(PAGE_SIZE),
        }
    }
}

/// Serial or a thread pool, chosen at run time.
pub enum Pool {
    Serial,
    Threads(ThreadPool),
}

impl Pool {
    /// `threads` > 1 starts a pool; otherwise everything runs on the caller.
    pub fn new(threads: usize) -> CliResult<Pool> {
        if threads <= 1 {
            return Ok(Pool::Serial);
        }
        ThreadPool::new(threads)
            .map(Pool::Threads)
            .map_err(|error| CliError::ThreadPool { threads, error })
    }
}

/// Everything a run needs, borrowed from the model's bytes and one arena.
pub struct Session<'a> {
    /// The parsed GGUF file (metadata such as `general.architecture`).
    pub file: File<'a>,
    pub tokenizer: Tokenizer<'a>,
    /// Scratch for [`Tokenizer::encode`], sized by `Shape::max_prompt_bytes`.
    pub encode_work: Workspace<'a>,
    pub engine: Engine<'a, PagedCache<'a>>,
    pub sampler: Sampler<'a>,
    pub pool: Pool,
}

impl<'a> Session<'a> {
    /// A session over `model` shaped by `shape`: `arena_buf` is replaced by
    /// an arena of exactly the size the session needs.
    pub fn load(
        model: &'a ModelFile,
        arena_buf: &'a mut Vec<u8>,
        shape: Shape,
        threads: usize,
    ) -> CliResult<Session<'a>> {
        Self::load_with_rows(model, arena_buf, shape, 0, threads)
    }

    /// [`Session::load`] with room for `extra_rows` more logits rows per
    /// step (speculative decoding's verify rows).
    pub fn load_with_rows(
        model: &'a ModelFile,
        arena_buf: &'a mut Vec<u8>,
        shape: Shape,
        extra_rows: usize,
        threads: usize,
    ) -> CliResult<Session<'a>> {
        let mut limits = shape.limits();
        limits.max_logit_rows += extra_rows;
        let need = arena_bytes(model, shape, limits)?;
        *arena_buf = vec![0u8; need];
        // Fresh zeroed pages: carves stay unmapped until written.
        let mut arena = Arena::over_zeroed(arena_buf.as_mut_slice());
        Self::build(model, &mut arena, shape, limits, threads)
    }

    fn build(
        model: &'a ModelFile,
        arena: &mut Arena<'a>,
        shape: Shape,
        limits: Limits,
        threads: usize,
    ) -> CliResult<Session<'a>> {
        let bytes = model.bytes();
        let file = parse_gguf(model)?;
        let weights = Model::from_gguf(&file, bytes, arena)?;
        let tokenizer = vocab::tokenizer(&file, arena)?;
        let encode_work = Workspace::new(arena, shape.max_prompt_bytes)?;
        let vocab_size = weights.cfg.vocab_size;
        let engine = Engine::new(weights, limits, arena)?;
        let sampler = Sampler::new(arena, vocab_size)?;
        let pool = Pool::new(threads)?;
        Ok(Session {
            file,
            tokenizer,
            encode_work,
            engine,
            sampler,
            pool,
        })
    }

    /// One engine step on the session's pool; the logits rows of the
    /// entries, `vocab_size` each.
    pub fn step(&mut self, batch: &[Entry<'_>]) -> CliResult<&[F32]> {
        let logits = match &self.pool {
            Pool::Serial => self.engine.step(&detllm::Serial, batch)?,
            Pool::Threads(pool) => self.engine.step(pool, batch)?,
        };
        Ok(logits)
    }

    /// The token ids of `text`, special tokens such as `<|im_start|>` parsed.
    pub fn encode(&mut self, text: &str) -> CliResult<Vec<u32>> {
        let mut ids = vec![0u32; text.len() + 8];
        let n = self
            .tokenizer
            .encode(text, true, &mut self.encode_work, &mut ids)?;
        ids.truncate(n);
        Ok(ids)
    }

    /// The bytes token `id` stands for (empty for a special or unknown id).
    pub fn token_bytes(&self, id: u32) -> &'a [u8] {
        self.tokenizer.piece(id, false).unwrap_or_default()
    }

    /// Entries in the model's vocabulary (the length of one logits row).
    pub fn vocab_size(&self) -> usize {
        self.engine.config().vocab_size
    }
}

/// `model`'s bytes parsed as GGUF; a parse error names the file.
fn parse_gguf(model: &ModelFile) -> CliResult<File<'_>> {
    File::parse(model.bytes()).map_err(|error| CliError::MalformedModel {
        path: model.path().to_path_buf(),
        error,
    })
}

/// Arena bytes of a session over `model` shaped by `shape`, its engine
/// built for `limits`.
fn arena_bytes(model: &ModelFile, shape: Shape, limits: Limits) -> CliResult<usize> {
    let file = parse_gguf(model)?;
    let cfg = Config::from_gguf(&file)?;
    let model_bytes = Model::bytes_required(&cfg).ok_or(CliError::SizeOverflow)?;
    let parts = [
        model_bytes,
        vocab::tokenizer_bytes(&file)?,
        Workspace::bytes_required(shape.max_prompt_bytes).ok_or(CliError::SizeOverflow)?,
        engine_bytes(&file, model.bytes(), model_bytes, limits)?,
        Sampler::bytes_required(cfg.vocab_size).ok_or(CliError::SizeOverflow)?,
    ];
    parts
        .iter()
        .try_fold(0usize, |sum, &n| sum.checked_add(n))
        .ok_or(CliError::SizeOverflow)
}

/// Arena bytes of the engine: its size depends on the bound model, so the
/// model is bound in a scratch arena of `model_bytes` first.
fn engine_bytes(
    file: &File<'_>,
    bytes: &[u8],
    model_bytes: usize,
    limits: Limits,
) -> CliResult<usize> {
    let mut scratch = vec![0u8; model_bytes];
    let mut arena = Arena::new(&mut scratch);
    let model = Model::from_gguf(file, bytes, &mut arena)?;
    Ok(Engine::<PagedCache>::bytes_required(&model, &limits)?)
}
