//! Continuous batching: a `no_std` scheduler over [`Engine::step`] whose
//! every completion is the same bits as its solo run, whatever the load.
//!
//! ## What it does
//!
//! Requests (prompt, `max_tokens`, [`SamplingParams`] with a seed, stop
//! tokens, `n` completions, logprobs) wait in a bounded queue
//! ([`Scheduler::submit`]; full is [`Error::QueueFull`]). Each
//! [`Scheduler::step`] fills one engine step under a token budget: one decode
//! row per running completion, then prefill chunks of admitted ones (chunked
//! prefill: a long prompt never stalls the decoders). A completion is
//! admitted only when a sequence slot and (by estimate) KV pages are free.
//! When a step cannot get its pages, the prefix cache gives back its least
//! recently used entry first; then the newest running completion is
//! **preempted**: its pages are freed and it is requeued with its history
//! (prompt and tokens generated so far), which it prefills again when
//! readmitted. [`Scheduler::cancel`] frees a request at any point. Events (a
//! token with its logprobs, a finished completion with its reason and audit
//! digest) go to a caller's [`Sink`].
//!
//! **Prefix cache.** When a prompt's prefill ends, its full KV pages are kept
//! as a forked sequence of the paged cache (bounded, LRU). A later request
//! whose history starts with some of those tokens forks the entry, cuts it to
//! the shared length and prefills only the rest; copy-on-write keeps the
//! entry intact. `n > 1` completions share the prompt's pages the same way:
//! completion 0 prefills, the others fork it when it samples its first token.
//!
//! **Constraints.** A request submitted with
//! [`Scheduler::submit_constrained`] samples under the caller's
//! [`Constraint`](crate::constraint::Constraint), passed to
//! [`Scheduler::step_constrained`]: before each token its mask (a pure
//! function of the tokens generated so far) is applied to the row, so the
//! token, logprobs and digests are those of the constrained distribution; an
//! empty mask ends the completion with [`FinishReason::Constraint`]. The
//! mask follows the completion through preemption and `n > 1` forks, since
//! it depends only on the completion's own tokens
//! (`tests/engine/constrain_props.rs`).
//!
//! **Resumed completions.** [`Scheduler::submit_resumed`] takes ids a
//! client already holds from an interrupted run: they are fed with the
//! prompt in prefill-sized chunks, every row from the prompt's last token on
//! with its logits (a verify entry, within the step's logit rows), and each
//! row's token is drawn exactly as decoding draws it and compared with the
//! id — the acceptance rule of speculative decoding (`spec::accept`, one
//! function for both). An id is kept only while it equals its draw; after
//! the first that does not, the rows past the token drawn are cut from the
//! cache and decoding goes on. So the events are the plain run's whatever
//! the ids are, and k correct ids cost one prefill pass instead of k steps.
//!
//! **Speculation.** With [`SchedConfig::speculate`], a decoding
//! completion feeds n-gram drafts from its own history after its last
//! token, verified by the same walk as resumed ids, in the token budget
//! and logits rows plain scheduling leaves over; rejected rows are cut
//! in the same step. The events are those of the scheduler without it
//! (`draft.rs` states the rules and who is not eligible).
//!
//! All memory is carved from the caller's [`Arena`] once
//! ([`Scheduler::bytes_required`]); nothing allocates afterwards.
//!
//! ## The contract
//!
//! A finished completion's tokens, per-token digests, final digest and
//! logprobs are a function of (model, request, completion index) alone: they
//! equal the solo run of [`model::generate`] over the prompt with the
//! request's parameters (completion `i` with seed `seed + i`), `max_tokens`
//! and its stop tokens as end-of-generation — whatever else is queued, the
//! arrival order, the token budget, the page count, the cache's content,
//! preemptions, cancellations of other requests, the thread count and the
//! sampling lanes. Why it
//! holds: a completion samples with its own [`Sampler`] state (PRNG, history,
//! digest chain, kept in its slot), always from the logits row of its last
//! history token, and that row does not depend on what shares the step
//! (batch invariance), on how the history was chunked or recomputed
//! (chunking invariance), or on whether its first rows were forked from a
//! cached prefix (paged fork == recomputed). A cancelled completion's tokens
//! are a prefix of its solo run's.
//!
//! Errors are typed and change nothing; nothing panics on any input; no page
//! leaks: when idle, the free pages plus [`Scheduler::cached_pages`] are the
//! whole pool, and [`Scheduler::clear_cache`] returns it all.
//!
//! ## How it is verified
//!
//! `tests/engine/sched_props.rs` (proptest) drives random workloads — arrival times,
//! prompt lengths, shared prefixes, `max_tokens`, budgets, page pools small
//! enough to force preemption, cancellations, `n > 1`, temperatures, seeds,
//! stop tokens, logprobs, cache clears, resumed requests (a prefix of the
//! solo run, sometimes with a wrong id) — on synthetic models, and checks every
//! finished completion against its solo `generate` run (tokens, every step's
//! digest, final digest; logprobs against [`logprobs`] over the solo run's
//! rows), cancelled ones as prefixes, the KV audit after every step, and the
//! page count when idle. `fuzz/fuzz_targets/sched.rs` drives it with
//! arbitrary submit / cancel / step / clear sequences. The unit tests of
//! `slot.rs` check the slot's PRNG and digest state against the library's.
//!
//! ## Example
//!
//! ```
//! use detllm::kv::{KvType, PagedCache};
//! use detllm::model::synth::{SynthSpec, synth_vec};
//! use detllm::model::{Engine, Limits, Model};
//! use detllm::sample::SamplingParams;
//! use detllm::sched::{Event, FinishReason, Request, SchedConfig, Scheduler};
//! use detllm::{Arena, Error, Serial};
//!
//! # fn main() -> Result<(), Error> {
//! let bytes = synth_vec(&SynthSpec::TINY)?;
//! let file = detllm::gguf::File::parse(&bytes)?;
//! let mut buf = vec![0u8; 1 << 21];
//! let mut arena = Arena::new(&mut buf);
//! let model = Model::from_gguf(&file, &bytes, &mut arena)?;
//! let limits = Limits {
//!     max_seqs: 4,
//!     max_seq_len: 32,
//!     max_step_tokens: 8,
//!     max_logit_rows: 4,
//!     kv_type: KvType::F16,
//!     page_size: 4,
//!     n_pages: 12,
//! };
//! let engine = Engine::<PagedCache>::new(model, limits, &mut arena)?;
//! let cfg = SchedConfig { max_slots: 8, max_cached: 1, token_budget: 8, sample_lanes: 1, speculate: None };
//! let mut sched = Scheduler::new(engine, cfg, &mut arena)?;
//!
//! // Two requests, the second with two sampled completions and logprobs.
//! let greedy = Request::new(&[1, 2, 3, 4, 5], 6, SamplingParams::GREEDY);
//! let a = sched.submit(&greedy)?;
//! let sampled = SamplingParams { temperature: detllm::F32::ONE, seed: 7, ..SamplingParams::GREEDY };
//! let b = sched.submit(&Request { n: 2, logprobs: Some(3), ..Request::new(&[1, 2, 3, 4, 9], 4, sampled) })?;
//!
//! let mut tokens = vec![Vec::new(); 3];
//! let mut finished = 0;
//! while !sched.is_idle() {
//!     sched.step(&Serial, &mut |ev: &Event| match *ev {
//!         Event::Token(t) => {
//!             let who = if t.request == a { 0 } else { 1 + t.index as usize };
//!             tokens[who].push(t.token);
//!             assert_eq!(t.top_logprobs.len(), if t.request == b { 3 } else { 0 });
//!         }
//!         Event::Finished(f) => {
//!             assert_eq!(f.reason, FinishReason::Length);
//!             finished += 1;
//!         }
//!     })?;
//! }
//! assert_eq!((tokens[0].len(), tokens[1].len(), finished), (6, 4, 3));
//! // Idle: every page is free or held by the prefix cache.
//! let kv = sched.engine().kv();
//! assert_eq!(kv.free_pages() + sched.cached_pages(), kv.n_pages());
//! # Ok(())
//! # }
//! ```
//!
//! [`Engine::step`]: crate::model::Engine::step
//! [`model::generate`]: crate::model::generate
//! [`SamplingParams`]: crate::sample::SamplingParams
//! [`Sampler`]: crate::sample::Sampler
//! [`Error::QueueFull`]: crate::Error::QueueFull
//! [`Arena`]: crate::Arena

#![deny(unsafe_code)]

mod cache;
mod draft;
mod event;
mod logprob;
mod sampling;
mod scheduler;
mod slot;

pub use draft::{MAX_DRAFT, NgramSpec};
pub use event::{Event, FinishEvent, FinishReason, RequestId, Sink, TokenEvent};
pub use logprob::{MAX_TOP_LOGPROBS, TopLogprob, logprobs};
pub use sampling::MAX_SAMPLE_LANES;
pub use scheduler::{MAX_STEP_ENTRIES, Request, SchedConfig, Scheduler, Stats, StepReport};
pub use slot::MAX_STOP;
