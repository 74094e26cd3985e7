//! `detllm serve` over real HTTP, on SmolLM2-135M.
//!
//! Each test starts the server binary on an ephemeral loopback port and
//! talks to it as a client would. What is checked:
//! * a response equals `detllm generate --json` for the same request (ids,
//!   text, digest), chat and plain prompts, greedy and sampled;
//! * streaming gives the same text, ids and digest as the whole response;
//! * under concurrent load with a KV budget small enough to force
//!   preemption, every response equals the same request answered alone by
//!   a second server process (everything but `id` and `created`), and the
//!   first server ends with no KV page in use;
//! * bad input gets OpenAI-style JSON errors with the right status and the
//!   server keeps serving; a full queue is 429 with `Retry-After`; the API key
//!   guards every route but `/health`; a client that disconnects mid-stream
//!   frees its pages; a slow client is cut off; a transcript fetched from
//!   the server verifies with `detllm verify`, byte for byte the file
//!   `detllm generate --transcript` writes;
//! * requests' grammars compile beside the engine (#43): a flood of good
//!   and bad schemas, grammars and tools, more than compile at once, gets
//!   each bad one the 400 it gets alone and each good one its solo answer,
//!   and the server keeps serving;
//! * `--speculate ngram` changes no answer: the same concurrent requests
//!   (copying prompts, the load mix, constrained ones) get byte-identical
//!   answers from a server with it and one without, and drafts were both
//!   accepted and rejected;
//! * SIGTERM mid-stream: new connections are refused, the stream finishes
//!   with its solo answer, the process exits 0;
//! * the official `openai` Python client (when `DETLLM_OPENAI_PYTHON` names
//!   an interpreter that has it; `scripts/test.sh` sets one up) gets the same
//!   answers.

mod support;

use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_detllm");

/// A server process on an ephemeral port, killed on drop.
struct Server {
    child: Child,
    port: u16,
}

/// The model, or `None` (the test returns) when it is missing and not required.
fn model() -> Option<std::path::PathBuf> {
    support::model::path()
}

/// The interpreter with the `openai` package (`scripts/test.sh` makes a venv
/// and exports `DETLLM_OPENAI_PYTHON`); required when the model is.
fn openai_python() -> Option<std::path::PathBuf> {
    let p = std::env::var_os("DETLLM_OPENAI_PYTHON").filter(|v| !v.is_empty());
    if p.is_none() && support::model::required() {
        panic!("DETLLM_OPENAI_PYTHON is not set: run the tests through scripts/test.sh");
    }
    p.map(std::path::PathBuf::from)
}

impl Server {
    fn start(extra: &[&str]) -> Server {
        Server::start_on(&model().expect("model checked by the caller"), extra)
    }

    /// A server on the model at `model`.
    fn start_on(model: &std::path::Path, extra: &[&str]) -> Server {
        // Each server its own audit store (the default is per user).
        static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let db =
            std::env::temp_dir().join(format!("detllm-serve-{}-{n}.sqlite", std::process::id()));
        let (child, port) = support::cli::spawn_listening(
            Command::new(BIN)
                .args(["serve", "--port", "0", "--model"])
                .arg(model)
                .arg("--audit-db")
                .arg(&db)
                .args(extra),
        );
        Server { child, port }
    }

    fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    /// POST JSON; (status, body as JSON).
    fn post(&self, path: &str, body: &Value) -> (u16, Value) {
        self.post_raw(path, &body.to_string(), &[])
    }

    fn post_raw(&self, path: &str, body: &str, headers: &[(&str, &str)]) -> (u16, Value) {
        let mut req = ureq::post(&self.url(path)).set("content-type", "application/json");
        for (k, v) in headers {
            req = req.set(k, v);
        }
        response(req.send_string(body))
    }

    fn get(&self, path: &str, headers: &[(&str, &str)]) -> (u16, String) {
        let mut req = ureq::get(&self.url(path));
        for (k, v) in headers {
            req = req.set(k, v);
        }
        match req.call() {
            Ok(r) => (r.status(), r.into_string().unwrap_or_default()),
            Err(ureq::Error::Status(code, r)) => (code, r.into_string().unwrap_or_default()),
            Err(e) => panic!("GET {path}: {e}"),
        }
    }

    /// The `data:` payloads of a streamed response, `[DONE]` last.
    fn stream(&self, path: &str, body: &Value) -> Vec<String> {
        let r = ureq::post(&self.url(path))
            .send_string(&body.to_string())
            .expect("stream request");
        assert_eq!(r.header("content-type"), Some("text/event-stream"));
        let mut text = String::new();
        r.into_reader()
            .read_to_string(&mut text)
            .expect("read stream");
        text.lines()
            .filter_map(|l| l.strip_prefix("data: "))
            .map(str::to_string)
            .collect()
    }

    fn metric(&self, name: &str) -> f64 {
        let (_, text) = self.get("/metrics", &[]);
        text.lines()
            .find(|l| l.starts_with(name) && l[name.len()..].starts_with(' '))
            .and_then(|l| l.rsplit(' ').next())
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("metric {name} missing"))
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn response(r: Result<ureq::Response, ureq::Error>) -> (u16, Value) {
    let (code, r) = match r {
        Ok(r) => (r.status(), r),
        Err(ureq::Error::Status(code, r)) => (code, r),
        Err(e) => panic!("request failed: {e}"),
    };
    let text = r.into_string().unwrap_or_default();
    let v = serde_json::from_str(&text).unwrap_or_else(|_| panic!("not JSON ({code}): {text}"));
    (code, v)
}

/// `detllm generate --json` for one prompt.
fn generate(prompt: &str, chat: bool, max_tokens: u32, sampling: &[&str]) -> Value {
    let model = model().expect("model checked by the caller");
    let mut cmd = Command::new(BIN);
    cmd.args(["generate", "--json", "--model"])
        .arg(&model)
        .args(["--max-tokens", &max_tokens.to_string(), "--prompt", prompt])
        .args(sampling);
    if chat {
        cmd.arg("--chat");
    }
    let out = cmd.output().expect("run detllm generate");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("generate --json output")
}

fn choice(v: &Value) -> &Value {
    &v["choices"][0]
}

/// A response without the two fields that name the moment (`id`, `created`).
fn timeless(mut v: Value) -> Value {
    if let Some(o) = v.as_object_mut() {
        o.remove("id");
        o.remove("created");
    }
    v
}

const QUESTION: &str = "What is the capital of France?";

#[test]
fn chat_and_completions_equal_generate() {
    if model().is_none() {
        return;
    }
    let s = Server::start(&[]);
    let cases: [(&str, Value, &[&str]); 2] = [
        ("greedy", json!({"temperature": 0}), &["--temperature", "0"]),
        (
            "sampled",
            json!({"temperature": 0.8, "top_k": 40, "top_p": 0.95, "min_p": 0.05, "seed": 7}),
            &[
                "--temperature",
                "0.8",
                "--top-k",
                "40",
                "--top-p",
                "0.95",
                "--min-p",
                "0.05",
                "--seed",
                "7",
            ],
        ),
    ];
    for (name, sampling, flags) in cases {
        for chat in [true, false] {
            let mut body = sampling.clone();
            body["max_tokens"] = json!(24);
            let path = if chat {
                body["messages"] = json!([{"role": "user", "content": QUESTION}]);
                "/v1/chat/completions"
            } else {
                body["prompt"] = json!(QUESTION);
                "/v1/completions"
            };
            let (code, r) = s.post(path, &body);
            assert_eq!(code, 200, "{name} {path}: {r}");
            let want = generate(QUESTION, chat, 24, flags);
            let c = choice(&r);
            let text = if chat {
                &c["message"]["content"]
            } else {
                &c["text"]
            };
            assert_eq!(c["detllm"]["token_ids"], want["ids"], "{name} {path}");
            assert_eq!(
                c["detllm"]["prompt_token_ids"], want["prompt_ids"],
                "{name} {path}"
            );
            assert_eq!(c["detllm"]["digest"], want["digest"], "{name} {path}");
            assert_eq!(*text, want["text"], "{name} {path}");
            let n = want["ids"].as_array().unwrap().len();
            assert_eq!(r["usage"]["completion_tokens"], json!(n));
            assert!(
                r["system_fingerprint"]
                    .as_str()
                    .unwrap()
                    .starts_with("detllm-v1+sha256:")
            );
        }
    }
}

/// A request without sampling fields samples with llama.cpp's defaults and
/// the seed the server chose and returned: the CLI's chat defaults with
/// that `--seed` give the same tokens and digest.
#[test]
fn default_sampling_is_the_clis_chat_sampling_with_the_returned_seed() {
    if model().is_none() {
        return;
    }
    let s = Server::start(&[]);
    let body = json!({"messages": [{"role": "user", "content": QUESTION}], "max_tokens": 24});
    let (code, r) = s.post("/v1/chat/completions", &body);
    assert_eq!(code, 200, "{r}");
    let c = choice(&r);
    let seed = c["detllm"]["seed"].as_u64().expect("seed returned");
    let want = generate(QUESTION, true, 24, &["--seed", &seed.to_string()]);
    assert_eq!(c["detllm"]["token_ids"], want["ids"], "seed {seed}");
    assert_eq!(c["detllm"]["digest"], want["digest"], "seed {seed}");
    assert_eq!(c["message"]["content"], want["text"], "seed {seed}");
    // The same defaults spelled out.
    let flags = [
        "--temperature",
        "0.8",
        "--top-k",
        "40",
        "--top-p",
        "0.95",
        "--min-p",
        "0.05",
        "--repeat-penalty",
        "1",
        "--seed",
    ];
    let seed = seed.to_string();
    let mut explicit: Vec<&str> = flags.to_vec();
    explicit.push(&seed);
    let spelled = generate(QUESTION, true, 24, &explicit);
    assert_eq!(spelled["digest"], want["digest"]);
}

#[test]
fn stream_equals_whole_response() {
    if model().is_none() {
        return;
    }
    let s = Server::start(&[]);
    let body = json!({
        "messages": [{"role": "user", "content": QUESTION}], "max_tokens": 20,
        "temperature": 0.9, "seed": 11, "logprobs": true, "top_logprobs": 3,
    });
    let (code, whole) = s.post("/v1/chat/completions", &body);
    assert_eq!(code, 200);
    let mut sbody = body.clone();
    sbody["stream"] = json!(true);
    sbody["stream_options"] = json!({"include_usage": true});
    let events = s.stream("/v1/chat/completions", &sbody);
    assert_eq!(events.last().map(String::as_str), Some("[DONE]"));
    let chunks: Vec<Value> = events[..events.len() - 1]
        .iter()
        .map(|e| serde_json::from_str(e).unwrap())
        .collect();
    let (usage, deltas) = chunks.split_last().unwrap();
    assert_eq!(usage["choices"], json!([]));
    assert_eq!(usage["usage"], whole["usage"]);
    let text: String = deltas
        .iter()
        .map(|c| c["choices"][0]["delta"]["content"].as_str().unwrap_or(""))
        .collect();
    let logprobs: Vec<Value> = deltas
        .iter()
        .filter_map(|c| c["choices"][0]["logprobs"]["content"].as_array())
        .flatten()
        .cloned()
        .collect();
    let w = choice(&whole);
    assert_eq!(text, w["message"]["content"].as_str().unwrap());
    assert_eq!(json!(logprobs), w["logprobs"]["content"]);
    let last = &deltas.last().unwrap()["choices"][0];
    assert_eq!(last["finish_reason"], w["finish_reason"]);
    assert_eq!(last["detllm"], w["detllm"]);
    assert_eq!(deltas[0]["choices"][0]["delta"]["role"], "assistant");
}

/// The mixed workload of the load test: shared prefixes, sampling, stops, n, logprobs.
fn workload() -> Vec<(&'static str, Value)> {
    let prompts = [
        "What is the capital of France?",
        "What is the capital of Spain?",
        "Name three colours.",
        "Write a haiku about the sea.",
        "What is 12 times 12?",
        "Tell me a fact about cats.",
    ];
    let mut w = Vec::new();
    for i in 0..24usize {
        let p = prompts[i % prompts.len()];
        let mut b = json!({"max_tokens": 12 + (i % 4) * 4, "seed": 100 + i as u64});
        b["temperature"] = json!([0.0, 0.7, 1.0][i % 3]);
        if i % 5 == 0 {
            b["stop"] = json!([",", "."]);
        }
        if i % 7 == 3 {
            b["n"] = json!(2);
        }
        if i % 4 == 1 {
            b["logprobs"] = json!(true);
            b["top_logprobs"] = json!(2);
        }
        if i % 6 == 5 {
            b["prompt"] = json!(p);
            b.as_object_mut().unwrap().remove("top_logprobs");
            if b.get("logprobs").is_some() {
                b["logprobs"] = json!(2);
            }
            w.push(("/v1/completions", b));
        } else {
            b["messages"] = json!([{"role": "user", "content": p}]);
            w.push(("/v1/chat/completions", b));
        }
    }
    w
}

#[test]
fn concurrent_load_with_preemption_equals_solo_runs() {
    if model().is_none() {
        return;
    }
    // 8 KV pages of 16 positions for up to 8 sequences of ~60 positions
    // (4 pages each): the pool holds two, so the scheduler preempts. (With
    // 16 pages, 6M, it preempted 3-4 times a run and none once on a busy
    // machine: the requests' overlap depends on timing.)
    let loaded = Server::start(&["--max-seqs", "8", "--kv-mem", "3M", "--step-tokens", "64"]);
    let solo = Server::start(&[]);
    let work = workload();
    let answers: Vec<(u16, Value)> = std::thread::scope(|sc| {
        let handles: Vec<_> = work
            .iter()
            .map(|(path, body)| sc.spawn(|| loaded.post(path, body)))
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for ((path, body), (code, got)) in work.iter().zip(answers) {
        assert_eq!(code, 200, "{path} {body}: {got}");
        let (code, want) = solo.post(path, body);
        assert_eq!(code, 200);
        assert_eq!(timeless(got), timeless(want), "{path} {body}");
    }
    assert!(
        loaded.metric("detllm_preemptions_total") > 0.0,
        "the load never preempted"
    );
    assert_eq!(loaded.metric("detllm_kv_pages_used"), 0.0);
    assert_eq!(loaded.metric("detllm_running_sequences"), 0.0);
}

/// Requests whose answers copy from their prompts (n-gram drafts get
/// accepted), greedy and sampled, with penalties, stops, logprobs and `n`.
fn copying_workload() -> Vec<(&'static str, Value)> {
    let texts = [
        "Repeat this sentence exactly, twice: the quick brown fox jumps over the lazy dog.",
        "Copy this list: apples, pears, plums, apples, pears, plums, apples, pears.",
        "Fix the typo and repeat the code: fn add(a: i32, b: i32) -> i32 { a + b }",
    ];
    (0..9usize)
        .map(|i| {
            let mut b = json!({
                "messages": [{"role": "user", "content": texts[i % 3]}],
                "max_tokens": 40, "seed": 500 + i as u64,
                "temperature": if i % 3 == 2 { 0.7 } else { 0.0 },
            });
            if i % 4 == 1 {
                b["logprobs"] = json!(true);
                b["top_logprobs"] = json!(3);
            }
            if i == 4 {
                b["repeat_penalty"] = json!(1.3);
            }
            if i == 5 {
                b["stop"] = json!(["plums"]);
            }
            if i == 7 {
                b["n"] = json!(2);
            }
            ("/v1/chat/completions", b)
        })
        .collect()
}

#[test]
fn speculation_changes_no_answer_under_load() {
    if model().is_none() {
        return;
    }
    // A pool small enough to preempt, and a step budget that drafts must
    // share with prefill chunks.
    let flags = ["--max-seqs", "8", "--kv-mem", "6M", "--step-tokens", "64"];
    let spec = Server::start(&[&flags[..], &["--speculate", "ngram", "--draft-max", "6"]].concat());
    let plain = Server::start(&flags);
    let work: Vec<(&str, Value)> = copying_workload()
        .into_iter()
        .chain(workload())
        .chain(
            constrained_workload()
                .into_iter()
                .take(6)
                .map(|b| ("/v1/chat/completions", b)),
        )
        .collect();
    let answer_all = |server: &Server| -> Vec<(u16, Value)> {
        std::thread::scope(|sc| {
            let handles: Vec<_> = work
                .iter()
                .map(|(path, body)| sc.spawn(|| server.post(path, body)))
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        })
    };
    let got = answer_all(&spec);
    let want = answer_all(&plain);
    for ((path, body), ((code, got), (want_code, want))) in
        work.iter().zip(got.into_iter().zip(want))
    {
        assert_eq!((code, want_code), (200, 200), "{path} {body}: {got}");
        assert_eq!(timeless(got), timeless(want), "{path} {body}");
    }
    let drafted = spec.metric("detllm_draft_tokens_total");
    let accepted = spec.metric("detllm_draft_accepted_tokens_total");
    eprintln!("speculation: {accepted} of {drafted} drafts accepted");
    assert!(
        accepted > 0.0 && drafted > accepted,
        "{accepted} of {drafted}"
    );
    assert_eq!(plain.metric("detllm_draft_tokens_total"), 0.0);
    assert_eq!(spec.metric("detllm_kv_pages_used"), 0.0);
    assert_eq!(spec.metric("detllm_running_sequences"), 0.0);
}

/// The tools of the tool-call tests (`cli/tests/serve_openai_tools.py` has
/// the same two).
fn tools() -> Value {
    json!([
        {"type": "function", "function": {"name": "get_weather",
            "description": "Current weather in a city.",
            "parameters": {"type": "object", "properties": {
                "city": {"type": "string", "maxLength": 24},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
                "required": ["city", "unit"], "additionalProperties": false}}},
        {"type": "function", "function": {"name": "get_time", "parameters": {
            "type": "object", "properties": {"zone": {"type": "string", "maxLength": 24}},
            "required": ["zone"], "additionalProperties": false}}}
    ])
}

/// Checks a call `(name, arguments text)` against [`tools`]'s schemas.
fn check_call(name: &str, arguments: &str) {
    let v: Value = serde_json::from_str(arguments)
        .unwrap_or_else(|e| panic!("{name}: arguments {arguments:?} are not JSON: {e}"));
    let o = v.as_object().unwrap_or_else(|| panic!("{arguments}"));
    let short = |k: &str| o[k].as_str().is_some_and(|s| s.chars().count() <= 24);
    match name {
        "get_weather" => {
            assert!(short("city"), "{arguments}");
            assert!(["celsius", "fahrenheit"].contains(&o["unit"].as_str().unwrap_or("")));
            assert_eq!(o.len(), 2, "{arguments}");
        }
        "get_time" => assert!(short("zone") && o.len() == 1, "{arguments}"),
        other => panic!("a call of {other:?}, which is no tool"),
    }
}

/// Checks every call of a chat answer's choices; how many choices made calls.
fn check_tool_answer(v: &Value) -> usize {
    let mut n = 0;
    for c in v["choices"].as_array().expect("choices") {
        let m = &c["message"];
        let Some(calls) = m["tool_calls"].as_array() else {
            assert_ne!(c["finish_reason"], "tool_calls", "{c}");
            continue;
        };
        for call in calls {
            assert_eq!(call["type"], "function", "{call}");
            assert!(call["id"].as_str().is_some_and(|i| i.starts_with("call_")));
            let args = call["function"]["arguments"].as_str().expect("arguments");
            if c["finish_reason"] == "tool_calls" {
                check_call(call["function"]["name"].as_str().expect("name"), args);
            }
        }
        if c["finish_reason"] == "tool_calls" {
            // `auto` may write prose before its calls: never empty, never
            // holding the opener.
            let prose = m["content"].as_str();
            assert!(
                m["content"].is_null()
                    || prose.is_some_and(|p| !p.is_empty() && !p.contains("<tool_call>")),
                "{c}"
            );
            n += 1;
        }
    }
    n
}

/// Requests mixing JSON-schema, JSON-object, tool-call and plain answers (#43).
fn constrained_workload() -> Vec<Value> {
    let person = json!({"type": "object", "properties": {
        "name": {"type": "string", "maxLength": 16}, "age": {"type": "integer"}},
        "required": ["name", "age"], "additionalProperties": false});
    let prompts = [
        "Give me a person as JSON.",
        "Describe a cat as JSON.",
        "Name a city.",
    ];
    (0..12usize)
        .map(|i| {
            let mut b = json!({
                "messages": [{"role": "user", "content": prompts[i % 3]}],
                "max_tokens": 40, "seed": 300 + i as u64,
                "temperature": if i % 2 == 0 { 0.0 } else { 0.8 },
            });
            match i % 3 {
                0 => {
                    b["response_format"] = json!({"type": "json_schema",
                    "json_schema": {"name": "person", "schema": person}})
                }
                1 => b["response_format"] = json!({"type": "json_object"}),
                _ => {}
            }
            if i % 4 == 3 {
                b["n"] = json!(2);
                b["logprobs"] = json!(true);
                b["top_logprobs"] = json!(2);
            }
            b
        })
        .chain(
            [
                json!("required"),
                json!("auto"),
                json!({"type": "function", "function": {"name": "get_time"}}),
                json!("required"),
            ]
            .into_iter()
            .enumerate()
            .map(|(i, choice)| {
                let mut b = json!({
                    "messages": [{"role": "user", "content": "What is the weather in Paris?"}],
                    "tools": tools(), "tool_choice": choice, "max_tokens": 50,
                    "seed": 400 + i as u64, "temperature": if i == 0 { 0.0 } else { 0.8 },
                });
                if i == 3 {
                    b["n"] = json!(2);
                    b["parallel_tool_calls"] = json!(false);
                }
                b
            }),
        )
        .collect()
}

#[test]
fn constrained_answers_under_load_equal_solo_runs_and_parse() {
    if model().is_none() {
        return;
    }
    // 10M: room for one tool request (a 350-token prompt), not for many.
    let loaded = Server::start(&["--max-seqs", "8", "--kv-mem", "10M", "--step-tokens", "64"]);
    let solo = Server::start(&[]);
    let work = constrained_workload();
    let path = "/v1/chat/completions";
    let answers: Vec<(u16, Value)> = std::thread::scope(|sc| {
        let handles: Vec<_> = work
            .iter()
            .map(|body| sc.spawn(|| loaded.post(path, body)))
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let mut parsed = 0;
    let mut called = 0;
    for (body, (code, got)) in work.iter().zip(answers) {
        assert_eq!(code, 200, "{body}: {got}");
        let (code, want) = solo.post(path, body);
        assert_eq!(code, 200);
        assert_eq!(timeless(got.clone()), timeless(want), "{body}");
        if body.get("tools").is_some() {
            called += check_tool_answer(&got);
        }
        if body.get("response_format").is_none() {
            continue;
        }
        for c in got["choices"].as_array().expect("choices") {
            if c["finish_reason"] != "stop" {
                continue;
            }
            let text = c["message"]["content"].as_str().expect("content");
            let v: Value = serde_json::from_str(text)
                .unwrap_or_else(|e| panic!("{body}: {text:?} is not JSON: {e}"));
            assert!(v.is_object(), "{text}");
            if body["response_format"]["type"] == "json_schema" {
                assert!(v["name"].is_string() && v["age"].is_i64(), "{text}");
                assert_eq!(v.as_object().unwrap().len(), 2, "{text}");
            }
            parsed += 1;
        }
    }
    assert!(parsed >= 5, "only {parsed} constrained answers ended");
    assert!(called >= 3, "only {called} tool answers ended with calls");
    assert!(
        loaded.metric("detllm_preemptions_total") > 0.0,
        "the load never preempted"
    );
    assert_eq!(loaded.metric("detllm_kv_pages_used"), 0.0);
    // A bad schema is a 400 naming its field; the server keeps serving.
    let bad = json!({"messages": [{"role": "user", "content": "hi"}],
        "response_format": {"type": "json_schema", "json_schema": {"schema": {"type": "strin"}}}});
    let (code, err) = loaded.post(path, &bad);
    assert_eq!(code, 400, "{err}");
    assert_eq!(err["error"]["param"], "response_format");
    assert_eq!(loaded.post(path, &work[2]).0, 200);
    // llama-server's `grammar` (GBNF): the answer is in its language; a
    // syntax error is a 400 naming the field, line and column.
    let gbnf = json!({"messages": [{"role": "user", "content": "Is the sky blue?"}],
        "grammar": "root ::= (\"yes\" | \"no\") \", \" [a-z]{1,12}", "seed": 1, "max_tokens": 20});
    let (code, r) = loaded.post(path, &gbnf);
    assert_eq!(code, 200, "{r}");
    let text = choice(&r)["message"]["content"]
        .as_str()
        .unwrap_or_default();
    let rest = text
        .strip_prefix("yes, ")
        .or_else(|| text.strip_prefix("no, "));
    assert!(
        rest.is_some_and(
            |w| (1..=12).contains(&w.len()) && w.bytes().all(|b| b.is_ascii_lowercase())
        ),
        "{text:?}"
    );
    let bad = json!({"messages": [{"role": "user", "content": "hi"}],
        "grammar": "root ::= \"a\"\n  | [b"});
    let (code, err) = loaded.post(path, &bad);
    assert_eq!(
        (code, &err["error"]["param"]),
        (400, &json!("grammar")),
        "{err}"
    );
    let msg = err["error"]["message"].as_str().unwrap_or_default();
    assert!(msg.contains("line 2, column 5"), "{msg}");
}

/// The grammar requests of [`a_flood_of_grammars_is_compiled_beside_the_engine`]:
/// `(body, the field a 400 names)`, `None` for a grammar that compiles.
fn grammar_flood() -> Vec<(Value, Option<&'static str>)> {
    let ask = |content: &str| json!([{"role": "user", "content": content}]);
    let schema = |schema: Value| json!({"type": "json_schema", "json_schema": {"schema": schema}});
    let person = json!({"type": "object", "properties": {
        "name": {"type": "string", "maxLength": 16}, "age": {"type": "integer"}},
        "required": ["name", "age"], "additionalProperties": false});
    let bad_tool = json!([{"type": "function", "function": {"name": "f",
        "parameters": {"type": "object", "properties": {"a": {"type": "strin"}}}}}]);
    // Over the 64 KiB limit on a grammar's text.
    let huge = json!({"type": "object", "description": "x".repeat(70_000)});
    let mut v = Vec::new();
    for round in 0..2u64 {
        let bad = [
            ("response_format", schema(json!({"type": "strin"}))),
            ("response_format", schema(huge.clone())),
            ("grammar", json!("root ::= \"a\"\n  | [b")),
            ("tools", bad_tool.clone()),
        ];
        for (field, value) in bad {
            let mut b = json!({"messages": ask("hi"), "max_tokens": 8});
            b[field] = value;
            v.push((b, Some(field)));
        }
        for k in 0..2 {
            let b = json!({"messages": ask("Give me a person as JSON."), "max_tokens": 40,
                "seed": 10 * round + k, "temperature": 0.8, "response_format": schema(person.clone())});
            v.push((b, None));
        }
    }
    v
}

/// Grammars compile on the HTTP side, a few at a time (#43): a flood of
/// schemas, grammars and tools, bad and good, more than compile at once,
/// beside a plain request. Each bad one is the 400 it is when sent alone
/// (its field, its message); each good one and the plain one is its solo
/// answer; and the server keeps serving (no compile slot is lost, no KV
/// page held).
#[test]
fn a_flood_of_grammars_is_compiled_beside_the_engine() {
    if model().is_none() {
        return;
    }
    let s = Server::start(&[]);
    let path = "/v1/chat/completions";
    let plain = json!({"messages": [{"role": "user", "content": "Name a city."}],
        "max_tokens": 30, "seed": 5, "temperature": 0.8});
    let mut work = grammar_flood();
    work.push((plain.clone(), None));
    // A lost compile slot would hang the requests after it: time out instead.
    let agent = ureq::AgentBuilder::new()
        .timeout(Duration::from_secs(120))
        .build();
    let post = |body: &Value| {
        response(
            agent
                .post(&s.url(path))
                .set("content-type", "application/json")
                .send_string(&body.to_string()),
        )
    };
    let answers: Vec<(u16, Value)> = std::thread::scope(|sc| {
        let handles: Vec<_> = work.iter().map(|(b, _)| sc.spawn(|| post(b))).collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let mut parsed = 0;
    for ((body, field), (code, got)) in work.iter().zip(answers) {
        let (solo_code, solo) = post(body);
        match field {
            Some(field) => {
                assert_eq!(code, 400, "{body}: {got}");
                assert_eq!(got["error"]["param"], *field, "{got}");
                assert_eq!(got, solo, "{body}: the flood's 400 is not the lone one");
            }
            None => {
                assert_eq!((code, solo_code), (200, 200), "{body}: {got}");
                assert_eq!(timeless(got.clone()), timeless(solo), "{body}");
                let c = choice(&got);
                if body.get("response_format").is_some() && c["finish_reason"] == "stop" {
                    let text = c["message"]["content"].as_str().unwrap_or_default();
                    let v: Value = serde_json::from_str(text)
                        .unwrap_or_else(|e| panic!("{text:?} is not JSON: {e}"));
                    // (An integer past i64 is still the schema's integer.)
                    assert!(v["name"].is_string() && v["age"].is_number(), "{text}");
                    parsed += 1;
                }
            }
        }
    }
    assert!(parsed >= 1, "no constrained answer ended");
    assert_eq!(s.get("/health", &[]).0, 200);
    assert_eq!(s.metric("detllm_kv_pages_used"), 0.0);
}

#[test]
fn disconnect_mid_stream_cancels_and_frees_pages() {
    if model().is_none() {
        return;
    }
    let s = Server::start(&[]);
    let body = json!({"messages": [{"role": "user", "content": QUESTION}], "max_tokens": 400,
                      "temperature": 1.0, "seed": 3, "stream": true});
    let mut conn = TcpStream::connect(("127.0.0.1", s.port)).unwrap();
    let text = body.to_string();
    write!(
        conn,
        "POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{text}",
        text.len()
    )
    .unwrap();
    let mut buf = [0u8; 2048];
    let n = conn.read(&mut buf).unwrap();
    assert!(String::from_utf8_lossy(&buf[..n]).starts_with("HTTP/1.1 200"));
    drop(conn);
    let t0 = Instant::now();
    while s.metric("detllm_requests_total{outcome=\"cancelled\"}") < 1.0
        || s.metric("detllm_running_sequences") > 0.0
        || s.metric("detllm_kv_pages_used") > 0.0
    {
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "request not cancelled or pages not freed after disconnect"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(s.metric("detllm_generated_tokens_total") < 400.0);
}

#[test]
fn bad_input_gets_json_errors_and_the_server_keeps_serving() {
    if model().is_none() {
        return;
    }
    let s = Server::start(&["--max-body", "4096", "--ctx", "256"]);
    let chat = "/v1/chat/completions";
    let msgs = json!([{"role": "user", "content": "hi"}]);
    let cases: Vec<(&str, String, u16, Option<&str>)> = vec![
        (chat, "{bad json".into(), 400, None),
        (chat, "[]".into(), 400, None),
        (
            chat,
            json!({"messages": "x"}).to_string(),
            400,
            Some("messages"),
        ),
        (
            chat,
            json!({"messages": []}).to_string(),
            400,
            Some("messages"),
        ),
        (
            chat,
            json!({"messages": [{"role": "robot", "content": "x"}]}).to_string(),
            400,
            Some("messages"),
        ),
        (
            chat,
            json!({"messages": msgs, "temperature": "hot"}).to_string(),
            400,
            Some("temperature"),
        ),
        (
            chat,
            json!({"messages": msgs, "temperature": -1}).to_string(),
            400,
            Some("temperature"),
        ),
        (
            chat,
            json!({"messages": msgs, "top_p": 2}).to_string(),
            400,
            Some("top_p"),
        ),
        (
            chat,
            json!({"messages": msgs, "max_tokens": 0}).to_string(),
            400,
            Some("max_tokens"),
        ),
        (
            chat,
            json!({"messages": msgs, "max_tokens": 100000}).to_string(),
            400,
            Some("max_tokens"),
        ),
        (
            chat,
            json!({"messages": msgs, "n": 99}).to_string(),
            400,
            Some("n"),
        ),
        (
            chat,
            json!({"messages": msgs, "top_logprobs": 3}).to_string(),
            400,
            Some("top_logprobs"),
        ),
        (
            chat,
            json!({"messages": msgs, "logprobs": true, "top_logprobs": 21}).to_string(),
            400,
            Some("top_logprobs"),
        ),
        (
            chat,
            json!({"messages": msgs, "stop": ["a", "b", "c", "d", "e"]}).to_string(),
            400,
            Some("stop"),
        ),
        (
            chat,
            json!({"messages": msgs, "seed": -5}).to_string(),
            400,
            Some("seed"),
        ),
        (
            chat,
            json!({"messages": msgs, "presence_penalty": 0.5}).to_string(),
            400,
            Some("presence_penalty"),
        ),
        (
            chat,
            json!({"messages": msgs, "model": "gpt-4o"}).to_string(),
            404,
            Some("model"),
        ),
        (
            chat,
            format!(
                "{{\"messages\": {msgs}, \"pad\": \"{}\"}}",
                "x".repeat(5000)
            ),
            413,
            None,
        ),
        (
            "/v1/completions",
            json!({"prompt": [1, 2, 999999]}).to_string(),
            400,
            Some("prompt"),
        ),
        (
            "/v1/completions",
            json!({"max_tokens": 5}).to_string(),
            400,
            Some("prompt"),
        ),
        ("/v1/nope", "{}".into(), 404, None),
        (
            "/detokenize",
            json!({"tokens": [999999]}).to_string(),
            400,
            Some("tokens"),
        ),
    ];
    for (path, body, status, param) in cases {
        let (code, v) = s.post_raw(path, &body, &[]);
        assert_eq!(code, status, "{path} {body}: {v}");
        let err = &v["error"];
        assert!(
            err["message"].as_str().is_some_and(|m| !m.is_empty()),
            "{v}"
        );
        assert!(err["type"].is_string(), "{v}");
        if let Some(p) = param {
            assert_eq!(err["param"], p, "{path} {body}: {v}");
        }
    }
    let (code, _) = s.get("/v1/chat/completions", &[]);
    assert_eq!(code, 405);
    // Still serving, and counted.
    let (code, _) = s.post(chat, &json!({"messages": msgs, "max_tokens": 2}));
    assert_eq!(code, 200);
    assert_eq!(s.get("/health", &[]).0, 200);
    assert!(s.metric("detllm_requests_total{outcome=\"invalid\"}") >= 20.0);
}

#[test]
fn full_queue_is_429_with_retry_after() {
    if model().is_none() {
        return;
    }
    let s = Server::start(&["--max-seqs", "1", "--max-queue", "1"]);
    let body = json!({"messages": [{"role": "user", "content": QUESTION}], "max_tokens": 40, "temperature": 0});
    let codes: Vec<(u16, Option<String>)> = std::thread::scope(|sc| {
        let hs: Vec<_> = (0..6)
            .map(|_| {
                sc.spawn(|| {
                    match ureq::post(&s.url("/v1/chat/completions")).send_string(&body.to_string())
                    {
                        Ok(r) => (r.status(), None),
                        Err(ureq::Error::Status(c, r)) => {
                            (c, r.header("retry-after").map(str::to_string))
                        }
                        Err(e) => panic!("{e}"),
                    }
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert!(codes.iter().any(|(c, _)| *c == 200), "{codes:?}");
    assert!(
        codes
            .iter()
            .any(|(c, r)| *c == 429 && r.as_deref() == Some("1")),
        "{codes:?}"
    );
    assert!(
        codes.iter().all(|(c, _)| *c == 200 || *c == 429),
        "{codes:?}"
    );
}

#[test]
fn api_key_guards_every_route_but_health() {
    if model().is_none() {
        return;
    }
    let s = Server::start(&["--api-key", "sesame"]);
    assert_eq!(s.get("/health", &[]).0, 200);
    assert_eq!(s.get("/v1/models", &[]).0, 401);
    assert_eq!(
        s.get("/metrics", &[("authorization", "Bearer wrong")]).0,
        401
    );
    assert_eq!(
        s.get("/v1/models", &[("authorization", "Bearer sesame")]).0,
        200
    );
    let (code, v) = s.post_raw("/tokenize", &json!({"content": "hi"}).to_string(), &[]);
    assert_eq!(
        (code, &v["error"]["code"]),
        (401, &json!("invalid_api_key"))
    );
}

#[test]
fn slow_client_is_cut_off() {
    if model().is_none() {
        return;
    }
    let s = Server::start(&["--timeout", "1"]);
    let mut conn = TcpStream::connect(("127.0.0.1", s.port)).unwrap();
    conn.write_all(b"POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\n")
        .unwrap();
    conn.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let t0 = Instant::now();
    let mut buf = Vec::new();
    let _ = conn.read_to_end(&mut buf); // the server closes the connection
    assert!(
        t0.elapsed() < Duration::from_secs(8),
        "idle connection kept open"
    );
    assert_eq!(s.get("/health", &[]).0, 200);
}

#[test]
fn tokenize_detokenize_and_transcript_round_trip() {
    if model().is_none() {
        return;
    }
    let s = Server::start(&[]);
    let (code, t) = s.post(
        "/tokenize",
        &json!({"content": "Hello world", "add_special": false}),
    );
    assert_eq!(code, 200);
    let (code, d) = s.post("/detokenize", &json!({"tokens": t["tokens"]}));
    assert_eq!((code, d["content"].as_str()), (200, Some("Hello world")));
    let (code, r) = s.post(
        "/v1/chat/completions",
        &json!({"messages": [{"role": "user", "content": QUESTION}], "max_tokens": 6,
                "temperature": 0.7, "seed": 5, "stop": [" "]}),
    );
    assert_eq!(code, 200);
    // The stop string ended the choice at the token that completed it.
    let c = choice(&r);
    let text = c["message"]["content"].as_str().unwrap();
    assert_eq!(c["finish_reason"], "stop", "{r}");
    assert!(!text.contains(' '), "{text:?}");
    let ids = c["detllm"]["token_ids"].as_array().unwrap();
    let (_, all) = s.post("/detokenize", &json!({ "tokens": ids }));
    let all = all["content"].as_str().unwrap();
    assert!(
        all.starts_with(text) && all[text.len()..].contains(' '),
        "{all:?}"
    );
    let (_, before) = s.post("/detokenize", &json!({ "tokens": &ids[..ids.len() - 1] }));
    let before = before["content"].as_str().unwrap();
    assert!(!before.contains(' '), "stopped late: {all:?}");
    let id = c["detllm"]["transcript_id"].as_str().unwrap().to_string();
    let (code, tr) = s.get(&format!("/v1/transcripts/{id}"), &[]);
    assert_eq!(code, 200, "{tr}");
    let path = std::env::temp_dir().join(format!(
        "detllm-serve-transcript-{}.json",
        std::process::id()
    ));
    std::fs::write(&path, tr).unwrap();
    let out = Command::new(BIN)
        .args(["verify"])
        .arg(&path)
        .arg("--model")
        .arg(model().expect("model checked by the caller"))
        .output()
        .unwrap();
    let _ = std::fs::remove_file(&path);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert_eq!(s.get("/v1/transcripts/0000", &[]).0, 404);
}

/// A transcript fetched from the server is, byte for byte, the file
/// `detllm generate --transcript` writes for the same request (one module
/// writes both; the format has no per-run field, docs/TRANSCRIPT.md), for a
/// chat and a plain prompt.
#[test]
fn server_transcript_is_the_cli_transcript() {
    let Some(model) = model() else {
        return;
    };
    let s = Server::start(&[]);
    let flags = [
        "--temperature",
        "0.8",
        "--top-k",
        "40",
        "--top-p",
        "0.95",
        "--min-p",
        "0.05",
        "--seed",
        "7",
    ];
    for chat in [true, false] {
        let mut body = json!({"max_tokens": 10, "temperature": 0.8, "top_k": 40,
                              "top_p": 0.95, "min_p": 0.05, "seed": 7});
        let path = if chat {
            body["messages"] = json!([{"role": "user", "content": QUESTION}]);
            "/v1/chat/completions"
        } else {
            body["prompt"] = json!(QUESTION);
            "/v1/completions"
        };
        let (code, r) = s.post(path, &body);
        assert_eq!(code, 200, "{path}: {r}");
        let id = choice(&r)["detllm"]["transcript_id"].as_str().unwrap();
        let (code, served) = s.get(&format!("/v1/transcripts/{id}"), &[]);
        assert_eq!(code, 200, "{served}");
        let file = std::env::temp_dir().join(format!(
            "detllm-cli-transcript-{}-{chat}.json",
            std::process::id()
        ));
        let mut cmd = Command::new(BIN);
        cmd.args(["generate", "--model"])
            .arg(&model)
            .args(["--max-tokens", "10", "--prompt", QUESTION])
            .args(flags)
            .arg("--transcript")
            .arg(&file);
        if chat {
            cmd.arg("--chat");
        }
        let out = cmd.output().expect("run detllm generate");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let written = std::fs::read_to_string(&file).expect("read the CLI transcript");
        let _ = std::fs::remove_file(&file);
        assert_eq!(served, written, "{path}");
        let v: Value = serde_json::from_str(&written).unwrap();
        assert_eq!(v["model"]["architecture"], "llama");
    }
}

/// SIGTERM mid-stream: the server stops accepting at once (new connections
/// are refused), the stream runs to its end (`[DONE]`) with the same text
/// and provenance as the same request's whole answer, and the process exits 0.
#[test]
fn sigterm_drains_the_stream_in_flight_and_exits_0() {
    if model().is_none() {
        return;
    }
    let mut s = Server::start(&["--drain-timeout", "120"]);
    let body = json!({"messages": [{"role": "user", "content": QUESTION}], "max_tokens": 160,
                      "temperature": 1.0, "seed": 3, "ignore_eos": true});
    let (code, whole) = s.post("/v1/chat/completions", &body);
    assert_eq!(code, 200, "{whole}");
    let mut sbody = body.clone();
    sbody["stream"] = json!(true);
    let r = ureq::post(&s.url("/v1/chat/completions"))
        .send_string(&sbody.to_string())
        .expect("stream request");
    let mut lines = BufReader::new(r.into_reader()).lines();
    let mut events: Vec<String> = Vec::new();
    // Mid-stream: after the first chunk.
    while events.is_empty() {
        let line = lines.next().expect("a first chunk").expect("read");
        if let Some(data) = line.strip_prefix("data: ") {
            events.push(data.to_string());
        }
    }
    let status = Command::new("kill")
        .args(["-TERM", &s.child.id().to_string()])
        .status()
        .expect("run kill");
    assert!(status.success());
    let t0 = Instant::now();
    while TcpStream::connect(("127.0.0.1", s.port)).is_ok() {
        assert!(
            t0.elapsed() < Duration::from_secs(5),
            "still accepting connections after SIGTERM"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    // Refused while draining, not because the process had gone.
    assert!(
        s.child.try_wait().expect("wait").is_none(),
        "connections were refused only once the server had exited"
    );
    for line in lines {
        let line = line.expect("the stream was cut");
        if let Some(data) = line.strip_prefix("data: ") {
            events.push(data.to_string());
        }
    }
    assert_eq!(events.last().map(String::as_str), Some("[DONE]"));
    let chunks: Vec<Value> = events[..events.len() - 1]
        .iter()
        .map(|e| serde_json::from_str(e).unwrap())
        .collect();
    assert!(chunks.len() > 2, "the stream had ended before the signal");
    let text: String = chunks
        .iter()
        .map(|c| c["choices"][0]["delta"]["content"].as_str().unwrap_or(""))
        .collect();
    let w = choice(&whole);
    assert_eq!(text, w["message"]["content"].as_str().unwrap());
    assert_eq!(chunks.last().unwrap()["choices"][0]["detllm"], w["detllm"]);
    let t0 = Instant::now();
    let exit = loop {
        if let Some(status) = s.child.try_wait().expect("wait") {
            break status;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "the server did not exit after draining"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(exit.code(), Some(0), "{exit:?}");
}

#[test]
fn openai_python_client_gets_the_same_answers() {
    if model().is_none() {
        return;
    }
    let Some(python) = openai_python() else {
        return;
    };
    let s = Server::start(&[]);
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/serve_openai.py");
    let out = Command::new(python)
        .arg(script)
        .arg(s.url("/v1"))
        .output()
        .expect("run the openai client");
    assert!(
        out.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let got: Value = serde_json::from_slice(&out.stdout).expect("client output");
    for case in got.as_array().unwrap() {
        // A request without a seed got one from the server: sending it
        // back must reproduce the answer.
        let mut request = case["request"].clone();
        request["seed"] = case["detllm"]["seed"].clone();
        let (code, want) = s.post("/v1/chat/completions", &request);
        assert_eq!(code, 200);
        let w = choice(&want);
        assert_eq!(case["text"], w["message"]["content"], "{case}");
        assert_eq!(case["stream_text"], w["message"]["content"], "{case}");
        assert_eq!(case["detllm"], w["detllm"], "{case}");
    }
}

/// Tool calls through the official `openai` client on `model`: every
/// forced call parses and fits its tool's schema, the stream's calls are
/// the whole answer's, and a round trip (calls, results, answer) works.
fn tool_calls_through_the_openai_client(
    model: &std::path::Path,
    python: &std::path::Path,
    short: bool,
) {
    let s = Server::start_on(model, &[]);
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/serve_openai_tools.py");
    let out = Command::new(python)
        .arg(script)
        .arg(s.url("/v1"))
        .args(short.then_some("short"))
        .output()
        .expect("run the openai client");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let got: Value = serde_json::from_str(&stdout).expect("client output");
    for case in got["cases"].as_array().expect("cases") {
        assert_eq!(case["whole"], case["stream"], "{case}");
        let whole = &case["whole"];
        assert!(whole["content"].is_null(), "{case}");
        let calls = whole["calls"].as_array().expect("calls");
        assert!(!calls.is_empty(), "{case}");
        if whole["finish"] == "tool_calls" {
            for c in calls {
                check_call(
                    c["name"].as_str().unwrap(),
                    c["arguments"].as_str().unwrap(),
                );
            }
        }
        let named = case["request"]["tool_choice"]["function"]["name"] == "get_time";
        if named || case["request"]["parallel_tool_calls"] == false {
            assert_eq!(calls.len(), 1, "{case}");
        }
        if named {
            assert_eq!(calls[0]["name"], "get_time", "{case}");
        }
    }
    // The round trip (call, `tool` result, answer), whole and streamed.
    let rt = &got["round_trip"];
    assert_eq!(
        rt, &got["round_trip_stream"],
        "whole vs streamed round trip"
    );
    let calls = rt["calls"].as_array().expect("round-trip calls");
    assert_eq!(calls.len(), 1, "{rt}");
    for c in calls {
        check_call(
            c["name"].as_str().unwrap(),
            c["arguments"].as_str().unwrap(),
        );
    }
    assert!(
        rt["answer"].as_str().is_some_and(|a| !a.trim().is_empty()) || rt["answer_calls"] != 0,
        "{rt}"
    );
    // `chat.completions.parse` with a pydantic model: the client parsed
    // the answer into the model.
    let p = &got["parse"];
    assert_eq!(p["finish"], "stop", "{p}");
    assert!(p["parsed"]["city"].is_string(), "{p}");
    assert!(p["parsed"]["celsius"].is_i64(), "{p}");
    assert!(p["parsed"]["sunny"].is_boolean(), "{p}");
    // Bad tools are 400s naming the field, and the server keeps serving.
    let chat = "/v1/chat/completions";
    let ask = json!([{"role": "user", "content": "hi"}]);
    for (body, param) in [
        (
            json!({"messages": ask, "tools": [{"type": "function", "function": {"name": "no spaces"}}]}),
            "tools",
        ),
        (
            json!({"messages": ask, "tools": tools(), "tool_choice": {"type": "function", "function": {"name": "nope"}}}),
            "tool_choice",
        ),
        (
            json!({"messages": ask, "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {"a": {"type": "strin"}}}}}]}),
            "tools",
        ),
        (
            json!({"messages": ask, "tools": tools(), "response_format": {"type": "json_object"}}),
            "tools",
        ),
        (
            json!({"messages": [{"role": "assistant", "tool_calls": [{"function": {"name": "f", "arguments": "{"}}]}]}),
            "messages",
        ),
    ] {
        let (code, err) = s.post(chat, &body);
        assert_eq!(code, 400, "{body}: {err}");
        assert_eq!(err["error"]["param"], param, "{body}: {err}");
        if body.to_string().contains(r#""strin""#) {
            let msg = err["error"]["message"].as_str().unwrap_or_default();
            assert!(
                msg.starts_with("tools[0].function.parameters: invalid schema:")
                    && msg.contains("strin"),
                "{msg}"
            );
        }
    }
    let (code, err) = s.post(
        "/v1/completions",
        &json!({"prompt": "hi", "tools": tools()}),
    );
    assert_eq!(
        (code, err["error"]["param"].as_str()),
        (400, Some("tools")),
        "{err}"
    );
    assert_eq!(
        s.post(chat, &json!({"messages": ask, "max_tokens": 4})).0,
        200
    );
    if !short {
        tools_transcript_verifies(&s, model);
    }
}

/// A tool request's transcript records its grammar (kind `tools`, text,
/// SHA-256) and `detllm verify` re-derives its masks: the transcript
/// verifies, and with the grammar's tool renamed (its SHA-256 made to
/// match) it is refused at the step that spells the name.
fn tools_transcript_verifies(s: &Server, model: &std::path::Path) {
    use sha2::{Digest, Sha256};
    let (code, r) = s.post(
        "/v1/chat/completions",
        &json!({"messages": [{"role": "user", "content": "What is the weather in Paris?"}],
                "tools": tools(), "tool_choice": "required", "parallel_tool_calls": false,
                "max_tokens": 60, "temperature": 0, "seed": 3}),
    );
    assert_eq!(code, 200, "{r}");
    let name = r["choices"][0]["message"]["tool_calls"][0]["function"]["name"]
        .as_str()
        .unwrap_or_else(|| panic!("no call: {r}"))
        .to_string();
    let id = choice(&r)["detllm"]["transcript_id"].as_str().unwrap();
    let (code, tr) = s.get(&format!("/v1/transcripts/{id}"), &[]);
    assert_eq!(code, 200, "{tr}");
    let mut t: Value = serde_json::from_str(&tr).expect("transcript JSON");
    let c = &t["constraint"];
    assert_eq!(c["kind"], "tools", "{c}");
    let text = c["text"].as_str().expect("constraint text").to_string();
    let sha = |x: &str| format!("{:x}", Sha256::digest(x.as_bytes()));
    assert_eq!(c["sha256"].as_str(), Some(sha(&text).as_str()), "{c}");
    assert!(text.contains(&format!("\\\"{name}\\\"")), "{text}");
    let verify = |t: &Value, tag: &str| {
        let path = std::env::temp_dir().join(format!(
            "detllm-tools-transcript-{}-{tag}.json",
            std::process::id()
        ));
        std::fs::write(&path, t.to_string()).unwrap();
        let out = Command::new(BIN)
            .arg("verify")
            .arg(&path)
            .arg("--model")
            .arg(model)
            .output()
            .unwrap();
        let _ = std::fs::remove_file(&path);
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
        )
    };
    let (ok, out) = verify(&t, "as-served");
    assert!(ok, "{out}");
    let other = text.replace(&name, "renamed_tool");
    t["constraint"]["sha256"] = json!(sha(&other));
    t["constraint"]["text"] = json!(other);
    let (ok, out) = verify(&t, "renamed");
    assert!(!ok && out.contains("CONSTRAINT REFUSED"), "{out}");
}

#[test]
fn tool_calls_generic_format_smollm2() {
    let (Some(model), Some(python)) = (model(), openai_python()) else {
        return;
    };
    tool_calls_through_the_openai_client(&model, &python, false);
}

/// Qwen2.5-Coder-0.5B (its own `<tool_call>` format): the greedy cases only,
/// to keep the test's time down.
#[test]
fn tool_calls_native_format_qwen25() {
    let Some(model) = support::model::real_model(
        "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
        "qwen2.5-coder-0.5b",
    ) else {
        return;
    };
    let Some(python) = openai_python() else {
        return;
    };
    tool_calls_through_the_openai_client(&model, &python, true);
}
