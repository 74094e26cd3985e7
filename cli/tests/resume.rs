//! Stream resume (`resume_token_ids`, docs/SERVER.md) over real HTTP, on
//! SmolLM2-135M.
//!
//! Two server processes stand for two replicas: replica A answers the
//! uninterrupted run, replica B every resume. What is checked:
//! * (property, random cut point k, chat and completions, greedy and seeded
//!   sampling, with and without a stop string, log-probabilities on) the
//!   uninterrupted stream's first k token chunks followed by B's resumed
//!   stream equal the uninterrupted stream, chunk for chunk (apart from
//!   `id`/`created`); B's whole (non-streamed) resume holds exactly the
//!   text and log-probabilities after the cut, the full run's `detllm`
//!   provenance and `usage`; B's transcript is A's, byte for byte;
//! * (property) ids that differ from the run at position j are a 409 naming
//!   j; the resume is recorded nowhere and the server keeps serving;
//! * a cut inside a multi-byte character (the client holds its first
//!   bytes' tokens but no text of it) resumes with the whole character;
//! * ids past the end of the run (it stopped) are a 409 naming where it ended;
//! * `n > 1`, several prompts, or more ids than `max_tokens` are 400s.

mod support;

use proptest::prelude::*;
use serde_json::{Value, json};
use std::process::{Child, Command};

const BIN: &str = env!("CARGO_BIN_EXE_detllm");

/// A server process on an ephemeral port, killed on drop.
struct Server {
    child: Child,
    port: u16,
}

impl Server {
    fn start(name: &str) -> Server {
        let model = support::model::path().expect("model checked by the caller");
        let db = std::env::temp_dir().join(format!(
            "detllm-resume-{}-{name}.sqlite",
            std::process::id()
        ));
        let (child, port) = support::cli::spawn_listening(
            Command::new(BIN)
                .args(["serve", "--port", "0", "--ctx", "512", "--model"])
                .arg(&model)
                .arg("--audit-db")
                .arg(&db),
        );
        Server { child, port }
    }

    fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    /// POST JSON: (status, body text).
    fn post(&self, path: &str, body: &Value) -> (u16, String) {
        let r = ureq::post(&self.url(path))
            .set("content-type", "application/json")
            .send_string(&body.to_string());
        let (code, r) = match r {
            Ok(r) => (r.status(), r),
            Err(ureq::Error::Status(code, r)) => (code, r),
            Err(e) => panic!("POST {path}: {e}"),
        };
        (code, r.into_string().unwrap_or_default())
    }

    fn transcript(&self, id: &str) -> String {
        let r = ureq::get(&self.url(&format!("/v1/transcripts/{id}")))
            .call()
            .expect("transcript");
        r.into_string().expect("transcript text")
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Two replicas `(A, B)` of the test's own (`None` without the model).
fn replicas(test: &str) -> Option<(Server, Server)> {
    support::model::path()?;
    Some((
        Server::start(&format!("{test}-a")),
        Server::start(&format!("{test}-b")),
    ))
}

/// A stream's chunks (JSON, `id`/`created` removed), `[DONE]` checked and dropped.
fn chunks(text: &str) -> Vec<Value> {
    let data: Vec<&str> = text
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .collect();
    assert_eq!(data.last(), Some(&"[DONE]"), "stream not finished: {text}");
    data[..data.len() - 1]
        .iter()
        .map(|d| timeless(serde_json::from_str(d).expect("chunk JSON")))
        .collect()
}

fn timeless(mut v: Value) -> Value {
    if let Some(o) = v.as_object_mut() {
        o.remove("id");
        o.remove("created");
    }
    v
}

const PROMPTS: [&str; 3] = [
    "Write the word 'coffee' in Chinese and Japanese, with emoji ☕🍵.",
    "What is the capital of France?",
    "List three colours, one per line.",
];

/// The request of a case: chat or completions, greedy or seeded sampling,
/// log-probabilities, maybe a stop string.
fn request(
    prompt: usize,
    chat: bool,
    sampled: bool,
    seed: u64,
    stop: bool,
) -> (&'static str, Value) {
    let mut b = json!({
        "max_tokens": 24, "seed": seed, "stream": true,
        "temperature": if sampled { 0.9 } else { 0.0 },
        "stream_options": {"include_usage": true},
    });
    if stop {
        b["stop"] = json!(["\n\n", "Paris"]);
    }
    if chat {
        b["messages"] = json!([{"role": "user", "content": PROMPTS[prompt]}]);
        b["logprobs"] = json!(true);
        b["top_logprobs"] = json!(2);
        ("/v1/chat/completions", b)
    } else {
        b["prompt"] = json!(PROMPTS[prompt]);
        b["logprobs"] = json!(2);
        ("/v1/completions", b)
    }
}

/// The uninterrupted stream: its chunks and the choice's token ids.
struct Run {
    chunks: Vec<Value>,
    ids: Vec<u32>,
}

fn uninterrupted(a: &Server, path: &str, body: &Value) -> Run {
    let (code, text) = a.post(path, body);
    assert_eq!(code, 200, "{text}");
    let chunks = chunks(&text);
    let last = chunks
        .iter()
        .rev()
        .find(|c| c["choices"][0]["detllm"]["token_ids"].is_array());
    let ids: Vec<u32> = last.expect("a final chunk")["choices"][0]["detllm"]["token_ids"]
        .as_array()
        .expect("token_ids")
        .iter()
        .map(|v| v.as_u64().expect("id") as u32)
        .collect();
    // What the client resumes with: each token chunk's id.
    let streamed: Vec<u32> = chunks
        .iter()
        .filter_map(|c| c["choices"][0]["detllm"]["token_id"].as_u64())
        .map(|id| id as u32)
        .collect();
    assert_eq!(streamed, ids, "the chunks' token ids are the run's");
    Run { chunks, ids }
}

fn with_resume(body: &Value, ids: &[u32], stream: bool) -> Value {
    let mut b = body.clone();
    b["resume_token_ids"] = json!(ids);
    b["stream"] = json!(stream);
    if !stream {
        b.as_object_mut().map(|o| o.remove("stream_options"));
    }
    b
}

/// A chunk's text (chat `delta.content` or completions `text`).
fn chunk_text(c: &Value) -> String {
    let ch = &c["choices"][0];
    ch["delta"]["content"]
        .as_str()
        .or(ch["text"].as_str())
        .unwrap_or("")
        .to_string()
}

/// The log-probability entries of `chunks` (chat: `content`; completions:
/// the parallel arrays, flattened into one triple per token).
fn logprobs(chunks: &[Value]) -> Vec<Value> {
    let mut v = Vec::new();
    for c in chunks {
        v.extend(logprob_entries(&c["choices"][0]["logprobs"]));
    }
    v
}

fn logprob_entries(lp: &Value) -> Vec<Value> {
    if let Some(content) = lp["content"].as_array() {
        return content.clone();
    }
    let n = lp["tokens"].as_array().map_or(0, Vec::len);
    (0..n)
        .map(|i| {
            json!([
                lp["tokens"][i],
                lp["token_logprobs"][i],
                lp["top_logprobs"][i]
            ])
        })
        .collect()
}

/// The resumed stream (from B) continues the uninterrupted one (from A)
/// exactly; the whole resume holds what follows the cut; the transcript is
/// the same bytes on both replicas.
fn check_resume(a: &Server, b: &Server, path: &str, body: &Value, run: &Run, k: usize) {
    let (code, text) = b.post(path, &with_resume(body, &run.ids[..k], true));
    assert_eq!(code, 200, "{text}");
    let mut joined = run.chunks[..k].to_vec();
    joined.extend(chunks(&text));
    assert_eq!(joined, run.chunks, "cut at {k}: the streams differ");

    let (code, text) = b.post(path, &with_resume(body, &run.ids[..k], false));
    assert_eq!(code, 200, "{text}");
    let whole: Value = serde_json::from_str(&text).expect("JSON body");
    let w = &whole["choices"][0];
    let (usage, body_chunks) = run.chunks.split_last().expect("usage chunk");
    let after = &body_chunks[k..];
    let rest: String = after.iter().map(chunk_text).collect();
    let got = w["message"]["content"].as_str().or(w["text"].as_str());
    assert_eq!(got, Some(rest.as_str()), "cut at {k}: whole text");
    assert_eq!(
        logprob_entries(&w["logprobs"]),
        logprobs(after),
        "cut at {k}: whole logprobs"
    );
    let last = &body_chunks.last().expect("final chunk")["choices"][0];
    assert_eq!(w["detllm"], last["detllm"], "cut at {k}: provenance");
    assert_eq!(w["finish_reason"], last["finish_reason"]);
    assert_eq!(whole["usage"], usage["usage"], "cut at {k}: usage");

    let id = last["detllm"]["transcript_id"]
        .as_str()
        .expect("transcript id");
    assert_eq!(b.transcript(id), a.transcript(id), "cut at {k}: transcript");
}

#[test]
fn resumed_stream_continues_the_uninterrupted_one() {
    let Some((a, b)) = replicas("prop") else {
        return;
    };
    let config = ProptestConfig {
        cases: 10,
        failure_persistence: None,
        ..ProptestConfig::default()
    };
    let cases = (
        (
            0..PROMPTS.len(),
            any::<bool>(),
            any::<bool>(),
            any::<bool>(),
        ),
        (0u64..1000, 0.0f64..=1.0, 0.0f64..1.0, 1u32..1000),
    );
    let mut runner = proptest::test_runner::TestRunner::new(config);
    let result = runner.run(
        &cases,
        |((prompt, chat, sampled, stop), (seed, cut, wrong, delta))| {
            let (path, body) = request(prompt, chat, sampled, seed, stop);
            let run = uninterrupted(&a, path, &body);
            let k = ((run.ids.len() as f64) * cut) as usize;
            check_resume(&a, &b, path, &body, &run, k.min(run.ids.len()));

            // A wrong id at position j (the ids before it right) is refuted there.
            let j = ((run.ids.len() as f64) * wrong) as usize;
            let mut ids = run.ids[..=j.min(run.ids.len() - 1)].to_vec();
            let last = ids.len() - 1;
            ids[last] = (ids[last] + delta) % 49152;
            for stream in [true, false] {
                let (code, text) = b.post(path, &with_resume(&body, &ids, stream));
                prop_assert_eq!(code, 409, "{}", text);
                let e: Value = serde_json::from_str(&text).expect("error JSON");
                prop_assert_eq!(&e["error"]["param"], "resume_token_ids");
                let msg = e["error"]["message"].as_str().unwrap_or("");
                prop_assert!(msg.contains(&format!("(position {last})")), "{}", msg);
            }
            Ok(())
        },
    );
    if let Err(e) = result {
        panic!("{e}");
    }
}

#[test]
fn cut_inside_a_multibyte_character_resumes_with_the_whole_character() {
    let Some((a, b)) = replicas("split") else {
        return;
    };
    let (path, body) = request(0, true, false, 1, false);
    let run = uninterrupted(&a, path, &body);
    // A token chunk whose bytes begin a character it cannot finish: no text.
    let split = run.chunks[..run.ids.len()]
        .iter()
        .position(|c| {
            let bytes = &c["choices"][0]["logprobs"]["content"][0]["bytes"];
            chunk_text(c).is_empty() && bytes.as_array().is_some_and(|b| !b.is_empty())
        })
        .expect("the prompt makes the model split a character across tokens");
    check_resume(&a, &b, path, &body, &run, split + 1);
    let (_, text) = b.post(path, &with_resume(&body, &run.ids[..=split], true));
    let first = chunks(&text)
        .into_iter()
        .map(|c| chunk_text(&c))
        .find(|t| !t.is_empty());
    let char_start = first.and_then(|t| t.chars().next()).expect("more text");
    assert!(
        char_start.len_utf8() > 1,
        "{char_start:?} is not the split character"
    );
}

#[test]
fn resume_with_several_choices_or_too_many_ids_is_400() {
    if support::model::path().is_none() {
        return;
    }
    let b = Server::start("bad");
    let (path, body) = request(1, true, true, 3, false);
    let mut two = with_resume(&body, &[1], true);
    two["n"] = json!(2);
    let too_many = with_resume(&body, &[1; 25], false);
    let (_, mut prompts) = request(1, false, true, 3, false);
    prompts["prompt"] = json!(["a", "b"]);
    let prompts = with_resume(&prompts, &[1], false);
    for (p, req) in [
        (path, &two),
        (path, &too_many),
        ("/v1/completions", &prompts),
    ] {
        let (code, text) = b.post(p, req);
        assert_eq!(code, 400, "{text}");
        let e: Value = serde_json::from_str(&text).expect("error JSON");
        assert_eq!(e["error"]["param"], "resume_token_ids");
    }
    // The server keeps serving.
    let (code, _) = b.post(path, &body);
    assert_eq!(code, 200);
}

#[test]
fn ids_past_the_end_of_the_run_are_409_at_its_end() {
    let Some((a, b)) = replicas("end") else {
        return;
    };
    // A greedy run that ends (a stop string or end of turn) before max_tokens.
    let (path, body, run) = (0..PROMPTS.len())
        .flat_map(|p| [true, false].map(|chat| request(p, chat, false, 1, true)))
        .map(|(path, body)| {
            let run = uninterrupted(&a, path, &body);
            (path, body, run)
        })
        .find(|(_, _, run)| run.ids.len() < 24)
        .expect("some prompt ends before max_tokens");
    let mut ids = run.ids.clone();
    ids.push(run.ids[0]);
    let (code, text) = b.post(path, &with_resume(&body, &ids, true));
    assert_eq!(code, 409, "{text}");
    let position = format!("(position {})", run.ids.len());
    assert!(text.contains(&position), "{text}");
    check_resume(&a, &b, path, &body, &run, run.ids.len());
}
