//! `detllm generate --transcript` and `detllm verify` on SmolLM2-135M
//! (fetched by scripts/test.sh; when absent these fail if the run requires the
//! model — scripts/test.sh, CI — and otherwise skip with a NOTICE):
//!
//! * a transcript verifies where it was written, and after a round trip
//!   through a JSON parser;
//! * changing any one generated id, any step digest, the final digest, the
//!   seed, a sampling parameter or a prompt id fails verification (exit 1)
//!   at the right step;
//! * a different model file is reported as a SHA-256 mismatch before any work;
//! * truncated, garbled, non-JSON, wrong-version and incomplete files are
//!   clean errors (non-zero exit, one message, no panic).
//!
//! The same properties run without any download on the synthetic model
//! (`SynthSpec::TINY` written to a temp file) against the committed
//! tests/data/synth-transcript.json.

mod support;

use support::cli::{bin, tmp};

/// [`support::cli::run`] without input.
fn run_plain(cmd: &mut Command) -> (i32, String, String) {
    support::cli::run(cmd, None)
}

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

const STEPS: usize = 6;

/// A named change to a transcript.
type Edit = (&'static str, fn(&mut Value));

/// The model and a transcript of a sampled generation, written once.
fn fixture() -> Option<&'static (PathBuf, Value)> {
    static F: OnceLock<Option<(PathBuf, Value)>> = OnceLock::new();
    F.get_or_init(|| {
        let model = support::model::path()?;
        let path = tmp("written.json");
        let (code, _, err) = run_plain(
            bin()
                .args(["generate", "--model"])
                .arg(&model)
                .args([
                    "--prompt",
                    "Once upon a time",
                    "--max-tokens",
                    &STEPS.to_string(),
                    "--temperature",
                    "0.8",
                    "--top-k",
                    "40",
                    "--top-p",
                    "0.95",
                    "--seed",
                    "5",
                    "--transcript",
                ])
                .arg(&path),
        );
        assert_eq!(code, 0, "generate failed: {err}");
        let v: Value =
            serde_json::from_str(&std::fs::read_to_string(&path).expect("read")).expect("json");
        Some((model, v))
    })
    .as_ref()
}

/// Writes `v` and runs `verify` on it.
fn verify(model: &Path, v: &Value, name: &str) -> (i32, String, String) {
    let p = tmp(name);
    std::fs::write(&p, serde_json::to_string_pretty(v).expect("json")).expect("write");
    run_plain(bin().arg("verify").arg(&p).arg("--model").arg(model))
}

fn verify_text(model: &Path, text: &[u8], name: &str) -> (i32, String, String) {
    let p = tmp(name);
    std::fs::write(&p, text).expect("write");
    run_plain(bin().arg("verify").arg(&p).arg("--model").arg(model))
}

fn diverged_at(out: &str) -> Option<usize> {
    out.lines()
        .find_map(|l| l.strip_prefix("DIVERGED at step "))
        .and_then(|r| r.trim_end_matches(':').parse().ok())
}

#[test]
fn a_transcript_verifies_as_written_and_after_a_round_trip() {
    let Some((model, v)) = fixture() else { return };
    assert_eq!(v["steps"].as_array().map(Vec::len), Some(STEPS));
    let written = tmp("written.json");
    let (code, out, err) = run_plain(bin().arg("verify").arg(&written).arg("--model").arg(model));
    assert_eq!(code, 0, "{out}{err}");
    let last = v["steps"][STEPS - 1]["digest"].as_str().expect("digest");
    assert_eq!(
        out.trim(),
        format!("verified: {STEPS} steps, digest {last}")
    );
    assert_eq!(v["final_digest"].as_str(), Some(last));
    // Parsed and re-serialized (compact, keys reordered by the parser).
    let reparsed: Value =
        serde_json::from_str(&serde_json::to_string(v).expect("json")).expect("json");
    let (code, out, _) = verify(model, &reparsed, "round-trip.json");
    assert_eq!(code, 0, "{out}");
}

#[test]
fn edited_run_parameters_fail_at_step_zero() {
    let Some((model, v)) = fixture() else { return };
    let edits: [Edit; 6] = [
        ("seed", |v| {
            v["sampling"]["seed"] = (v["sampling"]["seed"].as_u64().unwrap() + 1).into()
        }),
        ("temperature", |v| {
            v["sampling"]["temperature"]["bits"] = "0x3f4ccccc".into()
        }),
        ("top_k", |v| v["sampling"]["top_k"] = 39.into()),
        ("top_p", |v| {
            v["sampling"]["top_p"]["bits"] = "0x3f733332".into()
        }),
        ("penalty_last_n", |v| {
            v["sampling"]["penalty_last_n"] = 63.into()
        }),
        ("prompt id", |v| {
            let p = &mut v["prompt_ids"][1];
            *p = (p.as_u64().unwrap() + 1).into();
        }),
    ];
    for (what, edit) in edits {
        let mut t = v.clone();
        edit(&mut t);
        let (code, out, err) = verify(model, &t, "edited-param.json");
        assert_eq!(code, 1, "{what}: {out}{err}");
        assert_eq!(diverged_at(&out), Some(0), "{what}: {out}");
    }
}

#[test]
fn an_edited_final_digest_fails() {
    let Some((model, v)) = fixture() else { return };
    let mut t = v.clone();
    t["final_digest"] = "00".repeat(32).into();
    let (code, out, _) = verify(model, &t, "final.json");
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("DIVERGED at the final digest"), "{out}");
}

#[test]
fn a_different_model_is_reported_before_any_work() {
    let Some((_, v)) = fixture() else { return };
    let other = tmp("other.gguf");
    std::fs::write(&other, b"GGUF not the model").expect("write");
    let (code, out, _) = verify(&other, v, "other-model.json");
    assert_eq!(code, 1);
    assert!(out.starts_with("wrong model:"), "{out}");
}

#[test]
fn malformed_transcripts_are_clean_errors() {
    let Some((model, v)) = fixture() else { return };
    let text = serde_json::to_string_pretty(v).expect("json");
    let mut cases: Vec<(String, Vec<u8>)> = vec![
        ("empty".into(), Vec::new()),
        ("not json".into(), b"verified: 6 steps".to_vec()),
        ("garbled".into(), text.replace(':', ";").into_bytes()),
        ("binary".into(), vec![0xFF, 0x00, 0x7B, 0x80]),
    ];
    for cut in [1, text.len() / 3, text.len() / 2, text.len() - 2] {
        cases.push((
            format!("truncated at {cut}"),
            text.as_bytes()[..cut].to_vec(),
        ));
    }
    let mut edit = |what: &str, f: &dyn Fn(&mut Value)| {
        let mut t = v.clone();
        f(&mut t);
        cases.push((what.into(), serde_json::to_vec(&t).expect("json")));
    };
    edit("format 2", &|t| t["format"] = 2.into());
    edit("other profile", &|t| t["profile"] = "detllm-v0".into());
    edit("no steps", &|t| t["steps"] = Value::Array(vec![]));
    edit("no sampling", &|t| {
        t.as_object_mut()
            .unwrap()
            .remove("sampling")
            .map(drop)
            .unwrap_or(())
    });
    edit("no model hash", &|t| {
        t["model"]
            .as_object_mut()
            .unwrap()
            .remove("sha256")
            .map(drop)
            .unwrap_or(())
    });
    edit("short digest", &|t| t["steps"][0]["digest"] = "abc".into());
    edit("id not a number", &|t| t["steps"][0]["id"] = "x".into());
    edit("negative seed", &|t| t["sampling"]["seed"] = (-1).into());
    edit("NaN temperature", &|t| {
        t["sampling"]["temperature"]["bits"] = "0x7fc00000".into()
    });
    edit("id past vocab", &|t| {
        t["steps"][0]["id"] = 4_000_000_000u64.into()
    });
    edit("more steps than max_tokens", &|t| {
        t["max_tokens"] = 1.into()
    });
    for (what, bytes) in cases {
        let (code, out, err) = verify_text(model, &bytes, "malformed.json");
        assert!(
            code != 0 && code != 1,
            "{what}: exit {code} (expected a usage/format error)\n{out}{err}"
        );
        assert!(!err.trim().is_empty(), "{what}: no message");
        assert_eq!(
            err.trim().lines().count(),
            1,
            "{what}: message is not one line: {err}"
        );
        assert!(!out.contains("verified"), "{what}: {out}");
    }
}

/// Changing step `k`'s id or digest fails verification at step `k`: every
/// (step, field) edit, 2 × STEPS of them.
#[test]
fn an_edited_step_fails_at_that_step() {
    let Some((model, v)) = fixture() else { return };
    for k in 0..STEPS {
        for id in [true, false] {
            let mut t = v.clone();
            if id {
                let old = t["steps"][k]["id"].as_u64().unwrap();
                t["steps"][k]["id"] = ((old + 1 + 97 * k as u64) % 49152).into();
            } else {
                let d = t["steps"][k]["digest"].as_str().unwrap().to_string();
                let flipped = format!("{}{}", if d.starts_with('0') { '1' } else { '0' }, &d[1..]);
                t["steps"][k]["digest"] = flipped.into();
            }
            let (code, out, _) = verify(model, &t, &format!("step-{k}-{id}.json"));
            assert_eq!(code, 1, "step {k} (id edit: {id}): {out}");
            assert_eq!(
                diverged_at(&out),
                Some(k),
                "step {k} (id edit: {id}): {out}"
            );
        }
    }
}

/// The synthetic model (`SynthSpec::TINY`) written to a temp file, and the
/// committed transcript of its seeded sampled generation.
fn synth() -> &'static (PathBuf, Value) {
    static F: OnceLock<(PathBuf, Value)> = OnceLock::new();
    F.get_or_init(|| {
        let p = tmp("synth.gguf");
        let bytes = detllm::model::synth::synth_vec(&detllm::model::synth::SynthSpec::TINY)
            .expect("synthetic model");
        std::fs::write(&p, bytes).expect("write synthetic model");
        let t = support::model::data_path("synth-transcript.json");
        let v: Value =
            serde_json::from_str(&std::fs::read_to_string(t).expect("read")).expect("json");
        (p, v)
    })
}

#[test]
fn the_committed_synthetic_transcript_verifies_through_the_cli() {
    let (model, v) = synth();
    let n = v["steps"].as_array().map(Vec::len).expect("steps");
    let (code, out, err) = verify(model, v, "synth.json");
    assert_eq!(code, 0, "{out}{err}");
    let last = v["final_digest"].as_str().expect("final digest");
    assert_eq!(out.trim(), format!("verified: {n} steps, digest {last}"));
    // A parameter edit fails at step 0 here too.
    let mut t = v.clone();
    t["sampling"]["seed"] = (v["sampling"]["seed"].as_u64().unwrap() + 1).into();
    let (code, out, _) = verify(model, &t, "synth-seed.json");
    assert_eq!(code, 1, "{out}");
    assert_eq!(diverged_at(&out), Some(0), "{out}");
}

/// On the synthetic model: changing step `k`'s id or digest fails at step
/// `k`, and the report names both digests: every (step, field) edit.
#[test]
fn synth_an_edited_step_fails_at_that_step() {
    let (model, v) = synth();
    let n = v["steps"].as_array().map(Vec::len).expect("steps");
    assert_eq!(n, 12);
    for k in 0..n {
        for id in [true, false] {
            let mut t = v.clone();
            let expected = v["steps"][k]["digest"].as_str().unwrap().to_string();
            if id {
                let old = t["steps"][k]["id"].as_u64().unwrap();
                t["steps"][k]["id"] = ((old + 1 + 7 * k as u64) % 96).into();
            } else {
                let flipped = format!(
                    "{}{}",
                    if expected.starts_with('0') { '1' } else { '0' },
                    &expected[1..]
                );
                t["steps"][k]["digest"] = flipped.into();
            }
            let (code, out, _) = verify(model, &t, &format!("synth-step-{k}-{id}.json"));
            let what = format!("step {k} (id edit: {id})");
            assert_eq!(code, 1, "{what}: {out}");
            assert_eq!(diverged_at(&out), Some(k), "{what}: {out}");
            // The original digest is printed either as the expected one (id
            // edit) or as the produced one (digest edit), with both tokens.
            assert!(out.contains(&expected), "{what}: {out}");
            assert!(
                out.contains("expected token") && out.contains("produced token"),
                "{what}: {out}"
            );
        }
    }
}
