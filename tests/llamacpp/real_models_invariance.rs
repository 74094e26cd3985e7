//! Batching, chunking and threads do not change a bit on the real
//! Qwen2.5-Coder-0.5B-Instruct Q4_K_M and Gemma 3 270M Q4_K_M files (as
//! `tests/llamacpp/smollm2_greedy.rs` holds SmolLM2 to it).
//!
//! For a few short prompts (ids from the model's own tokenizer; 10-40
//! tokens, well inside Gemma 3's 512-token sliding window) greedy decoding
//! of [`STEPS`] tokens is run
//!
//! * each prompt alone, prefilled in one step (the reference);
//! * all prompts in one continuous batch, prefilled in one step each;
//! * the same batch with a two-thread pool;
//! * the batch prefilled token by token;
//! * the batch prefilled in random chunk sizes (seeded, [`SCHEDULES`]
//!   schedules, one of them with two threads), so that some sequences
//!   decode while others still prefill.
//!
//! Every logits row (every prompt row, then every row sampled from) goes
//! into one SHA-256 digest per prompt; each run's ids and digests must equal
//! the reference's. A failure names the run and, for a random schedule, the
//! seed and chunk sizes.
//!
//! How sharp it is: a last-bit error is not always visible, because the
//! activations are quantized (to 8 bits) before each quantized matrix
//! product and the KV cache is f16, which can absorb it. Planted in the
//! library, a last-bit flip of every residual element after each block when
//! a step has over 40 rows, or when the pool has two threads, fails the
//! batch or two-thread run on both models; a last-bit flip of one embedding
//! row (the first of a chunk that does not start the sequence) fails a
//! random schedule on both, though on Qwen2.5 only the fourth schedule
//! caught it, hence several schedules.
//!
//! The models follow `tests/support/model.rs`: skipped with a notice when
//! absent, a failure when the run requires them (`DETLLM_REQUIRE_MODEL`,
//! CI). Fetch them with `bash scripts/fetch-real-model.sh qwen2.5-coder-0.5b`
//! and `... gemma3-270m`.
#![cfg(feature = "std")]

use crate::support;

use detllm::audit::hash_logits;
use detllm::gguf::File;
use detllm::kv::{KvType, PagedCache, SeqId};
use detllm::model::{Config, Engine, Entry, Limits, Model};
use detllm::parallel::ThreadPool;
use detllm::sample::argmax;
use detllm::tokenizer::{Tokenizer, Workspace};
use detllm::{Arena, Parallel, Serial};
use sha2::{Digest, Sha256};

/// Tokens generated per prompt (the first from the prompt's last row).
const STEPS: usize = 12;
/// Random chunk schedules per model.
const SCHEDULES: u64 = 4;
/// Longest chunk a random schedule uses.
const MAX_CHUNK: usize = 9;
/// Room per sequence (prompt + generated tokens).
const MAX_SEQ_LEN: usize = 64;
/// KV page size (tokens).
const PAGE: usize = 16;

/// One prompt's outcome.
#[derive(Debug, PartialEq, Eq)]
struct Run {
    ids: Vec<u32>,
    digest: String,
}

/// A sequence's progress through its prompt and its generation.
struct Progress {
    seq: SeqId,
    pos: usize,
    chunk: usize,
    next: u32,
    ids: Vec<u32>,
    hash: Sha256,
}

/// Greedy decoding of `prompts` together (one continuous batch), prompt `i`
/// prefilled in the chunk sizes `chunks[i]` (summing to its length), every
/// prompt row's logits kept; each step, a sequence still in its prompt
/// contributes its next chunk, the others their last sampled token.
fn run<P: Parallel>(
    bytes: &[u8],
    prompts: &[Vec<u32>],
    chunks: &[Vec<usize>],
    par: &P,
) -> Vec<Run> {
    assert_eq!(prompts.len(), chunks.len());
    for (p, c) in prompts.iter().zip(chunks) {
        assert_eq!(
            c.iter().sum::<usize>(),
            p.len(),
            "a schedule must cover its prompt"
        );
    }
    let file = File::parse(bytes).unwrap();
    let cfg = Config::from_gguf(&file).unwrap();
    let total: usize = prompts.iter().map(Vec::len).sum();
    let lim = Limits {
        max_seqs: prompts.len(),
        max_seq_len: MAX_SEQ_LEN,
        max_step_tokens: total,
        max_logit_rows: total,
        kv_type: KvType::F16,
        page_size: PAGE,
        n_pages: prompts.len() * MAX_SEQ_LEN.div_ceil(PAGE),
    };
    let model_bytes = Model::bytes_required(&cfg).unwrap();
    let engine_bytes = {
        let mut buf = vec![0u8; model_bytes];
        let mut arena = Arena::new(&mut buf);
        let model = Model::from_gguf(&file, bytes, &mut arena).unwrap();
        Engine::<PagedCache>::bytes_required(&model, &lim).unwrap()
    };
    // Slack for the arena's alignment padding.
    let mut buf = vec![0u8; model_bytes + engine_bytes + 64];
    let mut arena = Arena::new(&mut buf);
    let model = Model::from_gguf(&file, bytes, &mut arena).unwrap();
    let vocab = model.cfg.vocab_size;
    let mut eng = Engine::<PagedCache>::new(model, lim, &mut arena).unwrap();
    let mut prog: Vec<Progress> = prompts
        .iter()
        .map(|_| Progress {
            seq: eng.new_seq().unwrap(),
            pos: 0,
            chunk: 0,
            next: 0,
            ids: Vec::new(),
            hash: Sha256::new(),
        })
        .collect();
    loop {
        // (prompt index, tokens) of this step, and whether they are prompt tokens.
        let mut plan: Vec<(usize, Vec<u32>, bool)> = Vec::new();
        for (i, p) in prog.iter().enumerate() {
            if p.pos < prompts[i].len() {
                let n = chunks[i][p.chunk];
                plan.push((i, prompts[i][p.pos..p.pos + n].to_vec(), true));
            } else if p.ids.len() < STEPS {
                plan.push((i, vec![p.next], false));
            }
        }
        if plan.is_empty() {
            break;
        }
        let entries: Vec<Entry> = plan
            .iter()
            .map(|(i, toks, prefill)| Entry {
                seq: prog[*i].seq,
                tokens: toks,
                all_logits: *prefill,
            })
            .collect();
        let logits = eng.step(par, &entries).unwrap();
        let mut rows = logits.chunks_exact(vocab);
        for (i, toks, prefill) in &plan {
            let p = &mut prog[*i];
            let n_rows = if *prefill { toks.len() } else { 1 };
            let mut last = None;
            for _ in 0..n_rows {
                let row = rows.next().expect("a logits row per kept token");
                hash_logits(&mut p.hash, row);
                last = Some(row);
            }
            if *prefill {
                p.pos += toks.len();
                p.chunk += 1;
                if p.pos < prompts[*i].len() {
                    continue;
                }
            }
            p.next = argmax(last.unwrap()).unwrap();
            p.ids.push(p.next);
        }
        assert!(rows.next().is_none(), "more logits rows than kept tokens");
    }
    prog.into_iter()
        .map(|p| Run {
            ids: p.ids,
            digest: p
                .hash
                .finalize()
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect(),
        })
        .collect()
}

/// SplitMix64: the random schedules' seeded generator.
fn splitmix(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Random chunk sizes in `1..=MAX_CHUNK` covering `len` tokens.
fn random_chunks(len: usize, rng: &mut u64) -> Vec<usize> {
    let mut out = Vec::new();
    let mut left = len;
    while left > 0 {
        let n = (1 + (splitmix(rng) % MAX_CHUNK as u64) as usize).min(left);
        out.push(n);
        left -= n;
    }
    out
}

/// The prompts' ids, from the model's own tokenizer.
fn tokenize(bytes: &[u8], texts: &[&str]) -> Vec<Vec<u32>> {
    let file = File::parse(bytes).unwrap();
    let mut mem = vec![0u8; Tokenizer::bytes_required_gguf(&file).unwrap()];
    let mut arena = Arena::new(&mut mem);
    let tok = Tokenizer::from_gguf(&file, &mut arena).unwrap();
    const MAX: usize = 1024;
    let mut wmem = vec![0u8; Workspace::bytes_required(MAX).unwrap()];
    let mut warena = Arena::new(&mut wmem);
    let mut ws = Workspace::new(&mut warena, MAX).unwrap();
    texts
        .iter()
        .map(|t| {
            let mut out = vec![0u32; MAX];
            let n = tok.encode(t, false, &mut ws, &mut out).unwrap();
            out.truncate(n);
            out
        })
        .collect()
}

fn check(file: &str, name: &str, texts: &[&str]) {
    let Some(path) = support::model::real_model(file, name) else {
        return;
    };
    let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let prompts = tokenize(&bytes, texts);
    for (t, p) in texts.iter().zip(&prompts) {
        assert!(
            (10..=40).contains(&p.len()),
            "{name}: prompt {t:?} has {} tokens, not 10-40",
            p.len()
        );
    }
    let whole: Vec<Vec<usize>> = prompts.iter().map(|p| vec![p.len()]).collect();
    let one_by_one: Vec<Vec<usize>> = prompts.iter().map(|p| vec![1; p.len()]).collect();
    let pool = ThreadPool::new(2).unwrap();

    let solo: Vec<Run> = prompts
        .iter()
        .zip(&whole)
        .map(|(p, c)| {
            run(
                &bytes,
                std::slice::from_ref(p),
                std::slice::from_ref(c),
                &Serial,
            )
            .remove(0)
        })
        .collect();
    for (i, r) in solo.iter().enumerate() {
        eprintln!(
            "{name}: prompt {i} ({} tokens) -> {:?} {}",
            prompts[i].len(),
            r.ids,
            &r.digest[..16]
        );
    }
    let same = |what: &str, runs: Vec<Run>| {
        for (i, (a, b)) in solo.iter().zip(&runs).enumerate() {
            assert_eq!(
                a, b,
                "{name}: prompt {i}: {what} differs from the prompt alone"
            );
        }
    };
    same("one batch", run(&bytes, &prompts, &whole, &Serial));
    same("one batch, 2 threads", run(&bytes, &prompts, &whole, &pool));
    same(
        "token-by-token prefill",
        run(&bytes, &prompts, &one_by_one, &Serial),
    );
    for s in 0..SCHEDULES {
        let seed = 0x5eed_0000 + s;
        let mut rng = seed;
        let chunks: Vec<Vec<usize>> = prompts
            .iter()
            .map(|p| random_chunks(p.len(), &mut rng))
            .collect();
        let what = format!(
            "random chunks (seed {seed:#x}: {chunks:?}, {} threads)",
            1 + s % 2
        );
        let runs = if s % 2 == 0 {
            run(&bytes, &prompts, &chunks, &Serial)
        } else {
            run(&bytes, &prompts, &chunks, &pool)
        };
        same(&what, runs);
    }
}

#[test]
fn qwen25_coder_batching_chunking_threads_invariant() {
    check(
        "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
        "qwen2.5-coder-0.5b",
        &[
            "def fibonacci(n: int) -> int:\n    \"\"\"Return the n-th Fibonacci number.",
            "// Sort the array in place using insertion sort.\nvoid sort(int *a, int n) {",
            "Explain in one sentence why the sky is blue, then give the physical law that describes it:",
        ],
    );
}

#[test]
fn gemma3_270m_batching_chunking_threads_invariant() {
    check(
        "gemma-3-270m-q4_k_m.gguf",
        "gemma3-270m",
        &[
            "The capital of France, on the river Seine, is a city called",
            "Here is a short poem about the sea and the wind over the harbour:",
            "Question: a baker makes seventeen loaves every morning and sells all but three of them. How many loaves does she sell in a week? Answer step by step, then give the number.",
        ],
    );
}
