//! SmolLM2-135M-Instruct end to end: greedy continuations of the reference
//! prompts of `tests/data/smollm2-llamacpp.json` (llama.cpp's prompt ids and
//! greedy ids; provenance in `tests/data/README.md`) through the library.
//!
//! * our ids and digests equal the committed goldens (regenerate with
//!   `scripts/regen-smollm2-goldens.sh`, i.e. `DETLLM_REGEN=1`);
//! * the three prompts decoded together as one continuous batch give exactly
//!   the ids and digests of each prompt run alone, with 1 and 2 threads;
//! * agreement with llama.cpp's greedy ids is reported (not asserted: its
//!   arithmetic differs, so a divergence after a near-tie is legitimate).
//!
//! Needs the model: `support::model::path()` fails the test when the run
//! requires it (`scripts/test.sh`, CI) and otherwise skips with a notice.
#![cfg(feature = "std")]

use crate::support;

use detllm::audit::hash_logits;
use detllm::gguf::File;
use detllm::kv::{KvType, PagedCache, SeqId};
use detllm::model::{Engine, Entry, Limits, Model};
use detllm::parallel::ThreadPool;
use detllm::sample::argmax;
use detllm::tokenizer::{Tokenizer, Workspace};
use detllm::{Arena, Parallel, Serial};
use sha2::{Digest, Sha256};
use std::path::PathBuf;

const STEPS: usize = 32;

fn golden_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/golden/smollm2.json")
}

/// llama.cpp's prompt ids and greedy continuations (`tests/data/smollm2-llamacpp.json`).
fn reference() -> serde_json::Value {
    let p = support::model::data_path("smollm2-llamacpp.json");
    let text = std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    serde_json::from_str(&text).expect("JSON")
}

struct Run {
    ids: Vec<u32>,
    digest: String,
    margins: Vec<f32>,
}

/// Greedy decoding of several prompts together (one continuous batch).
fn run_batch<P: Parallel>(bytes: &[u8], prompts: &[Vec<u32>], par: &P) -> Vec<Run> {
    let file = File::parse(bytes).unwrap();
    let mut buf = vec![0u8; 64 << 20];
    let mut arena = Arena::new(&mut buf);
    let model = Model::from_gguf(&file, bytes, &mut arena).unwrap();
    let vocab = model.cfg.vocab_size;
    let lim = Limits {
        max_seqs: prompts.len(),
        max_seq_len: 128,
        max_step_tokens: 160,
        max_logit_rows: prompts.len(),
        kv_type: KvType::F16,
        page_size: 16,
        n_pages: prompts.len() * 8,
    };
    let mut eng = Engine::<PagedCache>::new(model, lim, &mut arena).unwrap();
    let seqs: Vec<SeqId> = prompts.iter().map(|_| eng.new_seq().unwrap()).collect();
    let mut hashers: Vec<Sha256> = prompts.iter().map(|_| Sha256::new()).collect();
    let mut runs: Vec<Run> = prompts
        .iter()
        .map(|_| Run {
            ids: vec![],
            digest: String::new(),
            margins: vec![],
        })
        .collect();
    let mut next: Vec<u32> = vec![0; prompts.len()];
    let take = |i: usize, row: &[detllm::F32], runs: &mut Vec<Run>, hashers: &mut Vec<Sha256>| {
        hash_logits(&mut hashers[i], row);
        let t = argmax(row).unwrap();
        let mut v: Vec<f32> = row.iter().map(|x| f32::from_bits(x.to_bits())).collect();
        v.sort_by(|a, b| b.total_cmp(a));
        runs[i].margins.push(v[0] - v[1]);
        runs[i].ids.push(t);
        t
    };
    let entries: Vec<Entry> = seqs
        .iter()
        .zip(prompts)
        .map(|(&s, p)| Entry {
            seq: s,
            tokens: p,
            all_logits: false,
        })
        .collect();
    let logits = eng.step(par, &entries).unwrap().to_vec();
    for i in 0..prompts.len() {
        next[i] = take(
            i,
            &logits[i * vocab..(i + 1) * vocab],
            &mut runs,
            &mut hashers,
        );
    }
    let mut active: Vec<usize> = (0..prompts.len())
        .filter(|&i| next[i] != 2 && next[i] != 0)
        .collect();
    for _ in 1..STEPS {
        if active.is_empty() {
            break;
        }
        let toks: Vec<u32> = active.iter().map(|&i| next[i]).collect();
        let entries: Vec<Entry> = active
            .iter()
            .zip(&toks)
            .map(|(&i, t)| Entry {
                seq: seqs[i],
                tokens: std::slice::from_ref(t),
                all_logits: false,
            })
            .collect();
        let logits = eng.step(par, &entries).unwrap().to_vec();
        for (r, &i) in active.iter().enumerate() {
            next[i] = take(
                i,
                &logits[r * vocab..(r + 1) * vocab],
                &mut runs,
                &mut hashers,
            );
        }
        active.retain(|&i| next[i] != 2 && next[i] != 0);
    }
    for (r, h) in runs.iter_mut().zip(hashers) {
        r.digest = h.finalize().iter().map(|b| format!("{b:02x}")).collect();
    }
    runs
}

#[test]
fn smollm2_greedy_goldens_batching_and_threads() {
    let Some(path) = support::model::path() else {
        return;
    };
    let bytes = std::fs::read(&path).unwrap();
    let reference = reference();
    // Our tokenizer reproduces the reference prompt ids.
    let file = File::parse(&bytes).unwrap();
    let mut tbuf = vec![0u8; 8 << 20];
    let mut ta = Arena::new(&mut tbuf);
    let tok = Tokenizer::from_gguf(&file, &mut ta).unwrap();
    let mut work = Workspace::new(&mut ta, 4096).unwrap();
    let greedy = reference["greedy"].as_array().unwrap();
    let mut prompts = Vec::new();
    for g in greedy {
        let text = g["prompt"].as_str().unwrap();
        let mut out = vec![0u32; 4096];
        let n = tok.encode(text, true, &mut work, &mut out).unwrap();
        let want: Vec<u32> = g["prompt_ids"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_u64().unwrap() as u32)
            .collect();
        assert_eq!(&out[..n], &want[..], "prompt ids differ from llama.cpp");
        prompts.push(want);
    }
    // Each alone, then all together, then with two threads.
    let solo: Vec<Run> = prompts
        .iter()
        .map(|p| run_batch(&bytes, std::slice::from_ref(p), &Serial).remove(0))
        .collect();
    let batched = run_batch(&bytes, &prompts, &Serial);
    let threaded = run_batch(&bytes, &prompts, &ThreadPool::new(2).unwrap());
    for i in 0..prompts.len() {
        assert_eq!(
            solo[i].ids, batched[i].ids,
            "prompt {i}: batched ids differ from solo"
        );
        assert_eq!(
            solo[i].digest, batched[i].digest,
            "prompt {i}: batched digest differs"
        );
        assert_eq!(
            solo[i].digest, threaded[i].digest,
            "prompt {i}: 2 threads differ"
        );
    }
    // Agreement with llama.cpp (reported).
    let mut report = Vec::new();
    for (i, g) in greedy.iter().enumerate() {
        let theirs: Vec<u32> = g["ids"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_u64().unwrap() as u32)
            .collect();
        let n = theirs.len().min(STEPS);
        let same = solo[i]
            .ids
            .iter()
            .zip(&theirs)
            .take(n)
            .take_while(|(a, b)| a == b)
            .count();
        let margin = solo[i].margins.get(same).copied().unwrap_or(f32::NAN);
        report.push(serde_json::json!({"prompt": i, "agree_prefix": same, "of": n, "margin_at_divergence": margin}));
        eprintln!(
            "prompt {i}: first {same} of {n} llama.cpp greedy tokens reproduced; top-1 - top-2 margin there {margin}"
        );
    }
    let ours = serde_json::json!({
        "about": "detllm greedy (32 steps or EOG) on SmolLM2-135M-Instruct Q4_1; digest = SHA-256 of every logits row sampled from. Regenerate: scripts/regen-smollm2-goldens.sh",
        "profile": detllm::PROFILE,
        "runs": solo.iter().map(|r| serde_json::json!({"ids": r.ids, "digest": r.digest})).collect::<Vec<_>>(),
        "llamacpp_agreement": report,
    });
    let gp = golden_path();
    if std::env::var_os("DETLLM_REGEN").is_some() {
        std::fs::write(&gp, serde_json::to_string_pretty(&ours).unwrap() + "\n").unwrap();
        eprintln!("wrote {}", gp.display());
        return;
    }
    let golden: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&gp).expect("golden file")).unwrap();
    assert_eq!(golden["profile"], ours["profile"]);
    assert_eq!(
        golden["runs"], ours["runs"],
        "greedy ids/digests differ from tests/golden/smollm2.json"
    );
}
