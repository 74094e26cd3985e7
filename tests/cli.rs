//! The `detllm` command on SmolLM2-135M (fetched by scripts/test.sh; skipped
//! with a NOTICE when absent) and on broken files:
//!
//! * `inspect` on truncated and corrupted copies of the model: exit 1, one
//!   line naming the problem, no panic; on the model itself: exit 0;
//! * `tokenize --json` and `tokenize --jsonl` equal the library's tokenizer;
//! * `generate --json` with several prompts (one continuous batch) gives each
//!   prompt exactly the ids and digest of its solo run.

#[path = "gguf_util.rs"]
mod util;

use detllm::Arena;
use detllm::gguf::File;
use detllm::tokenizer::{Tokenizer, Workspace};
use serde_json::Value;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

fn run(args: &[&str], model: Option<&Path>, stdin: Option<&str>) -> (i32, String, String) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_detllm"));
    cmd.args(args);
    if let Some(m) = model {
        cmd.arg("--model").arg(m);
    }
    cmd.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("spawn detllm");
    if let Some(text) = stdin {
        child
            .stdin
            .take()
            .expect("stdin")
            .write_all(text.as_bytes())
            .expect("write stdin");
    }
    drop(child.stdin.take());
    let out = child.wait_with_output().expect("wait");
    let (o, e) = (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    );
    assert!(
        !e.contains("panicked") && !o.contains("panicked"),
        "detllm panicked:\n{e}"
    );
    (out.status.code().unwrap_or(-1), o, e)
}

fn tmp(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("detllm-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir.join(name)
}

#[test]
fn inspect_reports_broken_models_in_one_line() {
    let Some(model) = util::model_path() else {
        return;
    };
    let bytes = std::fs::read(&model).expect("read model");
    let (code, out, _) = run(
        &["inspect", model.to_str().expect("utf-8 path")],
        None,
        None,
    );
    assert_eq!(code, 0);
    assert!(out.contains("token_embd.weight"), "{out}");
    let mut cases: Vec<(String, Vec<u8>)> = vec![
        ("empty".into(), Vec::new()),
        ("wrong magic".into(), [b"GGUG", &bytes[4..4096]].concat()),
        (
            "version 9".into(),
            [&bytes[..4], &9u32.to_le_bytes()[..], &bytes[8..4096]].concat(),
        ),
    ];
    for cut in [3, 24, 100, 1000, 1 << 20, bytes.len() / 2, bytes.len() - 1] {
        cases.push((format!("truncated at {cut}"), bytes[..cut].to_vec()));
    }
    // A huge tensor count in the header.
    let mut huge = bytes[..4096].to_vec();
    huge[8..16].copy_from_slice(&u64::MAX.to_le_bytes());
    cases.push(("tensor count 2^64-1".into(), huge));
    for (what, data) in cases {
        let p = tmp("broken.gguf");
        std::fs::write(&p, &data).expect("write");
        let (code, out, err) = run(&["inspect", p.to_str().expect("utf-8 path")], None, None);
        assert_eq!(code, 1, "{what}: exit {code}\n{out}{err}");
        assert_eq!(err.trim().lines().count(), 1, "{what}: {err}");
        assert!(
            err.contains("malformed GGUF") || err.contains("detllm:"),
            "{what}: {err}"
        );
    }
}

/// The library's ids for `text` (special tokens parsed).
fn library_ids(model: &Path, texts: &[&str]) -> Vec<Vec<u32>> {
    let bytes = std::fs::read(model).expect("read model");
    let file = File::parse(&bytes).expect("parse");
    let mut buf = vec![0u8; Tokenizer::bytes_required_gguf(&file).expect("size")];
    let mut arena = Arena::new(&mut buf);
    let tok = Tokenizer::from_gguf(&file, &mut arena).expect("tokenizer");
    texts
        .iter()
        .map(|t| {
            let mut ws_buf = vec![0u8; Workspace::bytes_required(t.len()).expect("size")];
            let mut ws_arena = Arena::new(&mut ws_buf);
            let mut ws = Workspace::new(&mut ws_arena, t.len()).expect("workspace");
            let mut ids = vec![0u32; t.len() + 8];
            let n = tok.encode(t, true, &mut ws, &mut ids).expect("encode");
            ids.truncate(n);
            ids
        })
        .collect()
}

#[test]
fn tokenize_json_and_jsonl_equal_the_library() {
    let Some(model) = util::model_path() else {
        return;
    };
    let texts = [
        "Hello, world!",
        "  leading spaces and trailing  ",
        "unicode: café naïve 日本語 emoji 🙂",
        "<|im_start|>user\nWhat is 2+2?<|im_end|>\n",
        "numbers 1234567 and 3.14159",
    ];
    let want = library_ids(&model, &texts);
    for (t, w) in texts.iter().zip(&want) {
        let (code, out, err) = run(&["tokenize", "--json", t], Some(&model), None);
        assert_eq!(code, 0, "{err}");
        let got: Vec<u32> = serde_json::from_str(out.trim()).expect("json array");
        assert_eq!(&got, w, "{t:?}");
    }
    let lines: String = texts
        .iter()
        .map(|t| serde_json::json!({ "text": t }).to_string() + "\n")
        .collect();
    let (code, out, err) = run(&["tokenize", "--jsonl"], Some(&model), Some(&lines));
    assert_eq!(code, 0, "{err}");
    let got: Vec<Vec<u32>> = out
        .lines()
        .map(|l| {
            let v: Value = serde_json::from_str(l).expect("json line");
            serde_json::from_value(v["ids"].clone()).expect("ids")
        })
        .collect();
    assert_eq!(got, want);
    // A bad line is a clean error.
    let (code, _, err) = run(&["tokenize", "--jsonl"], Some(&model), Some("not json\n"));
    assert_ne!(code, 0);
    assert!(!err.trim().is_empty());
}

#[test]
fn generate_batched_equals_each_prompt_alone() {
    let Some(model) = util::model_path() else {
        return;
    };
    let prompts = [
        "Once upon a time",
        "The capital of France is",
        "def add(a, b):",
    ];
    let sampling = [
        "--max-tokens",
        "5",
        "--temperature",
        "0.7",
        "--top-k",
        "30",
        "--seed",
        "11",
    ];
    let mut args = vec!["generate", "--json"];
    for p in &prompts {
        args.extend(["--prompt", p]);
    }
    args.extend(sampling);
    let (code, out, err) = run(&args, Some(&model), None);
    assert_eq!(code, 0, "{err}");
    let batched: Vec<Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).expect("json"))
        .collect();
    assert_eq!(batched.len(), prompts.len());
    for (p, b) in prompts.iter().zip(&batched) {
        let mut args = vec!["generate", "--json", "--prompt", p];
        args.extend(sampling);
        let (code, out, err) = run(&args, Some(&model), None);
        assert_eq!(code, 0, "{err}");
        let solo: Value = serde_json::from_str(out.trim()).expect("json");
        assert_eq!(solo["ids"], b["ids"], "{p}");
        assert_eq!(solo["digest"], b["digest"], "{p}");
        assert_eq!(solo["ids"].as_array().map(Vec::len), Some(5));
    }
}
