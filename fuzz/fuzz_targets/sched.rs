//! The scheduler driven by arbitrary event sequences (submit, cancel, step,
//! clear the prefix cache) on the tiny synthetic model with a small page
//! pool: nothing panics, every error is typed and changes nothing, the KV
//! audit holds after every operation, events are well formed, the run
//! drains, no page leaks, and every finished completion equals its solo
//! `generate` run (tokens and every step's digest; a cancelled one is a
//! prefix of it).
//!
//! Input: 6 header bytes (page size, extra pages, completion sequences,
//! cache entries, queue slots, token budget), then operations, each an
//! opcode byte and its arguments.
#![no_main]

use detllm::audit::DigestChain;
use detllm::gguf::File;
use detllm::kv::{KvType, PagedCache};
use detllm::model::synth::{SynthSpec, synth_vec};
use detllm::model::{Engine, Limits, Model, generate};
use detllm::sample::{Sampler, SamplingParams};
use detllm::sched::{Event, FinishReason, Request, RequestId, SchedConfig, Scheduler};
use detllm::{Arena, Error, F32, Serial};
use libfuzzer_sys::fuzz_target;
use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::OnceLock;

const VOCAB: u32 = 96;
const MAX_LEN: usize = 24;

fn model_bytes() -> &'static [u8] {
    static BYTES: OnceLock<Vec<u8>> = OnceLock::new();
    BYTES.get_or_init(|| synth_vec(&SynthSpec::TINY).expect("synth"))
}

/// Reads bytes, zeros past the end.
struct Bytes<'d> {
    data: &'d [u8],
    at: usize,
}

impl Bytes<'_> {
    fn next(&mut self) -> u8 {
        let b = self.data.get(self.at).copied().unwrap_or(0);
        self.at += 1;
        b
    }
    fn done(&self) -> bool {
        self.at >= self.data.len()
    }
}

#[derive(Clone, Debug)]
struct Spec {
    prompt: Vec<u32>,
    max_tokens: usize,
    params: SamplingParams,
    stop: Vec<u32>,
    n: usize,
}

#[derive(Default, Debug, Clone)]
struct Run {
    tokens: Vec<u32>,
    digests: Vec<[u8; 32]>,
    finish: Option<(FinishReason, usize, [u8; 32])>,
}

fn with_engine<R>(
    lim: Limits,
    f: impl for<'a> FnOnce(Engine<'a, PagedCache<'a>>, &mut Arena<'a>) -> R,
) -> R {
    let bytes = model_bytes();
    let file = File::parse(bytes).expect("parse");
    let mut buf = vec![0u8; 1 << 22];
    let mut arena = Arena::new(&mut buf);
    let model = Model::from_gguf(&file, bytes, &mut arena).expect("model");
    let eng = Engine::<PagedCache>::new(model, lim, &mut arena).expect("engine");
    f(eng, &mut arena)
}

/// Tokens and per-step digests of completion `i` of `s` run alone.
fn solo(s: &Spec, i: usize) -> Run {
    let lim = Limits {
        max_seqs: 1,
        max_seq_len: MAX_LEN,
        max_step_tokens: 8,
        max_logit_rows: 1,
        kv_type: KvType::F16,
        page_size: 8,
        n_pages: MAX_LEN / 8 + 1,
    };
    with_engine(lim, |mut eng, arena| {
        let mut sampler = Sampler::new(arena, VOCAB as usize).expect("sampler");
        let params = SamplingParams {
            seed: s.params.seed.wrapping_add(i as u64),
            ..s.params
        };
        let seq = eng.new_seq().expect("seq");
        let mut history = vec![0u32; s.prompt.len() + s.max_tokens];
        let mut digests = Vec::new();
        let out = generate(
            &mut eng,
            &Serial,
            &mut sampler,
            seq,
            &s.prompt,
            &params,
            s.max_tokens,
            &mut history,
            &|t| s.stop.contains(&t),
            &mut |_, _, d| digests.push(*d),
        )
        .expect("generate");
        let n = out.n_tokens;
        let tokens = history[s.prompt.len()..s.prompt.len() + n].to_vec();
        let reason = if n > 0 && s.stop.contains(&tokens[n - 1]) {
            FinishReason::Stop
        } else {
            FinishReason::Length
        };
        Run {
            tokens,
            digests,
            finish: Some((reason, n, out.chain.digest())),
        }
    })
}

fuzz_target!(|data: &[u8]| {
    let mut b = Bytes { data, at: 0 };
    let page_size = 1 + b.next() as usize % 8;
    let n_pages = MAX_LEN.div_ceil(page_size) + b.next() as usize % 8;
    let run_cap = 1 + b.next() as usize % 4;
    let max_cached = b.next() as usize % 3;
    let max_slots = 1 + b.next() as usize % 8;
    let budget = 1 + b.next() as usize % 12;
    let lim = Limits {
        max_seqs: run_cap + max_cached,
        max_seq_len: MAX_LEN,
        max_step_tokens: budget,
        max_logit_rows: run_cap + max_cached,
        kv_type: KvType::F16,
        page_size,
        n_pages,
    };
    let cfg = SchedConfig {
        max_slots,
        max_cached,
        token_budget: budget,
        sample_lanes: 1,
        speculate: None,
    };
    let runs: RefCell<HashMap<(u64, u32), Run>> = RefCell::new(HashMap::new());
    let mut sink = |ev: &Event<'_>| {
        let mut runs = runs.borrow_mut();
        match *ev {
            Event::Token(t) => {
                let r = runs.entry((t.request.0, t.index)).or_default();
                assert!(r.finish.is_none(), "token after finish");
                assert_eq!(t.position, r.tokens.len(), "token position");
                assert!(t.token < VOCAB);
                r.tokens.push(t.token);
                r.digests.push(t.digest);
            }
            Event::Finished(f) => {
                let r = runs.entry((f.request.0, f.index)).or_default();
                assert!(r.finish.is_none(), "finished twice");
                assert_eq!(f.n_tokens, r.tokens.len());
                r.finish = Some((f.reason, f.n_tokens, f.digest));
            }
        }
    };
    let mut specs: Vec<(RequestId, Spec)> = Vec::new();
    with_engine(lim, |eng, arena| {
        let mut sched = Scheduler::new(eng, cfg, arena).expect("scheduler");
        let mut ops = 0;
        while !b.done() && ops < 64 {
            ops += 1;
            match b.next() % 4 {
                0 => {
                    // Submit: prompt (sometimes sharing a prefix), max_tokens,
                    // sampling, stop, n, logprobs; sometimes invalid.
                    let plen = b.next() as usize % 14;
                    let share = b.next() as usize % 8;
                    let mut prompt: Vec<u32> =
                        (0..share.min(plen)).map(|j| j as u32 * 7 % VOCAB).collect();
                    while prompt.len() < plen {
                        prompt.push(b.next() as u32 % (VOCAB + 2)); // 96, 97 are out of range
                    }
                    let max_tokens = b.next() as usize % 14;
                    let t = b.next();
                    let params = SamplingParams {
                        temperature: F32::from_bits(
                            [0, 0x3F00_0000, 0x3F80_0000, 0x3FC0_0000][t as usize % 4],
                        ),
                        top_k: (t >> 2) as u32 % 4,
                        seed: b.next() as u64,
                        ..SamplingParams::GREEDY
                    };
                    let stop: Vec<u32> =
                        (0..b.next() % 3).map(|_| b.next() as u32 % VOCAB).collect();
                    let n = b.next() as usize % 4; // 0 is invalid
                    let lp = b.next();
                    let req = Request {
                        prompt: &prompt,
                        max_tokens,
                        params,
                        stop: &stop,
                        n,
                        logprobs: (lp & 1 == 1).then_some(lp as usize >> 3), // up to 31: some invalid
                    };
                    let queued = sched.queued();
                    match sched.submit(&req) {
                        Ok(id) => specs.push((
                            id,
                            Spec {
                                prompt: prompt.clone(),
                                max_tokens,
                                params,
                                stop: stop.clone(),
                                n,
                            },
                        )),
                        Err(e) => {
                            assert!(
                                matches!(
                                    e,
                                    Error::EmptyPrompt
                                        | Error::TokenOutOfRange { .. }
                                        | Error::InvalidSampling { .. }
                                        | Error::PromptTooLong { .. }
                                        | Error::QueueFull { .. }
                                ),
                                "{e:?}"
                            );
                            assert_eq!(sched.queued(), queued, "a failed submit changed the queue");
                        }
                    }
                }
                1 => {
                    // Cancel a submitted request (or an unknown id).
                    let k = b.next() as usize;
                    let id = specs
                        .get(k % (specs.len() + 1))
                        .map_or(RequestId(1 << 40), |s| s.0);
                    match sched.cancel(id, &mut sink) {
                        Ok(()) | Err(Error::UnknownRequest { .. }) => {}
                        Err(e) => panic!("cancel: {e:?}"),
                    }
                }
                2 => {
                    for _ in 0..1 + b.next() % 4 {
                        sched.step(&Serial, &mut sink).expect("step");
                        assert!(sched.engine().kv().audit(), "KV audit");
                    }
                }
                _ => {
                    sched.clear_cache().expect("clear");
                    assert_eq!(sched.cached(), 0);
                }
            }
            assert!(sched.engine().kv().audit(), "KV audit");
        }
        // Drain.
        let mut guard = 0;
        while !sched.is_idle() {
            sched.step(&Serial, &mut sink).expect("step");
            assert!(sched.engine().kv().audit(), "KV audit");
            guard += 1;
            assert!(guard < 2000, "no progress");
        }
        let kv = sched.engine().kv();
        assert_eq!(kv.live_seqs(), sched.cached());
        assert_eq!(kv.free_pages() + sched.cached_pages(), n_pages, "page leak");
        sched.clear_cache().expect("clear");
        assert_eq!(sched.engine().kv().free_pages(), n_pages, "page leak");
        assert_eq!(sched.engine().kv().live_seqs(), 0);
    });
    // Every completion ended once and equals (or, cancelled, starts) its solo run.
    let runs = runs.into_inner();
    for (id, spec) in &specs {
        for i in 0..spec.n {
            let have = runs.get(&(id.0, i as u32)).cloned().unwrap_or_default();
            let (reason, n, digest) = have.finish.expect("every completion finishes");
            let want = solo(spec, i);
            if reason == FinishReason::Cancelled {
                assert!(n <= want.tokens.len());
                assert_eq!(have.tokens, want.tokens[..n]);
                assert_eq!(have.digests, want.digests[..n]);
                let params = SamplingParams {
                    seed: spec.params.seed.wrapping_add(i as u64),
                    ..spec.params
                };
                let start = DigestChain::new(&params).digest();
                assert_eq!(digest, have.digests.last().copied().unwrap_or(start));
            } else {
                assert_eq!(have.tokens, want.tokens, "{spec:?} completion {i}");
                assert_eq!(have.digests, want.digests);
                assert_eq!(have.finish, want.finish);
            }
        }
    }
});
