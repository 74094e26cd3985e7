//! Token constraints through the scheduler, as properties over random
//! workloads on a synthetic model:
//!
//! * every token a constrained completion samples is one its constraint
//!   allowed for the tokens before it, and the constraint sees each
//!   completion's tokens in order (`fill` with the tokens committed so far,
//!   `commit` with a token the last `fill` allowed);
//! * every completion — constrained or not, mixed in one workload, under
//!   page pools small enough to force preemption, prefix-cache forks,
//!   `n > 1`, several lanes and threads — equals its solo run: tokens, every
//!   step's digest, finish reason and final digest, logprobs;
//! * a mask with no token ends the completion with `FinishReason::Constraint`.
//!
//! The constraint is a pure function of (salt, tokens so far): a hash picks
//! a dead end (empty mask), a single token, or about half the vocabulary.
//! The solo reference does not use the scheduler: one engine sequence, the
//! mask applied with `TokenMask::apply`, the library's `Sampler`,
//! `DigestChain` and `sched::logprobs` over the masked row.
//!
//! Cases: `CONSTRAIN_CASES` (default 48; 8 in debug builds, which CI also runs).
#![cfg(feature = "std")]

use detllm::audit::DigestChain;
use detllm::constraint::{Completion, Constraint, TokenMask};
use detllm::gguf::File;
use detllm::kv::{KvType, PagedCache};
use detllm::model::synth::{SynthSpec, synth_vec};
use detllm::model::{Engine, Entry, Limits, Model};
use detllm::parallel::ThreadPool;
use detllm::sample::{Sampler, SamplingParams, SplitMix64};
use detllm::sched::{
    self, Event, FinishReason, MAX_TOP_LOGPROBS, Request, SchedConfig, Scheduler, TopLogprob,
};
use detllm::{Arena, Error, F32, Parallel, Serial};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use std::cell::RefCell;
use std::collections::HashMap;

const MAX_LEN: usize = 28;
const ARENA: usize = 6 << 20;

fn f32v(x: f32) -> F32 {
    F32::from_bits(x.to_bits())
}

fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The test's constraint: the allowed set after `generated`, a pure
/// function of (salt, generated).
fn allowed_set(salt: u64, generated: &[u32], vocab: usize, mask: &mut TokenMask<'_>) {
    let h = generated
        .iter()
        .fold(mix(salt), |h, &t| mix(h ^ u64::from(t)));
    mask.clear();
    match h % 16 {
        0 if !generated.is_empty() => {} // a dead end
        1..=3 => mask.allow((h >> 8) as u32 % vocab as u32),
        _ => {
            for t in 0..vocab as u32 {
                if mix(h ^ u64::from(t) << 32) & 1 == 1 {
                    mask.allow(t);
                }
            }
            if mask.is_empty() {
                mask.allow((h >> 8) as u32 % vocab as u32);
            }
        }
    }
}

fn allows(salt: u64, generated: &[u32], vocab: usize, token: u32) -> bool {
    let mut words = vec![0u32; TokenMask::words_for(vocab)];
    let mut m = TokenMask::new(&mut words, vocab).expect("mask");
    allowed_set(salt, generated, vocab, &mut m);
    m.allows(token)
}

#[derive(Clone, Debug)]
struct ReqSpec {
    arrival: usize,
    prompt: Vec<u32>,
    max_tokens: usize,
    params: SamplingParams,
    stop: Vec<u32>,
    n: usize,
    logprobs: Option<usize>,
    /// `Some(salt)`: constrained (completion `i` with salt `salt + i`).
    salt: Option<u64>,
}

#[derive(Clone, Debug)]
struct Workload {
    page_size: usize,
    extra_pages: usize,
    run_cap: usize,
    max_cached: usize,
    budget: usize,
    threads: usize,
    lanes: usize,
    reqs: Vec<ReqSpec>,
}

fn arb_req(base: Vec<u32>) -> impl Strategy<Value = ReqSpec> {
    let blen = base.len();
    (
        0usize..=8,
        0..=blen,
        prop::collection::vec(any::<u32>(), 1..=8),
        0usize..=12,
        (
            prop::sample::select(vec![0.0f32, 0.7, 1.0, 1.5]),
            prop::sample::select(vec![0u32, 0, 2, 5]),
            prop::sample::select(vec![1.0f32, 1.0, 0.8]),
            prop::sample::select(vec![1.0f32, 1.0, 1.2]),
            any::<u64>(),
        ),
        prop::collection::vec(any::<u32>(), 0..=2),
        prop::sample::select(vec![1usize, 1, 2, 3]),
        prop::option::weighted(0.4, prop::sample::select(vec![0usize, 2, 5])),
        prop::option::weighted(0.7, any::<u64>()),
    )
        .prop_map(
            move |(arrival, share, suffix, max_tokens, p, stop, n, logprobs, salt)| {
                let mut prompt = base[..share].to_vec();
                prompt.extend(suffix);
                prompt.truncate(MAX_LEN - 1);
                let max_tokens = max_tokens.min(MAX_LEN - prompt.len());
                let params = SamplingParams {
                    temperature: f32v(p.0),
                    top_k: p.1,
                    top_p: f32v(p.2),
                    repeat_penalty: f32v(p.3),
                    penalty_last_n: 8,
                    seed: p.4,
                    ..SamplingParams::GREEDY
                };
                ReqSpec {
                    arrival,
                    prompt,
                    max_tokens,
                    params,
                    stop,
                    n,
                    logprobs,
                    salt,
                }
            },
        )
}

fn arb_workload() -> impl Strategy<Value = Workload> {
    (
        1usize..=6,
        0usize..=5,
        3usize..=5,
        0usize..=2,
        1usize..=12,
        prop::sample::select(vec![1usize, 1, 2]),
        1usize..=3,
        prop::collection::vec(any::<u32>(), 0..=10),
    )
        .prop_flat_map(
            |(page_size, extra, run_cap, max_cached, budget, th, lanes, base)| {
                prop::collection::vec(arb_req(base), 1..=6).prop_map(move |reqs| Workload {
                    page_size,
                    extra_pages: extra,
                    run_cap,
                    max_cached,
                    budget,
                    threads: th,
                    lanes,
                    reqs,
                })
            },
        )
}

fn model_bytes() -> &'static [u8] {
    static M: std::sync::OnceLock<Vec<u8>> = std::sync::OnceLock::new();
    M.get_or_init(|| synth_vec(&SynthSpec::TINY).expect("tiny"))
}

/// What one completion produced.
#[derive(Clone, Debug, Default, PartialEq)]
struct Run {
    tokens: Vec<u32>,
    digests: Vec<[u8; 32]>,
    logprobs: Vec<(F32, Vec<TopLogprob>)>,
    finish: Option<(FinishReason, usize, [u8; 32])>,
}

/// The solo run of one completion, outside the scheduler.
fn solo<'a>(
    eng: &mut Engine<'a, PagedCache<'a>>,
    sampler: &mut Sampler<'_>,
    r: &ReqSpec,
    i: usize,
) -> Run {
    let vocab = eng.config().vocab_size;
    let params = SamplingParams {
        seed: r.params.seed.wrapping_add(i as u64),
        ..r.params
    };
    let salt = r.salt.map(|s| s.wrapping_add(i as u64));
    let mut run = Run::default();
    let mut chain = DigestChain::new(&params);
    if r.max_tokens == 0 {
        run.finish = Some((FinishReason::Length, 0, chain.digest()));
        return run;
    }
    let seq = eng.new_seq().expect("seq");
    let mut hist = r.prompt.clone();
    let mut rng = SplitMix64::new(params.seed);
    let mut words = vec![0u32; TokenMask::words_for(vocab)];
    let (mut masked, mut work) = (vec![F32::ZERO; vocab], vec![F32::ZERO; vocab]);
    let mut feed = r.prompt.clone();
    let reason = loop {
        let row = eng
            .step(
                &Serial,
                &[Entry {
                    seq,
                    tokens: &feed,
                    all_logits: false,
                }],
            )
            .expect("step")[..vocab]
            .to_vec();
        let mut mask = TokenMask::new(&mut words, vocab).expect("mask");
        match salt {
            Some(s) => allowed_set(s, &run.tokens, vocab, &mut mask),
            None => mask.allow_all(),
        }
        if mask.is_empty() {
            break FinishReason::Constraint;
        }
        mask.apply(&row, &mut masked).expect("apply");
        let tok = sampler
            .sample(&masked, &params, &hist, &mut rng)
            .expect("sample");
        run.digests.push(chain.step(&masked, tok));
        if let Some(k) = r.logprobs {
            let mut top = [TopLogprob::default(); MAX_TOP_LOGPROBS];
            let (lp, m) = sched::logprobs(&masked, &params, &hist, tok, &mut work, &mut top[..k])
                .expect("logprobs");
            run.logprobs.push((lp, top[..m].to_vec()));
        }
        hist.push(tok);
        run.tokens.push(tok);
        if r.stop.contains(&tok) {
            break FinishReason::Stop;
        }
        if run.tokens.len() == r.max_tokens {
            break FinishReason::Length;
        }
        feed = vec![tok];
    };
    eng.free(seq).expect("free");
    run.finish = Some((reason, run.tokens.len(), chain.digest()));
    run
}

/// The test's constraint as the scheduler sees it, checking the protocol.
struct Salted {
    vocab: usize,
    /// Request id -> salt of completion 0.
    salts: HashMap<u64, u64>,
    /// Tokens committed per completion, and the last mask filled.
    seen: HashMap<(u64, u32), (Vec<u32>, Vec<u32>)>,
    anomalies: Vec<String>,
}

impl Constraint for Salted {
    fn fill(&mut self, who: Completion, generated: &[u32], mask: &mut TokenMask<'_>) {
        let Some(&salt) = self.salts.get(&who.request.0) else {
            self.anomalies
                .push(format!("fill for unconstrained {who:?}"));
            mask.allow_all();
            return;
        };
        allowed_set(
            salt.wrapping_add(u64::from(who.index)),
            generated,
            self.vocab,
            mask,
        );
        let e = self.seen.entry((who.request.0, who.index)).or_default();
        if e.0 != generated {
            self.anomalies.push(format!(
                "{who:?}: fill after {generated:?}, committed {:?}",
                e.0
            ));
        }
        e.1 = mask.words().to_vec();
    }

    fn commit(&mut self, who: Completion, token: u32) {
        let e = self.seen.entry((who.request.0, who.index)).or_default();
        let ok =
            e.1.get(token as usize / 32)
                .is_some_and(|w| w & (1 << (token % 32)) != 0);
        if !ok {
            self.anomalies
                .push(format!("{who:?}: committed {token}, not in its last mask"));
        }
        e.0.push(token);
    }
}

/// Each (request index, completion index)'s run.
type Runs = HashMap<(usize, u32), Run>;

fn drive<P: Parallel>(
    sched: &mut Scheduler<'_>,
    par: &P,
    reqs: &[ReqSpec],
    vocab: usize,
) -> Result<(Runs, u64), TestCaseError> {
    let runs: RefCell<HashMap<(u64, u32), Run>> = RefCell::new(HashMap::new());
    let mut sink = |ev: &Event<'_>| {
        let mut runs = runs.borrow_mut();
        match *ev {
            Event::Token(t) => {
                let run = runs.entry((t.request.0, t.index)).or_default();
                run.tokens.push(t.token);
                run.digests.push(t.digest);
                if let Some(lp) = t.logprob {
                    run.logprobs.push((lp, t.top_logprobs.to_vec()));
                }
            }
            Event::Finished(f) => {
                let run = runs.entry((f.request.0, f.index)).or_default();
                run.finish = Some((f.reason, f.n_tokens, f.digest));
            }
        }
    };
    let mut c = Salted {
        vocab,
        salts: HashMap::new(),
        seen: HashMap::new(),
        anomalies: Vec::new(),
    };
    let mut ids = vec![None; reqs.len()];
    let mut step = 0usize;
    loop {
        for (r, spec) in reqs.iter().enumerate() {
            if ids[r].is_some() || spec.arrival > step {
                continue;
            }
            let req = Request {
                stop: &spec.stop,
                n: spec.n,
                logprobs: spec.logprobs,
                ..Request::new(&spec.prompt, spec.max_tokens, spec.params)
            };
            let got = match spec.salt {
                Some(_) => sched.submit_constrained(&req),
                None => sched.submit(&req),
            };
            match got {
                Ok(id) => {
                    if let Some(s) = spec.salt {
                        c.salts.insert(id.0, s);
                    }
                    ids[r] = Some(id);
                }
                Err(Error::QueueFull { .. }) => {}
                Err(e) => return Err(TestCaseError::fail(format!("submit {r}: {e}"))),
            }
        }
        if ids.iter().all(Option::is_some) && sched.is_idle() {
            break;
        }
        sched
            .step_constrained(par, &mut c, &mut sink)
            .map_err(|e| TestCaseError::fail(format!("step {step}: {e}")))?;
        step += 1;
        prop_assert!(step < 3000, "no progress");
    }
    prop_assert!(c.anomalies.is_empty(), "{:?}", c.anomalies);
    let runs = runs.into_inner();
    let mut out = HashMap::new();
    for (r, id) in ids.iter().enumerate() {
        for i in 0..reqs[r].n as u32 {
            let run = runs.get(&(id.expect("submitted").0, i)).cloned();
            out.insert((r, i), run.unwrap_or_default());
        }
    }
    Ok((out, sched.stats().preemptions))
}

/// Totals over the cases, to show the workloads reach what is tested.
#[derive(Debug, Default)]
struct Coverage {
    constrained_tokens: u64,
    dead_ends: u64,
    preemptions: u64,
}

fn check(w: &Workload, cov: &mut Coverage) -> Result<(), TestCaseError> {
    let bytes = model_bytes();
    let file = File::parse(bytes).expect("parse");
    fn build<'a>(
        file: &File<'a>,
        bytes: &'a [u8],
        lim: Limits,
        buf: &'a mut [u8],
    ) -> (Engine<'a, PagedCache<'a>>, Arena<'a>) {
        let mut arena = Arena::new(buf);
        let model = Model::from_gguf(file, bytes, &mut arena).expect("model");
        let eng = Engine::<PagedCache>::new(model, lim, &mut arena).expect("engine");
        (eng, arena)
    }
    let (mut buf1, mut buf2) = (vec![0u8; ARENA], vec![0u8; ARENA]);
    let solo_lim = Limits {
        max_seqs: 1,
        max_seq_len: MAX_LEN,
        max_step_tokens: MAX_LEN,
        max_logit_rows: 1,
        kv_type: KvType::F16,
        page_size: 8,
        n_pages: MAX_LEN / 8 + 1,
    };
    let (mut eng, mut arena) = build(&file, bytes, solo_lim, &mut buf1);
    let vocab = eng.config().vocab_size;
    let reqs: Vec<ReqSpec> = w
        .reqs
        .iter()
        .map(|r| ReqSpec {
            prompt: r.prompt.iter().map(|t| t % vocab as u32).collect(),
            stop: r.stop.iter().map(|t| t % vocab as u32).collect(),
            ..r.clone()
        })
        .collect();
    let mut sampler = Sampler::new(&mut arena, vocab).expect("sampler");
    let mut solos = HashMap::new();
    for (r, spec) in reqs.iter().enumerate() {
        for i in 0..spec.n {
            solos.insert((r, i as u32), solo(&mut eng, &mut sampler, spec, i));
        }
    }
    let lim = Limits {
        max_seqs: w.run_cap + w.max_cached,
        max_seq_len: MAX_LEN,
        max_step_tokens: w.budget,
        max_logit_rows: w.run_cap + w.max_cached,
        kv_type: KvType::F16,
        page_size: w.page_size,
        n_pages: MAX_LEN.div_ceil(w.page_size) + w.extra_pages,
    };
    let cfg = SchedConfig {
        max_slots: 8,
        max_cached: w.max_cached,
        token_budget: w.budget,
        sample_lanes: w.lanes,
        speculate: None,
    };
    let (eng, mut arena) = build(&file, bytes, lim, &mut buf2);
    let mut sched = Scheduler::new(eng, cfg, &mut arena).expect("scheduler");
    let (got, preempted) = if w.threads > 1 {
        let pool = ThreadPool::new(w.threads).expect("pool");
        drive(&mut sched, &pool, &reqs, vocab)?
    } else {
        drive(&mut sched, &Serial, &reqs, vocab)?
    };
    cov.preemptions += preempted;
    for (key, want) in &solos {
        let (r, i) = *key;
        let run = &got[key];
        if let Some(salt) = reqs[r].salt.map(|s| s.wrapping_add(u64::from(i))) {
            for (k, &t) in run.tokens.iter().enumerate() {
                prop_assert!(
                    allows(salt, &run.tokens[..k], vocab, t),
                    "req {} completion {}: token {} at {} not allowed",
                    r,
                    i,
                    t,
                    k
                );
            }
            cov.constrained_tokens += run.tokens.len() as u64;
        }
        if matches!(run.finish, Some((FinishReason::Constraint, ..))) {
            cov.dead_ends += 1;
        }
        prop_assert_eq!(run, want, "req {} completion {}", r, i);
    }
    Ok(())
}

fn cases() -> u32 {
    std::env::var("CONSTRAIN_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(if cfg!(debug_assertions) { 8 } else { 48 })
}

#[test]
fn constrained_completions_are_allowed_and_equal_their_solo_runs() {
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
    if cases() >= 32 {
        assert!(cov.constrained_tokens > 0, "{cov:?}");
        assert!(cov.dead_ends > 0, "{cov:?}");
        assert!(cov.preemptions > 0, "{cov:?}");
    }
}
