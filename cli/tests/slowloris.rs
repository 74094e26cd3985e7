//! Idle connections cannot starve `detllm serve` (synthetic model, no
//! download): with 1,000 connections open that never finish their request
//! head — four times `--max-connections`, and a header timeout so long it
//! never frees a slot — a real request is still answered (the server
//! closes the oldest idle connections to make room); and a connection that
//! sends nothing is closed at `--first-request-timeout`.

#![cfg(unix)]

mod support;

use detllm::model::synth::{SynthSpec, synth_vec};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::Child;
use std::time::Duration;
use support::cli::{bin, tmp};

struct Server {
    child: Child,
    port: u16,
}

impl Server {
    fn start(extra: &[&str]) -> Server {
        let model = tmp("slowloris-synth.gguf");
        std::fs::write(
            &model,
            synth_vec(&SynthSpec::TINY).expect("synthetic model"),
        )
        .expect("write");
        let (child, port) = support::cli::spawn_listening(
            bin()
                .args([
                    "serve",
                    "--port",
                    "0",
                    "--ctx",
                    "64",
                    "--audit-db",
                    "none",
                    "--model",
                ])
                .arg(&model)
                .args(extra),
        );
        Server { child, port }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A connection that starts a request head and never finishes it.
fn idle(port: u16) -> TcpStream {
    let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    s.write_all(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\n")
        .expect("partial head");
    s
}

#[test]
fn a_thousand_idle_connections_do_not_keep_a_real_request_out() {
    let server = Server::start(&[
        "--max-connections",
        "256",
        "--timeout",
        "3600",
        "--first-request-timeout",
        "3600",
    ]);
    let idle: Vec<TcpStream> = (0..1000).map(|_| idle(server.port)).collect();
    // A hang bound, not a speed figure: without eviction every slot stays
    // taken for the hour-long header timeout and this request never starts.
    let agent = ureq::AgentBuilder::new()
        .timeout(Duration::from_secs(60))
        .build();
    let url = format!("http://127.0.0.1:{}/v1/completions", server.port);
    let r = agent
        .post(&url)
        .send_string(r#"{"prompt": [0, 0], "max_tokens": 3, "temperature": 0}"#)
        .expect("the real request is answered");
    assert_eq!(r.status(), 200);
    let body = r.into_string().expect("body");
    assert!(body.contains("\"finish_reason\":\"length\""), "{body}");
    // The oldest idle connections were closed to make room.
    let mut first = &idle[0];
    first
        .set_read_timeout(Some(Duration::from_secs(30)))
        .expect("timeout");
    let mut buf = [0u8; 16];
    assert!(
        matches!(first.read(&mut buf), Ok(0) | Err(_)),
        "the oldest idle connection was closed"
    );
    drop(idle);
}

#[test]
fn a_connection_that_sends_nothing_is_closed_at_the_first_request_deadline() {
    let server = Server::start(&["--first-request-timeout", "1", "--timeout", "3600"]);
    let mut s = idle(server.port);
    s.set_read_timeout(Some(Duration::from_secs(30)))
        .expect("timeout");
    let mut buf = [0u8; 16];
    // Closed by the server (EOF or reset), not by the 30 s read timeout.
    match s.read(&mut buf) {
        Ok(0) => {}
        Ok(n) => panic!("unexpected {n} bytes"),
        Err(e) => assert!(
            !matches!(
                e.kind(),
                std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
            ),
            "not closed: {e}"
        ),
    }
}
