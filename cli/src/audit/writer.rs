//! The server's audit writer: one thread that owns the [`Store`] and
//! commits the choices finished in one engine step as one transaction (one
//! fsync), then — and only then — sends each choice's `Done` event, the
//! event the HTTP side turns into the final SSE event or the JSON body. A
//! commit that fails sends `Failed` instead (a 500 or an SSE error), so no
//! client holds an answer whose record could be lost. Steps that queue up
//! while a commit runs are committed together. Transcript reads
//! (`GET /v1/transcripts/{id}`) are served here too, after the pending
//! commit, so no async executor thread touches the database.
//!
//! Verified by `cli/tests/audit_crash.rs` (SIGKILL at random points under
//! load: every fully received answer is stored and verifies).

#![forbid(unsafe_code)]

use super::store::{Record, Store, StoreError};
use crate::serve::error::ApiError;
use crate::serve::protocol::Event;
use std::path::PathBuf;
use std::sync::mpsc::{Receiver, Sender, channel};
use tokio::sync::{mpsc::UnboundedSender, oneshot};

/// One finished choice waiting for its commit.
pub struct Pending {
    /// What is stored.
    pub record: Record,
    /// The choice's `Done` event, sent once the record is durable.
    pub done: Event,
    /// Where the request's events go.
    pub events: UnboundedSender<Event>,
}

/// What the worker thread sends the writer.
enum Msg {
    /// The choices one engine step finished.
    Step(Vec<Pending>),
    /// A stored transcript's text.
    Read {
        id: String,
        reply: oneshot::Sender<Option<String>>,
    },
}

/// The worker's handle on the writer thread.
pub struct Writer {
    tx: Sender<Msg>,
}

/// Where and how long the store keeps transcripts.
#[derive(Clone, Debug)]
pub struct StoreConfig {
    /// The SQLite file.
    pub path: PathBuf,
    /// Keep at most this many (the oldest go first); `None`: all.
    pub keep: Option<u64>,
}

impl Writer {
    /// Opens the store (its errors come back here, before the server
    /// starts) and starts the writer thread.
    pub fn start(cfg: &StoreConfig) -> Result<Writer, StoreError> {
        let mut store = Store::open(&cfg.path)?;
        store.commit_delay = test_commit_delay();
        let (tx, rx) = channel();
        let keep = cfg.keep;
        let path = cfg.path.clone();
        std::thread::Builder::new()
            .name("detllm-audit".into())
            .spawn(move || run(store, keep, &rx))
            .map_err(|e| StoreError::Unwritable(path, e.to_string()))?;
        Ok(Writer { tx })
    }

    /// Commits `step`'s choices, then sends their `Done` events.
    pub fn commit_step(&self, step: Vec<Pending>) {
        if let Err(std::sync::mpsc::SendError(Msg::Step(step))) = self.tx.send(Msg::Step(step)) {
            fail(step, "the audit writer stopped");
        }
    }

    /// Answers `reply` with transcript `id`'s text, if stored.
    pub fn read(&self, id: String, reply: oneshot::Sender<Option<String>>) {
        let _ = self.tx.send(Msg::Read { id, reply });
    }
}

/// The writer thread: commit what came, then answer the reads.
fn run(mut store: Store, keep: Option<u64>, rx: &Receiver<Msg>) {
    while let Ok(first) = rx.recv() {
        let mut batch = Vec::new();
        let mut reads = Vec::new();
        let mut take = |m: Msg| match m {
            Msg::Step(v) => batch.extend(v),
            Msg::Read { id, reply } => reads.push((id, reply)),
        };
        take(first);
        while let Ok(m) = rx.try_recv() {
            take(m);
        }
        if !batch.is_empty() {
            let records: Vec<Record> = batch.iter().map(|p| p.record.clone()).collect();
            match store.commit(&records, keep) {
                Ok(()) => {
                    for p in batch {
                        let _ = p.events.send(p.done);
                    }
                }
                Err(e) => {
                    eprintln!("detllm serve: {e}");
                    fail(batch, &format!("{e}"));
                }
            }
        }
        for (id, reply) in reads {
            let _ = reply.send(store.get(&id).ok().flatten().map(|r| r.transcript));
        }
    }
}

/// The crash test's hook: `DETLLM_AUDIT_TEST_COMMIT_DELAY_MS` holds each
/// transaction open that long before it commits, widening the window a
/// kill can land in (inside a transaction, or between a commit and the
/// events it releases). Unset in production: no delay.
fn test_commit_delay() -> std::time::Duration {
    let ms = std::env::var("DETLLM_AUDIT_TEST_COMMIT_DELAY_MS")
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
        .unwrap_or(0);
    std::time::Duration::from_millis(ms.min(1000))
}

/// Fails each pending choice's request: its record was not stored.
fn fail(batch: Vec<Pending>, why: &str) {
    for p in batch {
        let _ = p.events.send(Event::Failed(ApiError::internal(format!(
            "the answer's audit record could not be committed ({why}); it was not delivered"
        ))));
    }
}
