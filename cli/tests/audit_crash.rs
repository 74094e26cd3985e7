//! The audit store under crashes, on the synthetic model (no download).
//!
//! `detllm serve --audit-db DB --signing-key KEY` gets mixed requests from 32
//! concurrent clients (whole and streamed, one or two choices, greedy and sampled)
//! and is killed with SIGKILL at a pseudo-random moment; then it is started
//! again on the same DB, 20 times. After every kill:
//! * every choice whose last event the client received in full (the JSON
//!   body, or the streamed chunk carrying its provenance) has its
//!   transcript in the store, with the tokens the client got;
//! * `PRAGMA integrity_check` says `ok` and every stored transcript parses
//!   whole (no half-written record).
//!
//! At the end, on a restarted server, `GET /v1/transcripts/{id}` serves
//! the stored bytes, the key is served, and `detllm verify --pubkey`
//! accepts every one the clients received (signature, then re-execution), while a wrong
//! key, an edited field and an edited token are each refused with their
//! own message. A commit that fails fails its request (500, or an SSE
//! error event) and the server keeps serving.

#![cfg(unix)]

mod support;

use detllm::model::synth::{SynthSpec, synth_vec};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::Child;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use support::cli::{bin, run, tmp};

/// Kills (and restarts) of the crash test.
const KILLS: u64 = 20;
/// Client threads.
const CLIENTS: u64 = 32;

struct Server {
    child: Child,
    port: u16,
}

impl Server {
    fn start(model: &Path, db: &Path, key: &Path) -> Server {
        let (child, port) = support::cli::spawn_listening(
            bin()
                .args([
                    "serve",
                    "--port",
                    "0",
                    "--ctx",
                    "64",
                    "--max-seqs",
                    "4",
                    "--model",
                ])
                .arg(model)
                .arg("--audit-db")
                .arg(db)
                .arg("--signing-key")
                .arg(key)
                // Each commit held open 2 ms: kills land inside transactions too.
                .env("DETLLM_AUDIT_TEST_COMMIT_DELAY_MS", "2"),
        );
        Server { child, port }
    }

    fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill(); // SIGKILL
        let _ = self.child.wait();
    }
}

/// SplitMix64, for the workload and the kill points.
fn mix(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Request `r` of the workload: (streamed, body).
fn request(r: u64) -> (bool, Value) {
    let h = mix(r);
    // The synthetic model's stand-in vocabulary has one token, id 0.
    let prompt = vec![0; 1 + (h % 6) as usize];
    let body = json!({
        "prompt": prompt,
        "max_tokens": 2 + (h >> 8) % 10,
        "temperature": if (h >> 16).is_multiple_of(2) { 0.0 } else { 0.9 },
        "seed": (h >> 20) % 1000,
        "n": 1 + (h >> 32) % 2,
        "stream": (h >> 40).is_multiple_of(2),
    });
    ((h >> 40).is_multiple_of(2), body)
}

/// What a client received in full: transcript id -> token ids.
type Received = Arc<Mutex<BTreeMap<String, Vec<u64>>>>;

fn record(got: &Received, prov: &Value) {
    let id = prov["transcript_id"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let ids = prov["token_ids"]
        .as_array()
        .map(|a| a.iter().filter_map(Value::as_u64).collect())
        .unwrap_or_default();
    assert!(
        prov["signature"].is_string(),
        "a signed server signs: {prov}"
    );
    got.lock().unwrap().insert(id, ids);
}

/// Sends request `r`; records each choice whose last event arrived whole.
fn send(url: &str, r: u64, got: &Received) -> bool {
    let (stream, body) = request(r);
    let agent = ureq::AgentBuilder::new()
        .timeout(Duration::from_secs(20))
        .build();
    let Ok(resp) = agent.post(url).send_string(&body.to_string()) else {
        return false;
    };
    if !stream {
        let Ok(text) = resp.into_string() else {
            return false;
        };
        let Ok(v) = serde_json::from_str::<Value>(&text) else {
            return false; // cut off mid-body: not received in full
        };
        for c in v["choices"].as_array().into_iter().flatten() {
            record(got, &c["detllm"]);
        }
        return true;
    }
    for line in BufReader::new(resp.into_reader()).lines() {
        let Ok(line) = line else { return false };
        let Some(data) = line.strip_prefix("data: ") else {
            continue;
        };
        if data == "[DONE]" {
            return true;
        }
        // A line is whole once its newline came: a choice's last chunk.
        if let Ok(v) = serde_json::from_str::<Value>(data) {
            for c in v["choices"].as_array().into_iter().flatten() {
                // (Token chunks carry only `detllm.token_id`.)
                if c["detllm"]["transcript_id"].is_string() {
                    record(got, &c["detllm"]);
                }
            }
        }
    }
    false
}

/// Every stored record: id -> (transcript text, signature).
fn stored(db: &Path) -> BTreeMap<String, (String, Option<String>)> {
    let c = rusqlite::Connection::open(db).expect("open the store");
    let check: String = c
        .query_row("PRAGMA integrity_check", [], |r| r.get(0))
        .expect("integrity_check");
    assert_eq!(check, "ok");
    let mut st = c
        .prepare("SELECT id, transcript, signature FROM transcripts")
        .expect("select");
    st.query_map([], |r| Ok((r.get(0)?, (r.get(1)?, r.get(2)?))))
        .expect("query")
        .collect::<Result<_, _>>()
        .expect("rows")
}

fn synth_model() -> PathBuf {
    let path = tmp("crash-synth.gguf");
    std::fs::write(&path, synth_vec(&SynthSpec::TINY).expect("synthetic model")).expect("write");
    path
}

#[test]
fn sigkill_under_load_loses_no_received_answer() {
    let model = synth_model();
    let db = tmp("crash-audit.sqlite");
    let key = tmp("crash.key");
    for p in [&db, &key] {
        let _ = std::fs::remove_file(p);
    }
    let _ = std::fs::remove_file(tmp("crash.key.pub"));
    let (code, _, err) = run(bin().arg("keygen").arg(&key), None);
    assert_eq!(code, 0, "{err}");
    let got: Received = Arc::default();
    let mut served = 0;
    for kill in 0..KILLS {
        let server = Server::start(&model, &db, &key);
        let url = server.url("/v1/completions");
        let threads: Vec<_> = (0..CLIENTS)
            .map(|c| {
                let (url, got) = (url.clone(), got.clone());
                std::thread::spawn(move || {
                    let mut r = (kill * CLIENTS + c) << 16;
                    while send(&url, r, &got) {
                        r += 1;
                    }
                })
            })
            .collect();
        // The kill point: 30..330 ms into the load.
        std::thread::sleep(Duration::from_millis(30 + mix(kill ^ 0xC0FFEE) % 300));
        drop(server); // SIGKILL
        for t in threads {
            t.join().expect("client thread");
        }
        let store = stored(&db);
        let got = got.lock().unwrap();
        for (id, ids) in got.iter() {
            let (text, sig) = store
                .get(id)
                .unwrap_or_else(|| panic!("kill {kill}: received answer {id} is not stored"));
            assert!(sig.is_some(), "kill {kill}: {id} stored unsigned");
            let t: Value = serde_json::from_str(text).expect("a whole transcript");
            assert_eq!(t["final_digest"].as_str(), Some(id.as_str()));
            let steps: Vec<u64> = t["steps"]
                .as_array()
                .expect("steps")
                .iter()
                .filter_map(|s| s["id"].as_u64())
                .collect();
            assert_eq!(&steps, ids, "kill {kill}: {id}: stored tokens differ");
        }
        for (id, (text, _)) in &store {
            let t: Value = serde_json::from_str(text).expect("no half-written record");
            assert_eq!(t["final_digest"].as_str(), Some(id.as_str()));
        }
        served = got.len();
    }
    eprintln!("{served} answers received in full across {KILLS} kills");
    assert!(served >= 40, "the load finished only {served} answers");
    restarted_server_serves_and_verifies(&model, &db, &key, &got.lock().unwrap());
}

/// A restarted server serves the stored transcripts and its key; every answer
/// a client received verifies; tampering is caught, each kind with its own message.
fn restarted_server_serves_and_verifies(
    model: &Path,
    db: &Path,
    key: &Path,
    got: &BTreeMap<String, Vec<u64>>,
) {
    let server = Server::start(model, db, key);
    let store = stored(db);
    let public = std::fs::read_to_string(tmp("crash.key.pub")).expect("public key");
    let served: Value = serde_json::from_str(
        &ureq::get(&server.url("/v1/audit/key"))
            .call()
            .expect("GET key")
            .into_string()
            .expect("body"),
    )
    .expect("JSON");
    assert_eq!(served["public_key"].as_str(), Some(public.trim()));
    let start = Instant::now();
    for (n, id) in got.keys().enumerate() {
        let mut text = String::new();
        ureq::get(&server.url(&format!("/v1/transcripts/{id}")))
            .call()
            .expect("GET transcript")
            .into_reader()
            .read_to_string(&mut text)
            .expect("read");
        assert_eq!(text, store[id].0, "served bytes = stored bytes");
        let file = tmp(&format!("crash-t{n}.json"));
        std::fs::write(&file, &text).expect("write");
        let (code, out, err) = verify(model, &tmp("crash.key.pub"), &file);
        assert_eq!(code, 0, "{id}: {out}{err}");
        assert!(
            out.contains("signature: valid") && out.contains("verified"),
            "{out}"
        );
    }
    eprintln!("verified {} answers in {:?}", got.len(), start.elapsed());
    tamper(model, &store[got.keys().next().expect("an answer")].0);
}

fn verify(model: &Path, key: &Path, file: &Path) -> (i32, String, String) {
    run(
        bin()
            .arg("verify")
            .arg("--model")
            .arg(model)
            .arg("--pubkey")
            .arg(key)
            .arg(file),
        None,
    )
}

/// A wrong key, an edited field and an edited token each fail with their own message.
fn tamper(model: &Path, text: &str) {
    let other = tmp("crash-other.key");
    let _ = std::fs::remove_file(&other);
    let _ = std::fs::remove_file(tmp("crash-other.key.pub"));
    assert_eq!(run(bin().arg("keygen").arg(&other), None).0, 0);
    let key = tmp("crash.key.pub");
    let mut v: Value = serde_json::from_str(text).expect("JSON");
    let write = |name: &str, v: &Value| {
        let p = tmp(name);
        std::fs::write(&p, serde_json::to_string_pretty(v).unwrap()).expect("write");
        p
    };
    let original = write("crash-orig.json", &v);
    let (code, out, _) = verify(model, &tmp("crash-other.key.pub"), &original);
    assert_eq!(code, 1);
    assert!(out.contains("WRONG KEY"), "{out}");

    let mut edited = v.clone();
    let seed = edited["sampling"]["seed"].as_u64().unwrap();
    edited["sampling"]["seed"] = json!(seed + 1);
    let (code, out, _) = verify(model, &key, &write("crash-field.json", &edited));
    assert_eq!(code, 1);
    assert!(out.contains("BAD SIGNATURE: the request fields"), "{out}");

    let tok = v["steps"][0]["id"].as_u64().unwrap();
    v["steps"][0]["id"] = json!((tok + 1) % 96);
    let (code, out, _) = verify(model, &key, &write("crash-token.json", &v));
    assert_eq!(code, 1);
    assert!(
        out.contains("signature: valid") && out.contains("DIVERGED at step 0"),
        "{out}"
    );
}

/// A commit that fails (here: a trigger that aborts every insert) fails
/// its request — 500 for a whole response, an `error` event for a stream,
/// never an answer the store does not hold — and the server keeps serving
/// once the store accepts writes again.
#[test]
fn a_failed_commit_fails_the_request_and_the_server_keeps_serving() {
    let model = synth_model();
    let db = tmp("failing-audit.sqlite");
    let _ = std::fs::remove_file(&db);
    let key = tmp("failing.key");
    let _ = std::fs::remove_file(&key);
    let _ = std::fs::remove_file(tmp("failing.key.pub"));
    assert_eq!(run(bin().arg("keygen").arg(&key), None).0, 0);
    let server = Server::start(&model, &db, &key); // creates the store
    let c = rusqlite::Connection::open(&db).expect("open the store");
    c.execute_batch(
        "CREATE TRIGGER refuse BEFORE INSERT ON transcripts
         BEGIN SELECT RAISE(ABORT, 'disk says no'); END;",
    )
    .expect("trigger");
    let url = server.url("/v1/completions");
    let whole = r#"{"prompt": [0], "max_tokens": 3, "temperature": 0}"#;
    match ureq::post(&url).send_string(whole) {
        Err(ureq::Error::Status(500, r)) => {
            let text = r.into_string().expect("body");
            assert!(
                text.contains("audit record could not be committed"),
                "{text}"
            );
        }
        other => panic!("expected a 500, got {other:?}"),
    }
    let stream = r#"{"prompt": [0], "max_tokens": 3, "temperature": 0, "stream": true}"#;
    let text = ureq::post(&url)
        .send_string(stream)
        .expect("stream")
        .into_string()
        .expect("body");
    assert!(
        text.contains("audit record could not be committed"),
        "{text}"
    );
    assert!(!text.contains("\"finish_reason\":\"length\""), "{text}");
    c.execute_batch("DROP TRIGGER refuse;")
        .expect("drop trigger");
    let r = ureq::post(&url).send_string(whole).expect("served again");
    assert_eq!(r.status(), 200);
    let v: Value = serde_json::from_str(&r.into_string().expect("body")).expect("JSON");
    let id = v["choices"][0]["detllm"]["transcript_id"]
        .as_str()
        .expect("id");
    assert!(stored(&db).contains_key(id));
}
