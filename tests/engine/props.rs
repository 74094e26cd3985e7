//! The engine's bit-identity contract as properties over random synthetic
//! models (llama and qwen2, GQA ratios 1–4, partial RoPE, every weight format,
//! f16 and f32 KV, page sizes 1–16) and random schedules:
//!
//! * batched == sequential: each sequence's logits, whatever shares its steps;
//! * chunked prefill == token by token;
//! * paged == contiguous;
//! * fork == recomputed from scratch, truncate + refeed == fresh;
//! * 1 thread == N threads;
//! * a failing step (token out of range, unknown or freed sequence, step or
//!   sequence too long, more rows/logit rows/entries than planned, a foreign
//!   handle, an empty entry, KV pages exhausted) is its typed error and changes
//!   nothing: the run continues exactly as a run that never tried it;
//! * the memory plan is exact: the planned bytes suffice, one byte less is
//!   `ArenaExhausted` (model and engine plans alike), arena untouched.
//!
//! Logits are compared as bit patterns (`F32` equality is bitwise here).
#![cfg(feature = "std")]

use detllm::gguf::File;
use detllm::kv::{ContiguousCache, KvType, PagedCache, SeqId};
use detllm::model::synth::{SynthSpec, synth_vec};
use detllm::model::{Arch, Engine, Entry, KvBuild, Limits, Model};
use detllm::parallel::ThreadPool;
use detllm::quant::GgmlType;
use detllm::{Arena, Error, F32, Parallel, Serial};
use proptest::prelude::*;

/// Arena for one engine (models here need well under 4 MiB).
const ARENA: usize = 8 << 20;
/// Longest sequence any schedule builds.
const MAX_LEN: usize = 24;

fn synth(spec: &SynthSpec) -> Vec<u8> {
    synth_vec(spec).expect("synthetic model")
}

/// Builds model and engine in one scope and runs `$body` with `$eng`.
macro_rules! with_engine {
    ($k:ty, $bytes:expr, $lim:expr, |$eng:ident| $body:expr) => {{
        let bytes: &[u8] = $bytes;
        let file = File::parse(bytes).expect("parse");
        let mut buf = vec![0u8; ARENA];
        let mut arena = Arena::new(&mut buf);
        let model = Model::from_gguf(&file, bytes, &mut arena).expect("model");
        #[allow(unused_mut)]
        let mut $eng = Engine::<$k>::new(model, $lim, &mut arena).expect("engine");
        $body
    }};
}

/// A random small model: architecture, GQA ratio 1–4, head size, partial
/// rotary dims, weight/embedding formats (K-quants need 256-wide rows).
fn arb_spec() -> impl Strategy<Value = SynthSpec> {
    let plain = prop::sample::select(vec![
        GgmlType::F32,
        GgmlType::F16,
        GgmlType::BF16,
        GgmlType::Q4_0,
        GgmlType::Q4_1,
        GgmlType::Q5_0,
        GgmlType::Q5_1,
        GgmlType::Q8_0,
    ]);
    let embd = prop::sample::select(vec![
        GgmlType::F32,
        GgmlType::F16,
        GgmlType::Q8_0,
        GgmlType::Q4_1,
    ]);
    (
        0u8..5,
        1usize..=2,
        1usize..=4,
        plain,
        embd,
        any::<bool>(),
        any::<bool>(),
        any::<bool>(),
        any::<u64>(),
        0u8..8,
    )
        .prop_map(
            |(family, n_kv, ratio, wt, et, sep, half_rot, k_quant, seed, n_layers)| {
                let head_dim = 32;
                let mut n_heads = n_kv * ratio;
                let (mut weight_type, mut hidden_dim) = (wt, 64);
                if k_quant && n_layers < 2 {
                    // 256-wide rows for Q4_K / Q6_K.
                    n_heads = 8;
                    hidden_dim = 256;
                    weight_type = if seed & 1 == 0 {
                        GgmlType::Q4_K
                    } else {
                        GgmlType::Q6_K
                    };
                }
                let n_kv_heads = if n_heads % n_kv == 0 { n_kv } else { 1 };
                // 0 llama, 1 qwen2, 2 qwen3, 3 gemma3, 4 llama + rope_freqs.
                let arch = [
                    Arch::Llama,
                    Arch::Qwen2,
                    Arch::Qwen3,
                    Arch::Gemma3,
                    Arch::Llama,
                ][family as usize];
                let own_head_dim = matches!(arch, Arch::Qwen3 | Arch::Gemma3);
                // qwen3/gemma3 name head_dim (key_length); off the K-quant
                // path the residual is then one block wider than q_dim.
                let dim = n_heads * head_dim
                    + if own_head_dim && hidden_dim == 64 && seed & 2 == 0 {
                        32
                    } else {
                        0
                    };
                SynthSpec {
                    arch,
                    head_dim: if own_head_dim { head_dim } else { 0 },
                    // Short windows, so that the test sequences cross them.
                    sliding_window: if arch == Arch::Gemma3 {
                        1 + (seed >> 8) as usize % 6
                    } else {
                        0
                    },
                    rope_freqs: family == 4,
                    dim,
                    hidden_dim,
                    n_layers: 1 + usize::from(n_layers % 2),
                    n_heads,
                    n_kv_heads,
                    n_rot: if half_rot { head_dim / 2 } else { head_dim },
                    vocab_size: 40 + (seed % 40) as usize,
                    weight_type,
                    embd_type: et,
                    separate_output: sep,
                    seed,
                }
            },
        )
}

fn limits(kv_type: KvType, page_size: usize, n_pages: usize) -> Limits {
    Limits {
        max_seqs: 4,
        max_seq_len: MAX_LEN,
        max_step_tokens: 4 * MAX_LEN,
        max_logit_rows: 4 * MAX_LEN,
        kv_type,
        page_size,
        n_pages,
    }
}

/// Enough pages for 4 sequences of `MAX_LEN` tokens plus copy-on-write slack.
fn roomy(kv_type: KvType, page_size: usize) -> Limits {
    limits(kv_type, page_size, 4 * MAX_LEN.div_ceil(page_size) + 8)
}

/// Random KV setup: element type and page size.
fn arb_kv() -> impl Strategy<Value = (KvType, usize)> {
    (
        prop::sample::select(vec![KvType::F16, KvType::F32]),
        1usize..=16,
    )
}

/// Prompts (1–4 sequences, 1–12 tokens) as raw values; taken mod vocab.
fn arb_prompts() -> impl Strategy<Value = Vec<Vec<u32>>> {
    prop::collection::vec(prop::collection::vec(any::<u32>(), 1..=12), 1..=4)
}

fn modv(prompts: &[Vec<u32>], vocab: usize) -> Vec<Vec<u32>> {
    prompts
        .iter()
        .map(|p| p.iter().map(|t| t % vocab as u32).collect())
        .collect()
}

type Rows = Vec<Vec<F32>>;

/// A bad batch and the check its error must pass.
type Try<'b, 't> = (&'b [Entry<'t>], fn(&Error) -> bool);

/// Every position's logits of one sequence fed `tokens` in steps of the
/// given chunk sizes (cycled), alone.
fn solo<'a, K: KvBuild<'a>, P: Parallel>(
    eng: &mut Engine<'a, K>,
    par: &P,
    tokens: &[u32],
    chunks: &[usize],
) -> Rows {
    let vocab = eng.config().vocab_size;
    let s = eng.new_seq().expect("seq");
    let mut rows = Vec::new();
    let mut at = 0;
    let mut c = 0;
    while at < tokens.len() {
        let n = chunks[c % chunks.len()].clamp(1, tokens.len() - at);
        c += 1;
        let out = eng
            .step(
                par,
                &[Entry {
                    seq: s,
                    tokens: &tokens[at..at + n],
                    all_logits: true,
                }],
            )
            .expect("solo step");
        rows.extend(out.chunks(vocab).map(<[F32]>::to_vec));
        at += n;
    }
    eng.free(s).expect("free");
    rows
}

/// All sequences fed together in a ragged schedule: at each step, sequence
/// `i` advances by `sched[k]` tokens (0 = sits the step out). Returns every
/// position's logits per sequence.
fn batched<'a, K: KvBuild<'a>, P: Parallel>(
    eng: &mut Engine<'a, K>,
    par: &P,
    prompts: &[Vec<u32>],
    sched: &[u8],
) -> Vec<Rows> {
    let vocab = eng.config().vocab_size;
    let seqs: Vec<SeqId> = prompts
        .iter()
        .map(|_| eng.new_seq().expect("seq"))
        .collect();
    let mut fed = vec![0usize; prompts.len()];
    let mut out: Vec<Rows> = vec![Vec::new(); prompts.len()];
    let mut k = 0;
    while fed.iter().zip(prompts).any(|(f, p)| *f < p.len()) {
        let mut entries = Vec::new();
        let mut who = Vec::new();
        for (i, p) in prompts.iter().enumerate() {
            let want = usize::from(sched.get(k % sched.len().max(1)).copied().unwrap_or(1) % 5);
            k += 1;
            let n = want.min(p.len() - fed[i]);
            if n > 0 {
                entries.push(Entry {
                    seq: seqs[i],
                    tokens: &p[fed[i]..fed[i] + n],
                    all_logits: true,
                });
                who.push((i, n));
            }
        }
        if entries.is_empty() {
            // Nobody moved this round: advance the first unfinished one.
            let i = (0..prompts.len())
                .find(|&i| fed[i] < prompts[i].len())
                .expect("unfinished");
            entries.push(Entry {
                seq: seqs[i],
                tokens: &prompts[i][fed[i]..fed[i] + 1],
                all_logits: true,
            });
            who.push((i, 1));
        }
        let logits = eng.step(par, &entries).expect("batched step");
        let mut rows = logits.chunks(vocab);
        for (i, n) in who {
            for _ in 0..n {
                out[i].push(rows.next().expect("row").to_vec());
            }
            fed[i] += n;
        }
    }
    for s in seqs {
        eng.free(s).expect("free");
    }
    out
}

/// `n` cases; a failure is saved to `tests/engine/props.proptest-regressions`
/// and replayed first on every later run (proptest's default persistence).
fn cases(n: u32) -> ProptestConfig {
    ProptestConfig::with_cases(n)
}

proptest! {
    #![proptest_config(cases(96))]

    /// Batched ragged steps give each sequence exactly its solo logits.
    #[test]
    fn batched_equals_sequential(
        spec in arb_spec(), (kv, page) in arb_kv(), prompts in arb_prompts(),
        sched in prop::collection::vec(any::<u8>(), 1..16),
    ) {
        let bytes = synth(&spec);
        let prompts = modv(&prompts, spec.vocab_size);
        with_engine!(PagedCache, &bytes, roomy(kv, page), |eng| {
            let together = batched(&mut eng, &Serial, &prompts, &sched);
            for (i, p) in prompts.iter().enumerate() {
                let alone = solo(&mut eng, &Serial, p, &[p.len()]);
                prop_assert!(alone == together[i], "sequence {} differs from its solo run", i);
            }
            Ok::<(), TestCaseError>(())
        })?;
    }

    /// Any chunking of a prefill gives the logits of token-by-token feeding.
    #[test]
    fn chunked_prefill_equals_token_by_token(
        spec in arb_spec(), (kv, page) in arb_kv(),
        tokens in prop::collection::vec(any::<u32>(), 1..=MAX_LEN),
        chunks in prop::collection::vec(1usize..=8, 1..6),
    ) {
        let bytes = synth(&spec);
        let tokens: Vec<u32> = tokens.iter().map(|t| t % spec.vocab_size as u32).collect();
        with_engine!(PagedCache, &bytes, roomy(kv, page), |eng| {
            let one = solo(&mut eng, &Serial, &tokens, &[1]);
            let chunked = solo(&mut eng, &Serial, &tokens, &chunks);
            prop_assert!(one == chunked);
            Ok::<(), TestCaseError>(())
        })?;
    }

    /// The paged cache (any page size) and the contiguous cache agree.
    #[test]
    fn paged_equals_contiguous(
        spec in arb_spec(), (kv, page) in arb_kv(), prompts in arb_prompts(),
        sched in prop::collection::vec(any::<u8>(), 1..16),
    ) {
        let bytes = synth(&spec);
        let prompts = modv(&prompts, spec.vocab_size);
        let paged = with_engine!(PagedCache, &bytes, roomy(kv, page), |eng| {
            batched(&mut eng, &Serial, &prompts, &sched)
        });
        let contiguous = with_engine!(ContiguousCache, &bytes, roomy(kv, page), |eng| {
            batched(&mut eng, &Serial, &prompts, &sched)
        });
        prop_assert!(paged == contiguous);
    }

    /// A fork continues exactly like a fresh sequence fed the whole history;
    /// truncating and refeeding equals a fresh run.
    #[test]
    fn fork_and_truncate_equal_recomputation(
        spec in arb_spec(), (kv, page) in arb_kv(),
        prefix in prop::collection::vec(any::<u32>(), 1..=10),
        a in prop::collection::vec(any::<u32>(), 1..=6),
        b in prop::collection::vec(any::<u32>(), 1..=6),
    ) {
        let bytes = synth(&spec);
        let v = spec.vocab_size as u32;
        let (prefix, a, b): (Vec<u32>, Vec<u32>, Vec<u32>) = (
            prefix.iter().map(|t| t % v).collect(),
            a.iter().map(|t| t % v).collect(),
            b.iter().map(|t| t % v).collect(),
        );
        let vocab = spec.vocab_size;
        with_engine!(PagedCache, &bytes, roomy(kv, page), |eng| {
            let full_a = solo(&mut eng, &Serial, &[prefix.clone(), a.clone()].concat(), &[MAX_LEN]);
            let full_b = solo(&mut eng, &Serial, &[prefix.clone(), b.clone()].concat(), &[MAX_LEN]);
            let s = eng.new_seq().expect("seq");
            eng.step(&Serial, &[Entry { seq: s, tokens: &prefix, all_logits: false }]).expect("prefix");
            let f = eng.fork(s).expect("fork");
            // Both continue in one step, each with its own tokens.
            let out = eng.step(&Serial, &[
                Entry { seq: s, tokens: &a, all_logits: true },
                Entry { seq: f, tokens: &b, all_logits: true },
            ]).expect("continue").to_vec();
            let rows: Rows = out.chunks(vocab).map(<[F32]>::to_vec).collect();
            prop_assert!(rows[..a.len()] == full_a[prefix.len()..], "original after fork");
            prop_assert!(rows[a.len()..] == full_b[prefix.len()..], "fork");
            // Truncate the original back to the prefix and feed b.
            eng.truncate(s, prefix.len()).expect("truncate");
            let out = eng.step(&Serial, &[Entry { seq: s, tokens: &b, all_logits: true }])
                .expect("refeed").to_vec();
            let rows: Rows = out.chunks(vocab).map(<[F32]>::to_vec).collect();
            prop_assert!(rows[..] == full_b[prefix.len()..], "truncate + refeed");
            Ok::<(), TestCaseError>(())
        })?;
    }
}

proptest! {
    #![proptest_config(cases(48))]

    /// The thread count changes nothing.
    #[test]
    fn threads_change_nothing(
        spec in arb_spec(), (kv, page) in arb_kv(), prompts in arb_prompts(),
        sched in prop::collection::vec(any::<u8>(), 1..16), n in 2usize..=4,
    ) {
        let bytes = synth(&spec);
        let prompts = modv(&prompts, spec.vocab_size);
        let pool = ThreadPool::new(n).expect("pool");
        let one = with_engine!(PagedCache, &bytes, roomy(kv, page), |eng| {
            batched(&mut eng, &Serial, &prompts, &sched)
        });
        let many = with_engine!(PagedCache, &bytes, roomy(kv, page), |eng| {
            batched(&mut eng, &pool, &prompts, &sched)
        });
        prop_assert!(one == many);
    }

    /// Each kind of bad step is its typed error and changes nothing: the
    /// sequences then continue exactly like a run that never tried it.
    #[test]
    fn failing_steps_change_nothing(
        spec in arb_spec(), (kv, page) in arb_kv(),
        pa in prop::collection::vec(any::<u32>(), 1..=8),
        pb in prop::collection::vec(any::<u32>(), 1..=8),
        next in prop::collection::vec(any::<u32>(), 2),
        bad_at in 0usize..8,
    ) {
        let bytes = synth(&spec);
        let v = spec.vocab_size as u32;
        let pa: Vec<u32> = pa.iter().map(|t| t % v).collect();
        let pb: Vec<u32> = pb.iter().map(|t| t % v).collect();
        let next: Vec<u32> = next.iter().map(|t| t % v).collect();
        // Reference: prompts, then one decode step of both.
        let reference = with_engine!(PagedCache, &bytes, roomy(kv, page), |eng| {
            let (a, b) = (eng.new_seq().expect("a"), eng.new_seq().expect("b"));
            eng.step(&Serial, &[
                Entry { seq: a, tokens: &pa, all_logits: false },
                Entry { seq: b, tokens: &pb, all_logits: false },
            ]).expect("prompts");
            eng.step(&Serial, &[
                Entry { seq: a, tokens: &next[..1], all_logits: false },
                Entry { seq: b, tokens: &next[1..], all_logits: false },
            ]).expect("decode").to_vec()
        });
        // A handle issued by another engine (slot 3, which this engine never issues).
        let foreign = with_engine!(PagedCache, &bytes, roomy(kv, page), |eng| {
            (0..4).map(|_| eng.new_seq().expect("seq")).last().expect("4th")
        });
        // Tighter step limits than the reference (they must not change logits).
        let tight = Limits { max_step_tokens: 30, max_logit_rows: 20, ..roomy(kv, page) };
        with_engine!(PagedCache, &bytes, tight, |eng| {
            let (a, b) = (eng.new_seq().expect("a"), eng.new_seq().expect("b"));
            let gone = eng.new_seq().expect("c");
            eng.step(&Serial, &[Entry { seq: gone, tokens: &pa[..1], all_logits: false }]).expect("c");
            eng.free(gone).expect("free");
            eng.step(&Serial, &[
                Entry { seq: a, tokens: &pa, all_logits: false },
                Entry { seq: b, tokens: &pb, all_logits: false },
            ]).expect("prompts");
            let lens = (eng.seq_len(a).expect("len"), eng.seq_len(b).expect("len"));
            let free_before = eng.kv().free_pages();
            let mut bad_tokens = pb.clone();
            bad_tokens[bad_at % pb.len()] = v + (bad_at as u32);
            let long = vec![0u32; MAX_LEN];
            // Each fits its sequence; together 32..=46 rows > 30 planned.
            let fill_a = vec![0u32; MAX_LEN - lens.0];
            let fill_b = vec![0u32; MAX_LEN - lens.1];
            // 24 rows fit, but 24 logit rows > 20 planned.
            let twelve = vec![1u32 % v; 12];
            let one = [Entry { seq: a, tokens: &next[..1], all_logits: false }];
            let five = [one[0]; 5];
            let tries: [Try<'_, '_>; 9] = [
                (&[Entry { seq: a, tokens: &next[..1], all_logits: false },
                   Entry { seq: b, tokens: &bad_tokens, all_logits: false }],
                 |e| matches!(e, Error::TokenOutOfRange { .. })),
                (&[Entry { seq: a, tokens: &next[..1], all_logits: false },
                   Entry { seq: gone, tokens: &next[..1], all_logits: false }],
                 |e| matches!(e, Error::UnknownSequence { .. })),
                (&[Entry { seq: b, tokens: &next[..1], all_logits: false },
                   Entry { seq: foreign, tokens: &next[..1], all_logits: false }],
                 |e| matches!(e, Error::UnknownSequence { index: 3 })),
                (&[Entry { seq: a, tokens: &long, all_logits: false }],
                 |e| matches!(e, Error::SequenceTooLong { max: MAX_LEN, .. })),
                (&[Entry { seq: a, tokens: &fill_a, all_logits: false },
                   Entry { seq: b, tokens: &fill_b, all_logits: false }],
                 |e| matches!(e, Error::BatchTooLarge { max: 30, .. })),
                (&[Entry { seq: a, tokens: &twelve, all_logits: true },
                   Entry { seq: b, tokens: &twelve, all_logits: true }],
                 |e| matches!(e, Error::BatchTooLarge { requested: 24, max: 20 })),
                (&five,
                 |e| matches!(e, Error::BatchTooLarge { requested: 5, max: 4 })),
                (&[Entry { seq: a, tokens: &next[..1], all_logits: false },
                   Entry { seq: a, tokens: &next[1..], all_logits: false }],
                 |e| matches!(e, Error::DuplicateSequence { .. })),
                (&[Entry { seq: a, tokens: &[], all_logits: false }],
                 |e| matches!(e, Error::EmptyEntry { index: 0 })),
            ];
            for (i, (batch, is_expected)) in tries.iter().enumerate() {
                match eng.step(&Serial, batch) {
                    Err(e) => prop_assert!(is_expected(&e), "try {}: unexpected error {:?}", i, e),
                    Ok(_) => prop_assert!(false, "try {} succeeded", i),
                }
                prop_assert_eq!((eng.seq_len(a).expect("len"), eng.seq_len(b).expect("len")), lens);
                prop_assert_eq!(eng.kv().free_pages(), free_before);
                prop_assert!(eng.kv().audit(), "page accounting broken after try {}", i);
            }
            let out = eng.step(&Serial, &[
                Entry { seq: a, tokens: &next[..1], all_logits: false },
                Entry { seq: b, tokens: &next[1..], all_logits: false },
            ]).expect("decode").to_vec();
            prop_assert!(out == reference, "logits after failed steps differ");
            Ok::<(), TestCaseError>(())
        })?;
    }

    /// KV pages exhausted mid-batch: typed error, nothing changed; after a
    /// sequence is freed the same step succeeds with the logits it would
    /// have given with enough pages.
    #[test]
    fn pool_exhaustion_changes_nothing(
        spec in arb_spec(), kv in prop::sample::select(vec![KvType::F16, KvType::F32]),
        page in 1usize..=4,
        pa in prop::collection::vec(any::<u32>(), 1..=8),
        pb in prop::collection::vec(any::<u32>(), 1..=8),
        filler_len in 1usize..=12,
    ) {
        let bytes = synth(&spec);
        let v = spec.vocab_size as u32;
        let pa: Vec<u32> = pa.iter().map(|t| t % v).collect();
        let pb: Vec<u32> = pb.iter().map(|t| t % v).collect();
        let filler: Vec<u32> = (0..filler_len as u32).map(|t| t % v).collect();
        let vocab = spec.vocab_size;
        let pages = |n: usize| n.div_ceil(page);
        // a and b's prompts need this many pages; the filler holds the rest
        // of the pool, so the batch cannot fit until the filler is freed.
        let need = pages(pa.len()) + pages(pb.len());
        let pool = need - 1 + pages(filler_len);
        let reference = with_engine!(PagedCache, &bytes, roomy(kv, page), |eng| {
            let (a, b) = (eng.new_seq().expect("a"), eng.new_seq().expect("b"));
            eng.step(&Serial, &[
                Entry { seq: a, tokens: &pa, all_logits: true },
                Entry { seq: b, tokens: &pb, all_logits: true },
            ]).expect("prompts").to_vec()
        });
        with_engine!(PagedCache, &bytes, limits(kv, page, pool), |eng| {
            let filler_seq = eng.new_seq().expect("filler");
            eng.step(&Serial, &[Entry { seq: filler_seq, tokens: &filler, all_logits: false }])
                .expect("filler fits");
            let (a, b) = (eng.new_seq().expect("a"), eng.new_seq().expect("b"));
            let free_before = eng.kv().free_pages();
            let batch = [
                Entry { seq: a, tokens: &pa, all_logits: true },
                Entry { seq: b, tokens: &pb, all_logits: true },
            ];
            let e = eng.step(&Serial, &batch).expect_err("pool is one page short");
            prop_assert!(matches!(e, Error::KvPagesExhausted { .. }), "{:?}", e);
            prop_assert_eq!((eng.seq_len(a).expect("a"), eng.seq_len(b).expect("b")), (0, 0));
            prop_assert_eq!(eng.kv().free_pages(), free_before);
            prop_assert_eq!(eng.seq_len(filler_seq).expect("filler"), filler_len);
            eng.free(filler_seq).expect("free filler");
            let out = eng.step(&Serial, &batch).expect("fits after free").to_vec();
            prop_assert!(out == reference);
            prop_assert_eq!(out.len(), (pa.len() + pb.len()) * vocab);
            Ok::<(), TestCaseError>(())
        })?;
    }

    /// KV pages exhausted while continuing sequences that already hold
    /// tokens (each needs one new page, none is free): typed error, every
    /// sequence and the pool unchanged; after freeing a third sequence the
    /// same step gives the logits of a roomy run.
    #[test]
    fn pool_exhaustion_mid_sequence_changes_nothing(
        spec in arb_spec(), kv in prop::sample::select(vec![KvType::F16, KvType::F32]),
        page in 1usize..=4,
        pa in prop::collection::vec(any::<u32>(), 1..=8),
        pb in prop::collection::vec(any::<u32>(), 1..=8),
        extra in 0usize..=4,
        cont in any::<u32>(),
    ) {
        let bytes = synth(&spec);
        let v = spec.vocab_size as u32;
        let pa: Vec<u32> = pa.iter().map(|t| t % v).collect();
        let pb: Vec<u32> = pb.iter().map(|t| t % v).collect();
        // `page` more tokens always need exactly one more page.
        let cont: Vec<u32> = (0..page as u32).map(|i| cont.wrapping_add(i) % v).collect();
        // The filler holds at least two pages, enough for both continuations.
        let filler_len = 2 * page + extra;
        let filler: Vec<u32> = (0..filler_len as u32).map(|t| t % v).collect();
        let pages = |n: usize| n.div_ceil(page);
        let pool = pages(pa.len()) + pages(pb.len()) + pages(filler_len);
        let both = |a: SeqId, b: SeqId| [
            Entry { seq: a, tokens: &cont, all_logits: true },
            Entry { seq: b, tokens: &cont, all_logits: true },
        ];
        let reference = with_engine!(PagedCache, &bytes, roomy(kv, page), |eng| {
            let (a, b) = (eng.new_seq().expect("a"), eng.new_seq().expect("b"));
            eng.step(&Serial, &[
                Entry { seq: a, tokens: &pa, all_logits: false },
                Entry { seq: b, tokens: &pb, all_logits: false },
            ]).expect("prompts");
            eng.step(&Serial, &both(a, b)).expect("continue").to_vec()
        });
        with_engine!(PagedCache, &bytes, limits(kv, page, pool), |eng| {
            let (a, b) = (eng.new_seq().expect("a"), eng.new_seq().expect("b"));
            let filler_seq = eng.new_seq().expect("filler");
            eng.step(&Serial, &[
                Entry { seq: a, tokens: &pa, all_logits: false },
                Entry { seq: b, tokens: &pb, all_logits: false },
                Entry { seq: filler_seq, tokens: &filler, all_logits: false },
            ]).expect("prompts fill the pool");
            prop_assert_eq!(eng.kv().free_pages(), 0);
            let e = eng.step(&Serial, &both(a, b)).expect_err("no free page");
            prop_assert!(matches!(e, Error::KvPagesExhausted { .. }), "{:?}", e);
            prop_assert_eq!(
                (eng.seq_len(a).expect("a"), eng.seq_len(b).expect("b"), eng.seq_len(filler_seq).expect("f")),
                (pa.len(), pb.len(), filler_len)
            );
            prop_assert_eq!(eng.kv().free_pages(), 0);
            prop_assert!(eng.kv().audit(), "page accounting broken");
            eng.free(filler_seq).expect("free filler");
            let out = eng.step(&Serial, &both(a, b)).expect("fits after free").to_vec();
            prop_assert!(out == reference);
            Ok::<(), TestCaseError>(())
        })?;
    }

    /// The memory plan suffices at every buffer alignment (it counts each
    /// carve's worst-case padding), and an arena one byte smaller than what
    /// the build takes is `ArenaExhausted` with the arena untouched.
    #[test]
    fn memory_plan_suffices_and_shortfall_is_typed(
        spec in arb_spec(), (kv, page) in arb_kv(), paged in any::<bool>(), offset in 0usize..64,
    ) {
        let bytes = synth(&spec);
        let file = File::parse(&bytes).expect("parse");
        let lim = roomy(kv, page);
        let cfg = detllm::model::Config::from_gguf(&file).expect("config");
        let model_plan = Model::bytes_required(&cfg).expect("model plan");
        // Build with exactly the planned bytes, at `offset` from an aligned base.
        let build = |size: usize| -> (Result<(), Error>, usize, usize) {
            let mut buf = vec![0u8; size + 64];
            let mut arena = Arena::new(&mut buf[offset..offset + size]);
            let model = match Model::from_gguf(&file, &bytes, &mut arena) {
                Ok(m) => m,
                Err(e) => return (Err(e), arena.used(), arena.remaining()),
            };
            let before = arena.remaining();
            let r = if paged {
                Engine::<PagedCache>::new(model, lim, &mut arena).map(|_| ())
            } else {
                Engine::<ContiguousCache>::new(model, lim, &mut arena).map(|_| ())
            };
            let taken = before - arena.remaining();
            (r, arena.used() - taken, taken)
        };
        let engine_plan = {
            let mut buf = vec![0u8; ARENA];
            let mut arena = Arena::new(&mut buf);
            let model = Model::from_gguf(&file, &bytes, &mut arena).expect("model");
            if paged {
                Engine::<PagedCache>::bytes_required(&model, &lim)
            } else {
                Engine::<ContiguousCache>::bytes_required(&model, &lim)
            }.expect("engine plan")
        };
        let (r, model_used, engine_used) = build(model_plan + engine_plan);
        prop_assert!(r.is_ok(), "the planned size failed: {:?}", r);
        prop_assert!(model_used <= model_plan && engine_used <= engine_plan);
        // The engine plan is exact: with exactly `engine_plan` bytes left after
        // the model the build succeeds; with one byte less it is refused, typed.
        let (r, _, _) = build(model_used + engine_plan);
        prop_assert!(r.is_ok(), "exactly the engine plan failed: {:?}", r);
        let (r, _, taken) = build(model_used + engine_plan - 1);
        prop_assert!(
            matches!(r, Err(Error::ArenaExhausted { requested, .. }) if requested == engine_plan),
            "engine plan - 1: {:?}", r
        );
        prop_assert_eq!(taken, 0);
        // Likewise the model plan: one byte less and the model is refused.
        let (r, used, _) = build(model_plan - 1);
        prop_assert!(matches!(r, Err(Error::ArenaExhausted { .. })), "model plan - 1: {:?}", r);
        prop_assert_eq!(used, 0);
        // One byte short of what this build took: the engine build fails, typed, untouched.
        let short = model_used + engine_used - 1;
        let mut buf = vec![0u8; short + 64];
        let mut arena = Arena::new(&mut buf[offset..offset + short]);
        let model = Model::from_gguf(&file, &bytes, &mut arena).expect("the model still fits");
        let before = arena.remaining();
        let r = if paged {
            Engine::<PagedCache>::new(model, lim, &mut arena).map(|_| ())
        } else {
            Engine::<ContiguousCache>::new(model, lim, &mut arena).map(|_| ())
        };
        prop_assert!(matches!(r, Err(Error::ArenaExhausted { .. })), "{:?}", r);
        prop_assert_eq!(arena.remaining(), before);
    }
}

/// A model whose vocabulary is larger than one output-head pass (the engine
/// runs a head of several logit rows in passes of at least 1024 rows when
/// `rows · vocab` exceeds the layers' matmul scratch).
fn arb_big_vocab_spec() -> impl Strategy<Value = SynthSpec> {
    (arb_spec(), 1100usize..=2600).prop_map(|(spec, vocab_size)| SynthSpec { vocab_size, ..spec })
}

/// Limits of at most 8 rows per step, so `8 · vocab` (≥ 8800) is more than
/// the layers' scratch (`8 · max(dim, hidden)` ≤ 2048): the head of a
/// several-row step runs in 2–3 passes.
fn narrow(kv_type: KvType, page_size: usize) -> Limits {
    Limits {
        max_step_tokens: 8,
        max_logit_rows: 8,
        ..roomy(kv_type, page_size)
    }
}

proptest! {
    #![proptest_config(cases(32))]

    /// Logits of steps of several rows (head in passes) are those of one-row
    /// steps (head in one pass, no scratch), bit for bit, at any thread count.
    #[test]
    fn output_head_in_passes_equals_one_pass(
        spec in arb_big_vocab_spec(), (kv, page) in arb_kv(), prompts in arb_prompts(),
        n in 1usize..=3,
    ) {
        let bytes = synth(&spec);
        let vocab = spec.vocab_size;
        let prompts = modv(&prompts, vocab);
        let pool = ThreadPool::new(n).expect("pool");
        with_engine!(PagedCache, &bytes, narrow(kv, page), |eng| {
            let seqs: Vec<SeqId> = prompts.iter().map(|_| eng.new_seq().expect("seq")).collect();
            let mut together: Vec<Rows> = vec![Vec::new(); prompts.len()];
            let mut fed = vec![0usize; prompts.len()];
            while fed.iter().zip(&prompts).any(|(f, p)| *f < p.len()) {
                // Up to 2 tokens of every unfinished sequence: ≤ 8 rows, all returned.
                let mut entries = Vec::new();
                let mut who = Vec::new();
                for (i, p) in prompts.iter().enumerate() {
                    let k = (p.len() - fed[i]).min(2);
                    if k > 0 {
                        entries.push(Entry { seq: seqs[i], tokens: &p[fed[i]..fed[i] + k], all_logits: true });
                        who.push((i, k));
                    }
                }
                let out = eng.step(&pool, &entries).expect("step");
                prop_assert_eq!(out.len(), who.iter().map(|w| w.1).sum::<usize>() * vocab);
                let mut rows = out.chunks(vocab);
                for (i, k) in who {
                    for _ in 0..k {
                        together[i].push(rows.next().expect("row").to_vec());
                    }
                    fed[i] += k;
                }
            }
            for s in seqs {
                eng.free(s).expect("free");
            }
            for (i, p) in prompts.iter().enumerate() {
                let alone = solo(&mut eng, &Serial, p, &[1]);
                prop_assert!(alone == together[i], "sequence {} differs from its one-row steps", i);
            }
            Ok::<(), TestCaseError>(())
        })?;
    }
}

/// The engine plan holds one `(rows, vocab)` logits buffer, not a second
/// `(vocab, rows)` matmul scratch for the head: going from 1 to 64 logit rows
/// adds the 63 logits rows, the head's input activations and at most two
/// `(64, 1024)` blocks for the head in passes. (The plan used to add
/// 2 · 63 · vocab floats: 1.5 MiB more at 8 rows for SmolLM2's 49152.)
#[test]
fn more_logit_rows_cost_one_logits_row_each() {
    let spec = SynthSpec {
        vocab_size: 8192,
        embd_type: GgmlType::F32,
        ..SynthSpec::TINY
    };
    let bytes = synth(&spec);
    let file = File::parse(&bytes).expect("parse");
    let mut buf = vec![0u8; ARENA];
    let mut arena = Arena::new(&mut buf);
    let model = Model::from_gguf(&file, &bytes, &mut arena).expect("model");
    let plan = |r: usize| {
        let lim = Limits {
            max_step_tokens: 64,
            max_logit_rows: r,
            ..roomy(KvType::F16, 16)
        };
        Engine::<PagedCache>::bytes_required(&model, &lim).expect("plan")
    };
    let (r, f32s) = (64usize, 4usize);
    let grown = plan(r) - plan(1);
    let logits = (r - 1) * spec.vocab_size * f32s;
    let head_acts = r * spec.dim * f32s; // F32 head: F32 activations
    let passes = 2 * r * 1024 * f32s;
    let pads = 64;
    assert!(
        grown <= logits + head_acts + passes + pads,
        "1 -> {r} logit rows grew the plan by {grown} bytes; at most {} expected",
        logits + head_acts + passes + pads
    );
    // And the plan is still exact for several rows: it suffices.
    let mut buf = vec![0u8; ARENA];
    let mut arena = Arena::new(&mut buf);
    let model = Model::from_gguf(&file, &bytes, &mut arena).expect("model");
    let lim = Limits {
        max_step_tokens: 64,
        max_logit_rows: r,
        ..roomy(KvType::F16, 16)
    };
    let need = Engine::<PagedCache>::bytes_required(&model, &lim).expect("plan");
    let mut eng_buf = vec![0u8; need];
    let mut eng_arena = Arena::new(&mut eng_buf);
    let mut eng = Engine::<PagedCache>::new(model, lim, &mut eng_arena).expect("engine");
    let s = eng.new_seq().expect("seq");
    let toks: Vec<u32> = (0..20).collect();
    let out = eng
        .step(
            &Serial,
            &[Entry {
                seq: s,
                tokens: &toks,
                all_logits: true,
            }],
        )
        .expect("20-row step");
    assert_eq!(out.len(), 20 * spec.vocab_size);
}
