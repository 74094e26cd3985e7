//! `detllm serve`: an OpenAI-compatible HTTP server over the library's
//! continuous-batching scheduler.
//!
//! Layout: [`api`] (typed request and response shapes, validation),
//! [`extract`] (typed bodies and paths), [`http`] (routes, streaming, API
//! key), [`worker`] (the thread that owns the model, the engine and the
//! scheduler and runs steps), [`protocol`] (what the two say to each
//! other), [`text`] (stop strings and UTF-8 across tokens), [`metrics`]
//! (Prometheus text), [`error`] (OpenAI-style JSON errors, the one
//! rejection type).
//!
//! The guarantee: a response is a function of (model, request, seed) — the
//! scheduler decides every step on the engine thread, and the library makes
//! each sequence's logits independent of what shares its step, how its
//! prompt was chunked, the prefix cache, preemption and the thread count.
//! `docs/SERVER.md` documents every endpoint and the guarantee's limits.

#![forbid(unsafe_code)]

pub mod api;
pub mod error;
pub mod extract;
pub mod http;
pub mod metrics;
pub mod protocol;
pub mod text;
pub mod worker;

use crate::error::{CliError, CliResult};
use std::net::SocketAddr;
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
    /// Most open connections.
    #[arg(long, default_value_t = 256)]
    pub max_connections: usize,
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

/// Runs the server until interrupted.
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
    rt.block_on(serve(addr, state, &args, &loaded))?;
    Ok(ExitCode::SUCCESS)
}

/// What the worker thread is built for, from the flags.
pub fn worker_config(args: &ServeArgs) -> CliResult<worker::WorkerConfig> {
    let kv_bytes = match &args.kv_mem {
        Some(s) => Some(parse_size(s).ok_or(CliError::Usage(
            "--kv-mem must be a size such as 512M or 2G",
        ))?),
        None => None,
    };
    Ok(worker::WorkerConfig {
        model: args.model.clone(),
        max_seqs: args.max_seqs,
        ctx: args.ctx,
        kv_bytes,
        step_tokens: args.step_tokens,
        max_queue: args.max_queue,
    })
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
        api_key: args.api_key.clone(),
        ready: AtomicBool::new(true),
        body_limit: args.max_body,
        body_timeout: Duration::from_secs(args.timeout),
        next_seed: AtomicU64::new(random_seed()),
        next_id: AtomicU64::new(1),
    }
}

/// A seed start no two server processes are likely to share.
fn random_seed() -> u64 {
    use std::hash::{BuildHasher, RandomState};
    RandomState::new().hash_one(std::process::id()) >> 1
}

async fn serve(
    addr: SocketAddr,
    state: Arc<http::AppState>,
    args: &ServeArgs,
    loaded: &worker::Loaded,
) -> CliResult<()> {
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(CliError::Io)?;
    let local = listener.local_addr().map_err(CliError::Io)?;
    eprintln!(
        "detllm serve: {} ({}) on http://{local}  [{} sequences, context {}, KV {} pages]",
        loaded.model_name, loaded.fingerprint, args.max_seqs, args.ctx, loaded.kv_pages
    );
    let app = http::router(state.clone());
    let slots = Arc::new(tokio::sync::Semaphore::new(args.max_connections.max(1)));
    let header_timeout = Duration::from_secs(args.timeout.max(1));
    let shutdown = tokio::signal::ctrl_c();
    tokio::pin!(shutdown);
    loop {
        let permit = tokio::select! {
            p = slots.clone().acquire_owned() => p.map_err(|_| CliError::Usage("connection limit closed"))?,
            _ = &mut shutdown => break,
        };
        let (stream, _) = tokio::select! {
            a = listener.accept() => match a {
                Ok(a) => a,
                Err(_) => continue, // e.g. too many open files: try again
            },
            _ = &mut shutdown => break,
        };
        let service = hyper_util::service::TowerToHyperService::new(app.clone());
        tokio::spawn(async move {
            let _permit = permit;
            let conn = hyper::server::conn::http1::Builder::new()
                .timer(hyper_util::rt::TokioTimer::new())
                .header_read_timeout(header_timeout)
                .serve_connection(hyper_util::rt::TokioIo::new(stream), service);
            let _ = conn.await;
        });
    }
    state.ready.store(false, Ordering::Release);
    eprintln!("detllm serve: shutting down");
    Ok(())
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
