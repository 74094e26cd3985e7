//! The worker thread: owns the model, the engine and the library's
//! scheduler, turns commands into scheduler calls and scheduler events into
//! per-request [`Event`]s. (The library's engine, `detllm::model::Engine`,
//! is one of the things it owns.)
//!
//! Everything that decides a token happens here, in the order the
//! scheduler fixes; the HTTP side only formats, and compiles a request's
//! grammar before submitting it (`super::compile`): the worker is handed
//! it compiled ([`Compiled`]) and holds no compiler, so no compile delays
//! a step. Stop strings are found here too ([`ChoiceText`]), and a
//! completion that hits one is finished before the next step, so its
//! digest covers exactly the rows its tokens were sampled from — the same
//! as a solo run with the same stop strings.

#![forbid(unsafe_code)]

use super::api::{GenRequest, PromptInput};
use super::error::ApiError;
use super::metrics::Metrics;
use super::protocol::{Accepted, Alternative, Command, Event, Finish};
use super::text::ChoiceText;
use crate::audit::store::{Record, now_secs};
use crate::audit::writer::{Pending, Writer};
use crate::constrain::{Compiled, Compiler, Grammars};
use crate::error::{CliError, CliResult};
use crate::model_file::{ModelFile, existing_model};
use crate::output::hex;
use crate::session::{MAX_PROMPT_BYTES, Pool};
use crate::transcript::{self, ModelInfo};
use detllm::audit::hash_logits;
use detllm::gguf::File;
use detllm::kv::{KvType, PagedCache};
use detllm::model::{Engine, Limits, Model};
use detllm::sample::SamplingParams;
use detllm::sched::{self, FinishReason, RequestId, SchedConfig, Scheduler};
use detllm::tokenizer::{Tokenizer, Workspace};
use detllm::{Arena, F32};
use ed25519_dalek::SigningKey;
use sha2::{Digest, Sha256};
use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::mpsc::{Receiver, TryRecvError};
use std::time::Instant;
use tokio::sync::mpsc::UnboundedSender;

/// KV positions per page.
const PAGE_SIZE: usize = 16;
/// Prefix-cache entries (each keeps one engine sequence).
const PREFIX_CACHE_ENTRIES: usize = 8;
/// Finished transcripts kept for `GET /v1/transcripts/{id}`.
const TRANSCRIPTS_KEPT: usize = 256;

/// What the worker thread is built for.
#[derive(Clone)]
pub struct WorkerConfig {
    /// Model path and worker threads.
    pub model: crate::args::ModelArgs,
    /// Completions running at once.
    pub max_seqs: usize,
    /// Positions per sequence.
    pub ctx: usize,
    /// KV cache bytes (default: every sequence at full context).
    pub kv_bytes: Option<usize>,
    /// Tokens per step.
    pub step_tokens: usize,
    /// Completions waiting at most.
    pub max_queue: usize,
    /// `--speculate ngram`: drafts verified in the decode steps.
    pub speculate: Option<detllm::sched::NgramSpec>,
    /// Where finished choices are recorded (`None`: the in-memory ring).
    pub store: Option<crate::audit::writer::StoreConfig>,
    /// The receipts' signing key (`--signing-key`).
    pub signer: Option<Arc<SigningKey>>,
}

/// What the HTTP side needs to know of the loaded model.
#[derive(Clone, Debug)]
pub struct Loaded {
    /// `/v1/models` id: the file name without `.gguf`.
    pub model_name: String,
    /// `detllm-v1+sha256:<hex>`.
    pub fingerprint: String,
    /// KV pages in the pool.
    pub kv_pages: usize,
    /// The model's grammar compiler, for the HTTP side (`super::compile`);
    /// the worker keeps none.
    pub compiler: Compiler,
}

/// Loads the model on a new thread and serves `commands` there; returns
/// once the model is loaded (or failed to load).
pub fn start(
    cfg: WorkerConfig,
    commands: Receiver<Command>,
    metrics: Arc<Metrics>,
) -> CliResult<Loaded> {
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    // The store opens first: a locked, corrupt or unwritable file stops the start.
    let writer = match &cfg.store {
        Some(s) => Some(Writer::start(s).map_err(|e| CliError::Audit(e.to_string()))?),
        None => None,
    };
    std::thread::Builder::new()
        .name("detllm-worker".into())
        .spawn(move || match Runner::load(&cfg, metrics) {
            Ok((mut runner, loaded)) => {
                runner.front.writer = writer;
                runner.front.signer = cfg.signer.clone();
                let _ = ready_tx.send(Ok(loaded));
                runner.serve(&commands);
            }
            Err(e) => {
                let _ = ready_tx.send(Err(e));
            }
        })
        .map_err(CliError::Io)?;
    ready_rx
        .recv()
        .map_err(|_| CliError::Usage("the worker thread stopped while loading the model"))?
}

/// One running completion.
struct Choice {
    text: ChoiceText,
    /// SHA-256 over every logits row sampled from (the CLI's `digest`).
    rows: Sha256,
    /// Generated ids, for the transcript.
    ids: Vec<u32>,
    /// The audit chain's digest after each step, for the transcript.
    digests: Vec<[u8; 32]>,
    /// Ended by a stop string: finish it before the next step.
    hit_stop: bool,
    /// Its `Finished` event came.
    done: bool,
}

/// One accepted request.
struct Live {
    events: UnboundedSender<Event>,
    prompt_ids: Vec<u32>,
    prompt_text: String,
    params: SamplingParams,
    max_tokens: usize,
    /// The token constraint every choice was sampled under, if any.
    constraint: Option<crate::constrain::Spec>,
    choices: Vec<Choice>,
    /// Choices not finished yet.
    open: usize,
    /// The client went away: cancel after this step.
    gone: bool,
    /// Ids the client already holds (`resume_token_ids`): choice 0's first
    /// tokens are checked against them and not sent.
    resume: Vec<u32>,
    /// The run refuted `resume` (409 sent): nothing more is sent or recorded.
    refused: bool,
}

struct Runner {
    sched: Scheduler<'static>,
    /// The constrained completions' matchers (the scheduler's constraint;
    /// they come compiled, `super::compile`: no compiler lives here).
    grammars: Grammars,
    work: Workspace<'static>,
    pool: Pool,
    cfg: WorkerConfig,
    front: Front,
}

/// What turns scheduler events into request events (borrowed apart from
/// the scheduler while it steps).
struct Front {
    tokenizer: Tokenizer<'static>,
    metrics: Arc<Metrics>,
    info: ModelInfo,
    live: HashMap<u64, Live>,
    /// `(id, transcript text)` of the most recent choices (`--audit-db none`).
    transcripts: VecDeque<(String, String)>,
    /// The durable store's writer thread, if there is a store.
    writer: Option<Writer>,
    /// Choices finished since the last commit, waiting for it.
    pending: Vec<Pending>,
    /// Signs each choice's receipt, if set.
    signer: Option<Arc<SigningKey>>,
}

/// The engine limits for `cfg`: room for the running completions and the
/// prefix cache's sequences, pages from `kv_bytes` or enough for all.
fn limits(cfg: &WorkerConfig, kv_bytes_per_page: usize) -> Limits {
    let max_seqs = cfg.max_seqs + PREFIX_CACHE_ENTRIES;
    let all = cfg.max_seqs * cfg.ctx.div_ceil(PAGE_SIZE);
    let n_pages = match cfg.kv_bytes {
        Some(b) => (b / kv_bytes_per_page.max(1)).max(1),
        None => all,
    };
    Limits {
        max_seqs,
        max_seq_len: cfg.ctx,
        max_step_tokens: cfg.step_tokens,
        // Speculation's drafts need logits rows beyond one per sequence.
        max_logit_rows: (max_seqs + cfg.speculate.map_or(0, |s| s.max_draft)).min(cfg.step_tokens),
        kv_type: KvType::F16,
        page_size: PAGE_SIZE,
        n_pages,
    }
}

fn sched_config(cfg: &WorkerConfig) -> SchedConfig {
    SchedConfig {
        max_slots: cfg.max_seqs + cfg.max_queue,
        max_cached: PREFIX_CACHE_ENTRIES,
        token_budget: cfg.step_tokens,
        sample_lanes: cfg.model.threads.clamp(1, detllm::sched::MAX_SAMPLE_LANES),
        speculate: cfg.speculate,
    }
}

impl Runner {
    /// Loads the model: the runner, and what the HTTP side gets (the
    /// grammar compiler among it, which the runner does not keep).
    fn load(cfg: &WorkerConfig, metrics: Arc<Metrics>) -> CliResult<(Runner, Loaded)> {
        let path = existing_model(cfg.model.model.as_deref())?;
        let model: &'static ModelFile = Box::leak(Box::new(ModelFile::open_for_run(&path)?));
        let sha256 = model.sha256();
        let bytes = model.bytes();
        let file = File::parse(bytes).map_err(|error| CliError::MalformedModel {
            path: path.clone(),
            error,
        })?;
        let c = detllm::model::Config::from_gguf(&file)?;
        // f16 K and V rows of every layer, per page.
        let page_bytes = PAGE_SIZE * c.n_layers * c.kv_dim() * 2 * 2;
        let lim = limits(cfg, page_bytes);
        let scfg = sched_config(cfg);
        let need = arena_bytes(&file, bytes, &lim, &scfg)?;
        let buf: &'static mut [u8] = Box::leak(vec![0u8; need].into_boxed_slice());
        let mut arena = Arena::new(buf);
        let weights = Model::from_gguf(&file, bytes, &mut arena)?;
        let tokenizer = crate::vocab::tokenizer(&file, &mut arena)?;
        let work = Workspace::new(&mut arena, MAX_PROMPT_BYTES)?;
        let engine = Engine::<PagedCache>::new(weights, lim, &mut arena)?;
        let sched = Scheduler::new(engine, scfg, &mut arena)?;
        let info = ModelInfo::of(&path, sha256.clone(), &file, sched.engine().config());
        // A model the compiler cannot serve (no end-of-generation token)
        // still answers plain requests; constrained ones get the reason.
        let vocab_size = sched.engine().config().vocab_size;
        let compiler = Compiler::new(&tokenizer, vocab_size).unwrap_or_else(Compiler::unavailable);
        let model_name = path
            .file_name()
            .map(|f| f.to_string_lossy().trim_end_matches(".gguf").to_string())
            .unwrap_or_else(|| "model".into());
        let loaded = Loaded {
            model_name,
            fingerprint: format!("{}+sha256:{sha256}", detllm::PROFILE),
            kv_pages: lim.n_pages,
            compiler,
        };
        let runner = Runner {
            sched,
            grammars: Grammars::new(),
            work,
            pool: Pool::new(cfg.model.threads)?,
            cfg: cfg.clone(),
            front: Front {
                tokenizer,
                metrics,
                info,
                live: HashMap::new(),
                transcripts: VecDeque::new(),
                writer: None,
                pending: Vec::new(),
                signer: None,
            },
        };
        Ok((runner, loaded))
    }

    /// Commands and steps until every sender is gone.
    fn serve(&mut self, commands: &Receiver<Command>) {
        loop {
            let cmd = if self.sched.is_idle() {
                match commands.recv() {
                    Ok(c) => Some(c),
                    Err(_) => return,
                }
            } else {
                match commands.try_recv() {
                    Ok(c) => Some(c),
                    Err(TryRecvError::Empty) => None,
                    Err(TryRecvError::Disconnected) => return,
                }
            };
            match cmd {
                Some(c) => self.command(c),
                None => self.step(),
            }
            self.front.commit_pending();
            self.publish_gauges();
        }
    }

    fn command(&mut self, cmd: Command) {
        match cmd {
            Command::Submit {
                req,
                grammar,
                events,
                reply,
            } => {
                let _ = reply.send(self.submit(*req, grammar, events));
            }
            Command::Cancel { id } => self.cancel(id),
            Command::Tokenize {
                text,
                special,
                reply,
            } => {
                let _ = reply.send(self.encode(&text, special));
            }
            Command::Detokenize { tokens, reply } => {
                let _ = reply.send(self.decode(&tokens));
            }
            Command::Transcript { id, reply } => {
                if let Some(w) = &self.front.writer {
                    return w.read(id, reply);
                }
                let t = self
                    .front
                    .transcripts
                    .iter()
                    .find(|(k, _)| *k == id)
                    .map(|(_, v)| v.clone());
                let _ = reply.send(t);
            }
        }
    }

    fn encode(&mut self, text: &str, special: bool) -> Result<Vec<u32>, ApiError> {
        if text.len() > self.work.max_bytes() {
            return Err(ApiError::invalid(
                "prompt",
                format!("prompt longer than {} bytes", self.work.max_bytes()),
            ));
        }
        let mut out = vec![0u32; text.len() + 8];
        let n = self
            .front
            .tokenizer
            .encode(text, special, &mut self.work, &mut out)
            .map_err(|e| ApiError::invalid("prompt", format!("cannot tokenize the prompt: {e}")))?;
        out.truncate(n);
        Ok(out)
    }

    fn decode(&self, tokens: &[u32]) -> Result<String, ApiError> {
        let vocab = self.front.tokenizer.vocab_size();
        let mut bytes = Vec::new();
        for &t in tokens {
            let p = self.front.tokenizer.piece(t, false).ok_or_else(|| {
                ApiError::invalid(
                    "tokens",
                    format!("token id {t} is outside the vocabulary ({vocab})"),
                )
            })?;
            bytes.extend_from_slice(p);
        }
        Ok(String::from_utf8_lossy(&bytes).into_owned())
    }

    /// The prompt's text (for the transcript) and token ids.
    fn prompt(
        &mut self,
        p: &PromptInput,
        tools: Option<&super::tools::ToolSpec>,
    ) -> Result<(String, Vec<u32>), ApiError> {
        match p {
            PromptInput::Tokens(ids) => {
                let vocab = self.front.tokenizer.vocab_size();
                if let Some(&bad) = ids.iter().find(|&&t| t as usize >= vocab) {
                    return Err(ApiError::invalid(
                        "prompt",
                        format!("token id {bad} is outside the vocabulary ({vocab})"),
                    ));
                }
                Ok((String::new(), ids.clone()))
            }
            PromptInput::Text(t) => Ok((t.clone(), self.encode(t, true)?)),
            PromptInput::Chat(msgs) => {
                let template = crate::prompt::template_of(&self.front.tokenizer);
                let msgs = super::tools::prompt_messages(template, msgs, tools);
                let m: Vec<detllm::tokenizer::chat::Message<'_>> = msgs
                    .iter()
                    .map(|(role, content)| detllm::tokenizer::chat::Message { role, content })
                    .collect();
                let text = crate::prompt::render_chat(template, &m, true)
                    .map_err(|e| ApiError::invalid("messages", e.to_string()))?;
                let ids = self.encode(&text, true)?;
                Ok((text, ids))
            }
        }
    }

    /// Admits `req`, constrained by `grammar` (compiled by the HTTP side;
    /// `req.constraint` is not read here).
    fn submit(
        &mut self,
        req: GenRequest,
        grammar: Option<Compiled>,
        events: UnboundedSender<Event>,
    ) -> Result<Accepted, ApiError> {
        let (prompt_text, prompt_ids) = self.prompt(&req.prompt, req.tools.as_ref())?;
        if prompt_ids.is_empty() {
            return Err(ApiError::invalid(
                "prompt",
                "the prompt encodes to no tokens",
            ));
        }
        let ctx = self.cfg.ctx;
        let room = ctx.saturating_sub(prompt_ids.len());
        let max_tokens = match req.max_tokens {
            Some(m) if prompt_ids.len() + m > ctx => {
                return Err(ApiError::invalid(
                    "max_tokens",
                    format!(
                        "prompt ({} tokens) + max_tokens ({m}) exceeds the context ({ctx})",
                        prompt_ids.len()
                    ),
                ));
            }
            Some(m) => m,
            None if room == 0 => {
                return Err(ApiError::invalid(
                    "messages",
                    format!(
                        "the prompt ({} tokens) fills the context ({ctx})",
                        prompt_ids.len()
                    ),
                ));
            }
            None => room,
        };
        if req.resume.len() > max_tokens {
            return Err(ApiError::invalid(
                "resume_token_ids",
                format!(
                    "resume_token_ids holds {} ids, more than the run's {max_tokens} tokens",
                    req.resume.len()
                ),
            ));
        }
        let eog: Vec<u32> = if req.ignore_eos {
            Vec::new()
        } else {
            let ids = self.front.tokenizer.eog_ids();
            ids.iter().copied().take(sched::MAX_STOP).collect()
        };
        let request = sched::Request {
            prompt: &prompt_ids,
            max_tokens,
            params: req.params,
            stop: &eog,
            n: req.n,
            logprobs: req.logprobs,
        };
        // Ids the client holds are fed with the prompt and checked row by row.
        let submitted = self
            .sched
            .submit_resumed(&request, &req.resume, grammar.is_some());
        let id = submitted.map_err(|e| match e {
            detllm::Error::QueueFull { .. } => {
                ApiError::busy("the request queue is full; retry shortly")
            }
            other => ApiError::invalid("prompt", other.to_string()),
        })?;
        if let Some(g) = &grammar {
            for index in 0..req.n as u32 {
                self.grammars.attach(id.0, index, g);
            }
        }
        self.front
            .metrics
            .prompt_tokens
            .fetch_add(prompt_ids.len() as u64, Relaxed);
        let choices = (0..req.n)
            .map(|_| Choice {
                text: ChoiceText::new(req.stop.clone()),
                rows: Sha256::new(),
                ids: Vec::new(),
                digests: Vec::new(),
                hit_stop: false,
                done: false,
            })
            .collect();
        self.front.live.insert(
            id.0,
            Live {
                events,
                prompt_ids: prompt_ids.clone(),
                prompt_text,
                params: req.params,
                max_tokens,
                constraint: grammar.as_ref().map(|g| g.spec().clone()),
                choices,
                open: req.n,
                gone: false,
                resume: req.resume,
                refused: false,
            },
        );
        Ok(Accepted {
            id: id.0,
            prompt_ids,
            seed: req.params.seed,
        })
    }

    fn cancel(&mut self, id: u64) {
        let Some(l) = self.front.live.get(&id) else {
            return;
        };
        if !l.refused {
            // (A refused resume is counted as the 409 it was answered with.)
            self.front
                .metrics
                .request(super::metrics::Outcome::Cancelled);
        }
        let front = &mut self.front;
        let _ = self
            .sched
            .cancel(RequestId(id), &mut |ev: &sched::Event<'_>| {
                front.on_event(ev)
            });
        self.front.live.remove(&id);
    }

    /// One scheduler step; then finish choices that hit a stop string and
    /// cancel requests whose client went away.
    fn step(&mut self) {
        let t0 = Instant::now();
        let front = &mut self.front;
        let mut sink = |ev: &sched::Event<'_>| front.on_event(ev);
        let g = &mut self.grammars;
        let r = match &self.pool {
            Pool::Serial => self.sched.step_constrained(&detllm::Serial, g, &mut sink),
            Pool::Threads(p) => self.sched.step_constrained(p, g, &mut sink),
        };
        let metrics = &self.front.metrics;
        metrics.step(t0.elapsed().as_secs_f64());
        match r {
            Ok(report) => {
                metrics
                    .preemptions
                    .fetch_add(report.preempted as u64, Relaxed);
            }
            Err(e) => {
                // A failed step changed nothing; fail every request rather than spin.
                for (_, l) in self.front.live.drain() {
                    let _ = l.events.send(Event::Failed(ApiError::internal(format!(
                        "engine step failed: {e}"
                    ))));
                }
                let _ = self.sched.clear_cache();
                return;
            }
        }
        for (id, index) in self.front.stopped_choices() {
            let front = &mut self.front;
            let _ = self
                .sched
                .stop_completion(RequestId(id), index, &mut |ev: &sched::Event<'_>| {
                    front.on_event(ev)
                });
        }
        let gone: Vec<u64> = self
            .front
            .live
            .iter()
            .filter(|(_, l)| l.gone)
            .map(|(&id, _)| id)
            .collect();
        for id in gone {
            self.cancel(id);
        }
        self.front.live.retain(|_, l| l.open > 0);
        let live = &self.front.live;
        self.grammars.retain(|request| live.contains_key(&request));
    }

    fn publish_gauges(&self) {
        let m = &self.front.metrics;
        let kv = self.sched.engine().kv();
        let cached = self.sched.cached_pages();
        m.queue_depth.store(self.sched.queued() as u64, Relaxed);
        m.running.store(self.sched.running() as u64, Relaxed);
        m.kv_pages_free.store(kv.free_pages() as u64, Relaxed);
        m.kv_pages_cached.store(cached as u64, Relaxed);
        m.kv_pages_used.store(
            (kv.n_pages() - kv.free_pages()).saturating_sub(cached) as u64,
            Relaxed,
        );
        let s = self.sched.stats();
        m.prefix_cache_hit_tokens.store(s.prefix_tokens, Relaxed);
        m.draft_tokens.store(s.drafted, Relaxed);
        m.draft_accepted_tokens.store(s.draft_kept, Relaxed);
    }
}

fn f32_value(x: F32) -> f32 {
    f32::from_bits(x.to_bits())
}

impl Front {
    /// Hands the choices finished since the last call to the writer: one
    /// commit, then their `Done` events.
    fn commit_pending(&mut self) {
        if let Some(w) = &self.writer
            && !self.pending.is_empty()
        {
            w.commit_step(std::mem::take(&mut self.pending));
        }
    }

    /// Choices that hit a stop string and are still open: `(request, index)`.
    fn stopped_choices(&self) -> Vec<(u64, u32)> {
        let mut v = Vec::new();
        for (&id, l) in &self.live {
            for (i, c) in l.choices.iter().enumerate() {
                if c.hit_stop && !c.done {
                    v.push((id, i as u32));
                }
            }
        }
        v
    }

    /// Turns one scheduler event into the request's protocol event.
    fn on_event(&mut self, ev: &sched::Event<'_>) {
        let (live, transcripts, tok, metrics, info) = (
            &mut self.live,
            &mut self.transcripts,
            &self.tokenizer,
            &*self.metrics,
            &self.info,
        );
        match ev {
            sched::Event::Token(t) => {
                let Some(l) = live.get_mut(&t.request.0).filter(|l| !l.refused) else {
                    return;
                };
                // A resume's one-pass check draws several tokens in one step:
                // those after a stop string are not the answer's.
                let Some(c) = l.choices.get_mut(t.index as usize).filter(|c| !c.hit_stop) else {
                    return;
                };
                let position = c.ids.len();
                metrics.generated_tokens.fetch_add(1, Relaxed);
                hash_logits(&mut c.rows, t.logits);
                c.ids.push(t.token);
                c.digests.push(t.digest);
                let bytes = tok.piece(t.token, false).unwrap_or(&[]).to_vec();
                let eog = tok.is_eog(t.token);
                let (text, stopped) = if eog {
                    (String::new(), false)
                } else {
                    c.text.push(&bytes)
                };
                c.hit_stop |= stopped;
                let logprob = t.logprob.map(|lp| {
                    let alts = t
                        .top_logprobs
                        .iter()
                        .map(|a| Alternative {
                            id: a.token,
                            bytes: tok.piece(a.token, false).unwrap_or(&[]).to_vec(),
                            logprob: f32_value(a.logprob),
                        })
                        .collect();
                    (f32_value(lp), alts)
                });
                if t.index == 0
                    && let Some(&given) = l.resume.get(position)
                {
                    // Already with the client: checked, then not sent again.
                    if given != t.token {
                        let why = format!(
                            "resume_token_ids[{position}] is {given}, but this request's run \
                             samples {} there: the ids were not produced by this request",
                            t.token
                        );
                        refuse(l, position, why);
                    }
                    return;
                }
                let sent = l.events.send(Event::Token {
                    choice: t.index as usize,
                    id: t.token,
                    bytes,
                    text,
                    logprob,
                });
                l.gone |= sent.is_err();
            }
            sched::Event::Finished(f) => {
                let Some(l) = live.get_mut(&f.request.0).filter(|l| !l.refused) else {
                    return;
                };
                let Some(c) = l.choices.get_mut(f.index as usize) else {
                    return;
                };
                let ran = c.ids.len();
                let ended = c.hit_stop || !matches!(f.reason, FinishReason::Cancelled);
                if f.index == 0 && ran < l.resume.len() && ended {
                    let why = format!(
                        "resume_token_ids holds {} ids, but this request's run ends after {ran}",
                        l.resume.len()
                    );
                    return refuse(l, ran, why);
                }
                let finish = match f.reason {
                    FinishReason::Length => Finish::Length,
                    FinishReason::Stop => Finish::Stop,
                    FinishReason::Cancelled if c.hit_stop => Finish::Stop,
                    FinishReason::Cancelled => return,
                    // The schema allowed no next token (an engine limit).
                    FinishReason::Constraint => Finish::Stop,
                };
                c.done = true;
                l.open = l.open.saturating_sub(1);
                let rest = c.text.finish();
                let digest = hex(&c.rows.clone().finalize());
                // The chain after the answer's last token (tokens drawn in
                // the same step after a stop string were dropped).
                let last = c.digests.last().filter(|_| c.hit_stop);
                let audit = hex(last.unwrap_or(&f.digest));
                let transcript = transcript_text(info, l, f.index);
                let (transcript, signature) = signed(self.signer.as_deref(), transcript);
                let done = Event::Done {
                    choice: f.index as usize,
                    finish,
                    text: rest,
                    digest,
                    audit_digest: audit.clone(),
                    transcript_id: audit.clone(),
                    signature: signature.clone(),
                };
                if self.writer.is_some() {
                    // Sent by the writer once the record is durable.
                    self.pending.push(Pending {
                        record: Record {
                            id: audit,
                            created: now_secs(),
                            model_sha256: info.sha256.clone(),
                            transcript,
                            signature,
                        },
                        done,
                        events: l.events.clone(),
                    });
                } else {
                    push_transcript(transcripts, audit, transcript);
                    let sent = l.events.send(done);
                    l.gone |= sent.is_err();
                }
            }
        }
    }
}

/// Answers a resume the run refutes at `position` with a 409 and drops
/// the request (nothing more is sent; no transcript is recorded).
fn refuse(l: &mut Live, position: usize, why: String) {
    l.refused = true;
    l.gone = true;
    let e = ApiError::conflict("resume_token_ids", format!("{why} (position {position})"));
    let _ = l.events.send(Event::Failed(e));
}

/// `text` with its receipt and the receipt's signature, when `key` is set.
fn signed(key: Option<&SigningKey>, text: String) -> (String, Option<String>) {
    let Some(key) = key else {
        return (text, None);
    };
    let Ok(t) = transcript::parse(&text) else {
        return (text, None);
    };
    let receipt = crate::audit::receipt::sign(key, &t);
    let sig = receipt["signature"].as_str().map(str::to_string);
    match crate::audit::receipt::with_receipt(&text, receipt) {
        Some(with) => (with, sig),
        None => (text, None),
    }
}

fn push_transcript(store: &mut VecDeque<(String, String)>, id: String, t: String) {
    if store.iter().any(|(k, _)| *k == id) {
        return;
    }
    if store.len() >= TRANSCRIPTS_KEPT {
        store.pop_front();
    }
    store.push_back((id, t));
}

/// The audit transcript (docs/TRANSCRIPT.md) of choice `index`, as
/// `detllm generate --transcript` writes it.
fn transcript_text(info: &ModelInfo, l: &Live, index: u32) -> String {
    let Some(c) = l.choices.get(index as usize) else {
        return String::new();
    };
    let params = SamplingParams {
        seed: l.params.seed.wrapping_add(u64::from(index)),
        ..l.params
    };
    // A stop string ended it early: the transcript runs exactly its steps.
    let max_tokens = if c.hit_stop {
        c.ids.len()
    } else {
        l.max_tokens
    };
    transcript::to_text(
        info,
        &transcript::Run {
            params: &params,
            max_tokens,
            prompt: &l.prompt_text,
            prompt_ids: &l.prompt_ids,
            ids: &c.ids,
            digests: &c.digests,
            constraint: l.constraint.as_ref().map(crate::constrain::Spec::record),
        },
    )
}

/// Arena bytes for the model, tokenizer, encode workspace, engine and scheduler.
fn arena_bytes(
    file: &File<'_>,
    bytes: &[u8],
    lim: &Limits,
    scfg: &SchedConfig,
) -> CliResult<usize> {
    let c = detllm::model::Config::from_gguf(file)?;
    let model_bytes = Model::bytes_required(&c).ok_or(CliError::SizeOverflow)?;
    let mut scratch = vec![0u8; model_bytes];
    let mut a = Arena::new(&mut scratch);
    let m = Model::from_gguf(file, bytes, &mut a)?;
    let parts = [
        model_bytes,
        crate::vocab::tokenizer_bytes(file)?,
        Workspace::bytes_required(MAX_PROMPT_BYTES).ok_or(CliError::SizeOverflow)?,
        Engine::<PagedCache>::bytes_required(&m, lim)?,
        Scheduler::bytes_required(scfg, lim, c.vocab_size)?,
    ];
    parts
        .iter()
        .try_fold(0usize, |t, &p| t.checked_add(p))
        .ok_or(CliError::SizeOverflow)
}
