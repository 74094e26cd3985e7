//! Structured output through `detllm generate` and `detllm verify`
//! (feature `constrain`, issue #43), on SmolLM2-135M:
//!
//! * every `--json-schema` answer that ends (an end-of-generation token, not
//!   `--max-tokens`) parses as JSON and validates against its schema, checked
//!   by an independent validator (Python's `jsonschema`);
//! * every `--grammar` answer is one the grammar's language holds;
//! * a constrained transcript verifies, and `verify` names the first step
//!   whose token the constraint refuses when a token is edited;
//! * a grammar syntax error is a clean error naming line and column; a
//!   schema over the size limit is refused.
//!
//! Without the model (or Python's `jsonschema`), the tests print a NOTICE
//! and return, unless the run requires the model (scripts/test.sh, CI).

mod support;

use serde_json::Value;
use std::path::{Path, PathBuf};
use support::cli::{bin, run, tmp};

fn model() -> Option<PathBuf> {
    let m = support::model::path();
    if m.is_none() {
        assert!(!support::model::required(), "SmolLM2 is required");
        eprintln!("NOTICE: SmolLM2 not found; skipping");
    }
    m
}

/// `generate --chat --json` under `flag file` (prompt, seed, max tokens):
/// (text, ids, whether it ended with an end-of-generation token).
fn generate(model: &Path, flag: &str, file: &Path, prompt: &str, seed: u64) -> (String, bool) {
    let (code, out, err) = run(
        bin()
            .args(["generate", "--chat", "--json", "--max-tokens", "160"])
            .args(["--seed", &seed.to_string(), "--prompt", prompt, flag])
            .arg(file)
            .arg("--model")
            .arg(model),
        None,
    );
    assert_eq!(code, 0, "{err}");
    let v: Value = serde_json::from_str(out.trim()).expect("json line");
    let ids = v["ids"].as_array().expect("ids");
    // SmolLM2's end-of-generation tokens, `<|endoftext|>` (0) and
    // `<|im_end|>` (2): the answer ended by itself.
    let ended = matches!(ids.last().and_then(Value::as_u64), Some(0 | 2));
    (v["text"].as_str().expect("text").to_string(), ended)
}

/// The Python with `jsonschema` (scripts/test.sh makes one), else `python3`.
fn python() -> String {
    std::env::var("DETLLM_JSONSCHEMA_PYTHON").unwrap_or_else(|_| "python3".into())
}

/// Whether Python's `jsonschema` is there to validate with.
fn python_jsonschema() -> bool {
    let ok = std::process::Command::new(python())
        .args(["-c", "import jsonschema"])
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        assert!(
            !support::model::required(),
            "Python's jsonschema is required"
        );
        eprintln!("NOTICE: python3 jsonschema not found; skipping");
    }
    ok
}

/// Python's verdict on `instance` against `schema` (None: valid).
fn validate(schema: &str, instance: &str) -> Option<String> {
    let script = "import json,sys,jsonschema\n\
                  s=json.loads(open(sys.argv[1]).read()); i=json.loads(open(sys.argv[2]).read())\n\
                  jsonschema.validate(i, s, format_checker=jsonschema.FormatChecker())";
    let (sp, ip) = (tmp("v-schema.json"), tmp("v-instance.json"));
    std::fs::write(&sp, schema).expect("write");
    std::fs::write(&ip, instance).expect("write");
    let out = std::process::Command::new(python())
        .args(["-c", script])
        .arg(&sp)
        .arg(&ip)
        .output()
        .expect("python3");
    (!out.status.success()).then(|| String::from_utf8_lossy(&out.stderr).into_owned())
}

const SCHEMAS: &[(&str, &str)] = &[
    (
        "Give me a person as JSON.",
        r#"{"type":"object","properties":{"name":{"type":"string","maxLength":20},"age":{"type":"integer","minimum":0,"maximum":150}},"required":["name","age"],"additionalProperties":false}"#,
    ),
    (
        "List three colors as JSON.",
        r#"{"type":"object","properties":{"colors":{"type":"array","items":{"type":"string","enum":["red","green","blue","black","white"]},"minItems":1,"maxItems":3}},"required":["colors"],"additionalProperties":false}"#,
    ),
    (
        "Describe the weather in Paris as JSON.",
        r#"{"type":"object","properties":{"city":{"type":"string","pattern":"^[A-Z][a-z]{1,15}$"},"celsius":{"type":"number","minimum":-50,"maximum":60},"sky":{"enum":["clear","cloudy","rain"]}},"required":["city","celsius","sky"],"additionalProperties":false}"#,
    ),
    (
        "Answer as JSON: is 7 prime?",
        r#"{"type":"object","properties":{"answer":{"type":"boolean"},"reason":{"type":"string","minLength":1,"maxLength":40}},"required":["answer"],"additionalProperties":false}"#,
    ),
];

#[test]
fn every_json_schema_answer_validates() {
    let Some(model) = model() else { return };
    if !python_jsonschema() {
        return;
    }
    let mut ended = 0;
    for (k, (prompt, schema)) in SCHEMAS.iter().enumerate() {
        let file = tmp(&format!("schema{k}.json"));
        std::fs::write(&file, schema).expect("write schema");
        for seed in 1..=3 {
            let (text, done) = generate(&model, "--json-schema", &file, prompt, seed);
            if !done {
                continue; // cut at --max-tokens: reported as such
            }
            ended += 1;
            let verdict = validate(schema, &text);
            assert!(
                verdict.is_none(),
                "schema {k} seed {seed}: {text:?} does not validate: {verdict:?}"
            );
        }
    }
    assert!(ended >= 8, "only {ended} of 12 answers ended");
}

#[test]
fn every_grammar_answer_is_in_the_language() {
    let Some(model) = model() else { return };
    let grammar =
        "start: answer \" because \" reason\nanswer: \"yes\" | \"no\"\nreason: /[a-z ]{1,30}/\n";
    let file = tmp("g.lark");
    std::fs::write(&file, grammar).expect("write");
    // The same language in GBNF (llama.cpp's format), translated to Lark:
    // the same masks, so the same answers.
    let gbnf = "root ::= answer \" because \" reason\nanswer ::= \"yes\" | \"no\"\n\
                reason ::= [a-z ]{1,30}\n";
    let gfile = tmp("g.gbnf");
    std::fs::write(&gfile, gbnf).expect("write");
    let mut ended = 0;
    for seed in 1..=4 {
        let (text, done) = generate(&model, "--grammar", &file, "Is the sky blue?", seed);
        let from_gbnf = generate(&model, "--grammar", &gfile, "Is the sky blue?", seed);
        assert_eq!((&text, done), (&from_gbnf.0, from_gbnf.1), "seed {seed}");
        if !done {
            continue;
        }
        ended += 1;
        let rest = text
            .strip_prefix("yes because ")
            .or_else(|| text.strip_prefix("no because "));
        let ok = rest.is_some_and(|r| {
            (1..=30).contains(&r.len()) && r.bytes().all(|b| b == b' ' || b.is_ascii_lowercase())
        });
        assert!(ok, "seed {seed}: {text:?} is not in the grammar's language");
    }
    assert!(ended >= 3, "only {ended} of 4 answers ended");
}

#[test]
fn verify_rechecks_every_mask_and_names_a_refused_token() {
    let Some(model) = model() else { return };
    let schema = tmp("vschema.json");
    std::fs::write(&schema, SCHEMAS[0].1).expect("write");
    let t = tmp("constrained.transcript.json");
    let (code, _, err) = run(
        bin()
            .args(["generate", "--chat", "--max-tokens", "60", "--seed", "3"])
            .args(["--prompt", SCHEMAS[0].0, "--json-schema"])
            .arg(&schema)
            .arg("--transcript")
            .arg(&t)
            .arg("--model")
            .arg(&model),
        None,
    );
    assert_eq!(code, 0, "{err}");
    let verify = |path: &Path| {
        run(
            bin().arg("verify").arg(path).arg("--model").arg(&model),
            None,
        )
    };
    let (code, out, err) = verify(&t);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.starts_with("verified:"), "{out}");
    let mut v: Value = serde_json::from_str(&std::fs::read_to_string(&t).expect("read")).unwrap();
    assert_eq!(v["constraint"]["kind"], "json_schema");
    // Step 0 of an object is `{` (possibly with spaces): a letter is refused.
    let letter = 81; // SmolLM2's "a"
    v["steps"][0]["id"] = letter.into();
    let edited = tmp("edited.transcript.json");
    std::fs::write(&edited, serde_json::to_string_pretty(&v).unwrap()).expect("write");
    let (code, out, _) = verify(&edited);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.starts_with("CONSTRAINT REFUSED at step 0: token 81"),
        "{out}"
    );
    // A changed constraint text no longer matches its recorded hash.
    v["constraint"]["text"] = "{}".into();
    std::fs::write(&edited, serde_json::to_string_pretty(&v).unwrap()).expect("write");
    let (code, _, err) = verify(&edited);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("sha256"), "{err}");
}

/// llama.cpp's example grammars (`grammars/*.gbnf` of its source, which
/// is not part of this repository: `DETLLM_GBNF_DIR`, else the copy
/// `scripts/lib.sh`'s `llamacpp_tool` unpacks in the user cache; skipped
/// without either, except under `scripts/test.sh`, which fetches them) translate,
/// compile in llguidance and constrain a short answer; chess.gbnf's starts
/// as its grammar says.
#[test]
fn llama_cpp_example_grammars_translate_and_constrain() {
    let Some(model) = model() else { return };
    let cache = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| Path::new(&h).join(".cache")));
    let dir = std::env::var_os("DETLLM_GBNF_DIR")
        .map(PathBuf::from)
        .or_else(|| cache.map(|c| c.join("detllm/llama.cpp-0.3.36/grammars")))
        .filter(|d| d.is_dir());
    let Some(dir) = dir else {
        // Required as the models are (scripts/test.sh fetches them).
        let on = |v| std::env::var(v).is_ok_and(|s| s != "0" && s != "false");
        assert!(
            !on("DETLLM_REQUIRE_MODEL") && !on("CI"),
            "no llama.cpp grammars directory (DETLLM_GBNF_DIR)"
        );
        eprintln!("NOTICE: no llama.cpp grammars directory; skipping");
        return;
    };
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("the grammars directory")
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "gbnf"))
        .collect();
    files.sort();
    assert!(files.len() >= 5, "{}: only {files:?}", dir.display());
    for file in &files {
        let (code, out, err) = run(
            bin()
                .args(["generate", "--chat", "--json", "--max-tokens", "12"])
                .args(["--seed", "1", "--prompt", "Write something.", "--grammar"])
                .arg(file)
                .arg("--model")
                .arg(&model),
            None,
        );
        assert_eq!(code, 0, "{}: {err}", file.display());
        let v: Value = serde_json::from_str(out.trim()).expect("json line");
        let text = v["text"].as_str().expect("text");
        assert!(!text.is_empty(), "{}", file.display());
        if file.ends_with("chess.gbnf") {
            assert!(text.starts_with("1. "), "{text:?}");
        }
    }
}

#[test]
fn bad_grammars_are_clean_errors() {
    let Some(model) = model() else { return };
    let cases: [(&str, &str, String, &str); 4] = [
        (
            "bad.gbnf",
            "--grammar",
            "root ::= \"a\" item\nitem ::= (\"b\"\n".into(),
            "GBNF line 3, column 1: expected ')'",
        ),
        (
            "bad.lark",
            "--grammar",
            "start: \"a\"\nfoo: ( \"b\"\n".into(),
            "2(11)",
        ),
        (
            "bad.json",
            "--json-schema",
            r#"{"type":"strin"}"#.into(),
            "strin",
        ),
        (
            "big.json",
            "--json-schema",
            format!(r#"{{"description":"{}"}}"#, "x".repeat(70_000)),
            "over the limit",
        ),
    ];
    for (name, flag, text, want) in cases {
        let file = tmp(name);
        std::fs::write(&file, text).expect("write");
        let (code, _, err) = run(
            bin()
                .args(["generate", "--prompt", "x", flag])
                .arg(&file)
                .arg("--model")
                .arg(&model),
            None,
        );
        assert_eq!(code, 2, "{name}: {err}");
        assert!(
            err.contains("constraint:") && err.contains(want),
            "{name}: {err}"
        );
    }
}
