//! `detllm serve`: an OpenAI-compatible HTTP server over the library's
//! continuous-batching scheduler.
//!
//! Layout: [`api`] (typed request and response shapes, validation),
//! [`extract`] (typed bodies and paths), [`http`] (routes, streaming, API
//! key), [`compile`] (requests' grammars, compiled off the engine thread),
//! [`worker`] (the thread that owns the model, the engine and the
//! scheduler and runs steps), [`protocol`] (what the two say to each
//! other), [`text`] (stop strings and UTF-8 across tokens), [`metrics`]
//! (Prometheus text), [`error`] (OpenAI-style JSON errors, the one
//! rejection type), [`conns`] (idle connections cannot starve the server).
//! Finished choices are recorded (and signed) by `crate::audit`
//! (docs/AUDIT.md).
//!
//! Shutdown: on SIGTERM or Ctrl-C (SIGINT) the server stops accepting (the
//! listening socket is closed, so new connections are refused), lets every
//! in-flight request and stream finish — the worker keeps stepping their
//! completions — and exits 0; if they have not finished within
//! `--drain-timeout` seconds, or a second signal comes, it exits 1 without
//! waiting further. `cli/tests/serve.rs` sends SIGTERM mid-stream and checks it.
//!
//! The guarantee: a response is a function of (model, request, seed) — the
//! scheduler decides every step on the worker thread, and the library makes
//! each sequence's logits independent of what shares its step, how its
//! prompt was chunked, the prefix cache, preemption and the thread count.
//! `docs/SERVER.md` documents every endpoint and the guarantee's limits.

#![forbid(unsafe_code)]

pub mod api;
pub mod compile;
pub mod conns;
pub mod error;
pub mod extract;
pub mod http;
pub mod metrics;
pub mod protocol;
pub mod structured;
pub mod text;
pub mod tools;
pub mod verify_page;
pub mod worker;

use crate::error::{CliError, CliResult};
use detllm::sched::NgramSpec;
use hyper_util::server::graceful::GracefulShutdown;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

/// `detllm serve` options.
#[derive(clap::Args, Clone)]
pub struct ServeArgs {
    #[command(flatten)]
    pub model: crate::args::ModelArgs,
    /// Address to bind (loopback by default).
    #[arg(long, default_value = "127.0.0.1")]
    pub host: String,
    /// Port (0: any free port; the chosen one is printed).
    #[arg(long, default_value_t = 8080)]
    pub port: u16,
    /// Sequences decoded together at most.
    #[arg(long, default_value_t = 8)]
    pub max_seqs: usize,
    /// Context length per sequence in tokens (prompt + completion).
    #[arg(long, default_value_t = 2048)]
    pub ctx: usize,
    /// Memory for the KV cache (e.g. 256M, 1G; default: room for every sequence at full context).
    #[arg(long)]
    pub kv_mem: Option<String>,
    /// Tokens per engine step (the decode rows plus prefill chunks).
    #[arg(long, default_value_t = 256)]
    pub step_tokens: usize,
    /// Requests waiting for admission at most (more get 429).
    #[arg(long, default_value_t = 64)]
    pub max_queue: usize,
    /// Require `Authorization: Bearer KEY` on every route but /health.
    #[arg(long)]
    pub api_key: Option<String>,
    /// Largest request body in bytes.
    #[arg(long, default_value_t = 1 << 20)]
    pub max_body: usize,
    /// Seconds a connection may take to send its headers or body.
    #[arg(long, default_value_t = 30)]
    pub timeout: u64,
    /// Most open connections. When all are taken, the oldest that has not
    /// yet sent a request is closed to make room.
    #[arg(long, default_value_t = 256)]
    pub max_connections: usize,
    /// Most open connections from one client address [default: --max-connections].
    #[arg(long)]
    pub max_connections_per_addr: Option<usize>,
    /// Seconds a new connection may take to send its first request head.
    #[arg(long, default_value_t = 10)]
    pub first_request_timeout: u64,
    /// Seconds to let in-flight requests finish after SIGTERM or Ctrl-C
    /// (exit 0 if they do, 1 if the time runs out).
    #[arg(long, default_value_t = 30)]
    pub drain_timeout: u64,
    /// The durable audit store (SQLite): every choice's transcript is committed
    /// before its last byte is sent. `none`: keep the last 256 in memory only.
    /// [default: $XDG_STATE_HOME/detllm/audit.sqlite, else ~/.local/state/detllm/audit.sqlite]
    #[arg(long)]
    pub audit_db: Option<PathBuf>,
    /// Keep at most N transcripts in the store (the oldest go first) [default: all].
    #[arg(long)]
    pub audit_keep: Option<u64>,
    /// Sign every choice's receipt with this Ed25519 key (`detllm keygen FILE`).
    #[arg(long)]
    pub signing_key: Option<PathBuf>,
    /// Speculative decoding: `ngram` feeds each decoding sequence's drafts
    /// (the tokens after the latest earlier occurrence of its last few
    /// tokens, in its prompt and text so far) in the same engine step as the
    /// other sequences' rows, from the step's spare tokens and logits rows.
    /// Every answer (text, logprobs, digests, finish reason) is the same bits
    /// as without it; only the step count changes.
    #[arg(long, value_enum)]
    pub speculate: Option<ServeSpeculate>,
    /// Most draft tokens per sequence and step with --speculate, 1–32 (each
    /// sequence starts at min(4, this) and adapts to the drafts it keeps).
    #[arg(long, default_value_t = 8, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=32))]
    pub draft_max: usize,
    /// The browser verifier's module for `/verify` (written by scripts/build-web.sh).
    #[arg(long, default_value = "web/wasm.js")]
    pub verify_wasm: std::path::PathBuf,
}

/// Where `serve --speculate` takes drafts from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum ServeSpeculate {
    /// Prompt lookup over each sequence's own prompt and text.
    Ngram,
}

/// Parses `256M`, `1G`, `65536K`, `1000000` (bytes).
pub fn parse_size(s: &str) -> Option<usize> {
    let s = s.trim();
    let (num, mult) = match s.char_indices().last()? {
        (i, 'k' | 'K') => (&s[..i], 1usize << 10),
        (i, 'm' | 'M') => (&s[..i], 1 << 20),
        (i, 'g' | 'G') => (&s[..i], 1 << 30),
        _ => (s, 1),
    };
    num.trim().parse::<usize>().ok()?.checked_mul(mult)
}

/// Runs the server until SIGTERM or Ctrl-C, then drains (module docs).
pub fn run(args: ServeArgs) -> CliResult<ExitCode> {
    let addr: SocketAddr = format!("{}:{}", args.host, args.port)
        .parse()
        .map_err(|_| CliError::Usage("--host must be an IP address (e.g. 127.0.0.1 or ::1)"))?;
    let metrics = Arc::new(metrics::Metrics::default());
    let (cmd_tx, cmd_rx) = std::sync::mpsc::channel();
    let loaded = worker::start(worker_config(&args)?, cmd_rx, metrics.clone())?;
    let state = Arc::new(app_state(&args, cmd_tx, metrics, &loaded));
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(CliError::Io)?;
    rt.block_on(serve(addr, state, &args, &loaded))
}

/// What the worker thread is built for, from the flags.
pub fn worker_config(args: &ServeArgs) -> CliResult<worker::WorkerConfig> {
    let kv_bytes = match &args.kv_mem {
        Some(s) => Some(parse_size(s).ok_or(CliError::Usage(
            "--kv-mem must be a size such as 512M or 2G",
        ))?),
        None => None,
    };
    let signer = match &args.signing_key {
        Some(path) => Some(Arc::new(
            crate::audit::receipt::read_signing_key(path)
                .map_err(|e| CliError::Audit(e.to_string()))?,
        )),
        None => None,
    };
    Ok(worker::WorkerConfig {
        model: args.model.clone(),
        max_seqs: args.max_seqs,
        ctx: args.ctx,
        kv_bytes,
        step_tokens: args.step_tokens,
        max_queue: args.max_queue,
        speculate: args.speculate.map(|ServeSpeculate::Ngram| NgramSpec {
            max_draft: args.draft_max,
        }),
        store: store_config(args)?,
        signer,
    })
}

/// `--audit-db` and `--audit-keep`: the store, or `None` for `--audit-db none`.
fn store_config(args: &ServeArgs) -> CliResult<Option<crate::audit::writer::StoreConfig>> {
    let path = match &args.audit_db {
        Some(p) if p.as_os_str() == "none" => return Ok(None),
        Some(p) => p.clone(),
        None => crate::audit::store::default_path().ok_or(CliError::Usage(
            "no XDG_STATE_HOME or HOME for the audit store: give --audit-db PATH (or none)",
        ))?,
    };
    Ok(Some(crate::audit::writer::StoreConfig {
        path,
        keep: args.audit_keep,
    }))
}

/// What the handlers share, for the model `loaded` by the worker behind `worker`.
pub fn app_state(
    args: &ServeArgs,
    worker: std::sync::mpsc::Sender<protocol::Command>,
    metrics: Arc<metrics::Metrics>,
    loaded: &worker::Loaded,
) -> http::AppState {
    http::AppState {
        worker,
        metrics,
        model_name: loaded.model_name.clone(),
        fingerprint: loaded.fingerprint.clone(),
        compiles: compile::Compiles::new(loaded.compiler.clone()),
        api_key: args.api_key.clone(),
        ready: AtomicBool::new(true),
        body_limit: args.max_body,
        body_timeout: Duration::from_secs(args.timeout),
        next_seed: AtomicU64::new(random_seed()),
        next_id: AtomicU64::new(1),
        public_key: args.signing_key.as_ref().and_then(|p| {
            let key = crate::audit::receipt::read_signing_key(p).ok()?;
            Some(crate::output::hex(key.verifying_key().as_bytes()))
        }),
        verify_wasm: verify_page::load(&args.verify_wasm),
    }
}

/// A seed start no two server processes are likely to share.
fn random_seed() -> u64 {
    use std::hash::{BuildHasher, RandomState};
    RandomState::new().hash_one(std::process::id()) >> 1
}

/// Serves connections on `addr` until a shutdown signal, then drains
/// (module docs); the exit code says whether the drain finished.
async fn serve(
    addr: SocketAddr,
    state: Arc<http::AppState>,
    args: &ServeArgs,
    loaded: &worker::Loaded,
) -> CliResult<ExitCode> {
    // Installed before the address is printed: a signal from then on drains.
    let mut signals = Signals::install()?;
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(CliError::Io)?;
    let local = listener.local_addr().map_err(CliError::Io)?;
    eprintln!(
        "detllm serve: {} ({}) on http://{local}  [{} sequences, context {}, KV {} pages]",
        loaded.model_name, loaded.fingerprint, args.max_seqs, args.ctx, loaded.kv_pages
    );
    match store_config(args)? {
        Some(s) => eprintln!("detllm serve: audit store {}", s.path.display()),
        None => eprintln!("detllm serve: audit store none (the last 256 transcripts in memory)"),
    }
    if let Some(key) = &state.public_key {
        eprintln!("detllm serve: signing receipts with Ed25519 public key {key}");
    }
    let connections = GracefulShutdown::new();
    accept_until_signal(listener, &state, args, &connections, &mut signals).await?;
    // The listener is closed: new connections are refused from here on.
    state.ready.store(false, Ordering::Release);
    let drain = Duration::from_secs(args.drain_timeout);
    eprintln!(
        "detllm serve: shutting down; draining {} open connections (at most {}s)",
        connections.count(),
        drain.as_secs()
    );
    tokio::select! {
        () = connections.shutdown() => {
            eprintln!("detllm serve: drained");
            Ok(ExitCode::SUCCESS)
        }
        () = tokio::time::sleep(drain) => {
            eprintln!("detllm serve: --drain-timeout passed with requests in flight; exiting");
            Ok(ExitCode::from(1))
        }
        () = signals.next() => {
            eprintln!("detllm serve: second signal; exiting without draining");
            Ok(ExitCode::from(1))
        }
    }
}

/// Accepts connections (at most `--max-connections` open, each with the
/// header timeout) and serves each under `connections`' watch, until a
/// signal; the listener is dropped on return.
async fn accept_until_signal(
    listener: tokio::net::TcpListener,
    state: &Arc<http::AppState>,
    args: &ServeArgs,
    connections: &GracefulShutdown,
    signals: &mut Signals,
) -> CliResult<()> {
    let app = http::router(state.clone());
    let slots = Arc::new(tokio::sync::Semaphore::new(args.max_connections.max(1)));
    let registry = conns::Registry::new(
        args.max_connections_per_addr
            .unwrap_or(args.max_connections),
    );
    let header_timeout = Duration::from_secs(args.timeout.max(1));
    let first_request = Duration::from_secs(args.first_request_timeout.max(1));
    loop {
        let (stream, addr) = tokio::select! {
            a = listener.accept() => match a {
                Ok(a) => a,
                Err(_) => continue, // e.g. too many open files: try again
            },
            () = signals.next() => return Ok(()),
        };
        let Some(ticket) = registry.admit(addr.ip()) else {
            continue; // that address is at its limit, every connection busy: refused
        };
        let permit = match slots.clone().try_acquire_owned() {
            Ok(p) => p,
            Err(_) => {
                // Full: close the oldest idle connection (if any) and wait for its slot.
                registry.evict_oldest_fresh();
                tokio::select! {
                    p = slots.clone().acquire_owned() => p.map_err(|_| CliError::Usage("connection limit closed"))?,
                    () = signals.next() => return Ok(()),
                }
            }
        };
        let started = ticket.started.clone();
        let tower = hyper_util::service::TowerToHyperService::new(app.clone());
        let service = hyper::service::service_fn(move |req| {
            started.store(true, Ordering::Release);
            hyper::service::Service::call(&tower, req)
        });
        let conn = hyper::server::conn::http1::Builder::new()
            .timer(hyper_util::rt::TokioTimer::new())
            .header_read_timeout(header_timeout)
            .serve_connection(hyper_util::rt::TokioIo::new(stream), service);
        let conn = connections.watch(conn);
        tokio::spawn(serve_connection(conn, permit, ticket, first_request));
    }
}

/// Runs one connection until it ends, is evicted, or sends no request
/// head within `first_request` (dropping it closes the socket).
async fn serve_connection<C: std::future::Future>(
    conn: C,
    permit: tokio::sync::OwnedSemaphorePermit,
    mut ticket: conns::Ticket,
    first_request: Duration,
) {
    let _permit = permit;
    let started = ticket.started.clone();
    let deadline = async {
        tokio::time::sleep(first_request).await;
        if started.load(Ordering::Acquire) {
            std::future::pending::<()>().await;
        }
    };
    tokio::select! {
        _ = conn => {}
        _ = &mut ticket.evicted => {}
        () = deadline => {}
    }
}

/// SIGTERM and SIGINT (Ctrl-C), listened for from [`Signals::install`] on.
struct Signals {
    #[cfg(unix)]
    term: tokio::signal::unix::Signal,
    #[cfg(unix)]
    int: tokio::signal::unix::Signal,
}

impl Signals {
    #[cfg(unix)]
    fn install() -> CliResult<Signals> {
        use tokio::signal::unix::{SignalKind, signal};
        Ok(Signals {
            term: signal(SignalKind::terminate()).map_err(CliError::Io)?,
            int: signal(SignalKind::interrupt()).map_err(CliError::Io)?,
        })
    }

    #[cfg(not(unix))]
    fn install() -> CliResult<Signals> {
        Ok(Signals {})
    }

    /// The next signal.
    #[cfg(unix)]
    async fn next(&mut self) {
        tokio::select! {
            _ = self.term.recv() => {}
            _ = self.int.recv() => {}
        }
    }

    /// The next Ctrl-C.
    #[cfg(not(unix))]
    async fn next(&mut self) {
        let _ = tokio::signal::ctrl_c().await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse() {
        assert_eq!(parse_size("512M"), Some(512 << 20));
        assert_eq!(parse_size("2g"), Some(2 << 30));
        assert_eq!(parse_size("1000"), Some(1000));
        assert_eq!(parse_size("x"), None);
        assert_eq!(parse_size("99999999999999999999G"), None);
    }
}
