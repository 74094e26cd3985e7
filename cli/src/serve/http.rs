//! The HTTP routes: OpenAI's shapes in, the engine's events out.
//!
//! Handlers parse and validate ([`super::api`]), send a command to the
//! engine thread and turn its events into a JSON body or server-sent events.
//! Nothing here decides a token. Every failure is an [`ApiError`] JSON body;
//! a client that goes away cancels its request (the receiver is dropped and
//! a [`CancelGuard`] tells the engine).

#![forbid(unsafe_code)]

use super::api::{GenRequest, Provenance, RequestBody, TokenLogprob, TopLogprob, Usage};
use super::error::{ApiError, from_json};
use super::metrics::{Metrics, Outcome};
use super::protocol::{Accepted, Alternative, Command, Event, Finish};
use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{Path, Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::sse::{Event as SseEvent, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tokio::sync::{mpsc, oneshot};

/// What every handler shares.
pub struct AppState {
    /// Commands to the engine thread.
    pub engine: std::sync::mpsc::Sender<Command>,
    /// Exported metrics.
    pub metrics: Arc<Metrics>,
    /// The served model's name (`/v1/models`, `model` fields).
    pub model_name: String,
    /// `system_fingerprint`: the arithmetic profile and the model's SHA-256.
    pub fingerprint: String,
    /// Bearer token every route but `/health` requires, if set.
    pub api_key: Option<String>,
    /// The model is loaded and the engine runs.
    pub ready: AtomicBool,
    /// Largest request body in bytes.
    pub body_limit: usize,
    /// How long a client may take to send its body.
    pub body_timeout: Duration,
    /// Seeds for requests without one: a per-process random start, then counting.
    pub next_seed: AtomicU64,
    /// Request ids (`chatcmpl-N`).
    pub next_id: AtomicU64,
}

type Shared = Arc<AppState>;

/// The router with every route, the API-key check and JSON 404/405 answers.
pub fn router(state: Shared) -> Router {
    let api = Router::new()
        .route("/v1/chat/completions", post(chat_completions))
        .route("/v1/completions", post(completions))
        .route("/v1/models", get(models))
        .route("/v1/models/{id}", get(model))
        .route("/v1/transcripts/{id}", get(transcript))
        .route("/tokenize", post(tokenize))
        .route("/detokenize", post(detokenize))
        .route("/metrics", get(metrics))
        .route_layer(middleware::from_fn_with_state(state.clone(), require_key));
    Router::new()
        .route("/health", get(health))
        .merge(api)
        .fallback(|| async { ApiError::not_found("no such route") })
        .method_not_allowed_fallback(|| async { ApiError::method_not_allowed() })
        .with_state(state)
}

/// Rejects requests without the bearer token (constant-time compare).
async fn require_key(State(st): State<Shared>, req: Request, next: Next) -> Response {
    if let Some(key) = &st.api_key {
        let given = req
            .headers()
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .unwrap_or("");
        if !constant_time_eq(given.as_bytes(), key.as_bytes()) {
            st.metrics.request(Outcome::Invalid);
            return ApiError::unauthorized().into_response();
        }
    }
    next.run(req).await
}

/// Equal bytes, in time that depends only on the lengths.
pub fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    let mut diff = (a.len() ^ b.len()) as u8 | u8::from(a.len() != b.len());
    for (i, &x) in a.iter().enumerate() {
        diff |= x ^ b.get(i % b.len().max(1)).copied().unwrap_or(0);
    }
    diff == 0
}

async fn health(State(st): State<Shared>) -> Response {
    if st.ready.load(Ordering::Acquire) {
        (StatusCode::OK, axum::Json(json!({"status": "ok"}))).into_response()
    } else {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            axum::Json(json!({"status": "loading"})),
        )
            .into_response()
    }
}

async fn metrics(State(st): State<Shared>) -> Response {
    (
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
        st.metrics.render(),
    )
        .into_response()
}

fn model_object(st: &AppState) -> Value {
    json!({"id": st.model_name, "object": "model", "created": 0, "owned_by": "detllm"})
}

async fn models(State(st): State<Shared>) -> Response {
    axum::Json(json!({"object": "list", "data": [model_object(&st)]})).into_response()
}

async fn model(State(st): State<Shared>, Path(id): Path<String>) -> Response {
    if id == st.model_name {
        axum::Json(model_object(&st)).into_response()
    } else {
        ApiError::unknown_model(&id, &st.model_name).into_response()
    }
}

/// The body, at most `body_limit` bytes, read within `body_timeout`.
async fn read_body(st: &AppState, body: Body) -> Result<Bytes, ApiError> {
    match tokio::time::timeout(st.body_timeout, axum::body::to_bytes(body, st.body_limit)).await {
        Err(_) => Err(ApiError {
            status: StatusCode::REQUEST_TIMEOUT,
            ..ApiError::bad_request("request body not received in time")
        }),
        Ok(Err(e)) => {
            let too_large = std::error::Error::source(&e)
                .is_some_and(|s| s.is::<http_body_util::LengthLimitError>());
            Err(if too_large {
                ApiError::too_large(st.body_limit)
            } else {
                ApiError::bad_request(format!("could not read the request body: {e}"))
            })
        }
        Ok(Ok(b)) => Ok(b),
    }
}

/// Parses a JSON body, naming the field at fault.
fn parse<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    let de = &mut serde_json::Deserializer::from_slice(bytes);
    let v = serde_path_to_error::deserialize(de).map_err(from_json)?;
    Ok(v)
}

async fn ask<T>(
    st: &AppState,
    cmd: impl FnOnce(oneshot::Sender<T>) -> Command,
) -> Result<T, ApiError> {
    let (tx, rx) = oneshot::channel();
    st.engine
        .send(cmd(tx))
        .map_err(|_| ApiError::unavailable("the engine has stopped"))?;
    rx.await
        .map_err(|_| ApiError::unavailable("the engine has stopped"))
}

fn check_model(st: &AppState, name: &Option<String>) -> Result<(), ApiError> {
    match name {
        Some(n) if !n.is_empty() && *n != st.model_name => {
            Err(ApiError::unknown_model(n, &st.model_name))
        }
        _ => Ok(()),
    }
}

fn count(st: &AppState, r: &Result<Response, ApiError>) {
    let o = match r {
        Ok(_) => return, // counted when the stream or body completes
        Err(e) if e.status == StatusCode::TOO_MANY_REQUESTS => Outcome::Busy,
        Err(e) if e.status.is_client_error() => Outcome::Invalid,
        Err(_) => Outcome::Error,
    };
    st.metrics.request(o);
}

async fn chat_completions(State(st): State<Shared>, body: Body) -> Response {
    let r = async {
        let bytes = read_body(&st, body).await?;
        let req: RequestBody = parse(&bytes)?;
        check_model(&st, &req.model)?;
        let seed = st.next_seed.fetch_add(1, Ordering::Relaxed);
        let g = req.into_chat(seed)?;
        run(st.clone(), Kind::Chat, vec![g]).await
    }
    .await;
    count(&st, &r);
    r.unwrap_or_else(IntoResponse::into_response)
}

async fn completions(State(st): State<Shared>, body: Body) -> Response {
    let r = async {
        let bytes = read_body(&st, body).await?;
        let req: RequestBody = parse(&bytes)?;
        check_model(&st, &req.model)?;
        let seed = st.next_seed.fetch_add(1, Ordering::Relaxed);
        let gens = req.into_completions(seed)?;
        run(st.clone(), Kind::Text, gens).await
    }
    .await;
    count(&st, &r);
    r.unwrap_or_else(IntoResponse::into_response)
}

/// Which response shape.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Chat,
    Text,
}

/// Tells the engine to drop a request unless disarmed (client gone, handler dropped).
struct CancelGuard {
    engine: std::sync::mpsc::Sender<Command>,
    ids: Vec<u64>,
}

impl CancelGuard {
    /// Nothing left to cancel.
    fn disarm(&mut self) {
        self.ids.clear();
    }
}

impl Drop for CancelGuard {
    fn drop(&mut self) {
        for &id in &self.ids {
            let _ = self.engine.send(Command::Cancel { id });
        }
    }
}

/// One submitted prompt: its acceptance and its event stream.
struct Submitted {
    accepted: Accepted,
    events: mpsc::UnboundedReceiver<Event>,
    n: usize,
}

async fn submit(st: &AppState, g: GenRequest) -> Result<Submitted, ApiError> {
    let (etx, erx) = mpsc::unbounded_channel();
    let n = g.n;
    let accepted = ask(st, |reply| Command::Submit {
        req: g,
        events: etx,
        reply,
    })
    .await??;
    Ok(Submitted {
        accepted,
        events: erx,
        n,
    })
}

/// Submits every prompt (all or none: a rejection cancels the ones accepted).
async fn run(st: Shared, kind: Kind, gens: Vec<GenRequest>) -> Result<Response, ApiError> {
    let stream = gens.first().is_some_and(|g| g.stream);
    let include_usage = gens.first().is_some_and(|g| g.include_usage);
    let logprobs = gens.first().and_then(|g| g.logprobs);
    let mut guard = CancelGuard {
        engine: st.engine.clone(),
        ids: Vec::new(),
    };
    let mut subs = Vec::new();
    for g in gens {
        let s = submit(&st, g).await?;
        guard.ids.push(s.accepted.id);
        subs.push(s);
    }
    let id = format!(
        "{}-{}",
        if kind == Kind::Chat {
            "chatcmpl"
        } else {
            "cmpl"
        },
        st.next_id.fetch_add(1, Ordering::Relaxed)
    );
    let head = Head {
        id,
        created: SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs()),
        model: st.model_name.clone(),
        fingerprint: st.fingerprint.clone(),
        kind,
        logprobs,
    };
    if stream {
        Ok(stream_response(st, head, subs, guard, include_usage))
    } else {
        collect_response(st, head, subs, guard).await
    }
}

/// The fields every response and chunk repeats.
#[derive(Clone)]
struct Head {
    id: String,
    created: u64,
    model: String,
    fingerprint: String,
    kind: Kind,
    logprobs: Option<usize>,
}

impl Head {
    fn object(&self, chunk: bool) -> &'static str {
        match (self.kind, chunk) {
            (Kind::Chat, false) => "chat.completion",
            (Kind::Chat, true) => "chat.completion.chunk",
            (Kind::Text, _) => "text_completion",
        }
    }

    fn wrap(&self, chunk: bool, choices: Value, usage: Option<Usage>) -> Value {
        let mut v = json!({
            "id": self.id,
            "object": self.object(chunk),
            "created": self.created,
            "model": self.model,
            "system_fingerprint": self.fingerprint,
            "choices": choices,
        });
        if let Some(u) = usage {
            v["usage"] = json!(u);
        }
        v
    }
}

/// One choice being assembled.
#[derive(Default)]
struct Choice {
    text: String,
    ids: Vec<u32>,
    logprobs: Vec<TokenLogprob>,
    finish: Option<(Finish, String, String, String)>,
}

fn lossy(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn token_logprob(bytes: &[u8], lp: f32, alts: &[Alternative]) -> TokenLogprob {
    TokenLogprob {
        token: lossy(bytes),
        logprob: lp,
        bytes: bytes.to_vec(),
        top_logprobs: alts
            .iter()
            .map(|a| TopLogprob {
                token: lossy(&a.bytes),
                logprob: a.logprob,
                bytes: a.bytes.clone(),
            })
            .collect(),
    }
}

impl Choice {
    /// Folds an event in; `Err` if the engine failed.
    fn apply(&mut self, ev: &Event) -> Result<(), ApiError> {
        match ev {
            Event::Token {
                id,
                bytes,
                text,
                logprob,
                ..
            } => {
                self.ids.push(*id);
                self.text.push_str(text);
                if let Some((lp, alts)) = logprob {
                    self.logprobs.push(token_logprob(bytes, *lp, alts));
                }
            }
            Event::Done {
                finish,
                text,
                digest,
                audit_digest,
                transcript_id,
                ..
            } => {
                self.text.push_str(text);
                self.finish = Some((
                    *finish,
                    digest.clone(),
                    audit_digest.clone(),
                    transcript_id.clone(),
                ));
            }
            Event::Failed(e) => return Err(e.clone()),
        }
        Ok(())
    }
}

fn event_choice(ev: &Event) -> Option<usize> {
    match ev {
        Event::Token { choice, .. } | Event::Done { choice, .. } => Some(*choice),
        Event::Failed(_) => None,
    }
}

fn provenance(sub: &Submitted, c: &Choice) -> Provenance {
    let (_, digest, audit, tid) =
        c.finish
            .clone()
            .unwrap_or((Finish::Length, String::new(), String::new(), String::new()));
    Provenance {
        seed: sub.accepted.seed,
        digest,
        audit_digest: audit,
        transcript_id: tid,
        prompt_token_ids: sub.accepted.prompt_ids.clone(),
        token_ids: c.ids.clone(),
    }
}

fn logprobs_json(kind: Kind, c: &Choice, wanted: bool) -> Value {
    if !wanted {
        return Value::Null;
    }
    match kind {
        Kind::Chat => json!({"content": c.logprobs}),
        Kind::Text => json!({
            "tokens": c.logprobs.iter().map(|l| &l.token).collect::<Vec<_>>(),
            "token_logprobs": c.logprobs.iter().map(|l| l.logprob).collect::<Vec<_>>(),
            "top_logprobs": c.logprobs.iter().map(|l| {
                l.top_logprobs.iter().map(|t| (t.token.clone(), json!(t.logprob))).collect::<serde_json::Map<String, Value>>()
            }).collect::<Vec<_>>(),
        }),
    }
}

fn choice_json(head: &Head, index: usize, sub: &Submitted, c: &Choice) -> Value {
    let finish = c.finish.as_ref().map(|f| f.0.as_str());
    let mut v = match head.kind {
        Kind::Chat => json!({
            "index": index,
            "message": {"role": "assistant", "content": c.text},
            "finish_reason": finish,
        }),
        Kind::Text => json!({"index": index, "text": c.text, "finish_reason": finish}),
    };
    v["logprobs"] = logprobs_json(head.kind, c, head.logprobs.is_some());
    v["detllm"] = json!(provenance(sub, c));
    v
}

async fn collect_response(
    st: Shared,
    head: Head,
    mut subs: Vec<Submitted>,
    mut guard: CancelGuard,
) -> Result<Response, ApiError> {
    let mut all: Vec<Vec<Choice>> = Vec::new();
    let mut usage = Usage::default();
    for sub in &mut subs {
        let mut choices: Vec<Choice> = (0..sub.n).map(|_| Choice::default()).collect();
        while choices.iter().any(|c| c.finish.is_none()) {
            let ev = sub
                .events
                .recv()
                .await
                .ok_or_else(|| ApiError::internal("the engine dropped the request"))?;
            let c = event_choice(&ev).and_then(|i| choices.get_mut(i));
            match c {
                Some(c) => c.apply(&ev)?,
                None => {
                    if let Event::Failed(e) = ev {
                        return Err(e);
                    }
                }
            }
        }
        usage.prompt_tokens += sub.accepted.prompt_ids.len();
        usage.completion_tokens += choices.iter().map(|c| c.ids.len()).sum::<usize>();
        all.push(choices);
    }
    usage.total_tokens = usage.prompt_tokens + usage.completion_tokens;
    let mut out = Vec::new();
    for (sub, choices) in subs.iter().zip(&all) {
        for c in choices {
            out.push(choice_json(&head, out.len(), sub, c));
        }
    }
    guard.disarm(); // every request finished: nothing to cancel
    st.metrics.request(Outcome::Ok);
    Ok(axum::Json(head.wrap(false, Value::Array(out), Some(usage))).into_response())
}

/// One streamed chunk for `index`; the last one of a choice carries its
/// `detllm` provenance (`prov`).
fn delta_chunk(
    head: &Head,
    index: usize,
    ev: &Event,
    first: bool,
    prov: Option<Value>,
) -> Option<Value> {
    let (text, lp, finish) = match ev {
        Event::Token {
            bytes,
            text,
            logprob,
            ..
        } => (
            text.clone(),
            logprob.as_ref().map(|(l, a)| token_logprob(bytes, *l, a)),
            None,
        ),
        Event::Done { finish, text, .. } => (text.clone(), None, Some(finish.as_str())),
        Event::Failed(_) => return None,
    };
    let logprobs = match (&lp, head.kind) {
        (None, _) => Value::Null,
        (Some(l), Kind::Chat) => json!({"content": [l]}),
        (Some(l), Kind::Text) => json!({
            "tokens": [l.token], "token_logprobs": [l.logprob],
            "top_logprobs": [l.top_logprobs.iter().map(|t| (t.token.clone(), json!(t.logprob))).collect::<serde_json::Map<String, Value>>()],
        }),
    };
    let choice = match head.kind {
        Kind::Chat => {
            let mut delta = json!({"content": text});
            if first {
                delta["role"] = json!("assistant");
            }
            json!({"index": index, "delta": delta, "logprobs": logprobs, "finish_reason": finish})
        }
        Kind::Text => {
            json!({"index": index, "text": text, "logprobs": logprobs, "finish_reason": finish})
        }
    };
    let mut choice = choice;
    if let Some(p) = prov {
        choice["detllm"] = p;
    }
    Some(head.wrap(true, json!([choice]), None))
}

fn stream_response(
    st: Shared,
    head: Head,
    subs: Vec<Submitted>,
    guard: CancelGuard,
    include_usage: bool,
) -> Response {
    let (tx, rx) = mpsc::unbounded_channel::<Result<SseEvent, Infallible>>();
    tokio::spawn(async move {
        let mut guard = guard; // dropped (cancelling) if the client goes away first
        let mut usage = Usage::default();
        let mut base = 0;
        let mut ok = true;
        for mut sub in subs {
            let mut open = sub.n;
            let mut started = vec![false; sub.n];
            let mut choices: Vec<Choice> = (0..sub.n).map(|_| Choice::default()).collect();
            usage.prompt_tokens += sub.accepted.prompt_ids.len();
            while open > 0 {
                let Some(ev) = sub.events.recv().await else {
                    ok = false;
                    break;
                };
                if let Event::Failed(e) = &ev {
                    let _ = tx.send(Ok(SseEvent::default().data(e.body().to_string())));
                    ok = false;
                    break;
                }
                let Some(i) = event_choice(&ev).filter(|&i| i < sub.n) else {
                    continue;
                };
                let _ = choices[i].apply(&ev);
                let prov = match &ev {
                    Event::Token { .. } => {
                        usage.completion_tokens += 1;
                        None
                    }
                    Event::Done { .. } => {
                        open -= 1;
                        Some(json!(provenance(&sub, &choices[i])))
                    }
                    Event::Failed(_) => None,
                };
                let first = !started[i];
                started[i] = true;
                if let Some(v) = delta_chunk(&head, base + i, &ev, first, prov)
                    && tx
                        .send(Ok(SseEvent::default().data(v.to_string())))
                        .is_err()
                {
                    return; // client gone: the guard cancels
                }
            }
            if !ok {
                break;
            }
            base += sub.n;
        }
        usage.total_tokens = usage.prompt_tokens + usage.completion_tokens;
        if ok && include_usage {
            let v = head.wrap(true, json!([]), Some(usage));
            let _ = tx.send(Ok(SseEvent::default().data(v.to_string())));
        }
        let _ = tx.send(Ok(SseEvent::default().data("[DONE]")));
        st.metrics
            .request(if ok { Outcome::Ok } else { Outcome::Error });
        if ok {
            guard.disarm();
        }
    });
    Sse::new(tokio_stream::wrappers::UnboundedReceiverStream::new(rx)).into_response()
}

async fn tokenize(State(st): State<Shared>, body: Body) -> Response {
    let r = async {
        let bytes = read_body(&st, body).await?;
        #[derive(serde::Deserialize)]
        struct Req {
            content: String,
            #[serde(default = "yes")]
            add_special: bool,
        }
        fn yes() -> bool {
            true
        }
        let req: Req = parse(&bytes)?;
        let ids = ask(&st, |reply| Command::Tokenize {
            text: req.content,
            special: req.add_special,
            reply,
        })
        .await??;
        Ok::<_, ApiError>(axum::Json(json!({"tokens": ids})).into_response())
    }
    .await;
    r.unwrap_or_else(IntoResponse::into_response)
}

async fn detokenize(State(st): State<Shared>, body: Body) -> Response {
    let r = async {
        let bytes = read_body(&st, body).await?;
        #[derive(serde::Deserialize)]
        struct Req {
            tokens: Vec<u32>,
        }
        let req: Req = parse(&bytes)?;
        let text = ask(&st, |reply| Command::Detokenize {
            tokens: req.tokens,
            reply,
        })
        .await??;
        Ok::<_, ApiError>(axum::Json(json!({"content": text})).into_response())
    }
    .await;
    r.unwrap_or_else(IntoResponse::into_response)
}

async fn transcript(State(st): State<Shared>, Path(id): Path<String>) -> Response {
    match ask(&st, |reply| Command::Transcript {
        id: id.clone(),
        reply,
    })
    .await
    {
        // The bytes `detllm generate --transcript` would write.
        Ok(Some(text)) => ([(header::CONTENT_TYPE, "application/json")], text).into_response(),
        Ok(None) => ApiError::not_found(format!(
            "no transcript {id} (kept for the most recent responses only)"
        ))
        .into_response(),
        Err(e) => e.into_response(),
    }
}
