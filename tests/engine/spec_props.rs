//! Speculative decoding changes no bit, as a property over random synthetic
//! models (llama and qwen2, f16 and f32 KV, page sizes 1–8), prompts,
//! seeds, sampling parameters (greedy and sampled, penalties, top-k/p,
//! min-p), end-of-generation sets, `max_tokens`, step and logit-row limits
//! and draft sources:
//!
//! * the n-gram source ([`NgramDraft`]) with random suffix lengths;
//! * random tokens, some outside the vocabulary (mostly rejected);
//! * the true continuation (every draft kept), optionally with one token
//!   corrupted at a random offset (a forced rejection mid-draft);
//! * the true continuation shifted by one (every draft rejected);
//!
//! and draft lengths 0–8. `generate_speculative` must give `generate`'s
//! tokens, audit digest after every token and final chain; its rows must be
//! the rows of one all-logits step over the plain history (so the
//! logprobs, computed with `sched::logprobs` from both, are equal); the
//! sequence's KV length must be plain decoding's; and one more step after
//! each must give the same logits (the cache holds the same rows: nothing of
//! a rejected draft survives).
//!
//! Planted bugs this catches (each tried, then reverted): a PRNG advanced
//! for every verified row instead of every emitted token; rejected rows not
//! truncated from the cache; a draft kept without comparing it.
//!
//! A conversation (`conversation_equals_plain_turns`): two or three turns
//! continued with `continue_speculative` from one `Conversation` give the
//! tokens a plain chat loop gives (one sequence, the PRNG and the whole
//! history carried across turns, the last token fed before the next turn),
//! and the same logits one step later. Planted bug caught: the PRNG
//! restarted from the seed each turn.
//!
//! Cases: `SPEC_CASES` (default 256, about a second in release).
#![cfg(feature = "std")]

use detllm::gguf::File;
use detllm::kv::{KvType, PagedCache};
use detllm::model::synth::{SynthSpec, synth_vec};
use detllm::model::{Arch, Engine, Entry, Limits, Model, generate};
use detllm::quant::GgmlType;
use detllm::sample::{Sampler, SamplingParams, SplitMix64};
use detllm::sched::{self, TopLogprob};
use detllm::spec::{
    Ask, Conversation, DraftSource, NgramDraft, continue_speculative, generate_speculative,
};
use detllm::{Arena, F32, Result, Serial};
use proptest::prelude::*;
use std::sync::OnceLock;

const MAX_LEN: usize = 32;
const ARENA: usize = 6 << 20;

fn f32v(x: f32) -> F32 {
    F32::from_bits(x.to_bits())
}

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

/// Which draft source a case uses.
#[derive(Clone, Debug)]
enum Source {
    Ngram { min_n: usize, max_n: usize },
    Random { seed: u64, spread: u32 },
    Truth { corrupt_at: Option<usize> },
    Shifted,
}

/// A draft source over the case's plain output (`truth`: the whole plain
/// history) and a counter-based generator for the random one.
struct Drafter<'t> {
    source: Source,
    truth: &'t [u32],
    vocab: u32,
    calls: u64,
}

impl DraftSource for Drafter<'_> {
    fn propose(&mut self, history: &[u32], out: &mut [u32]) -> Result<usize> {
        self.calls += 1;
        let next = |i: usize| self.truth.get(history.len() + i).copied();
        match self.source {
            Source::Ngram { min_n, max_n } => NgramDraft { min_n, max_n }.propose(history, out),
            Source::Random { seed, spread } => {
                let mut x = seed ^ self.calls.wrapping_mul(0x9E37_79B9_7F4A_7C15);
                for o in out.iter_mut() {
                    x = x
                        .wrapping_mul(6364136223846793005)
                        .wrapping_add(1442695040888963407);
                    *o = ((x >> 33) as u32) % (self.vocab + spread);
                }
                Ok(out.len())
            }
            Source::Truth { corrupt_at } => {
                let mut n = 0;
                while n < out.len() {
                    let Some(t) = next(n) else { break };
                    out[n] = if Some(n) == corrupt_at {
                        (t + 1) % self.vocab
                    } else {
                        t
                    };
                    n += 1;
                }
                Ok(n)
            }
            Source::Shifted => {
                let mut n = 0;
                while n < out.len() {
                    let Some(t) = next(n) else { break };
                    out[n] = (t + 1) % self.vocab;
                    n += 1;
                }
                Ok(n)
            }
        }
    }
}

#[derive(Clone, Debug)]
struct Case {
    model: usize,
    kv_type: KvType,
    page_size: usize,
    step_tokens: usize,
    logit_rows: usize,
    prompt: Vec<u32>,
    max_tokens: usize,
    params: SamplingParams,
    eog: Vec<u32>,
    source: Source,
    draft_max: usize,
    logprobs: usize,
}

fn arb_params() -> impl Strategy<Value = SamplingParams> {
    (
        prop::sample::select(vec![0.0f32, 0.0, 0.5, 0.8, 1.0, 1.7]),
        prop::sample::select(vec![0u32, 0, 1, 3, 8]),
        prop::sample::select(vec![1.0f32, 1.0, 0.9, 0.5]),
        prop::sample::select(vec![0.0f32, 0.0, 0.05]),
        prop::sample::select(vec![1.0f32, 1.0, 1.1, 0.9, 1.5]),
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

fn arb_source() -> impl Strategy<Value = Source> {
    prop_oneof![
        (1usize..=2, 1usize..=4).prop_map(|(a, b)| Source::Ngram {
            min_n: a,
            max_n: a.max(b)
        }),
        (any::<u64>(), prop::sample::select(vec![0u32, 0, 8]))
            .prop_map(|(seed, spread)| { Source::Random { seed, spread } }),
        prop::option::of(0usize..6).prop_map(|corrupt_at| Source::Truth { corrupt_at }),
        Just(Source::Shifted),
    ]
}

fn arb_case() -> impl Strategy<Value = Case> {
    (
        (
            0usize..2,
            prop::sample::select(vec![KvType::F16, KvType::F32]),
            1usize..=8,
            1usize..=12,
            1usize..=10,
        ),
        // Short alphabets make repeats (n-gram matches) likely.
        (1u32..=96, prop::collection::vec(any::<u32>(), 1..=14)),
        0usize..=18,
        arb_params(),
        prop::collection::vec(any::<u32>(), 0..=2),
        arb_source(),
        0usize..=8,
        prop::sample::select(vec![0usize, 0, 1, 4]),
    )
        .prop_map(
            |(
                (model, kv_type, page_size, step_tokens, logit_rows),
                (alphabet, raw),
                max_tokens,
                params,
                eog,
                source,
                draft_max,
                logprobs,
            )| {
                let prompt: Vec<u32> = raw.iter().map(|t| t % alphabet).collect();
                let max_tokens = max_tokens.min(MAX_LEN - prompt.len());
                Case {
                    model,
                    kv_type,
                    page_size,
                    step_tokens,
                    logit_rows,
                    prompt,
                    max_tokens,
                    params,
                    eog,
                    source,
                    draft_max,
                    logprobs,
                }
            },
        )
}

/// What one generation gave: history, per-token digests and rows, final
/// chain, KV length, the logits of one more step.
#[derive(Debug, PartialEq)]
struct Out {
    history: Vec<u32>,
    digests: Vec<[u8; 32]>,
    rows: Vec<Vec<F32>>,
    chain: [u8; 32],
    kv_len: usize,
    next: Vec<F32>,
}

/// The logprob and the top `k` of each token against its row.
fn logprobs(
    rows: &[Vec<F32>],
    history: &[u32],
    p: usize,
    params: &SamplingParams,
    k: usize,
) -> Vec<(F32, Vec<TopLogprob>)> {
    let mut work = vec![F32::ZERO; rows.first().map_or(0, Vec::len)];
    rows.iter()
        .enumerate()
        .map(|(i, row)| {
            let mut top = vec![TopLogprob::default(); k];
            let (lp, m) = sched::logprobs(
                row,
                params,
                &history[..p + i],
                history[p + i],
                &mut work,
                &mut top,
            )
            .expect("logprobs");
            top.truncate(m);
            (lp, top)
        })
        .collect()
}

fn run_case(c: &Case) -> std::result::Result<(), TestCaseError> {
    let bytes = &models()[c.model];
    let file = File::parse(bytes).expect("parse");
    let mut buf = vec![0u8; ARENA];
    let mut arena = Arena::new(&mut buf);
    let model = Model::from_gguf(&file, bytes, &mut arena).expect("model");
    let vocab = model.cfg.vocab_size;
    let lim = Limits {
        max_seqs: 2,
        max_seq_len: MAX_LEN,
        max_step_tokens: c.step_tokens,
        max_logit_rows: c.logit_rows,
        kv_type: c.kv_type,
        page_size: c.page_size,
        n_pages: 2 * MAX_LEN.div_ceil(c.page_size) + 2,
    };
    let mut eng = Engine::<PagedCache>::new(model, lim, &mut arena).expect("engine");
    let mut sampler = Sampler::new(&mut arena, vocab).expect("sampler");
    let prompt: Vec<u32> = c.prompt.iter().map(|t| t % vocab as u32).collect();
    let eog: Vec<u32> = c.eog.iter().map(|t| t % vocab as u32).collect();
    let is_eog = |t: u32| eog.contains(&t);
    let p = prompt.len();
    let total = p + c.max_tokens;

    // Plain decoding.
    let seq = eng.new_seq().expect("seq");
    let mut history = vec![0u32; total];
    let mut digests = Vec::new();
    let plain = generate(
        &mut eng,
        &Serial,
        &mut sampler,
        seq,
        &prompt,
        &c.params,
        c.max_tokens,
        &mut history,
        &is_eog,
        &mut |_, _, d| digests.push(*d),
    )
    .expect("generate");
    let n = plain.n_tokens;
    history.truncate(p + n);
    let kv_len = eng.seq_len(seq).expect("len");
    let next = one_more(&mut eng, seq, &history, vocab);
    eng.free(seq).expect("free");
    // The rows plain decoding drew from: one all-logits step over the history.
    let rows = if n == 0 {
        Vec::new()
    } else {
        let s = eng.new_seq().expect("seq");
        let mut rows = Vec::new();
        for (at, chunk) in history[..p + n - 1]
            .chunks(c.logit_rows.min(c.step_tokens))
            .enumerate()
        {
            let out = eng
                .step(
                    &Serial,
                    &[Entry {
                        seq: s,
                        tokens: chunk,
                        all_logits: true,
                    }],
                )
                .expect("rows");
            let first = at * c.logit_rows.min(c.step_tokens);
            for (j, r) in out.chunks(vocab).enumerate() {
                if first + j + 1 >= p {
                    rows.push(r.to_vec());
                }
            }
        }
        eng.free(s).expect("free");
        rows
    };
    let want = Out {
        history: history.clone(),
        digests,
        rows,
        chain: plain.chain.digest(),
        kv_len,
        next,
    };

    // Speculative decoding.
    let mut drafter = Drafter {
        source: c.source.clone(),
        truth: &history,
        vocab: vocab as u32,
        calls: 0,
    };
    let seq = eng.new_seq().expect("seq");
    let mut spec_hist = vec![0u32; total];
    let (mut digests, mut rows) = (Vec::new(), Vec::new());
    let (spec, _stats) = generate_speculative(
        &mut eng,
        &Serial,
        &mut sampler,
        seq,
        &prompt,
        &c.params,
        c.max_tokens,
        &mut spec_hist,
        &is_eog,
        &mut drafter,
        c.draft_max,
        &mut |_, _, d, r| {
            digests.push(*d);
            rows.push(r.to_vec());
        },
    )
    .expect("generate_speculative");
    spec_hist.truncate(p + spec.n_tokens);
    let kv_len = eng.seq_len(seq).expect("len");
    let next = one_more(&mut eng, seq, &spec_hist, vocab);
    eng.free(seq).expect("free");
    let got = Out {
        history: spec_hist,
        digests,
        rows,
        chain: spec.chain.digest(),
        kv_len,
        next,
    };
    prop_assert_eq!(spec.chain, plain.chain);
    prop_assert_eq!(
        logprobs(&got.rows, &got.history, p, &c.params, c.logprobs),
        logprobs(&want.rows, &want.history, p, &c.params, c.logprobs)
    );
    prop_assert_eq!(got, want);
    Ok(())
}

/// The logits of one step feeding the history's last token (empty when
/// the sequence is full or nothing was generated).
fn one_more<'a>(
    eng: &mut Engine<'a, PagedCache<'a>>,
    seq: detllm::kv::SeqId,
    history: &[u32],
    vocab: usize,
) -> Vec<F32> {
    let len = eng.seq_len(seq).expect("len");
    if len + 1 > MAX_LEN || len + 1 != history.len() {
        return Vec::new();
    }
    let last = history[len];
    let out = eng
        .step(
            &Serial,
            &[Entry {
                seq,
                tokens: &[last],
                all_logits: false,
            }],
        )
        .expect("one more");
    out[..vocab].to_vec()
}

fn cases() -> u32 {
    std::env::var("SPEC_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(256)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), ..ProptestConfig::default() })]

    #[test]
    fn speculative_equals_plain(c in arb_case()) {
        run_case(&c)?;
    }

    #[test]
    fn conversation_equals_plain_turns(
        c in arb_case(),
        turns in prop::collection::vec(prop::collection::vec(any::<u32>(), 1..=5), 2..=3),
        per_turn in 1usize..=5,
    ) {
        run_turns(&c, &turns, per_turn)?;
    }

    #[test]
    fn ngram_proposes_what_follows_the_latest_match(
        raw in prop::collection::vec(0u32..4, 1..=24),
        min_n in 1usize..=2,
        extra in 0usize..=3,
        k in 0usize..=6,
    ) {
        let max_n = min_n + extra;
        let mut out = vec![u32::MAX; k];
        let got = NgramDraft { min_n, max_n }.propose(&raw, &mut out).expect("propose");
        // Direct search: longest n first, latest start first.
        let mut want = Vec::new();
        'outer: for n in (min_n..=max_n).rev() {
            if n >= raw.len() {
                continue;
            }
            let suffix = &raw[raw.len() - n..];
            for i in (0..raw.len() - n).rev() {
                if &raw[i..i + n] == suffix {
                    want = raw[i + n..].iter().copied().take(k).collect();
                    break 'outer;
                }
            }
        }
        prop_assert_eq!(&out[..got], &want[..]);
    }
}

/// A copy-heavy greedy case accepts drafts (the property would pass
/// vacuously if every draft were rejected).
#[test]
fn true_continuation_is_accepted() {
    let bytes = &models()[0];
    let file = File::parse(bytes).expect("parse");
    let mut buf = vec![0u8; ARENA];
    let mut arena = Arena::new(&mut buf);
    let model = Model::from_gguf(&file, bytes, &mut arena).expect("model");
    let vocab = model.cfg.vocab_size;
    let lim = Limits {
        max_seqs: 2,
        max_seq_len: MAX_LEN,
        max_step_tokens: 16,
        max_logit_rows: 16,
        kv_type: KvType::F16,
        page_size: 4,
        n_pages: 20,
    };
    let mut eng = Engine::<PagedCache>::new(model, lim, &mut arena).expect("engine");
    let mut sampler = Sampler::new(&mut arena, vocab).expect("sampler");
    let prompt = [3u32, 1, 4, 1, 5];
    let params = SamplingParams::GREEDY;
    let mut history = vec![0u32; 25];
    let seq = eng.new_seq().expect("seq");
    generate(
        &mut eng,
        &Serial,
        &mut sampler,
        seq,
        &prompt,
        &params,
        20,
        &mut history,
        &|_| false,
        &mut |_, _, _| {},
    )
    .expect("generate");
    eng.free(seq).expect("free");
    let mut drafter = Drafter {
        source: Source::Truth { corrupt_at: None },
        truth: &history.clone(),
        vocab: vocab as u32,
        calls: 0,
    };
    let seq = eng.new_seq().expect("seq");
    let mut spec_hist = vec![0u32; 25];
    let (_, stats) = generate_speculative(
        &mut eng,
        &Serial,
        &mut sampler,
        seq,
        &prompt,
        &params,
        20,
        &mut spec_hist,
        &|_| false,
        &mut drafter,
        8,
        &mut |_, _, _, _| {},
    )
    .expect("speculative");
    assert_eq!(spec_hist, history);
    assert_eq!(stats.accepted, stats.drafted);
    assert!(stats.accepted > 0, "{stats:?}");
    assert!(stats.steps < 8, "{stats:?}");
}

/// Feeds `tokens` in chunks of `step`; the last chunk's logits row.
fn feed<'a>(
    eng: &mut Engine<'a, PagedCache<'a>>,
    seq: detllm::kv::SeqId,
    tokens: &[u32],
    step: usize,
) -> Vec<F32> {
    let vocab = eng.config().vocab_size;
    let mut row = Vec::new();
    for chunk in tokens.chunks(step) {
        let entry = Entry {
            seq,
            tokens: chunk,
            all_logits: false,
        };
        row = eng.step(&Serial, &[entry]).expect("step")[..vocab].to_vec();
    }
    row
}

/// A chat of `turns` (each at most `per_turn` tokens generated), plainly
/// and with `continue_speculative`; see the module docs.
fn run_turns(
    c: &Case,
    turns: &[Vec<u32>],
    per_turn: usize,
) -> std::result::Result<(), TestCaseError> {
    let bytes = &models()[c.model];
    let file = File::parse(bytes).expect("parse");
    let mut buf = vec![0u8; ARENA];
    let mut arena = Arena::new(&mut buf);
    let model = Model::from_gguf(&file, bytes, &mut arena).expect("model");
    let vocab = model.cfg.vocab_size;
    let lim = Limits {
        max_seqs: 2,
        max_seq_len: MAX_LEN,
        max_step_tokens: c.step_tokens,
        max_logit_rows: c.logit_rows,
        kv_type: c.kv_type,
        page_size: c.page_size,
        n_pages: 2 * MAX_LEN.div_ceil(c.page_size) + 2,
    };
    let mut eng = Engine::<PagedCache>::new(model, lim, &mut arena).expect("engine");
    let mut sampler = Sampler::new(&mut arena, vocab).expect("sampler");
    let turns: Vec<Vec<u32>> = turns
        .iter()
        .map(|t| t.iter().map(|x| x % vocab as u32).collect())
        .collect();
    let eog: Vec<u32> = c.eog.iter().map(|t| t % vocab as u32).collect();
    let is_eog = |t: u32| eog.contains(&t);

    // Plain: the chat loop (sample, stop at end of generation or the limit,
    // the last token fed before the next turn).
    let seq = eng.new_seq().expect("seq");
    let (mut plain, mut rng) = (Vec::new(), SplitMix64::new(c.params.seed));
    for turn in &turns {
        let mut row = feed(&mut eng, seq, turn, c.step_tokens);
        plain.extend_from_slice(turn);
        for n in 1.. {
            let tok = sampler
                .sample(&row, &c.params, &plain, &mut rng)
                .expect("sample");
            plain.push(tok);
            row = feed(&mut eng, seq, &[tok], 1);
            if is_eog(tok) || n >= per_turn {
                break;
            }
        }
    }
    eng.free(seq).expect("free");

    // Speculative, from one conversation.
    let mut drafter = Drafter {
        source: c.source.clone(),
        truth: &plain,
        vocab: vocab as u32,
        calls: 0,
    };
    let seq = eng.new_seq().expect("seq");
    let mut history = vec![0u32; plain.len() + per_turn];
    let mut conv = Conversation {
        history: &mut history,
        len: 0,
        rng: SplitMix64::new(c.params.seed),
    };
    let mut next = Vec::new();
    for turn in &turns {
        let ask = Ask {
            params: &c.params,
            max_tokens: per_turn,
            is_eog: &is_eog,
            on_step: &mut |_, _, _, _| {},
        };
        let parts = (&mut eng, &Serial, &mut sampler, seq);
        continue_speculative(parts, &mut conv, turn, ask, &mut drafter, c.draft_max)
            .expect("continue_speculative");
        let last = conv.history[conv.len - 1];
        next = feed(&mut eng, seq, &[last], 1);
    }
    let got = conv.history[..conv.len].to_vec();
    eng.free(seq).expect("free");
    prop_assert_eq!(got, plain);
    // The last reply's `next` row against the plain loop's final row.
    let seq = eng.new_seq().expect("seq");
    let want = feed(&mut eng, seq, &conv.history[..conv.len], c.step_tokens);
    prop_assert_eq!(next, want);
    Ok(())
}
