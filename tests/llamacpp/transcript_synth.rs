//! The committed audit transcript of the synthetic model,
//! `tests/data/synth-transcript.json` (format: docs/TRANSCRIPT.md), and the
//! chain of evidence that every target verifies it:
//!
//! 1. re-executing the generation here reproduces every step's token and
//!    digest, and the model hash;
//! 2. its final digest is the golden `model.sampled` in
//!    `tests/golden/model.txt`, which `scripts/cross-test.sh` recomputes on
//!    s390x, aarch64, i686, wasm32, Cortex-M4 and RISC-V — and since each
//!    step's digest chains the previous one, an equal final digest means
//!    every step (every logits row, every token) was reproduced there.
//!
//! Regenerate (after an intended change to the profile or the chain):
//! `scripts/regen-transcript.sh`.
#![cfg(feature = "std")]

use detllm::model::synth::{SynthSpec, synth_vec};
use detllm::selftest::model::{SAMPLED_PARAMS, SAMPLED_TOKENS, sampled_prompt, sampled_steps};
use detllm::selftest::{Hex, SCRATCH_BYTES};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use std::path::PathBuf;

fn path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/synth-transcript.json")
}

fn bits(x: detllm::F32) -> Value {
    json!({ "bits": format!("{:#010x}", x.to_bits()), "value": f32::from_bits(x.to_bits()) })
}

/// Runs the generation and builds its transcript.
fn record() -> Value {
    let mut scratch = vec![0u8; SCRATCH_BYTES];
    let mut steps = Vec::new();
    let last = sampled_steps(&mut scratch, &mut |_, tok, d| {
        steps.push(json!({ "id": tok, "digest": Hex(d).to_string() }));
    })
    .expect("sampled generation");
    let spec = SynthSpec::TINY;
    let model = synth_vec(&spec).expect("synthetic model");
    let p = SAMPLED_PARAMS;
    json!({
        "format": 1,
        "profile": detllm::PROFILE,
        "crate_version": env!("CARGO_PKG_VERSION"),
        "model": {
            "file": "synthetic:SynthSpec::TINY",
            "sha256": Hex(&Sha256::digest(&model).into()).to_string(),
            "architecture": "llama",
            "vocab_size": spec.vocab_size, "dim": spec.dim, "n_layers": spec.n_layers,
        },
        "sampling": {
            "temperature": bits(p.temperature), "top_k": p.top_k, "top_p": bits(p.top_p),
            "min_p": bits(p.min_p), "repeat_penalty": bits(p.repeat_penalty),
            "penalty_last_n": p.penalty_last_n, "seed": p.seed,
        },
        "max_tokens": SAMPLED_TOKENS,
        "prompt": "",
        "prompt_ids": sampled_prompt().to_vec(),
        "steps": steps,
        "final_digest": Hex(&last).to_string(),
    })
}

fn committed() -> Value {
    let text = std::fs::read_to_string(path()).expect("tests/data/synth-transcript.json");
    serde_json::from_str(&text).expect("transcript is JSON")
}

#[test]
fn committed_transcript_reexecutes_step_by_step() {
    let fresh = record();
    if std::env::var_os("DETLLM_REGEN_TRANSCRIPT").is_some() {
        let text = serde_json::to_string_pretty(&fresh).expect("json") + "\n";
        std::fs::write(path(), text).expect("write transcript");
        println!("wrote {}", path().display());
        return;
    }
    let old = committed();
    let (fs, os) = (&fresh["steps"], &old["steps"]);
    assert_eq!(fs.as_array().map(Vec::len), Some(SAMPLED_TOKENS));
    for (i, (f, o)) in fs
        .as_array()
        .unwrap()
        .iter()
        .zip(os.as_array().expect("steps"))
        .enumerate()
    {
        assert_eq!(f, o, "step {i} differs from the committed transcript");
    }
    assert_eq!(
        fresh["model"], old["model"],
        "model hash or metadata differs"
    );
    assert_eq!(fresh["sampling"], old["sampling"]);
    assert_eq!(fresh["prompt_ids"], old["prompt_ids"]);
    assert_eq!(
        fresh, old,
        "transcript differs (run scripts/regen-transcript.sh after an intended change)"
    );
    assert_eq!(
        old["final_digest"],
        os.as_array().unwrap().last().unwrap()["digest"]
    );
}

#[test]
fn committed_final_digest_is_the_cross_target_golden() {
    let golden = std::fs::read_to_string(
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/golden/model.txt"),
    )
    .expect("tests/golden/model.txt");
    let sampled = golden
        .lines()
        .find_map(|l| l.strip_prefix("model.sampled "))
        .expect("model.sampled golden")
        .trim();
    assert_eq!(committed()["final_digest"].as_str(), Some(sampled));
}
