//! The scheduler's contract as properties over random workloads on synthetic
//! models (llama and qwen2, f16 and f32 KV):
//!
//! * every finished completion's tokens, every step's audit digest, its final
//!   digest, finish reason and logprobs equal its solo run through
//!   `model::generate` (completion `i` with seed `seed + i`, the stop tokens
//!   as end-of-generation), whatever the arrival times, prompt lengths,
//!   shared prefixes (prefix-cache hits), `max_tokens`, token budgets, page
//!   pools (small enough to force preemption), cancellations, cache clears,
//!   `n > 1`, sampling parameters and thread count;
//! * a completion submitted with `submit_resumed` and the first k tokens of
//!   its solo run (sometimes one of them changed) is its solo run too, and
//!   the scheduler keeps exactly the resumed ids equal to the solo tokens
//!   before the first that differs (`Stats::resumed_kept`; planted bugs
//!   caught: the id compared one position late — kept 0 of 1; a draw from the
//!   row after its own — an error; the walk going on past a mismatch — the
//!   tokens differ);
//! * with n-gram speculation (`SchedConfig::speculate`, a random draft
//!   length), every completion is its solo run too, and every completion
//!   cancelled in neither run has the same events (tokens, digests, logprobs,
//!   finish) as in the same workload scheduled without speculation (planted
//!   bugs caught: the PRNG advanced once per draft row not drawn for; the
//!   rejected rows left in the KV cache, the bookkeeping cut);
//! * a cancelled completion's tokens, digests and logprobs are a prefix of its
//!   solo run's;
//! * every completion ends with exactly one `Finished` event, after its tokens;
//! * the paged cache's audit holds after every step, and when idle the free
//!   pages plus the prefix cache's pages are the whole pool; clearing the cache
//!   frees every page and sequence;
//! * errors are typed and change nothing.
//!
//! The solo reference: `generate` gives tokens and per-step digests; one
//! all-logits step over the solo history gives the rows the tokens were
//! sampled from (checked: the digest chain over them equals `generate`'s),
//! and the reference logprobs are `sched::logprobs` over those rows.
//!
//! Cases: `SCHED_CASES` (default 64, well under a minute in release). A
//! failing case is saved to `tests/engine/sched_props.proptest-regressions` and
//! replayed first on every later run (commit the file to keep it);
//! `PROPTEST_RNG_SEED=<u64>` fixes the seed of a whole run.
#![cfg(feature = "std")]

use detllm::audit::DigestChain;
use detllm::gguf::File;
use detllm::kv::{KvType, PagedCache};
use detllm::model::synth::{SynthSpec, synth_vec};
use detllm::model::{Arch, Engine, Entry, Limits, Model, generate};
use detllm::parallel::ThreadPool;
use detllm::quant::GgmlType;
use detllm::sample::{Sampler, SamplingParams};
use detllm::sched::{
    self, Event, FinishReason, MAX_TOP_LOGPROBS, NgramSpec, Request, RequestId, SchedConfig,
    Scheduler, TopLogprob,
};
use detllm::spec::DraftLen;
use detllm::{Arena, Error, F32, Parallel, Serial};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::OnceLock;

/// Longest sequence (prompt + max_tokens) of any workload.
const MAX_LEN: usize = 32;
/// Arena for model, engine and scheduler.
const ARENA: usize = 6 << 20;

fn f32v(x: f32) -> F32 {
    F32::from_bits(x.to_bits())
}

/// The synthetic models: TINY (llama, Q4_1) and a qwen2 (biases, NEOX RoPE,
/// 4 query heads per KV head, Q8_0, another vocabulary).
fn models() -> &'static [Vec<u8>; 2] {
    static M: OnceLock<[Vec<u8>; 2]> = OnceLock::new();
    M.get_or_init(|| {
        let qwen = SynthSpec {
            arch: Arch::Qwen2,
            n_kv_heads: 1,
            vocab_size: 61,
            weight_type: GgmlType::Q8_0,
            seed: 5,
            ..SynthSpec::TINY
        };
        [
            synth_vec(&SynthSpec::TINY).expect("tiny"),
            synth_vec(&qwen).expect("qwen"),
        ]
    })
}

#[derive(Clone, Debug)]
struct ReqSpec {
    /// Step at which it is submitted (retried while the queue is full).
    arrival: usize,
    prompt: Vec<u32>,
    max_tokens: usize,
    params: SamplingParams,
    stop: Vec<u32>,
    n: usize,
    logprobs: Option<usize>,
    /// Step from which it is cancelled.
    cancel_at: Option<usize>,
    /// (n = 1 only) Submitted with `submit_resumed` and the first `cut %
    /// (solo length + 1)` tokens of its solo run, one of them (at `pos %
    /// cut`) changed by `delta` when set.
    resume: Option<(usize, Option<(usize, u32)>)>,
}

#[derive(Clone, Debug)]
struct Workload {
    model: usize,
    kv_type: KvType,
    page_size: usize,
    /// Pages beyond the minimum (`ceil(MAX_LEN / page_size)`).
    extra_pages: usize,
    /// Engine sequences for completions (≥ the largest `n`).
    run_cap: usize,
    max_cached: usize,
    max_slots: usize,
    budget: usize,
    threads: usize,
    /// Sampling lanes (`SchedConfig::sample_lanes`).
    lanes: usize,
    /// `Some(max_draft)`: run with n-gram speculation, and once more without
    /// it to compare the events.
    speculate: Option<usize>,
    clear_at: Vec<usize>,
    reqs: Vec<ReqSpec>,
}

fn arb_params() -> impl Strategy<Value = SamplingParams> {
    (
        prop::sample::select(vec![0.0f32, 0.0, 0.5, 0.8, 1.0, 1.7]),
        prop::sample::select(vec![0u32, 0, 1, 3, 8]),
        prop::sample::select(vec![1.0f32, 1.0, 0.9, 0.5]),
        prop::sample::select(vec![0.0f32, 0.0, 0.05]),
        prop::sample::select(vec![1.0f32, 1.0, 1.1, 0.9]),
        0usize..=16,
        any::<u64>(),
    )
        .prop_map(
            |(t, top_k, top_p, min_p, pen, last_n, seed)| SamplingParams {
                temperature: f32v(t),
                top_k,
                top_p: f32v(top_p),
                min_p: f32v(min_p),
                repeat_penalty: f32v(pen),
                penalty_last_n: last_n,
                seed,
            },
        )
}

fn arb_req(base: Vec<u32>) -> impl Strategy<Value = ReqSpec> {
    let blen = base.len();
    (
        0usize..=12,
        0..=blen,
        prop::collection::vec(any::<u32>(), 1..=10),
        0usize..=12,
        arb_params(),
        prop::collection::vec(any::<u32>(), 0..=2),
        prop::sample::select(vec![1usize, 1, 1, 2, 3]),
        prop::option::weighted(0.4, prop::sample::select(vec![0usize, 1, 3, 5, 20])),
        prop::option::weighted(0.2, 0usize..=24),
        prop::option::weighted(
            0.4,
            (
                0usize..=32,
                prop::option::weighted(0.3, (any::<usize>(), any::<u32>())),
            ),
        ),
    )
        .prop_map(
            move |(
                arrival,
                share,
                suffix,
                max_tokens,
                params,
                stop,
                n,
                logprobs,
                cancel_at,
                resume,
            )| {
                let mut prompt = base[..share].to_vec();
                prompt.extend(suffix);
                prompt.truncate(MAX_LEN - 1);
                let max_tokens = max_tokens.min(MAX_LEN - prompt.len());
                ReqSpec {
                    arrival,
                    prompt,
                    max_tokens,
                    params,
                    stop,
                    n,
                    logprobs,
                    cancel_at,
                    resume,
                }
            },
        )
}

fn arb_workload() -> impl Strategy<Value = Workload> {
    (
        0usize..2,
        prop::sample::select(vec![KvType::F16, KvType::F32]),
        1usize..=8,
        0usize..=6,
        3usize..=5,
        0usize..=3,
        3usize..=12,
        1usize..=16,
        prop::sample::select(vec![1usize, 1, 2]),
        (1usize..=3, prop::option::weighted(0.6, 1usize..=8)),
        prop::collection::vec(0usize..30, 0..=2),
        prop::collection::vec(any::<u32>(), 0..=14),
    )
        .prop_flat_map(
            |(
                model,
                kv_type,
                page_size,
                extra,
                run_cap,
                max_cached,
                slots,
                budget,
                th,
                (lanes, speculate),
                clear,
                base,
            )| {
                prop::collection::vec(arb_req(base), 1..=6).prop_map(move |reqs| Workload {
                    model,
                    kv_type,
                    page_size,
                    extra_pages: extra,
                    run_cap,
                    max_cached,
                    max_slots: slots,
                    budget,
                    threads: th,
                    lanes,
                    speculate,
                    clear_at: clear.clone(),
                    reqs,
                })
            },
        )
}

/// A model and engine in one arena; `$body` runs with `$eng`, `$arena`, `$vocab`.
macro_rules! with_engine {
    ($model:expr, $lim:expr, |$eng:ident, $arena:ident, $vocab:ident| $body:expr) => {{
        let bytes: &[u8] = &models()[$model];
        let file = File::parse(bytes).expect("parse");
        let mut buf = vec![0u8; ARENA];
        let mut $arena = Arena::new(&mut buf);
        let model = Model::from_gguf(&file, bytes, &mut $arena).expect("model");
        let $vocab = model.cfg.vocab_size;
        #[allow(unused_mut)]
        let mut $eng = Engine::<PagedCache>::new(model, $lim, &mut $arena).expect("engine");
        $body
    }};
}

/// What one completion produced (solo or scheduled).
#[derive(Clone, Debug, Default, PartialEq)]
struct Run {
    tokens: Vec<u32>,
    digests: Vec<[u8; 32]>,
    logprobs: Vec<(F32, Vec<TopLogprob>)>,
    /// (reason, n_tokens, final digest)
    finish: Option<(FinishReason, usize, [u8; 32])>,
}

/// The solo run of one completion: `generate`, then the sampled-from rows
/// for the logprobs.
#[allow(clippy::too_many_arguments)]
fn solo<'a>(
    eng: &mut Engine<'a, PagedCache<'a>>,
    sampler: &mut Sampler<'_>,
    vocab: usize,
    prompt: &[u32],
    params: &SamplingParams,
    max_tokens: usize,
    stop: &[u32],
    logprobs: Option<usize>,
) -> Run {
    let p = prompt.len();
    let seq = eng.new_seq().expect("seq");
    let mut history = vec![0u32; p + max_tokens];
    let mut digests = Vec::new();
    let out = generate(
        eng,
        &Serial,
        sampler,
        seq,
        prompt,
        params,
        max_tokens,
        &mut history,
        &|t| stop.contains(&t),
        &mut |_, _, d| digests.push(*d),
    )
    .expect("generate");
    eng.free(seq).expect("free");
    let n = out.n_tokens;
    let tokens = history[p..p + n].to_vec();
    let mut run = Run {
        tokens: tokens.clone(),
        digests: digests.clone(),
        logprobs: Vec::new(),
        finish: None,
    };
    let reason = if n > 0 && stop.contains(&tokens[n - 1]) {
        FinishReason::Stop
    } else {
        FinishReason::Length
    };
    run.finish = Some((reason, n, out.chain.digest()));
    if n == 0 {
        assert_eq!(out.chain.digest(), DigestChain::new(params).digest());
        return run;
    }
    // Rows the tokens were sampled from: positions p-1 .. p+n-2.
    let s = eng.new_seq().expect("seq");
    let rows = eng
        .step(
            &Serial,
            &[Entry {
                seq: s,
                tokens: &history[..p + n - 1],
                all_logits: true,
            }],
        )
        .expect("rows")
        .to_vec();
    eng.free(s).expect("free");
    let mut chain = DigestChain::new(params);
    let mut work = vec![F32::ZERO; vocab];
    for k in 0..n {
        let row = &rows[(p - 1 + k) * vocab..(p + k) * vocab];
        assert_eq!(chain.step(row, tokens[k]), digests[k], "solo rows");
        if let Some(kk) = logprobs {
            let mut top = [TopLogprob::default(); MAX_TOP_LOGPROBS];
            let (lp, m) = sched::logprobs(
                row,
                params,
                &history[..p + k],
                tokens[k],
                &mut work,
                &mut top[..kk],
            )
            .expect("logprobs");
            run.logprobs.push((lp, top[..m].to_vec()));
        }
    }
    run
}

/// Coverage of the schedules run (summed over cases).
#[derive(Debug, Default)]
struct Coverage {
    preemptions: u64,
    prefix_hits: u64,
    evictions: u64,
    cancelled_midway: u64,
    forked_finished: u64,
    stopped: u64,
    with_logprobs: u64,
    queue_full: u64,
    clears: u64,
    /// Speculation: draft rows verified, drafts kept, and completions whose
    /// events were compared with the run without speculation.
    drafted: u64,
    draft_kept: u64,
    compared_plain: u64,
    /// Resumed completions that ran to the end (with ids, with a wrong id).
    resumed: u64,
    resumed_wrong: u64,
}

fn params_of(r: &ReqSpec, i: usize) -> SamplingParams {
    SamplingParams {
        seed: r.params.seed.wrapping_add(i as u64),
        ..r.params
    }
}

fn check(w: &Workload, cov: &mut Coverage) -> Result<(), TestCaseError> {
    // Tokens taken mod the model's vocabulary.
    let vocab = {
        let bytes: &[u8] = &models()[w.model];
        Model::from_gguf(
            &File::parse(bytes).expect("parse"),
            bytes,
            &mut Arena::new(&mut vec![0u8; ARENA]),
        )
        .expect("model")
        .cfg
        .vocab_size
    };
    let reqs: Vec<ReqSpec> = w
        .reqs
        .iter()
        .map(|r| ReqSpec {
            prompt: r.prompt.iter().map(|t| t % vocab as u32).collect(),
            stop: r.stop.iter().map(|t| t % vocab as u32).collect(),
            ..r.clone()
        })
        .collect();
    // Solo runs.
    let solo_lim = Limits {
        max_seqs: 1,
        max_seq_len: MAX_LEN,
        max_step_tokens: MAX_LEN,
        max_logit_rows: MAX_LEN,
        kv_type: w.kv_type,
        page_size: 16,
        n_pages: MAX_LEN / 16 + 1,
    };
    let solos: Vec<Vec<Run>> = with_engine!(w.model, solo_lim, |eng, arena, v| {
        let mut sampler = Sampler::new(&mut arena, v).expect("sampler");
        reqs.iter()
            .map(|r| {
                (0..r.n)
                    .map(|i| {
                        solo(
                            &mut eng,
                            &mut sampler,
                            v,
                            &r.prompt,
                            &params_of(r, i),
                            r.max_tokens,
                            &r.stop,
                            r.logprobs,
                        )
                    })
                    .collect()
            })
            .collect()
    });
    let resumes: Vec<Vec<u32>> = reqs
        .iter()
        .zip(&solos)
        .map(|(r, runs)| resumed_ids(r, &runs[0].tokens, vocab))
        .collect();
    let solo_tokens: Vec<Vec<u32>> = solos.iter().map(|runs| runs[0].tokens.clone()).collect();
    // The scheduled run.
    let n_pages = MAX_LEN.div_ceil(w.page_size) + w.extra_pages;
    let lim = Limits {
        max_seqs: w.run_cap + w.max_cached,
        max_seq_len: MAX_LEN,
        max_step_tokens: w.budget,
        max_logit_rows: w.run_cap + w.max_cached,
        kv_type: w.kv_type,
        page_size: w.page_size,
        n_pages,
    };
    let schedule = |speculate: Option<usize>, cov: &mut Coverage| {
        let cfg = SchedConfig {
            max_slots: w.max_slots,
            max_cached: w.max_cached,
            token_budget: w.budget,
            sample_lanes: w.lanes,
            speculate: speculate.map(|max_draft| NgramSpec { max_draft }),
        };
        with_engine!(w.model, lim, |eng, arena, _v| {
            let mut sched = Scheduler::new(eng, cfg, &mut arena).expect("scheduler");
            if w.threads > 1 {
                drive(
                    &mut sched,
                    &ThreadPool::new(w.threads).expect("pool"),
                    w,
                    (&reqs, &resumes, &solo_tokens),
                    cov,
                )
            } else {
                drive(&mut sched, &Serial, w, (&reqs, &resumes, &solo_tokens), cov)
            }
        })
    };
    let got = schedule(w.speculate, cov)?;
    // With speculation: every completion cancelled in neither run has the
    // events of the scheduler without it (cancellations land at a step, and
    // the runs take different steps: the prefix property below covers them).
    if w.speculate.is_some() {
        let plain = schedule(None, &mut Coverage::default())?;
        let finished = |run: Option<&Run>| {
            run.and_then(|r| r.finish)
                .is_some_and(|f| f.0 != FinishReason::Cancelled)
        };
        for (key, run) in &got {
            if finished(Some(run)) && finished(plain.get(key)) {
                prop_assert_eq!(
                    Some(run),
                    plain.get(key),
                    "request {} completion {}: speculation changed the events",
                    key.0,
                    key.1
                );
                cov.compared_plain += 1;
            }
        }
    }
    // Compare.
    for (r, (spec, solo_runs)) in reqs.iter().zip(&solos).enumerate() {
        for (i, want) in solo_runs.iter().enumerate() {
            let have = got.get(&(r, i)).cloned().unwrap_or_default();
            let ctx = format!("request {r} completion {i}: {spec:?}");
            let Some((reason, n, digest)) = have.finish else {
                return Err(TestCaseError::fail(format!("{ctx}: never finished")));
            };
            prop_assert_eq!(n, have.tokens.len(), "{}", ctx);
            prop_assert_eq!(have.digests.len(), n, "{}", ctx);
            if reason == FinishReason::Cancelled {
                let k = n;
                prop_assert!(k <= want.tokens.len(), "{}", ctx);
                prop_assert_eq!(&have.tokens[..], &want.tokens[..k], "{}", ctx);
                prop_assert_eq!(&have.digests[..], &want.digests[..k], "{}", ctx);
                if spec.logprobs.is_some() {
                    prop_assert_eq!(&have.logprobs[..], &want.logprobs[..k], "{}", ctx);
                }
                let last = have
                    .digests
                    .last()
                    .copied()
                    .unwrap_or_else(|| DigestChain::new(&params_of(spec, i)).digest());
                prop_assert_eq!(digest, last, "{}", ctx);
                if k > 0 && k < want.tokens.len() {
                    cov.cancelled_midway += 1;
                }
            } else {
                prop_assert_eq!(&have.tokens, &want.tokens, "{}", ctx);
                prop_assert_eq!(&have.digests, &want.digests, "{}", ctx);
                prop_assert_eq!(&have.logprobs, &want.logprobs, "{}", ctx);
                prop_assert_eq!(have.finish, want.finish, "{}", ctx);
                if i > 0 && n > 0 {
                    cov.forked_finished += 1;
                }
                if reason == FinishReason::Stop {
                    cov.stopped += 1;
                }
                if spec.logprobs.is_some() && n > 0 {
                    cov.with_logprobs += 1;
                }
                let ids = &resumes[r];
                if !ids.is_empty() {
                    cov.resumed += 1;
                    cov.resumed_wrong += u64::from(ids[..] != want.tokens[..ids.len()]);
                }
            }
        }
    }
    Ok(())
}

type Got = HashMap<(usize, usize), Run>;

/// The ids request `r` is resumed with (empty: submitted plainly), from
/// its solo run's tokens.
fn resumed_ids(r: &ReqSpec, solo: &[u32], vocab: usize) -> Vec<u32> {
    let Some((cut, wrong)) = r.resume.filter(|_| r.n == 1) else {
        return Vec::new();
    };
    let mut ids = solo[..cut % (solo.len() + 1)].to_vec();
    if let Some((pos, delta)) = wrong.filter(|_| !ids.is_empty() && vocab > 1) {
        let p = pos % ids.len();
        let d = 1 + delta % (vocab as u32 - 1);
        ids[p] = (ids[p] + d) % vocab as u32;
    }
    ids
}

/// Runs the workload to the end; returns every completion's events by
/// (request index, completion index).
fn drive<P: Parallel>(
    sched: &mut Scheduler<'_>,
    par: &P,
    w: &Workload,
    (reqs, resumes, solos): (&[ReqSpec], &[Vec<u32>], &[Vec<u32>]),
    cov: &mut Coverage,
) -> Result<Got, TestCaseError> {
    let runs: RefCell<HashMap<(u64, u32), Run>> = RefCell::new(HashMap::new());
    let anomalies: RefCell<Vec<String>> = RefCell::new(Vec::new());
    let mut sink = |ev: &Event<'_>| {
        let mut runs = runs.borrow_mut();
        match *ev {
            Event::Token(t) => {
                let run = runs.entry((t.request.0, t.index)).or_default();
                if run.finish.is_some() || t.position != run.tokens.len() {
                    anomalies
                        .borrow_mut()
                        .push(format!("token event out of order: {t:?}"));
                }
                run.tokens.push(t.token);
                run.digests.push(t.digest);
                if let Some(lp) = t.logprob {
                    run.logprobs.push((lp, t.top_logprobs.to_vec()));
                } else if !t.top_logprobs.is_empty() {
                    anomalies.borrow_mut().push("top without logprob".into());
                }
            }
            Event::Finished(f) => {
                let run = runs.entry((f.request.0, f.index)).or_default();
                if run.finish.is_some() {
                    anomalies
                        .borrow_mut()
                        .push(format!("finished twice: {f:?}"));
                }
                run.finish = Some((f.reason, f.n_tokens, f.digest));
            }
        }
    };
    let n_pages = sched.engine().kv().n_pages();
    let mut ids: Vec<Option<RequestId>> = vec![None; reqs.len()];
    let mut cancelled = vec![false; reqs.len()];
    let mut step = 0usize;
    loop {
        for (r, spec) in reqs.iter().enumerate() {
            if ids[r].is_none() && spec.arrival <= step {
                let req = Request {
                    prompt: &spec.prompt,
                    max_tokens: spec.max_tokens,
                    params: spec.params,
                    stop: &spec.stop,
                    n: spec.n,
                    logprobs: spec.logprobs,
                };
                let submitted = if resumes[r].is_empty() {
                    sched.submit(&req)
                } else {
                    sched.submit_resumed(&req, &resumes[r], false)
                };
                match submitted {
                    Ok(id) => ids[r] = Some(id),
                    Err(Error::QueueFull { capacity }) => {
                        prop_assert_eq!(capacity, w.max_slots);
                        cov.queue_full += 1;
                    }
                    Err(e) => return Err(TestCaseError::fail(format!("submit {r}: {e}"))),
                }
            }
            if let (Some(id), Some(c)) = (ids[r], spec.cancel_at)
                && c <= step
                && !cancelled[r]
            {
                cancelled[r] = true;
                let done = (0..spec.n).all(|i| {
                    runs.borrow()
                        .get(&(id.0, i as u32))
                        .is_some_and(|x| x.finish.is_some())
                });
                match sched.cancel(id, &mut sink) {
                    Ok(()) => prop_assert!(!done, "cancel of a finished request"),
                    Err(Error::UnknownRequest { id: x }) => {
                        prop_assert_eq!(x, id.0);
                        prop_assert!(done, "UnknownRequest for a live request");
                    }
                    Err(e) => return Err(TestCaseError::fail(format!("cancel: {e}"))),
                }
            }
        }
        if w.clear_at.contains(&step) {
            sched.clear_cache().expect("clear");
            prop_assert_eq!(sched.cached(), 0);
            cov.clears += 1;
        }
        if ids.iter().all(Option::is_some) && sched.is_idle() {
            break;
        }
        sched
            .step(par, &mut sink)
            .map_err(|e| TestCaseError::fail(format!("step {step}: {e}")))?;
        prop_assert!(sched.engine().kv().audit(), "KV audit after step {}", step);
        step += 1;
        prop_assert!(step < 3000, "no progress");
    }
    let a = anomalies.borrow();
    prop_assert!(a.is_empty(), "{:?}", *a);
    // No leaks: idle, every page is free or held by the prefix cache.
    let kv = sched.engine().kv();
    prop_assert_eq!(kv.live_seqs(), sched.cached());
    prop_assert_eq!(kv.free_pages() + sched.cached_pages(), n_pages);
    let stats = sched.stats();
    // Every resumed id equal to its solo token is kept, unless cancelled first.
    let common = |r: usize| {
        let solo = &solos[r];
        resumes[r]
            .iter()
            .zip(solo)
            .take_while(|(a, b)| a == b)
            .count() as u64
    };
    let all: u64 = (0..reqs.len()).map(common).sum();
    let uncancelled: u64 = (0..reqs.len()).filter(|&r| !cancelled[r]).map(common).sum();
    prop_assert!(
        (uncancelled..=all).contains(&stats.resumed_kept),
        "resumed ids kept: {} not in {}..={}",
        stats.resumed_kept,
        uncancelled,
        all
    );
    cov.drafted += stats.drafted;
    cov.draft_kept += stats.draft_kept;
    cov.preemptions += stats.preemptions;
    cov.prefix_hits += stats.prefix_hits;
    cov.evictions += stats.evictions;
    sched.clear_cache().expect("clear");
    let kv = sched.engine().kv();
    prop_assert_eq!(kv.free_pages(), n_pages);
    prop_assert_eq!(kv.live_seqs(), 0);
    prop_assert!(kv.audit());
    let runs = runs.into_inner();
    let mut got = Got::new();
    for (r, id) in ids.iter().enumerate() {
        let id = id.expect("submitted");
        for i in 0..reqs[r].n {
            if let Some(run) = runs.get(&(id.0, i as u32)) {
                got.insert((r, i), run.clone());
            }
        }
    }
    Ok(got)
}

fn cases() -> u32 {
    std::env::var("SCHED_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(64)
}

#[test]
fn every_completion_equals_its_solo_run() {
    // Failures are replayable: a failing case's seed is saved to
    // tests/engine/sched_props.proptest-regressions (the file beside this source,
    // proptest's default persistence, which needs `source_file`) and
    // replayed first on every later run; PROPTEST_RNG_SEED=<u64> fixes the
    // seed of a whole run.
    let mut runner = TestRunner::new(Config {
        cases: cases(),
        source_file: Some(file!()),
        ..Config::default()
    });
    let cov = RefCell::new(Coverage::default());
    let result = runner.run(&arb_workload(), |w| check(&w, &mut cov.borrow_mut()));
    if let Err(e) = result {
        panic!("{e}");
    }
    let cov = cov.into_inner();
    println!("coverage: {cov:?}");
    // The schedules really reach what the property is about.
    if cases() >= 40 {
        assert!(cov.preemptions > 0, "{cov:?}");
        assert!(cov.prefix_hits > 0, "{cov:?}");
        assert!(cov.evictions > 0, "{cov:?}");
        assert!(cov.cancelled_midway > 0, "{cov:?}");
        assert!(cov.forked_finished > 0, "{cov:?}");
        assert!(cov.stopped > 0, "{cov:?}");
        assert!(cov.with_logprobs > 0, "{cov:?}");
        assert!(cov.queue_full > 0, "{cov:?}");
        assert!(cov.resumed > 0, "{cov:?}");
        assert!(cov.resumed_wrong > 0, "{cov:?}");
        assert!(cov.draft_kept > 0, "{cov:?}");
        assert!(cov.drafted > cov.draft_kept, "{cov:?}");
        assert!(cov.compared_plain > 0, "{cov:?}");
    }
}

// ---------------------------------------------------------------------------
// The draft length adapts per completion.

/// A completion under n-gram speculation proposes, step by step, no more
/// drafts than `DraftLen` allows after the drafts kept so far (the
/// reference `DraftLen` fed each step's drafted and kept counts, from
/// `Scheduler::stats`): random repetitive prompts (so that the n-gram
/// lookup finds matches), seeds, temperatures and draft maxima. Across the
/// cases some step must be paused after a miss and some must draft more
/// than one token, so that both rules are exercised (planted: the update
/// after the verify walk left out — the length stays at its start and
/// passes the reference's after the first partial acceptance).
#[test]
fn draft_length_adapts_to_kept_drafts() {
    let mut runner = TestRunner::new(Config {
        cases: cases(),
        source_file: Some(file!()),
        ..Config::default()
    });
    let strategy = (
        prop::collection::vec(1u32..6, 2..5),
        2usize..5,
        1usize..9,
        any::<u64>(),
        prop_oneof![Just(0.0f32), 0.3f32..1.2],
    );
    let seen = RefCell::new((0usize, 0usize));
    let result = runner.run(&strategy, |(motif, reps, max_draft, seed, temp)| {
        let prompt: Vec<u32> = motif
            .iter()
            .copied()
            .cycle()
            .take(motif.len() * reps)
            .collect();
        let max_tokens = MAX_LEN - prompt.len();
        let lim = Limits {
            max_seqs: 2,
            max_seq_len: MAX_LEN,
            max_step_tokens: 16,
            max_logit_rows: 16,
            kv_type: KvType::F16,
            page_size: 4,
            n_pages: MAX_LEN / 4 + 2,
        };
        let cfg = SchedConfig {
            max_slots: 1,
            max_cached: 0,
            token_budget: 16,
            sample_lanes: 1,
            speculate: Some(NgramSpec { max_draft }),
        };
        let params = SamplingParams {
            temperature: f32v(temp),
            seed,
            ..SamplingParams::GREEDY
        };
        with_engine!(0, lim, |eng, arena, _v| {
            let mut sched = Scheduler::new(eng, cfg, &mut arena).expect("scheduler");
            let req = Request {
                prompt: &prompt,
                max_tokens,
                params,
                stop: &[],
                n: 1,
                logprobs: None,
            };
            sched.submit(&req).expect("submit");
            let mut sink = |_: &Event<'_>| {};
            let mut want = DraftLen::new(max_draft);
            let (mut drafted, mut kept) = (0u64, 0u64);
            let mut steps = 0;
            while !sched.is_idle() {
                let allowed = want.current();
                sched.step(&Serial, &mut sink).expect("step");
                let st = sched.stats();
                let (d, k) = (
                    (st.drafted - drafted) as usize,
                    (st.draft_kept - kept) as usize,
                );
                (drafted, kept) = (st.drafted, st.draft_kept);
                prop_assert!(d <= allowed, "step {steps}: {d} drafts, {allowed} allowed");
                let mut seen = seen.borrow_mut();
                seen.0 += usize::from(allowed == 0 && want.max() > 0);
                seen.1 += usize::from(d > 1);
                want.update(d, k);
                steps += 1;
                prop_assert!(steps < 200, "no progress");
            }
            Ok(())
        })
    });
    if let Err(e) = result {
        panic!("{e}");
    }
    let (paused, long) = seen.into_inner();
    println!("paused steps {paused}, steps drafting more than one {long}");
    if cases() >= 40 {
        assert!(paused > 0, "no step was paused");
        assert!(long > 0, "no step drafted more than one token");
    }
}

// ---------------------------------------------------------------------------
// Typed errors that change nothing.

fn small_limits() -> Limits {
    Limits {
        max_seqs: 4,
        max_seq_len: MAX_LEN,
        max_step_tokens: 8,
        max_logit_rows: 4,
        kv_type: KvType::F16,
        page_size: 4,
        n_pages: 6,
    }
}

/// A bad request and the check its error must pass.
type BadRequest<'r> = (Request<'r>, fn(&Error) -> bool);

#[test]
fn bad_requests_are_typed_errors_and_change_nothing() {
    let cfg = SchedConfig {
        max_slots: 3,
        max_cached: 1,
        token_budget: 8,
        sample_lanes: 1,
        speculate: None,
    };
    with_engine!(0, small_limits(), |eng, arena, vocab| {
        let mut sched = Scheduler::new(eng, cfg, &mut arena).expect("scheduler");
        let g = SamplingParams::GREEDY;
        let ok = Request::new(&[1, 2, 3], 4, g);
        let bad_token = [vocab as u32];
        let cases: Vec<BadRequest> = vec![
            (Request::new(&[], 4, g), |e| matches!(e, Error::EmptyPrompt)),
            (Request::new(&bad_token, 4, g), |e| {
                matches!(e, Error::TokenOutOfRange { .. })
            }),
            (Request { n: 0, ..ok }, |e| {
                matches!(e, Error::InvalidSampling { param: "n" })
            }),
            (Request { n: 4, ..ok }, |e| {
                matches!(e, Error::InvalidSampling { param: "n" })
            }),
            (
                Request {
                    logprobs: Some(21),
                    ..ok
                },
                |e| {
                    matches!(
                        e,
                        Error::InvalidSampling {
                            param: "top_logprobs"
                        }
                    )
                },
            ),
            (
                Request {
                    stop: &[1; 17],
                    ..ok
                },
                |e| matches!(e, Error::InvalidSampling { param: "stop" }),
            ),
            // 6 pages of 4 tokens: 24 tokens at most.
            (Request::new(&[1; 20], 5, g), |e| {
                matches!(e, Error::PromptTooLong { len: 25, max: 24 })
            }),
            (Request::new(&[1], usize::MAX, g), |e| {
                matches!(e, Error::PromptTooLong { .. })
            }),
            (
                Request::new(
                    &[1],
                    1,
                    SamplingParams {
                        temperature: F32::NAN,
                        ..g
                    },
                ),
                |e| !matches!(e, Error::QueueFull { .. }),
            ),
        ];
        for (req, is) in &cases {
            let e = sched.submit(req).expect_err("bad request accepted");
            assert!(is(&e), "{req:?}: {e:?}");
            assert!(sched.is_idle());
        }
        assert_eq!(sched.max_len(), 24);
        // Queue full: 3 slots.
        let a = sched.submit(&Request { n: 2, ..ok }).expect("a");
        let e = sched.submit(&Request { n: 2, ..ok }).expect_err("full");
        assert_eq!(e, Error::QueueFull { capacity: 3 });
        assert_eq!(sched.queued(), 2);
        let b = sched.submit(&ok).expect("b");
        assert_ne!(a, b);
        // Unknown request: never submitted, and after cancellation.
        let mut events = Vec::new();
        let mut sink = |ev: &Event<'_>| {
            if let Event::Finished(f) = ev {
                events.push((f.request, f.index, f.reason, f.n_tokens));
            }
        };
        assert_eq!(
            sched.cancel(RequestId(99), &mut sink),
            Err(Error::UnknownRequest { id: 99 })
        );
        sched.cancel(a, &mut sink).expect("cancel");
        assert_eq!(
            sched.cancel(a, &mut sink),
            Err(Error::UnknownRequest { id: a.0 })
        );
        while !sched.is_idle() {
            sched.step(&Serial, &mut sink).expect("step");
        }
        assert_eq!(
            events,
            vec![
                (a, 0, FinishReason::Cancelled, 0),
                (a, 1, FinishReason::Cancelled, 0),
                (b, 0, FinishReason::Length, 4)
            ]
        );
        sched.clear_cache().expect("clear");
        assert_eq!(sched.engine().kv().free_pages(), 6);
    });
}

#[test]
fn bad_configs_are_typed_errors() {
    let lim = small_limits();
    let good = SchedConfig {
        max_slots: 3,
        max_cached: 1,
        token_budget: 8,
        sample_lanes: 1,
        speculate: None,
    };
    let bad = [
        (
            SchedConfig {
                max_slots: 0,
                ..good
            },
            "max_slots",
        ),
        (
            SchedConfig {
                max_cached: 4,
                ..good
            },
            "max_cached",
        ),
        (
            SchedConfig {
                token_budget: 0,
                ..good
            },
            "token_budget",
        ),
        (
            SchedConfig {
                token_budget: 9,
                ..good
            },
            "token_budget",
        ),
        (
            SchedConfig {
                sample_lanes: 0,
                ..good
            },
            "sample_lanes",
        ),
        (
            SchedConfig {
                sample_lanes: detllm::sched::MAX_SAMPLE_LANES + 1,
                ..good
            },
            "sample_lanes",
        ),
        (
            SchedConfig {
                speculate: Some(NgramSpec { max_draft: 0 }),
                ..good
            },
            "max_draft",
        ),
        (
            SchedConfig {
                speculate: Some(NgramSpec {
                    max_draft: detllm::sched::MAX_DRAFT + 1,
                }),
                ..good
            },
            "max_draft",
        ),
    ];
    for (cfg, name) in bad {
        with_engine!(0, lim, |eng, arena, _v| {
            let e = Scheduler::new(eng, cfg, &mut arena)
                .err()
                .expect("bad config");
            assert!(
                matches!(e, Error::InvalidLimit { name: n, .. } if n == name),
                "{e:?}"
            );
        });
    }
    // The plan is exact: one byte short is ArenaExhausted, arena untouched.
    with_engine!(0, lim, |eng, arena, vocab| {
        let need = Scheduler::bytes_required(&good, &lim, vocab).expect("plan");
        let mut small = vec![0u8; need - 1];
        let mut a2 = Arena::new(&mut small);
        let e = Scheduler::new(eng, good, &mut a2).err().expect("too small");
        assert!(matches!(e, Error::ArenaExhausted { .. }), "{e:?}");
        assert_eq!(a2.used(), 0);
        let _ = &mut arena;
    });
    with_engine!(0, lim, |eng, arena, vocab| {
        let need = Scheduler::bytes_required(&good, &lim, vocab).expect("plan");
        let mut exact = vec![0u8; need];
        let mut a2 = Arena::new(&mut exact);
        Scheduler::new(eng, good, &mut a2).expect("the planned bytes suffice");
        let _ = &mut arena;
    });
}

// ---------------------------------------------------------------------------
// Logprobs against an f64 reference.

proptest! {
    #![proptest_config(Config::with_cases(256))]

    #[test]
    fn logprobs_match_an_f64_log_softmax(
        raw in prop::collection::vec(-2000i32..2000, 1..80),
        temp in prop::sample::select(vec![0.0f32, 0.3, 1.0, 2.5]),
        k in 0usize..=20,
        pick in any::<prop::sample::Index>(),
    ) {
        // Logits on a coarse grid, so that ties happen.
        let logits: Vec<F32> = raw.iter().map(|&r| f32v((r / 40) as f32 * 0.25)).collect();
        let n = logits.len();
        let token = pick.index(n) as u32;
        let params = SamplingParams { temperature: f32v(temp), ..SamplingParams::GREEDY };
        let mut work = vec![F32::ZERO; n];
        let mut top = vec![TopLogprob::default(); k];
        let (lp, m) = sched::logprobs(&logits, &params, &[], token, &mut work, &mut top)
            .expect("logprobs");
        prop_assert_eq!(m, k.min(n));
        let t = if temp == 0.0 { 1.0 } else { temp as f64 };
        let xs: Vec<f64> = logits.iter().map(|l| f32::from_bits(l.to_bits()) as f64 / t).collect();
        let max = xs.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
        let lse = max + xs.iter().map(|x| (x - max).exp()).sum::<f64>().ln();
        let want = xs[token as usize] - lse;
        let got = f32::from_bits(lp.to_bits()) as f64;
        prop_assert!((got - want).abs() <= 1e-5 * (1.0 + want.abs()), "{} vs {}", got, want);
        // Top: the k largest, ties to the lowest id, each equal to its own logprob.
        let mut order: Vec<usize> = (0..n).collect();
        order.sort_by(|&a, &b| logits[b].total_cmp(logits[a]).then(a.cmp(&b)));
        for (j, c) in top[..m].iter().enumerate() {
            prop_assert_eq!(c.token as usize, order[j]);
            let (lpj, _) = sched::logprobs(&logits, &params, &[], c.token, &mut work, &mut [])
                .expect("logprob");
            prop_assert_eq!(c.logprob, lpj);
        }
    }
}

/// The distribution `sched::logprobs` documents, computed independently in
/// f64 from the same logits: the repetition penalty (each distinct token of
/// the last `penalty_last_n` of `history` once, ids past the vocabulary
/// ignored: `l > 0` becomes `l / p`, otherwise `l · p`), NaN as `-inf`,
/// division by the temperature (1 when greedy), a log-softmax over the whole
/// vocabulary (top-k, top-p and min-p do not enter).
fn f64_penalized_log_softmax(logits: &[F32], params: &SamplingParams, history: &[u32]) -> Vec<f64> {
    let f = |x: F32| f32::from_bits(x.to_bits()) as f64;
    let mut v: Vec<f64> = logits
        .iter()
        .map(|&l| if l.is_nan() { f64::NEG_INFINITY } else { f(l) })
        .collect();
    let p = f(params.repeat_penalty);
    let window = &history[history.len().saturating_sub(params.penalty_last_n)..];
    let mut seen = std::collections::BTreeSet::new();
    for &t in window {
        if seen.insert(t) && (t as usize) < v.len() {
            let l = &mut v[t as usize];
            *l = if *l > 0.0 { *l / p } else { *l * p };
        }
    }
    let t = if params.temperature.is_zero() {
        1.0
    } else {
        f(params.temperature)
    };
    let xs: Vec<f64> = v.iter().map(|x| x / t).collect();
    let max = xs.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
    let lse = max + xs.iter().map(|x| (x - max).exp()).sum::<f64>().ln();
    xs.iter().map(|x| x - lse).collect()
}

proptest! {
    #![proptest_config(Config::with_cases(512))]

    /// Logprobs under a repetition penalty, a history (repeats, ids past
    /// the vocabulary, longer and shorter than the penalty window),
    /// temperatures and the truncating samplers, against
    /// [`f64_penalized_log_softmax`]: the token's logprob and every top
    /// entry's within 1e-5 relative; the top entries the largest reference
    /// values, exact reference ties to the lowest id; top-k, top-p and
    /// min-p change no bit.
    #[test]
    fn penalized_logprobs_match_an_f64_reference(
        raw in prop::collection::vec(-2000i32..2000, 1..80),
        history in prop::collection::vec(0u32..90, 0..48),
        penalty in prop::sample::select(vec![1.0f32, 1.1, 1.3, 2.0, 0.8]),
        last_n in 0usize..=64,
        temp in prop::sample::select(vec![0.0f32, 0.3, 0.7, 1.0, 1.5]),
        top_k in prop::sample::select(vec![0u32, 1, 5, 40]),
        top_p in prop::sample::select(vec![1.0f32, 0.9, 0.5]),
        min_p in prop::sample::select(vec![0.0f32, 0.05, 0.2]),
        k in 0usize..=20,
        pick in any::<prop::sample::Index>(),
    ) {
        // A coarse grid (ties), with an occasional -inf and NaN.
        let logits: Vec<F32> = raw
            .iter()
            .map(|&r| match r {
                1999 => F32::NEG_INFINITY,
                -1999 => F32::NAN,
                _ => f32v((r / 40) as f32 * 0.25),
            })
            .collect();
        let n = logits.len();
        let token = pick.index(n) as u32;
        let params = SamplingParams {
            temperature: f32v(temp),
            top_k,
            top_p: f32v(top_p),
            min_p: f32v(min_p),
            repeat_penalty: f32v(penalty),
            penalty_last_n: last_n,
            seed: 7,
        };
        let want = f64_penalized_log_softmax(&logits, &params, &history);
        let close = |got: F32, want: f64| {
            let got = f32::from_bits(got.to_bits()) as f64;
            got == want || (got - want).abs() <= 1e-5 * (1.0 + want.abs())
        };
        prop_assume!(want.iter().any(|x| x.is_finite()), "every logit -inf or NaN");
        let mut work = vec![F32::ZERO; n];
        let mut top = vec![TopLogprob::default(); k];
        let (lp, m) = sched::logprobs(&logits, &params, &history, token, &mut work, &mut top)
            .expect("logprobs");
        prop_assert!(close(lp, want[token as usize]), "token {}: {:?} vs {}", token, lp, want[token as usize]);
        prop_assert_eq!(m, k.min(n));
        // Top: the j-th entry holds a j-th largest reference value; entries
        // with equal reference values in id order; each its own logprob.
        let mut sorted = want.clone();
        sorted.sort_by(|a, b| b.total_cmp(a));
        for (j, c) in top[..m].iter().enumerate() {
            let id = c.token as usize;
            prop_assert!(close(c.logprob, want[id]), "top {}: id {} {:?} vs {}", j, id, c.logprob, want[id]);
            prop_assert!(close(c.logprob, sorted[j]), "top {}: id {} {:?}, rank value {}", j, id, c.logprob, sorted[j]);
            if j > 0 && want[top[j - 1].token as usize] == want[id] {
                prop_assert!(top[j - 1].token < c.token, "tie order at {}", j);
            }
            let (own, _) = sched::logprobs(&logits, &params, &history, c.token, &mut work, &mut [])
                .expect("logprob");
            prop_assert_eq!(c.logprob, own);
        }
        // The truncating samplers do not enter the reported distribution.
        let plain = SamplingParams { top_k: 0, top_p: F32::ONE, min_p: F32::ZERO, ..params };
        let (lp_plain, _) = sched::logprobs(&logits, &plain, &history, token, &mut work, &mut [])
            .expect("logprobs");
        prop_assert_eq!(lp, lp_plain);
    }
}

#[test]
fn logprob_errors_are_typed() {
    let logits = [F32::ZERO; 4];
    let mut work = [F32::ZERO; 3];
    let g = SamplingParams::GREEDY;
    assert!(matches!(
        sched::logprobs(&logits, &g, &[], 4, &mut [F32::ZERO; 4], &mut []),
        Err(Error::TokenOutOfRange {
            token: 4,
            vocab_size: 4
        })
    ));
    assert!(matches!(
        sched::logprobs(&logits, &g, &[], 0, &mut work, &mut []),
        Err(Error::BufferTooSmall {
            needed: 4,
            available: 3
        })
    ));
}
