//! `--speculate` changes no bit of what `detllm generate` prints (issue #45):
//!
//! * the streamed text (stdout), the digest line and `--json`'s ids and
//!   digest are the same without speculation, with `--speculate ngram` at
//!   draft lengths 1, 3 and 8, and with `--speculate draft` (the model
//!   drafting for itself: every draft accepted), greedy and sampled, one
//!   prompt and several;
//! * a transcript recorded with speculation is byte-identical to the plain
//!   one and `detllm verify` (which never speculates) accepts it;
//! * a draft model with another vocabulary is a typed one-line error, and so
//!   is `--speculate draft` without `--draft-model`.
//!
//! They need SmolLM2-135M (scripts/test.sh fetches it); without it they fail
//! when the run requires the model and otherwise print a NOTICE and return.
//! Planted bug caught: the speculative path not hashing a row into the
//! run's digest (every digest comparison fails).

mod support;

use detllm::model::synth::{SynthSpec, synth_vec};
use serde_json::Value;
use std::path::Path;
use support::cli::{bin, run, tmp};

/// (stdout, the stderr line starting with `digest`) of one `generate`.
fn generate(model: &Path, prompts: &[&str], extra: &[&str]) -> (String, String) {
    let mut cmd = bin();
    cmd.args(["generate", "--max-tokens", "40", "--model"])
        .arg(model)
        .args(extra);
    for p in prompts {
        cmd.args(["--prompt", p]);
    }
    let (code, out, err) = run(&mut cmd, None);
    assert_eq!(code, 0, "{extra:?}: {err}");
    let digests: Vec<&str> = err.lines().filter(|l| l.starts_with("digest")).collect();
    if extra.contains(&"--speculate") {
        assert!(err.contains("speculation:"), "{err}");
    }
    (out, digests.join("\n"))
}

/// `--json`'s objects without their timing fields.
fn without_timing(out: &str) -> Vec<Value> {
    out.lines()
        .map(|l| {
            let mut v: Value = serde_json::from_str(l).expect("JSON line");
            let o = v.as_object_mut().expect("object");
            o.remove("prefill_tok_s");
            o.remove("decode_tok_s");
            v
        })
        .collect()
}

const SAMPLED: [&str; 6] = ["--temperature", "0.8", "--top-k", "40", "--seed", "7"];

#[test]
fn speculation_changes_no_output() {
    let Some(model) = support::model::path() else {
        return;
    };
    let m = model.to_str().expect("utf-8 path");
    let prompt = "Count: one two three four five six seven one two three four";
    let ngram = &["--speculate", "ngram"][..];
    let draft = &["--speculate", "draft", "--draft-model", m][..];
    let greedy_specs = [
        ngram,
        &["--speculate", "ngram", "--draft-max", "1"][..],
        &["--speculate", "ngram", "--draft-max", "3"][..],
        draft,
    ];
    let chat = &["--chat", "--seed", "3"][..];
    let cases: [(&[&str], &[&[&str]]); 3] = [
        (&[], &greedy_specs),
        (&SAMPLED, &[ngram, draft]),
        (chat, &[ngram]),
    ];
    for (sampling, specs) in cases {
        let plain = generate(&model, &[prompt], sampling);
        for spec in specs {
            let args: Vec<&str> = sampling.iter().chain(spec.iter()).copied().collect();
            assert_eq!(generate(&model, &[prompt], &args), plain, "{args:?}");
        }
    }
    // Several prompts, --json.
    let prompts = [prompt, "The capital of France is", "def add(a, b):"];
    for sampling in [&[][..], &SAMPLED[..]] {
        let mut args = vec!["--json"];
        args.extend_from_slice(sampling);
        let plain = without_timing(&generate(&model, &prompts, &args).0);
        args.extend_from_slice(&["--speculate", "ngram"]);
        let spec = without_timing(&generate(&model, &prompts, &args).0);
        assert_eq!(plain.len(), 3);
        assert_eq!(spec, plain, "{args:?}");
    }
}

#[test]
fn transcript_recorded_with_speculation_verifies_without_it() {
    let Some(model) = support::model::path() else {
        return;
    };
    let prompt = "a b c d a b c d a b";
    let mut paths = Vec::new();
    for (name, spec) in [("plain", &[][..]), ("spec", &["--speculate", "ngram"][..])] {
        let path = tmp(&format!("spec-transcript-{name}.txt"));
        let mut args = vec!["--transcript", path.to_str().expect("utf-8")];
        args.extend_from_slice(&SAMPLED);
        args.extend_from_slice(spec);
        generate(&model, &[prompt], &args);
        paths.push(path);
    }
    let plain = std::fs::read(&paths[0]).expect("plain transcript");
    let spec = std::fs::read(&paths[1]).expect("speculative transcript");
    assert_eq!(
        spec, plain,
        "the transcript records no trace of speculation"
    );
    let (code, out, err) = run(
        bin()
            .arg("verify")
            .arg("--model")
            .arg(&model)
            .arg(&paths[1]),
        None,
    );
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("verified"), "{out}");
}

#[test]
fn draft_model_with_another_vocabulary_is_a_typed_error() {
    let Some(model) = support::model::path() else {
        return;
    };
    let other = tmp("spec-other-vocab.gguf");
    std::fs::write(&other, synth_vec(&SynthSpec::TINY).expect("synth")).expect("write");
    let base = ["generate", "--prompt", "hi", "--max-tokens", "2", "--model"];
    let (code, _, err) = run(
        bin()
            .args(base)
            .arg(&model)
            .args(["--speculate", "draft", "--draft-model"])
            .arg(&other),
        None,
    );
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("the draft model's vocabulary"), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    let (code, _, err) = run(
        bin().args(base).arg(&model).args(["--speculate", "draft"]),
        None,
    );
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--draft-model"), "{err}");
}

/// Three user turns of a scripted chat (the replies copy from the turns and
/// from each other, so n-gram drafts are often right).
const TURNS: &[u8] = b"Repeat exactly: the cat sat on the mat, the dog sat on the log.\n\
Say the same sentence again, then once more.\n\
Now list the animals you named.\n";

/// (stdout, the tokens/s lines) of `chat` fed `TURNS` on stdin.
fn chat(model: &Path, extra: &[&str]) -> (String, Vec<String>) {
    let mut cmd = bin();
    cmd.args(["chat", "--max-tokens", "48", "--model"])
        .arg(model)
        .args(extra);
    let (code, out, err) = run(&mut cmd, Some(TURNS));
    assert_eq!(code, 0, "{extra:?}: {err}");
    let lines: Vec<String> = err
        .lines()
        .filter(|l| l.contains(" tokens, "))
        .map(str::to_string)
        .collect();
    assert_eq!(lines.len(), 3, "one reply per turn: {err}");
    (out, lines)
}

#[test]
fn chat_speculation_changes_no_reply() {
    let Some(model) = support::model::path() else {
        return;
    };
    let m = model.to_str().expect("utf-8 path");
    let sampled = &["--seed", "11", "--repeat-penalty", "1.1"][..];
    let greedy = &["--temperature", "0"][..];
    for sampling in [sampled, greedy] {
        let (plain, _) = chat(&model, sampling);
        assert!(plain.lines().count() >= 3, "{plain}");
        for spec in [
            &["--speculate", "ngram"][..],
            &["--speculate", "ngram", "--draft-max", "2"][..],
            &["--speculate", "draft", "--draft-model", m][..],
        ] {
            let args = [sampling, spec].concat();
            let (out, lines) = chat(&model, &args);
            assert_eq!(out, plain, "{args:?}");
            assert!(
                lines.iter().all(|l| l.contains("speculation:")),
                "{lines:?}"
            );
            if spec[1] == "draft" {
                // The model drafting for itself: greedy drafts are all kept.
                let accepted = lines.iter().any(|l| !l.contains(" 0 accepted"));
                assert!(accepted, "{lines:?}");
            }
        }
    }
}
