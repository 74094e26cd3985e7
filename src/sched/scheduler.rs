//! [`Scheduler`]: the queue, admission, the step plan, preemption, and the
//! per-completion sampling that reproduces the solo run.

#![forbid(unsafe_code)]

use super::cache::{Hit, PrefixCache};
use super::draft::{self, MAX_DRAFT, NgramSpec};
use super::event::{Event, FinishEvent, FinishReason, RequestId, Sink};
use super::logprob::MAX_TOP_LOGPROBS;
use super::sampling::{Job, Lanes};
use super::slot::{MAX_STOP, Slot, State};
use crate::constraint::{Constraint, Unconstrained};
use crate::kv::{KvStore, PagedCache, SeqId};
use crate::model::{Engine, Entry, Limits};
use crate::sample::SamplingParams;
use crate::spec::DraftLen;
use crate::spec::accept::{Drew, Rows as AcceptRows, accept};
use crate::{Arena, Error, F32, Parallel, Result};

/// Most entries (sequences) one step carries; more running sequences than
/// this take turns (the oldest first).
pub const MAX_STEP_ENTRIES: usize = 128;

/// Capacities of a scheduler (its engine's [`Limits`] give the rest).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SchedConfig {
    /// Completions waiting or running at once: the queue's capacity. A
    /// request of `n` completions takes `n`; a submit that does not fit is
    /// [`Error::QueueFull`].
    pub max_slots: usize,
    /// Prefix-cache entries. Each keeps one of the engine's sequences
    /// (`Limits::max_seqs`) for itself; the rest run completions.
    pub max_cached: usize,
    /// Tokens per step, decode rows and prefill chunks together
    /// (`1..=Limits::max_step_tokens`).
    pub token_budget: usize,
    /// Completions of a step sampled in parallel (`1..=`
    /// [`MAX_SAMPLE_LANES`](super::MAX_SAMPLE_LANES)), each lane with its
    /// own sampler and logprob workspace (`vocab_size` values each). Set it
    /// to the thread count; results do not depend on it.
    pub sample_lanes: usize,
    /// `Some`: decoding completions feed n-gram drafts, verified in the
    /// step (speculative decoding; every event is the same as with `None`,
    /// see `draft.rs`).
    pub speculate: Option<NgramSpec>,
}

/// One request: a prompt and how to continue it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Request<'r> {
    /// Prompt tokens (at least one).
    pub prompt: &'r [u32],
    /// Tokens to generate at most per completion (0: finish at once).
    pub max_tokens: usize,
    /// Sampling parameters. Completion `i` is sampled with seed
    /// `params.seed + i` (wrapping), so completion 0 is the solo run with
    /// `params` itself.
    pub params: SamplingParams,
    /// Tokens that end a completion (reported, as its last token); at most 16.
    pub stop: &'r [u32],
    /// Completions of the prompt (`1..=` [`Scheduler::max_n`]); they share the
    /// prompt's KV pages.
    pub n: usize,
    /// `Some(k)`: report each token's log-probability and the `k ≤ 20` most
    /// likely tokens' ([`super::logprobs`]).
    pub logprobs: Option<usize>,
}

impl<'r> Request<'r> {
    /// One completion of `prompt`, no stop tokens, no logprobs.
    pub fn new(prompt: &'r [u32], max_tokens: usize, params: SamplingParams) -> Self {
        Request {
            prompt,
            max_tokens,
            params,
            stop: &[],
            n: 1,
            logprobs: None,
        }
    }
}

/// What one [`Scheduler::step`] did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StepReport {
    /// Decode rows (one token each).
    pub decoded: usize,
    /// Prefill tokens (prompts, and prefixes recomputed after preemption).
    pub prefilled: usize,
    /// Completions admitted from the queue.
    pub admitted: usize,
    /// Completions preempted (pages freed, requeued).
    pub preempted: usize,
    /// Prefix-cache entries evicted for room.
    pub evicted: usize,
    /// Completions finished (cancelled ones are reported by `cancel`).
    pub finished: usize,
    /// Draft rows verified (speculation; not counted in `decoded`).
    pub drafted: usize,
}

/// Running totals since the scheduler was built.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Requests accepted.
    pub submitted: u64,
    /// Completions finished by length or stop token.
    pub finished: u64,
    /// Completions cancelled.
    pub cancelled: u64,
    /// Tokens sampled.
    pub tokens_out: u64,
    /// Tokens prefilled (recomputation included).
    pub tokens_prefilled: u64,
    /// Engine steps run.
    pub steps: u64,
    /// Preemptions.
    pub preemptions: u64,
    /// Prefix-cache evictions for room.
    pub evictions: u64,
    /// Admissions that forked a cached prefix.
    pub prefix_hits: u64,
    /// Prompt tokens those hits did not recompute.
    pub prefix_tokens: u64,
    /// Resumed ids ([`Scheduler::submit_resumed`]) found equal to the
    /// token drawn at their position.
    pub resumed_kept: u64,
    /// Draft tokens fed in verify entries (speculation).
    pub drafted: u64,
    /// Of those, drafts found equal to the token drawn at their position.
    pub draft_kept: u64,
}

/// One row group of a step: a slot, how many of its tokens it feeds, and
/// whether it verifies proposed tokens (a logits row for every token).
#[derive(Clone, Copy)]
struct Row {
    slot: u32,
    n: u32,
    verify: bool,
}

impl Row {
    const EMPTY: Row = Row {
        slot: 0,
        n: 0,
        verify: false,
    };

    /// Rows of the step's logits it takes.
    fn logit_rows(&self) -> usize {
        if self.verify { self.n as usize } else { 1 }
    }
}

type Rows = [Row; MAX_STEP_ENTRIES];

/// A continuous-batching scheduler over an [`Engine`] with a paged KV cache.
/// See the [module docs](super) for the contract.
pub struct Scheduler<'a> {
    engine: Engine<'a, PagedCache<'a>>,
    cfg: SchedConfig,
    /// Engine sequences for completions: `max_seqs - max_cached`.
    run_cap: usize,
    /// Entries per step: `min(MAX_STEP_ENTRIES, max_seqs, max_logit_rows)`.
    max_entries: usize,
    /// Tokens per step: `token_budget`.
    budget: usize,
    /// Longest history: `min(max_seq_len, n_pages · page_size)`.
    max_len: usize,
    /// Row length of the token table: `max_seq_len`.
    stride: usize,
    slots: &'a mut [Slot],  // (max_slots)
    tokens: &'a mut [u32],  // (max_slots, max_seq_len) each slot's history
    cache: PrefixCache<'a>, // (max_cached) entries
    lanes: Lanes<'a>,       // (sample_lanes) samplers and logprob workspaces
    jobs: &'a mut [Job],    // (max_slots) a step's completions to sample
    next_id: u64,
    stats: Stats,
}

fn check_config(cfg: &SchedConfig, lim: &Limits) -> Result<()> {
    let bad = |name, value| Err(Error::InvalidLimit { name, value });
    if cfg.max_slots == 0 || u32::try_from(cfg.max_slots).is_err() {
        return bad("max_slots", cfg.max_slots);
    }
    if cfg.max_cached >= lim.max_seqs {
        return bad("max_cached", cfg.max_cached);
    }
    if cfg.token_budget == 0 || cfg.token_budget > lim.max_step_tokens {
        return bad("token_budget", cfg.token_budget);
    }
    if cfg.sample_lanes == 0 || cfg.sample_lanes > super::MAX_SAMPLE_LANES {
        return bad("sample_lanes", cfg.sample_lanes);
    }
    if let Some(spec) = cfg.speculate
        && (spec.max_draft == 0 || spec.max_draft > MAX_DRAFT)
    {
        return bad("max_draft", spec.max_draft);
    }
    Ok(())
}

impl<'a> Scheduler<'a> {
    /// Arena bytes [`Scheduler::new`] takes for `cfg` over an engine built
    /// with `lim` for a vocabulary of `vocab_size` (padding included).
    pub fn bytes_required(cfg: &SchedConfig, lim: &Limits, vocab_size: usize) -> Result<usize> {
        let parts = [
            Arena::bytes_for::<Slot>(cfg.max_slots),
            cfg.max_slots
                .checked_mul(lim.max_seq_len)
                .and_then(Arena::bytes_for::<u32>),
            PrefixCache::bytes_required(cfg.max_cached, lim.max_seq_len),
            Lanes::bytes_required(cfg.sample_lanes, vocab_size),
            Arena::bytes_for::<Job>(cfg.max_slots),
        ];
        let mut total = 0usize;
        for p in parts {
            total = total
                .checked_add(p.ok_or(Error::SizeOverflow)?)
                .ok_or(Error::SizeOverflow)?;
        }
        Ok(total)
    }

    /// A scheduler driving `engine` (which should hold no sequences), its
    /// tables carved from `arena`. Errors: [`Error::InvalidLimit`]
    /// (`max_slots` zero, `max_cached ≥ max_seqs`, `token_budget` zero or
    /// above `max_step_tokens`, `sample_lanes` outside its range, a
    /// `speculate` draft length outside `1..=MAX_DRAFT`), [`Error::ArenaExhausted`] (arena untouched;
    /// size it with [`Scheduler::bytes_required`]).
    pub fn new(
        engine: Engine<'a, PagedCache<'a>>,
        cfg: SchedConfig,
        arena: &mut Arena<'a>,
    ) -> Result<Self> {
        let lim = *engine.limits();
        check_config(&cfg, &lim)?;
        let vocab = engine.config().vocab_size;
        let need = Self::bytes_required(&cfg, &lim, vocab)?;
        if need > arena.remaining() {
            return Err(Error::ArenaExhausted {
                requested: need,
                available: arena.remaining(),
            });
        }
        let slots = arena.alloc::<Slot>(cfg.max_slots)?;
        let tokens = arena.alloc::<u32>(cfg.max_slots * lim.max_seq_len)?;
        let cache = PrefixCache::new(arena, cfg.max_cached, lim.max_seq_len)?;
        let lanes = Lanes::new(arena, cfg.sample_lanes, vocab)?;
        let jobs = arena.alloc::<Job>(cfg.max_slots)?;
        Ok(Scheduler {
            engine,
            cfg,
            run_cap: lim.max_seqs - cfg.max_cached,
            max_entries: MAX_STEP_ENTRIES.min(lim.max_seqs).min(lim.max_logit_rows),
            budget: cfg.token_budget,
            max_len: lim
                .max_seq_len
                .min(lim.n_pages.saturating_mul(lim.page_size)),
            stride: lim.max_seq_len,
            slots,
            tokens,
            cache,
            lanes,
            jobs,
            next_id: 0,
            stats: Stats::default(),
        })
    }

    /// The engine (read-only: its KV cache, limits and config).
    pub fn engine(&self) -> &Engine<'a, PagedCache<'a>> {
        &self.engine
    }

    /// The capacities the scheduler was built with.
    pub fn config(&self) -> &SchedConfig {
        &self.cfg
    }

    /// Running totals.
    pub fn stats(&self) -> Stats {
        self.stats
    }

    /// Longest prompt plus `max_tokens`: `min(max_seq_len, n_pages · page_size)`.
    pub fn max_len(&self) -> usize {
        self.max_len
    }

    /// Most completions one request may ask for: `min(max_slots, max_seqs - max_cached)`.
    pub fn max_n(&self) -> usize {
        self.run_cap.min(self.cfg.max_slots)
    }

    /// Completions waiting for admission (new or preempted).
    pub fn queued(&self) -> usize {
        self.count(|s| matches!(s.state(), State::Queued | State::Follower))
    }

    /// Completions holding KV pages (prefilling or decoding).
    pub fn running(&self) -> usize {
        self.count(|s| s.state() == State::Active)
    }

    /// Whether no request is waiting or running.
    pub fn is_idle(&self) -> bool {
        self.count(|s| s.state() != State::Free) == 0
    }

    /// Prefix-cache entries.
    pub fn cached(&self) -> usize {
        self.cache.len()
    }

    /// Distinct KV pages the prefix cache holds (when idle, exactly the
    /// pages missing from the free pool).
    pub fn cached_pages(&self) -> usize {
        self.cache.pages(self.engine.kv())
    }

    /// Empties the prefix cache, returning its pages.
    pub fn clear_cache(&mut self) -> Result<()> {
        self.cache.clear(&mut self.engine)
    }

    fn count(&self, f: impl Fn(&Slot) -> bool) -> usize {
        self.slots.iter().filter(|s| f(s)).count()
    }

    /// Queues a request and returns its id. Errors (nothing queued):
    /// [`Error::EmptyPrompt`], [`Error::TokenOutOfRange`] (a prompt token),
    /// the sampling parameters' error, [`Error::InvalidSampling`] (`"n"`
    /// outside `1..=max_n()`, `"top_logprobs"` above 20, `"stop"` with more
    /// than 16 tokens), [`Error::PromptTooLong`] (prompt plus `max_tokens`
    /// above [`Scheduler::max_len`]), [`Error::QueueFull`] (fewer than `n`
    /// free slots; retry after some finish).
    pub fn submit(&mut self, req: &Request<'_>) -> Result<RequestId> {
        self.enqueue(req, false, &[])
    }

    /// Queues a request whose completions sample under the [`Constraint`]
    /// passed to [`Scheduler::step_constrained`] (asked for each of them,
    /// by request id and completion index, before every token). Errors as
    /// [`Scheduler::submit`].
    pub fn submit_constrained(&mut self, req: &Request<'_>) -> Result<RequestId> {
        self.enqueue(req, true, &[])
    }

    /// Queues a request of one completion whose first tokens the caller
    /// believes are `resumed` (ids a client already received from an
    /// interrupted run): the prompt and `resumed` are fed in prefill-sized
    /// chunks, every row after the prompt's last token is drawn for exactly
    /// as decoding would, and each resumed id is kept only while it equals
    /// its draw (the same rule as speculative decoding,
    /// [`crate::spec`]). The events, tokens and digests are the plain run's
    /// whatever `resumed` holds — a wrong id only costs the rows after it
    /// (the caller compares the token events with `resumed` to find where
    /// they part). `constrained` as [`Scheduler::submit_constrained`].
    /// Errors as [`Scheduler::submit`], and [`Error::InvalidSampling`]
    /// (`"n"` when `n > 1` with ids to resume, `"resumed"` with more ids
    /// than `max_tokens`), [`Error::TokenOutOfRange`] (a resumed id).
    pub fn submit_resumed(
        &mut self,
        req: &Request<'_>,
        resumed: &[u32],
        constrained: bool,
    ) -> Result<RequestId> {
        if !resumed.is_empty() && req.n != 1 {
            return Err(Error::InvalidSampling { param: "n" });
        }
        if resumed.len() > req.max_tokens {
            return Err(Error::InvalidSampling { param: "resumed" });
        }
        self.enqueue(req, constrained, resumed)
    }

    fn enqueue(
        &mut self,
        req: &Request<'_>,
        constrained: bool,
        resumed: &[u32],
    ) -> Result<RequestId> {
        if req.prompt.is_empty() {
            return Err(Error::EmptyPrompt);
        }
        let vocab_size = self.engine.config().vocab_size;
        let mut ids = req.prompt.iter().chain(resumed);
        if let Some(&token) = ids.find(|&&t| t as usize >= vocab_size) {
            return Err(Error::TokenOutOfRange { token, vocab_size });
        }
        req.params.validate()?;
        if req.n == 0 || req.n > self.max_n() {
            return Err(Error::InvalidSampling { param: "n" });
        }
        let logprobs = match req.logprobs {
            None => 0,
            Some(k) if k <= MAX_TOP_LOGPROBS => k as u32 + 1,
            Some(_) => {
                return Err(Error::InvalidSampling {
                    param: "top_logprobs",
                });
            }
        };
        if req.stop.len() > MAX_STOP {
            return Err(Error::InvalidSampling { param: "stop" });
        }
        let total = req.prompt.len().saturating_add(req.max_tokens);
        if total > self.max_len {
            return Err(Error::PromptTooLong {
                len: total,
                max: self.max_len,
            });
        }
        if self.count(|s| s.state() == State::Free) < req.n {
            return Err(Error::QueueFull {
                capacity: self.cfg.max_slots,
            });
        }
        // Both fit in u32: they are at most max_seq_len.
        let (prompt_len, max_tokens) = (req.prompt.len() as u32, req.max_tokens as u32);
        let id = self.next_id;
        self.next_id += 1;
        for index in 0..req.n {
            let Some(j) = self.slots.iter().position(|s| s.state() == State::Free) else {
                break;
            };
            let params = SamplingParams {
                seed: req.params.seed.wrapping_add(index as u64),
                ..req.params
            };
            let mut slot = Slot::new(
                id,
                index as u32,
                &params,
                prompt_len,
                max_tokens,
                req.stop,
                logprobs,
            );
            if index > 0 {
                slot.set_state(State::Follower);
            }
            slot.constrained = u32::from(constrained);
            // At most max_tokens (checked), so it fits the row and u32.
            slot.forced = resumed.len() as u32;
            self.slots[j] = slot;
            let start = j * self.stride;
            if let Some(h) = self.tokens.get_mut(start..start + req.prompt.len()) {
                h.copy_from_slice(req.prompt);
            }
            let at = start + req.prompt.len();
            if let Some(h) = self.tokens.get_mut(at..at + resumed.len()) {
                h.copy_from_slice(resumed);
            }
        }
        self.stats.submitted += 1;
        Ok(RequestId(id))
    }

    /// Cancels every completion of `id` still waiting or running: frees its
    /// pages and reports `Finished { reason: Cancelled }` for each.
    /// [`Error::UnknownRequest`] if none is (finished, cancelled, or never
    /// submitted).
    pub fn cancel<S: Sink + ?Sized>(&mut self, id: RequestId, sink: &mut S) -> Result<()> {
        let mut found = false;
        for s in self.slots.iter_mut() {
            if s.request == id.0 && s.state() != State::Free {
                s.finish(FinishReason::Cancelled);
                found = true;
            }
        }
        if !found {
            return Err(Error::UnknownRequest { id: id.0 });
        }
        self.retire_done(sink, &mut StepReport::default())
    }

    /// Ends completion `index` of `id` now, as if its last token had been a
    /// stop token: frees its pages and reports `Finished { reason: Stop }`.
    /// For stop conditions the caller decides (e.g. a stop string found in
    /// the decoded text): called between steps, the completion's tokens and
    /// digests are those of a solo run that stops at the same token.
    /// [`Error::UnknownRequest`] if that completion is not waiting or running.
    pub fn stop_completion<S: Sink + ?Sized>(
        &mut self,
        id: RequestId,
        index: u32,
        sink: &mut S,
    ) -> Result<()> {
        let slot = self
            .slots
            .iter_mut()
            .find(|s| s.request == id.0 && s.index == index && s.state() != State::Free)
            .ok_or(Error::UnknownRequest { id: id.0 })?;
        slot.finish(FinishReason::Stop);
        self.retire_done(sink, &mut StepReport::default())
    }

    /// Runs one engine step: one decode row per running completion, prefill
    /// chunks of the others and of newly admitted requests, under the token
    /// budget; samples every completion whose history is fed and reports
    /// its token, and finished completions. When the KV pool cannot hold the
    /// step it evicts cached prefixes (least recently used first), then
    /// preempts the newest running completion, and retries. Returns what it
    /// did (all zeros when idle).
    pub fn step<P: Parallel, S: Sink + ?Sized>(
        &mut self,
        par: &P,
        sink: &mut S,
    ) -> Result<StepReport> {
        self.step_constrained(par, &mut Unconstrained, sink)
    }

    /// [`Scheduler::step`], asking `constraint` for the mask of every
    /// completion submitted with [`Scheduler::submit_constrained`] before it
    /// samples (in the step's sampling order, on the calling thread), and
    /// telling it each token sampled. A completion whose mask is empty ends
    /// with [`FinishReason::Constraint`].
    pub fn step_constrained<P: Parallel, S: Sink + ?Sized>(
        &mut self,
        par: &P,
        constraint: &mut dyn Constraint,
        sink: &mut S,
    ) -> Result<StepReport> {
        let mut report = StepReport::default();
        // Leftovers of a step that failed half-way (none normally), and
        // requests with nothing to generate.
        self.fork_followers()?;
        for s in self.slots.iter_mut() {
            if matches!(s.state(), State::Queued | State::Follower) && s.max_tokens == 0 {
                s.finish(FinishReason::Length);
            }
        }
        self.retire_done(sink, &mut report)?;
        self.repair()?;
        self.drop_drafts(); // a past step's leftovers, before admission plans
        self.admit(&mut report)?;
        self.propose_drafts();
        let mut rows = [Row::EMPTY; MAX_STEP_ENTRIES];
        loop {
            let (n, _) = self.plan(&mut rows);
            if n == 0 {
                return Ok(report);
            }
            match self.run(par, &rows[..n], constraint, sink, &mut report) {
                Ok(()) => return Ok(report),
                Err(e @ Error::KvPagesExhausted { .. }) => {
                    if self.drop_drafts() {
                        continue; // speculation never evicts nor preempts
                    }
                    if self.cache.evict_lru(&mut self.engine)? {
                        report.evicted += 1;
                        self.stats.evictions += 1;
                    } else if self.preempt_newest()? {
                        report.preempted += 1;
                    } else {
                        return Err(e);
                    }
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// The slot with the smallest key above `after` among those `want` accepts.
    fn next_slot(&self, after: Option<(u64, u32)>, want: impl Fn(&Slot) -> bool) -> Option<usize> {
        self.slots
            .iter()
            .enumerate()
            .filter(|(_, s)| want(s) && after.is_none_or(|a| s.key() > a))
            .min_by_key(|(_, s)| s.key())
            .map(|(i, _)| i)
    }

    /// The next step's rows over the active completions: a decode row for
    /// each (oldest first), then prefill and verify chunks (oldest first),
    /// while the token budget, the entry limit and the logit rows last;
    /// then the decode rows of completions with drafts grow by their drafts
    /// (oldest first) from what is left. Returns (rows, tokens).
    fn plan(&self, rows: &mut Rows) -> (usize, usize) {
        let max_logits = self.engine.limits().max_logit_rows;
        let (mut n, mut tokens, mut logits) = (0, 0, 0);
        for decode in [true, false] {
            let mut last = None;
            while n < self.max_entries && tokens < self.budget && logits < max_logits {
                let Some(i) = self.next_slot(last, |s| {
                    s.state() == State::Active && s.unfed() > 0 && s.in_decode() == decode
                }) else {
                    break;
                };
                let s = &self.slots[i];
                last = Some(s.key());
                rows[n] = if decode {
                    decode_row(s, i)
                } else {
                    chunk(s, i, self.budget - tokens, max_logits - logits)
                };
                tokens += rows[n].n as usize;
                logits += rows[n].logit_rows();
                n += 1;
            }
        }
        for r in rows[..n].iter_mut() {
            let s = &self.slots[r.slot as usize];
            if r.verify && s.drafted == 1 {
                let extra = (s.forced as usize)
                    .min(self.budget - tokens)
                    .min(max_logits - logits);
                r.n += extra as u32;
                tokens += extra;
                logits += extra;
            }
        }
        (n, tokens)
    }

    /// Writes n-gram drafts after the history of every completion eligible
    /// for speculation (see `draft.rs`). Nothing without
    /// [`SchedConfig::speculate`].
    fn propose_drafts(&mut self) {
        let Some(spec) = self.cfg.speculate else {
            return;
        };
        for (i, s) in self.slots.iter_mut().enumerate() {
            let left = (s.max_tokens as usize).saturating_sub(s.generated());
            if s.state() != State::Active || !s.decodes() || s.generated() == 0 || left < 2 {
                continue;
            }
            let start = i * self.stride;
            let Some(row) = self.tokens.get_mut(start..start + self.stride) else {
                continue;
            };
            if s.draft.max() == 0 {
                s.draft = DraftLen::new(spec.max_draft);
            }
            let want = s.draft.current();
            if want == 0 {
                // Paused after a miss: this step decodes plainly.
                s.draft.update(0, 0);
                continue;
            }
            // At most the tokens still to draw after the last row's own.
            let k = draft::propose(row, s.len as usize, want.min(left - 1));
            if k > 0 {
                s.forced = k as u32;
                s.drafted = 1;
            }
        }
    }

    /// Drops every completion's drafts; true if any were pending.
    fn drop_drafts(&mut self) -> bool {
        let mut any = false;
        for s in self.slots.iter_mut() {
            any |= s.drop_drafts();
        }
        any
    }

    /// Admits queued completions, oldest first, while sequence slots, the
    /// step's entries and token budget, and (estimated) KV pages allow; the
    /// first that does not fit ends admission (no overtaking). When nothing
    /// else runs the head of the queue is admitted whatever the estimate
    /// (the step evicts and preempts as it must). A completion whose history
    /// shares a prefix with a cached one forks it.
    fn admit(&mut self, report: &mut StepReport) -> Result<()> {
        let mut rows = [Row::EMPTY; MAX_STEP_ENTRIES];
        let (mut entries, mut tokens) = self.plan(&mut rows);
        let kv = self.engine.kv();
        let ps = kv.config().page_size.max(1);
        let mut pages: usize = rows[..entries]
            .iter()
            .map(|r| pages_to_grow(kv, self.slots[r.slot as usize].seq, r.n as usize))
            .sum();
        let available = kv.free_pages() + self.cache.evictable_pages(kv);
        let mut running = self.count(|s| s.has_seq == 1);
        let mut last = None;
        while entries < self.max_entries && tokens < self.budget {
            let Some(i) = self.next_slot(last, |s| s.state() == State::Queued) else {
                break;
            };
            let s = self.slots[i];
            last = Some(s.key());
            let leads = s.index == 0 && s.generated() == 0;
            let followers = if leads {
                self.count(|f| {
                    f.request == s.request && f.state() == State::Follower && f.has_seq == 0
                })
            } else {
                0
            };
            if running + 1 + followers > self.run_cap {
                break;
            }
            let len = s.len as usize;
            let start = i * self.stride;
            let hist = self.tokens.get(start..start + len).unwrap_or(&[]);
            let hit = self
                .cache
                .lookup(hist)
                .map(|h| (h, h.common.min(len.saturating_sub(1))))
                .filter(|&(_, m)| m > 0);
            let fed = hit.map_or(0, |(_, m)| m);
            let mut from = s;
            from.fed = fed as u32;
            let chunk = chunk(&from, i, self.budget - tokens, 1).n as usize;
            let need = (fed + chunk).div_ceil(ps) - fed.div_ceil(ps)
                + usize::from(!fed.is_multiple_of(ps));
            if entries > 0 && pages + need > available {
                break;
            }
            let seq = match hit {
                Some((h, m)) => self.fork_cached(h, m)?,
                None => self.engine.new_seq()?,
            };
            let slot = &mut self.slots[i];
            slot.seq = seq;
            slot.has_seq = 1;
            slot.fed = fed as u32;
            slot.set_state(State::Active);
            if leads {
                self.take_placeholders(s.request)?;
            }
            running += 1 + followers;
            entries += 1;
            tokens += chunk;
            pages += need;
            report.admitted += 1;
        }
        Ok(())
    }

    /// A new sequence holding the first `m` tokens of the cache entry `hit`.
    fn fork_cached(&mut self, hit: Hit, m: usize) -> Result<SeqId> {
        let child = self.engine.fork(hit.seq)?;
        if m < hit.len
            && let Err(err) = self.engine.truncate(child, m)
        {
            self.engine.free(child)?;
            return Err(err);
        }
        self.cache.touch(hit.entry);
        self.stats.prefix_hits += 1;
        self.stats.prefix_tokens += m as u64;
        Ok(child)
    }

    /// Empty placeholder sequences for the followers of `request`, so that
    /// their forks find a free sequence slot.
    fn take_placeholders(&mut self, request: u64) -> Result<()> {
        for i in 0..self.slots.len() {
            let f = self.slots[i];
            if f.request == request && f.state() == State::Follower && f.has_seq == 0 {
                let seq = self.engine.new_seq()?;
                self.slots[i].seq = seq;
                self.slots[i].has_seq = 1;
            }
        }
        Ok(())
    }

    /// Frees the sequence of slot `i` if it holds one.
    fn release(&mut self, i: usize) -> Result<()> {
        let s = &mut self.slots[i];
        if s.has_seq == 1 {
            s.has_seq = 0;
            let seq = s.seq;
            self.engine.free(seq)?;
        }
        Ok(())
    }

    /// Preempts the newest active completion (never the last one): frees its
    /// pages and requeues it with its history (prompt and generated tokens),
    /// which it recomputes when readmitted. A leader that had not sampled
    /// yet gives back its followers' placeholders too. False if fewer than
    /// two completions are active.
    fn preempt_newest(&mut self) -> Result<bool> {
        if self.running() < 2 {
            return Ok(false);
        }
        let Some(v) = self
            .slots
            .iter()
            .enumerate()
            .filter(|(_, s)| s.state() == State::Active)
            .max_by_key(|(_, s)| s.key())
            .map(|(i, _)| i)
        else {
            return Ok(false);
        };
        self.release(v)?;
        let s = &mut self.slots[v];
        s.fed = 0;
        s.set_state(State::Queued);
        let (request, leads) = (s.request, s.index == 0 && s.generated() == 0);
        if leads {
            for i in 0..self.slots.len() {
                if self.slots[i].request == request && self.slots[i].state() == State::Follower {
                    self.release(i)?;
                }
            }
        }
        self.stats.preemptions += 1;
        Ok(true)
    }

    /// An active completion whose whole history is committed (only after a
    /// step that failed while sampling) gives back its last row, so that the
    /// next step recomputes it and samples.
    fn repair(&mut self) -> Result<()> {
        for i in 0..self.slots.len() {
            let s = self.slots[i];
            if s.state() == State::Active && s.fed >= s.len && s.len > 0 {
                self.engine.truncate(s.seq, s.len as usize - 1)?;
                self.slots[i].fed = s.len - 1;
            }
        }
        Ok(())
    }

    /// Runs the planned rows through the engine, samples, forks followers,
    /// caches finished prompts and retires finished completions.
    /// [`Error::KvPagesExhausted`] comes from the engine step, before
    /// anything changed.
    fn run<P: Parallel, S: Sink + ?Sized>(
        &mut self,
        par: &P,
        rows: &[Row],
        constraint: &mut dyn Constraint,
        sink: &mut S,
        report: &mut StepReport,
    ) -> Result<()> {
        let stride = self.stride;
        let empty = Entry {
            seq: bytemuck::Zeroable::zeroed(),
            tokens: &[],
            all_logits: false,
        };
        let mut entries = [empty; MAX_STEP_ENTRIES];
        for (e, r) in entries.iter_mut().zip(rows) {
            let s = &self.slots[r.slot as usize];
            let start = r.slot as usize * stride + s.fed as usize;
            let tokens =
                self.tokens
                    .get(start..start + r.n as usize)
                    .ok_or(Error::BufferTooSmall {
                        needed: start + r.n as usize,
                        available: self.tokens.len(),
                    })?;
            *e = Entry {
                seq: s.seq,
                tokens,
                all_logits: r.verify,
            };
        }
        let vocab = self.engine.config().vocab_size;
        let logits = self.engine.step(par, &entries[..rows.len()])?;
        self.stats.steps += 1;
        for r in rows {
            let s = &mut self.slots[r.slot as usize];
            if s.drafted == 1 && r.verify {
                report.decoded += 1;
                report.drafted += r.n as usize - 1;
                self.stats.drafted += u64::from(r.n - 1);
            } else if !r.verify && s.decodes() {
                report.decoded += 1;
            } else {
                report.prefilled += r.n as usize;
                self.stats.tokens_prefilled += u64::from(r.n);
            }
            s.fed += r.n;
        }
        let step = (stride, logits, vocab);
        let mut first_row = 0;
        for r in rows {
            if r.verify {
                let mut kept = 0;
                let drafted = self.slots[r.slot as usize].drafted == 1;
                let mut resumed = Resumed {
                    par,
                    lanes: &mut self.lanes,
                    slots: self.slots,
                    tokens: self.tokens,
                    step,
                    constraint: &mut *constraint,
                    sink: &mut *sink,
                    tokens_out: &mut self.stats.tokens_out,
                    kept: &mut kept,
                    slot: r.slot as usize,
                    first_row,
                };
                let walked = accept(&mut resumed, r.n as usize);
                if drafted {
                    // The last row's proposal, if any, was not fed.
                    let fed = r.n as usize - 1;
                    let kept = kept.min(fed as u64);
                    self.stats.draft_kept += kept;
                    let s = &mut self.slots[r.slot as usize];
                    s.draft.update(fed, kept as usize);
                } else {
                    self.stats.resumed_kept += kept;
                }
                walked?;
            }
            first_row += r.logit_rows();
        }
        let n_jobs = plan_jobs(self.slots, rows, self.jobs)?;
        self.lanes.run(
            par,
            &self.jobs[..n_jobs],
            self.slots,
            self.tokens,
            (stride, logits, vocab),
            constraint,
            sink,
            &mut self.stats.tokens_out,
        )?;
        self.cut_verified(rows)?;
        self.fork_followers()?;
        self.cache_prompts(rows);
        self.retire_done(sink, report)
    }

    /// After a verify entry, the cache holds the history minus its last
    /// token, as plain decoding's: the rows past the last token drawn (a
    /// proposal that was not kept, and those after it) are cut.
    fn cut_verified(&mut self, rows: &[Row]) -> Result<()> {
        for r in rows.iter().filter(|r| r.verify) {
            let s = &mut self.slots[r.slot as usize];
            if s.state() == State::Active && s.has_seq == 1 && s.fed >= s.len {
                self.engine.truncate(s.seq, s.len as usize - 1)?;
                s.fed = s.len - 1;
            }
        }
        Ok(())
    }

    /// Followers that sampled their first token fork their leader's
    /// sequence (which holds exactly the prompt); without a leader to fork
    /// they are requeued and recompute their history.
    fn fork_followers(&mut self) -> Result<()> {
        for i in 0..self.slots.len() {
            if self.slots[i].state() != State::Forking {
                continue;
            }
            self.release(i)?; // the placeholder
            let f = self.slots[i];
            let leader = self.slots.iter().find(|l| {
                l.request == f.request && l.index == 0 && l.has_seq == 1 && l.fed == f.prompt_len
            });
            let child = match leader {
                Some(l) => self.engine.fork(l.seq).ok(),
                None => None,
            };
            let s = &mut self.slots[i];
            match child {
                Some(c) => {
                    s.seq = c;
                    s.has_seq = 1;
                    s.fed = s.prompt_len;
                    s.set_state(State::Active);
                }
                None => {
                    s.fed = 0;
                    s.set_state(State::Queued);
                }
            }
        }
        Ok(())
    }

    /// Caches the full pages of every prompt whose prefill ended this step
    /// (best effort: a failure leaves the cache as it was).
    fn cache_prompts(&mut self, rows: &[Row]) {
        if self.cfg.max_cached == 0 {
            return;
        }
        let ps = self.engine.limits().page_size.max(1);
        for r in rows {
            let i = r.slot as usize;
            let s = self.slots[i];
            let before = s.fed.saturating_sub(r.n);
            if s.has_seq == 0 || before >= s.prompt_len || s.fed < s.prompt_len {
                continue;
            }
            let full = s.prompt_len as usize / ps * ps;
            let start = i * self.stride;
            if let Some(prefix) = self.tokens.get(start..start + full) {
                let _ = self.cache.insert(&mut self.engine, s.seq, prefix);
            }
        }
    }

    /// Releases finished completions and reports them.
    fn retire_done<S: Sink + ?Sized>(
        &mut self,
        sink: &mut S,
        report: &mut StepReport,
    ) -> Result<()> {
        let mut failed = None;
        for i in 0..self.slots.len() {
            if self.slots[i].state() != State::Done {
                continue;
            }
            if let Err(e) = self.release(i) {
                failed.get_or_insert(e);
            }
            let s = &mut self.slots[i];
            s.set_state(State::Free);
            let reason = s.reason();
            sink.event(&Event::Finished(FinishEvent {
                request: RequestId(s.request),
                index: s.index,
                reason,
                n_tokens: s.generated(),
                digest: s.digest,
            }));
            if reason == FinishReason::Cancelled {
                self.stats.cancelled += 1;
            } else {
                self.stats.finished += 1;
                report.finished += 1;
            }
        }
        failed.map_or(Ok(()), Err)
    }
}

/// Pages a step adding `n` tokens to `seq` takes: new pages past its room,
/// and a copy of each shared page covering new positions (an upper bound
/// when several sequences of the step share a page).
fn pages_to_grow(kv: &PagedCache<'_>, seq: SeqId, n: usize) -> usize {
    let ps = kv.config().page_size.max(1);
    let (len, room) = (kv.len(seq).unwrap_or(0), kv.room(seq).unwrap_or(0));
    let grow = room.max(len + n).div_ceil(ps) - room.div_ceil(ps);
    let table = kv.page_table(seq).unwrap_or(&[]);
    let shared = table
        .iter()
        .skip(len / ps)
        .filter(|&&p| kv.refcount(p).unwrap_or(0) > 1)
        .count();
    grow + shared
}

/// The completions that sample this step, in order: each row that ends
/// its completion's history, and after a leader's first row its
/// followers (they draw their first token from the same row). Returns
/// how many were written to `jobs`.
fn plan_jobs(slots: &[Slot], rows: &[Row], jobs: &mut [Job]) -> Result<usize> {
    let (mut n, mut first_row) = (0, 0);
    let mut push = |job: Job| -> Result<()> {
        let available = jobs.len();
        *jobs.get_mut(n).ok_or(Error::BufferTooSmall {
            needed: n + 1,
            available,
        })? = job;
        n += 1;
        Ok(())
    };
    for r in rows {
        let s = &slots[r.slot as usize];
        let row = first_row as u32;
        first_row += r.logit_rows();
        if r.verify || s.fed != s.len {
            continue; // sampled by its walk, or a prefill chunk short of the end
        }
        push(Job {
            slot: r.slot,
            row,
            follower: 0,
        })?;
        if s.index == 0 && s.generated() == 0 {
            for (j, f) in slots.iter().enumerate() {
                if f.request == s.request && f.state() == State::Follower {
                    push(Job {
                        slot: j as u32,
                        row,
                        follower: 1,
                    })?;
                }
            }
        }
    }
    Ok(n)
}

/// Slot `i`'s decode row: its last history token; a verify entry of that
/// one row when it has drafts (the plan may grow it by the drafts).
fn decode_row(s: &Slot, i: usize) -> Row {
    Row {
        slot: i as u32,
        n: 1,
        verify: s.drafted == 1 && s.forced > 0,
    }
}

/// Slot `i`'s next entry, with `tokens` of the step's budget and
/// `logit_rows` of its logits rows left: without proposals, its unfed
/// history; with proposals, first the history up to its last token (no
/// logits), then that token and the proposals with a row each (a verify
/// entry: every row is drawn for).
fn chunk(s: &Slot, i: usize, tokens: usize, logit_rows: usize) -> Row {
    let unfed = s.unfed() as usize;
    let (n, verify) = if s.forced == 0 {
        (unfed.min(tokens), false)
    } else if s.fed + 1 < s.len {
        (((s.len - 1 - s.fed) as usize).min(tokens), false)
    } else {
        (unfed.min(tokens).min(logit_rows), true)
    };
    Row {
        slot: i as u32,
        n: n as u32,
        verify,
    }
}

/// A resumed completion's verify entry, as [`accept`] walks it: row `i`
/// follows the history's last token and the first `i` proposals; each draw
/// is the step's ordinary sampling of one job (the slot's sampler, PRNG,
/// penalty window, constraint, logprobs and events).
struct Resumed<'x, 'a, P, S: ?Sized> {
    par: &'x P,
    lanes: &'x mut Lanes<'a>,
    slots: &'x mut [Slot],
    tokens: &'x mut [u32],
    step: (usize, &'x [F32], usize),
    constraint: &'x mut dyn Constraint,
    sink: &'x mut S,
    tokens_out: &'x mut u64,
    kept: &'x mut u64,
    slot: usize,
    first_row: usize,
}

impl<P: Parallel, S: Sink + ?Sized> AcceptRows for Resumed<'_, '_, P, S> {
    fn proposed(&self, _i: usize) -> Option<u32> {
        let s = self.slots.get(self.slot)?;
        if s.forced == 0 {
            return None;
        }
        self.tokens
            .get(self.slot * self.step.0 + s.len as usize)
            .copied()
    }

    fn draw(&mut self, i: usize) -> Result<Drew> {
        let proposed = self.proposed(i);
        let before = self.slots.get(self.slot).ok_or(Error::SizeOverflow)?.len;
        let job = Job {
            slot: self.slot as u32,
            row: (self.first_row + i) as u32,
            follower: 0,
        };
        self.lanes.run(
            self.par,
            &[job],
            self.slots,
            self.tokens,
            self.step,
            &mut *self.constraint,
            &mut *self.sink,
            self.tokens_out,
        )?;
        let s = &mut self.slots[self.slot];
        if s.len == before {
            s.forced = 0;
            return Ok(Drew::Ended);
        }
        let at = self.slot * self.step.0 + s.len as usize - 1;
        let tok = self.tokens.get(at).copied().ok_or(Error::SizeOverflow)?;
        *self.kept += u64::from(proposed == Some(tok));
        s.forced = match proposed {
            Some(p) if p == tok && s.state() != State::Done => s.forced - 1,
            _ => 0,
        };
        Ok(if s.state() == State::Done {
            Drew::Last(tok)
        } else {
            Drew::Token(tok)
        })
    }
}
