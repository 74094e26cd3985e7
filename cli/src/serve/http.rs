//! The HTTP routes: OpenAI's shapes in, the worker's events out.
//!
//! Each handler takes typed input (`extract::ApiJson`, `extract::PathId`),
//! validates it ([`super::api`]), compiles its grammar if it has one
//! ([`super::compile`]), sends a command to the worker thread and
//! turns its events into a typed body ([`super::api::Completion`], …) or
//! server-sent events. Nothing here decides a token. Every failure is an
//! [`ApiError`] — the one rejection type of extractors and handlers alike;
//! a client that goes away cancels its request (the receiver is dropped and
//! a [`CancelGuard`] tells the worker).
//!
//! Verified by the router tests below (`tower::ServiceExt::oneshot` on
//! [`router`] over a synthetic model: every error case's status, `type` and
//! `param`, and a served completion) and, over real HTTP on SmolLM2, by
//! `cli/tests/serve.rs`.

#![forbid(unsafe_code)]

use super::api::{
    Choice, Completion, Detllm, DetokenizeRequest, Detokenized, FunctionCall, GenRequest, Health,
    Logprobs, Message, ModelList, ModelObject, Provenance, RequestBody, TokenLogprob,
    TokenizeRequest, Tokens, ToolCall, TopLogprob, Usage,
};
use super::error::ApiError;
use super::extract::{ApiJson, BodyLimits, PathId};
use super::metrics::{Metrics, Outcome};
use super::protocol::{Accepted, Alternative, Command, Event, Finish};
use axum::Json;
use axum::Router;
use axum::extract::{FromRef, Request, State};
use axum::handler::Handler;
use axum::http::{StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::sse::{Event as SseEvent, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde::Serialize;
use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tokio::sync::{mpsc, oneshot};

/// What every handler shares.
pub struct AppState {
    /// Commands to the worker thread.
    pub worker: std::sync::mpsc::Sender<Command>,
    /// Exported metrics.
    pub metrics: Arc<Metrics>,
    /// The served model's name (`/v1/models`, `model` fields).
    pub model_name: String,
    /// `system_fingerprint`: the arithmetic profile and the model's SHA-256.
    pub fingerprint: String,
    /// Requests' grammars, compiled here before they are submitted.
    pub compiles: super::compile::Compiles,
    /// Bearer token every route but `/health` requires, if set.
    pub api_key: Option<String>,
    /// The model is loaded and the server is not shutting down.
    pub ready: AtomicBool,
    /// Largest request body in bytes.
    pub body_limit: usize,
    /// How long a client may take to send its body.
    pub body_timeout: Duration,
    /// Seeds for requests without one: a per-process random start, then counting.
    pub next_seed: AtomicU64,
    /// Request ids (`chatcmpl-N`).
    pub next_id: AtomicU64,
    /// The receipts' Ed25519 public key, hex (`--signing-key`).
    pub public_key: Option<String>,
    /// The browser verifier's module script for `/verify` (`serve::verify_page`).
    pub verify_wasm: Option<Arc<str>>,
}

/// The state every handler and extractor gets.
pub type Shared = Arc<AppState>;

impl FromRef<Shared> for BodyLimits {
    fn from_ref(st: &Shared) -> Self {
        BodyLimits {
            max_bytes: st.body_limit,
            timeout: st.body_timeout,
        }
    }
}

/// The router with every route, the API-key check and JSON 404/405 answers.
pub fn router(state: Shared) -> Router {
    let counted = || middleware::from_fn_with_state(state.clone(), count_rejections);
    let api = Router::new()
        .route(
            "/v1/chat/completions",
            post(chat_completions.layer(counted())),
        )
        .route("/v1/completions", post(completions.layer(counted())))
        .route("/v1/models", get(models))
        .route("/v1/models/{id}", get(model))
        .route("/v1/transcripts/{id}", get(transcript))
        .route("/v1/audit/key", get(audit_key))
        .route("/tokenize", post(tokenize))
        .route("/detokenize", post(detokenize))
        .route("/metrics", get(metrics))
        .route_layer(middleware::from_fn_with_state(state.clone(), require_key));
    Router::new()
        .route("/health", get(health))
        .merge(api)
        .merge(super::verify_page::routes(state.verify_wasm.clone()))
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
        Json(Health { status: "ok" }).into_response()
    } else {
        let loading = Health { status: "loading" };
        (StatusCode::SERVICE_UNAVAILABLE, Json(loading)).into_response()
    }
}

async fn metrics(State(st): State<Shared>) -> Response {
    (
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
        st.metrics.render(),
    )
        .into_response()
}

async fn models(State(st): State<Shared>) -> Response {
    let list = ModelList {
        data: vec![ModelObject::served(&st.model_name)],
        object: "list",
    };
    Json(list).into_response()
}

async fn model(State(st): State<Shared>, PathId(id): PathId) -> Result<Response, ApiError> {
    if id == st.model_name {
        Ok(Json(ModelObject::served(&st.model_name)).into_response())
    } else {
        Err(ApiError::unknown_model(&id, &st.model_name))
    }
}

/// Counts a completion route's rejections by status (its successes are
/// counted when the body or stream completes).
async fn count_rejections(State(st): State<Shared>, req: Request, next: Next) -> Response {
    let response = next.run(req).await;
    let status = response.status();
    let outcome = if status.is_success() {
        None
    } else if status == StatusCode::TOO_MANY_REQUESTS {
        Some(Outcome::Busy)
    } else if status.is_client_error() {
        Some(Outcome::Invalid)
    } else {
        Some(Outcome::Error)
    };
    if let Some(o) = outcome {
        st.metrics.request(o);
    }
    response
}

async fn ask<T>(
    st: &AppState,
    cmd: impl FnOnce(oneshot::Sender<T>) -> Command,
) -> Result<T, ApiError> {
    let (tx, rx) = oneshot::channel();
    st.worker
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

async fn chat_completions(
    State(st): State<Shared>,
    ApiJson(req): ApiJson<RequestBody>,
) -> Result<Response, ApiError> {
    check_model(&st, &req.model)?;
    let seed = st.next_seed.fetch_add(1, Ordering::Relaxed);
    let g = req.into_chat(seed)?;
    run(st, Kind::Chat, vec![g]).await
}

async fn completions(
    State(st): State<Shared>,
    ApiJson(req): ApiJson<RequestBody>,
) -> Result<Response, ApiError> {
    check_model(&st, &req.model)?;
    let seed = st.next_seed.fetch_add(1, Ordering::Relaxed);
    let gens = req.into_completions(seed)?;
    run(st, Kind::Text, gens).await
}

/// Which response shape.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Chat,
    Text,
}

/// Tells the worker to drop a request unless disarmed (client gone, handler dropped).
struct CancelGuard {
    worker: std::sync::mpsc::Sender<Command>,
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
            let _ = self.worker.send(Command::Cancel { id });
        }
    }
}

/// One submitted prompt: its acceptance and its event stream.
struct Submitted {
    accepted: Accepted,
    events: mpsc::UnboundedReceiver<Event>,
    n: usize,
    /// `resume_token_ids`: choice 0's first ids, which the client holds.
    resumed: Vec<u32>,
    /// The first event, read early to check a resume before answering.
    first: Option<Event>,
}

impl Submitted {
    /// The next event (`None`: the worker dropped the request).
    async fn next(&mut self) -> Option<Event> {
        match self.first.take() {
            Some(ev) => Some(ev),
            None => self.events.recv().await,
        }
    }

    /// For a resume, waits for the worker's verdict on `resume_token_ids`
    /// (it checks each against the run and sends nothing for them) so that
    /// a refuted resume is answered with its 409 before any byte of a 200.
    async fn check_resume(&mut self) -> Result<(), ApiError> {
        if self.resumed.is_empty() {
            return Ok(());
        }
        match self.events.recv().await {
            Some(Event::Failed(e)) => Err(e),
            Some(ev) => {
                self.first = Some(ev);
                Ok(())
            }
            None => Err(ApiError::internal("the engine dropped the request")),
        }
    }

    /// The choices being assembled; a resumed choice starts with the ids
    /// the client holds, so its provenance and `usage` are the full run's.
    fn assemblies(&self) -> Vec<Assembly> {
        let mut v: Vec<Assembly> = (0..self.n).map(|_| Assembly::default()).collect();
        if let Some(c) = v.first_mut() {
            c.ids = self.resumed.clone();
        }
        v
    }
}

/// Compiles `g`'s grammar (off the engine thread), then hands both to the worker.
async fn submit(st: &AppState, g: GenRequest) -> Result<Submitted, ApiError> {
    let grammar = st.compiles.compile(g.constraint.as_ref()).await?;
    let (etx, erx) = mpsc::unbounded_channel();
    let n = g.n;
    let resumed = g.resume.clone();
    let accepted = ask(st, |reply| Command::Submit {
        req: Box::new(g),
        grammar,
        events: etx,
        reply,
    })
    .await??;
    Ok(Submitted {
        accepted,
        events: erx,
        n,
        resumed,
        first: None,
    })
}

/// Submits every prompt (all or none: a rejection cancels the ones accepted).
async fn run(st: Shared, kind: Kind, gens: Vec<GenRequest>) -> Result<Response, ApiError> {
    let stream = gens.first().is_some_and(|g| g.stream);
    let include_usage = gens.first().is_some_and(|g| g.include_usage);
    let logprobs = gens.first().and_then(|g| g.logprobs);
    let tools = gens
        .first()
        .and_then(|g| g.tools.as_ref())
        .map(|t| t.choice.clone());
    let mut guard = CancelGuard {
        worker: st.worker.clone(),
        ids: Vec::new(),
    };
    let mut subs = Vec::new();
    for g in gens {
        let mut s = submit(&st, g).await?;
        guard.ids.push(s.accepted.id);
        s.check_resume().await?;
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
        tools,
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
    /// A tools request's `tool_choice`: its answers are split into prose
    /// and calls (`super::tools::Splitter`).
    tools: Option<super::tools::Choice>,
}

impl Head {
    fn object(&self, chunk: bool) -> &'static str {
        match (self.kind, chunk) {
            (Kind::Chat, false) => "chat.completion",
            (Kind::Chat, true) => "chat.completion.chunk",
            (Kind::Text, _) => "text_completion",
        }
    }

    /// The response (or, with `chunk`, the streamed chunk) holding `choices`.
    fn wrap(&self, chunk: bool, choices: Vec<Choice>, usage: Option<Usage>) -> Completion<'_> {
        Completion {
            choices,
            created: self.created,
            id: &self.id,
            model: &self.model,
            object: self.object(chunk),
            system_fingerprint: &self.fingerprint,
            usage,
        }
    }
}

/// How a choice ended, from its `Done` event.
#[derive(Clone)]
struct Ending {
    finish: Finish,
    digest: String,
    audit_digest: String,
    transcript_id: String,
    signature: Option<String>,
}

/// One choice being assembled from its events.
#[derive(Default)]
struct Assembly {
    text: String,
    ids: Vec<u32>,
    logprobs: Vec<TokenLogprob>,
    ending: Option<Ending>,
}

fn lossy(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn token_logprob(bytes: &[u8], lp: f32, alts: &[Alternative]) -> TokenLogprob {
    TokenLogprob {
        bytes: bytes.to_vec(),
        logprob: f64::from(lp),
        token: lossy(bytes),
        top_logprobs: alts
            .iter()
            .map(|a| TopLogprob {
                bytes: a.bytes.clone(),
                logprob: f64::from(a.logprob),
                token: lossy(&a.bytes),
            })
            .collect(),
    }
}

impl Assembly {
    /// Folds an event in; `Err` if the worker failed.
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
                signature,
                ..
            } => {
                self.text.push_str(text);
                self.ending = Some(Ending {
                    finish: *finish,
                    digest: digest.clone(),
                    audit_digest: audit_digest.clone(),
                    transcript_id: transcript_id.clone(),
                    signature: signature.clone(),
                });
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

fn provenance(sub: &Submitted, c: &Assembly) -> Provenance {
    let (digest, audit_digest, transcript_id, signature) = match &c.ending {
        Some(e) => (
            e.digest.clone(),
            e.audit_digest.clone(),
            e.transcript_id.clone(),
            e.signature.clone(),
        ),
        None => Default::default(),
    };
    Provenance {
        audit_digest,
        digest,
        prompt_token_ids: sub.accepted.prompt_ids.clone(),
        seed: sub.accepted.seed,
        token_ids: c.ids.clone(),
        transcript_id,
        signature,
    }
}

/// `finish` as `finish_reason`: `"tool_calls"` for an answer that ended
/// (not cut) after making calls.
fn finish_reason(finish: Finish, calls: usize) -> &'static str {
    match finish {
        Finish::Stop if calls > 0 => "tool_calls",
        f => f.as_str(),
    }
}

/// Choice `index` (of prompt `sub`, the request's choice `local`) of a
/// whole response.
fn whole_choice(head: &Head, index: usize, local: usize, sub: &Submitted, c: &Assembly) -> Choice {
    let chat = head.kind == Kind::Chat;
    let text = c.text.clone();
    let (content, calls) = match &head.tools {
        Some(choice) => super::tools::split_whole(choice, &text),
        None => (Some(text.clone()), Vec::new()),
    };
    let tool_calls = (!calls.is_empty()).then(|| {
        calls
            .iter()
            .enumerate()
            .map(|(k, (name, arguments))| ToolCall {
                function: FunctionCall {
                    arguments: arguments.clone(),
                    name: Some(name.clone()),
                },
                id: Some(call_id(sub, local, k)),
                index: None,
                kind: Some("function"),
            })
            .collect()
    });
    Choice {
        delta: None,
        detllm: Some(Detllm::Provenance(provenance(sub, c))),
        finish_reason: c
            .ending
            .as_ref()
            .map(|e| finish_reason(e.finish, calls.len())),
        index,
        logprobs: head.logprobs.map(|_| Logprobs::of(chat, &c.logprobs)),
        message: chat.then_some(Message {
            content,
            role: Some("assistant"),
            tool_calls,
        }),
        text: (!chat).then_some(text),
    }
}

/// The id of call `call` of the request's choice `local`.
fn call_id(sub: &Submitted, local: usize, call: usize) -> String {
    super::tools::call_id(&sub.accepted.prompt_ids, sub.accepted.seed, local, call)
}

/// `v` as JSON text (the response types always serialize: string keys only).
fn json_text<T: Serialize>(v: &T) -> String {
    serde_json::to_string(v).unwrap_or_default()
}

/// One server-sent event holding `v` as JSON.
fn sse_json<T: Serialize>(v: &T) -> SseEvent {
    SseEvent::default().data(json_text(v))
}

async fn collect_response(
    st: Shared,
    head: Head,
    mut subs: Vec<Submitted>,
    mut guard: CancelGuard,
) -> Result<Response, ApiError> {
    let mut all: Vec<Vec<Assembly>> = Vec::new();
    let mut usage = Usage::default();
    for sub in &mut subs {
        let mut choices = sub.assemblies();
        while choices.iter().any(|c| c.ending.is_none()) {
            let ev = sub
                .next()
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
        for (local, c) in choices.iter().enumerate() {
            out.push(whole_choice(&head, out.len(), local, sub, c));
        }
    }
    guard.disarm(); // every request finished: nothing to cancel
    st.metrics.request(Outcome::Ok);
    Ok(Json(head.wrap(false, out, Some(usage))).into_response())
}

/// A streamed choice's state: whether its first chunk went out, and (for
/// a tools request) its splitter into prose and calls.
struct StreamedChoice {
    started: bool,
    tools: Option<super::tools::Splitter>,
}

/// The `delta` of `text` (a chunk's new text): the text itself, or for a
/// tools request the prose and call parts it completes; and the calls
/// begun so far.
fn chunk_delta(
    sub: &Submitted,
    local: usize,
    s: &mut StreamedChoice,
    text: String,
    last: bool,
) -> (Message, usize) {
    let role = (!s.started).then_some("assistant");
    s.started = true;
    let Some(split) = s.tools.as_mut() else {
        return (
            Message {
                content: Some(text),
                role,
                tool_calls: None,
            },
            0,
        );
    };
    let mut p = split.feed(&text);
    if last {
        let rest = split.finish();
        p.content.push_str(&rest.content);
        p.calls.extend(rest.calls);
    }
    let calls: Vec<ToolCall> = p
        .calls
        .into_iter()
        .map(|d| ToolCall {
            id: d.name.is_some().then(|| call_id(sub, local, d.index)),
            kind: d.name.is_some().then_some("function"),
            function: FunctionCall {
                arguments: d.arguments,
                name: d.name,
            },
            index: Some(d.index),
        })
        .collect();
    let content = (!p.content.is_empty() || !split.in_calls()).then_some(p.content);
    let msg = Message {
        content,
        role,
        tool_calls: (!calls.is_empty()).then_some(calls),
    };
    (msg, split.calls())
}

/// The streamed choice of one event for the request's choice `local`
/// (`index` in the response; `None` for a failure); a choice's last chunk
/// carries its provenance (`prov`).
fn chunk_choice(
    head: &Head,
    (index, local): (usize, usize),
    sub: &Submitted,
    state: &mut StreamedChoice,
    ev: &Event,
    prov: Option<Provenance>,
) -> Option<Choice> {
    let (text, lp, finish, detllm) = match ev {
        Event::Token {
            id,
            bytes,
            text,
            logprob,
            ..
        } => (
            text.clone(),
            logprob.as_ref().map(|(l, a)| token_logprob(bytes, *l, a)),
            None,
            Some(Detllm::Token { token_id: *id }),
        ),
        Event::Done { finish, text, .. } => (
            text.clone(),
            None,
            Some(*finish),
            prov.map(Detllm::Provenance),
        ),
        Event::Failed(_) => return None,
    };
    let chat = head.kind == Kind::Chat;
    let (delta, calls) = chunk_delta(sub, local, state, text.clone(), finish.is_some());
    Some(Choice {
        delta: chat.then_some(delta),
        detllm,
        finish_reason: finish.map(|f| finish_reason(f, calls)),
        index,
        logprobs: lp.map(|l| Logprobs::of(chat, &[l])),
        message: None,
        text: (!chat).then_some(text),
    })
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
            let mut states: Vec<StreamedChoice> = (0..sub.n)
                .map(|_| StreamedChoice {
                    started: false,
                    tools: head.tools.as_ref().map(super::tools::Splitter::new),
                })
                .collect();
            // A resumed choice's first chunk (and its role) went out before the cut.
            if let Some(s) = states.first_mut() {
                s.started = !sub.resumed.is_empty();
            }
            let mut choices = sub.assemblies();
            usage.prompt_tokens += sub.accepted.prompt_ids.len();
            usage.completion_tokens += sub.resumed.len();
            while open > 0 {
                let Some(ev) = sub.next().await else {
                    ok = false;
                    break;
                };
                if let Event::Failed(e) = &ev {
                    let _ = tx.send(Ok(sse_json(&e.body())));
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
                        Some(provenance(&sub, &choices[i]))
                    }
                    Event::Failed(_) => None,
                };
                if let Some(c) = chunk_choice(&head, (base + i, i), &sub, &mut states[i], &ev, prov)
                    && tx
                        .send(Ok(sse_json(&head.wrap(true, vec![c], None))))
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
            let last = head.wrap(true, Vec::new(), Some(usage));
            let _ = tx.send(Ok(sse_json(&last)));
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

async fn tokenize(
    State(st): State<Shared>,
    ApiJson(req): ApiJson<TokenizeRequest>,
) -> Result<Json<Tokens>, ApiError> {
    let tokens = ask(&st, |reply| Command::Tokenize {
        text: req.content,
        special: req.add_special,
        reply,
    })
    .await??;
    Ok(Json(Tokens { tokens }))
}

async fn detokenize(
    State(st): State<Shared>,
    ApiJson(req): ApiJson<DetokenizeRequest>,
) -> Result<Json<Detokenized>, ApiError> {
    let content = ask(&st, |reply| Command::Detokenize {
        tokens: req.tokens,
        reply,
    })
    .await??;
    Ok(Json(Detokenized { content }))
}

/// `GET /v1/audit/key`: the public key receipts are signed with.
async fn audit_key(State(st): State<Shared>) -> Result<Response, ApiError> {
    match &st.public_key {
        Some(key) => {
            Ok(Json(serde_json::json!({ "scheme": "ed25519", "public_key": key })).into_response())
        }
        None => Err(ApiError::not_found(
            "this server signs no receipts (start it with --signing-key FILE)",
        )),
    }
}

async fn transcript(State(st): State<Shared>, PathId(id): PathId) -> Result<Response, ApiError> {
    let kept = ask(&st, |reply| Command::Transcript {
        id: id.clone(),
        reply,
    })
    .await?;
    match kept {
        // The bytes `detllm generate --transcript` would write.
        Some(text) => Ok(([(header::CONTENT_TYPE, "application/json")], text).into_response()),
        None => Err(ApiError::not_found(format!(
            "no transcript {id} (not in the audit store; with --audit-db none only the most recent are kept)"
        ))),
    }
}

/// The router in process (`tower::ServiceExt::oneshot`, no socket) over a
/// worker running the synthetic model (`SynthSpec::TINY`; its stand-in
/// vocabulary has one token, id 0, and encodes no text): every bad-input
/// case of docs/SERVER.md's error table gets its status, `error.type`,
/// `error.param` (and `code`), and a good request is served.
#[cfg(test)]
mod tests {
    use super::*;
    use crate::serve::{ServeArgs, app_state, metrics::Metrics, worker, worker_config};
    use axum::body::Body;
    use axum::http::HeaderMap;
    use clap::Parser;
    use detllm::model::synth::{SynthSpec, synth_vec};
    use serde_json::{Value, json};
    use std::path::PathBuf;
    use std::sync::OnceLock;
    use tower::ServiceExt;

    #[derive(Parser)]
    struct Flags {
        #[command(flatten)]
        serve: ServeArgs,
    }

    /// The synthetic model, written once per test process.
    fn synth_model() -> &'static PathBuf {
        static PATH: OnceLock<PathBuf> = OnceLock::new();
        PATH.get_or_init(|| {
            let dir = std::env::temp_dir().join(format!("detllm-router-{}", std::process::id()));
            std::fs::create_dir_all(&dir).expect("temp dir");
            let path = dir.join("synth.gguf");
            let bytes = synth_vec(&SynthSpec::TINY).expect("synthetic model");
            std::fs::write(&path, bytes).expect("write the synthetic model");
            path
        })
    }

    /// The router of `detllm serve --model SYNTH FLAGS…` (`--ctx 64` unless
    /// given) with its own worker thread.
    fn app(flags: &[&str]) -> Router {
        router(state(flags))
    }

    /// The state of [`app`]'s router.
    fn state(flags: &[&str]) -> Shared {
        let model = synth_model().to_str().expect("UTF-8 temp path");
        let mut argv = vec!["serve", "--model", model];
        if !flags.contains(&"--ctx") {
            argv.extend(["--ctx", "64"]);
        }
        if !flags.contains(&"--audit-db") {
            argv.extend(["--audit-db", "none"]);
        }
        argv.extend_from_slice(flags);
        let args = Flags::try_parse_from(argv).expect("flags").serve;
        let metrics = Arc::new(Metrics::default());
        let (commands, received) = std::sync::mpsc::channel();
        let cfg = worker_config(&args).expect("worker config");
        let loaded = worker::start(cfg, received, metrics.clone()).expect("worker");
        Arc::new(app_state(&args, commands, metrics, &loaded))
    }

    /// One request through the router: status, headers, body text.
    async fn send(
        app: &Router,
        method: &str,
        path: &str,
        body: Body,
        headers: &[(&str, &str)],
    ) -> (StatusCode, HeaderMap, String) {
        let mut req = Request::builder().method(method).uri(path);
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        let req = req.body(body).expect("request");
        let r = app.clone().oneshot(req).await.expect("infallible");
        let (parts, body) = r.into_parts();
        let bytes = axum::body::to_bytes(body, usize::MAX).await.expect("body");
        (parts.status, parts.headers, lossy(&bytes))
    }

    async fn post(app: &Router, path: &str, body: &str) -> (StatusCode, Value) {
        let (status, _, text) = send(app, "POST", path, Body::from(body.to_string()), &[]).await;
        let v = serde_json::from_str(&text).unwrap_or_else(|_| panic!("not JSON: {text}"));
        (status, v)
    }

    /// Asserts `v` is an OpenAI error of `kind` naming `param` (and `code`).
    fn assert_error(v: &Value, kind: &str, param: Option<&str>, code: Option<&str>, what: &str) {
        let e = &v["error"];
        assert!(
            e["message"].as_str().is_some_and(|m| !m.is_empty()),
            "{what}: {v}"
        );
        assert_eq!(e["type"], kind, "{what}: {v}");
        assert_eq!(e["param"], json!(param), "{what}: {v}");
        assert_eq!(e["code"], json!(code), "{what}: {v}");
    }

    const CHAT: &str = "/v1/chat/completions";
    const TEXT: &str = "/v1/completions";
    const INVALID: &str = "invalid_request_error";

    /// A bad request and its answer: `(route, body, status, param, code)`.
    type Case = (
        &'static str,
        String,
        u16,
        Option<&'static str>,
        Option<&'static str>,
    );

    /// Every bad request of the error table.
    fn bad_requests() -> Vec<Case> {
        let m = json!([{"role": "user", "content": "hi"}]);
        let chat = |extra: Value| {
            let mut b = json!({"messages": m});
            for (k, v) in extra.as_object().expect("object") {
                b[k] = v.clone();
            }
            b.to_string()
        };
        let text = |b: Value| b.to_string();
        vec![
            (CHAT, "{bad json".into(), 400, None, None),
            (CHAT, "[]".into(), 400, None, None),
            (CHAT, "".into(), 400, None, None),
            (
                CHAT,
                json!({"messages": "x"}).to_string(),
                400,
                Some("messages"),
                None,
            ),
            (
                CHAT,
                json!({"messages": []}).to_string(),
                400,
                Some("messages"),
                None,
            ),
            (CHAT, json!({}).to_string(), 400, Some("messages"), None),
            (
                CHAT,
                json!({"messages": [{"role": "robot", "content": "x"}]}).to_string(),
                400,
                Some("messages"),
                None,
            ),
            (
                CHAT,
                json!({"messages": [{"role": "user", "content": [{"type": "image_url"}]}]})
                    .to_string(),
                400,
                Some("messages"),
                None,
            ),
            // The stand-in vocabulary encodes no text.
            (CHAT, chat(json!({})), 400, Some("prompt"), None),
            (
                CHAT,
                chat(json!({"temperature": "hot"})),
                400,
                Some("temperature"),
                None,
            ),
            (
                CHAT,
                chat(json!({"temperature": -1})),
                400,
                Some("temperature"),
                None,
            ),
            (CHAT, chat(json!({"top_p": 2})), 400, Some("top_p"), None),
            (CHAT, chat(json!({"top_k": "x"})), 400, Some("top_k"), None),
            (CHAT, chat(json!({"min_p": 1.5})), 400, Some("min_p"), None),
            (
                CHAT,
                chat(json!({"repeat_penalty": 0})),
                400,
                Some("repeat_penalty"),
                None,
            ),
            (
                CHAT,
                chat(json!({"max_tokens": 0})),
                400,
                Some("max_tokens"),
                None,
            ),
            (
                CHAT,
                chat(json!({"max_tokens": "many"})),
                400,
                Some("max_tokens"),
                None,
            ),
            (CHAT, chat(json!({"n": 99})), 400, Some("n"), None),
            (CHAT, chat(json!({"n": 0})), 400, Some("n"), None),
            (
                CHAT,
                chat(json!({"top_logprobs": 3})),
                400,
                Some("top_logprobs"),
                None,
            ),
            (
                CHAT,
                chat(json!({"logprobs": true, "top_logprobs": 21})),
                400,
                Some("top_logprobs"),
                None,
            ),
            (
                CHAT,
                chat(json!({"logprobs": 3})),
                400,
                Some("logprobs"),
                None,
            ),
            (
                CHAT,
                chat(json!({"stop": ["a", "b", "c", "d", "e"]})),
                400,
                Some("stop"),
                None,
            ),
            (CHAT, chat(json!({"stop": ""})), 400, Some("stop"), None),
            (CHAT, chat(json!({"seed": -5})), 400, Some("seed"), None),
            (
                CHAT,
                chat(json!({"presence_penalty": 0.5})),
                400,
                Some("presence_penalty"),
                None,
            ),
            (
                CHAT,
                chat(json!({"frequency_penalty": 1})),
                400,
                Some("frequency_penalty"),
                None,
            ),
            (
                CHAT,
                chat(json!({"stream": "yes"})),
                400,
                Some("stream"),
                None,
            ),
            (
                CHAT,
                chat(json!({"model": "gpt-4o"})),
                404,
                Some("model"),
                Some("model_not_found"),
            ),
            (
                TEXT,
                text(json!({"max_tokens": 5})),
                400,
                Some("prompt"),
                None,
            ),
            (
                TEXT,
                text(json!({"prompt": [0, 0, 999999]})),
                400,
                Some("prompt"),
                None,
            ),
            (TEXT, text(json!({"prompt": []})), 400, Some("prompt"), None),
            (
                TEXT,
                text(json!({"prompt": {"a": 1}})),
                400,
                Some("prompt"),
                None,
            ),
            (
                TEXT,
                text(json!({"prompt": [0], "max_tokens": 100000})),
                400,
                Some("max_tokens"),
                None,
            ),
            (
                TEXT,
                text(json!({"prompt": [[0], [0], [0]], "n": 3})),
                400,
                Some("n"),
                None,
            ),
            (
                TEXT,
                text(json!({"prompt": [0], "logprobs": true})),
                400,
                Some("logprobs"),
                None,
            ),
            (
                TEXT,
                text(json!({"prompt": [0], "logprobs": 21})),
                400,
                Some("logprobs"),
                None,
            ),
            (
                TEXT,
                text(json!({"prompt": [0], "echo": true})),
                400,
                Some("echo"),
                None,
            ),
            (
                TEXT,
                text(json!({"prompt": [0], "suffix": "x"})),
                400,
                Some("suffix"),
                None,
            ),
            ("/v1/nope", "{}".into(), 404, None, None),
            (
                "/tokenize",
                json!({"content": 5}).to_string(),
                400,
                Some("content"),
                None,
            ),
            (
                "/tokenize",
                json!({"content": "hi"}).to_string(),
                400,
                Some("prompt"),
                None,
            ),
            (
                "/detokenize",
                json!({"tokens": [999999]}).to_string(),
                400,
                Some("tokens"),
                None,
            ),
            (
                "/detokenize",
                json!({"tokens": "x"}).to_string(),
                400,
                Some("tokens"),
                None,
            ),
        ]
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn every_bad_request_gets_its_status_type_and_param() {
        let app = app(&[]);
        let cases = bad_requests();
        for (path, body, status, param, code) in &cases {
            let (got, v) = post(&app, path, body).await;
            let what = format!("{path} {body}");
            assert_eq!(got.as_u16(), *status, "{what}: {v}");
            assert_error(&v, INVALID, *param, *code, &what);
        }
        // Counted as invalid: each rejection on a completion route.
        let counted = cases
            .iter()
            .filter(|(p, ..)| *p == CHAT || *p == TEXT)
            .count();
        let (_, _, metrics) = send(&app, "GET", "/metrics", Body::empty(), &[]).await;
        let line = format!("detllm_requests_total{{outcome=\"invalid\"}} {counted}");
        assert!(metrics.lines().any(|l| l == line), "{line}\n{metrics}");
        // Still serving.
        let (status, _, _) = send(&app, "GET", "/health", Body::empty(), &[]).await;
        assert_eq!(status, StatusCode::OK);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn wrong_method_unknown_model_and_transcript_are_json_errors() {
        let app = app(&[]);
        let (status, _, text) = send(&app, "GET", CHAT, Body::empty(), &[]).await;
        assert_eq!(status, StatusCode::METHOD_NOT_ALLOWED);
        let v: Value = serde_json::from_str(&text).expect("JSON");
        assert_error(&v, INVALID, None, None, "GET chat");
        let (status, _, text) = send(&app, "GET", "/v1/models/gpt-4o", Body::empty(), &[]).await;
        assert_eq!(status, StatusCode::NOT_FOUND);
        let v: Value = serde_json::from_str(&text).expect("JSON");
        assert_error(&v, INVALID, Some("model"), Some("model_not_found"), "model");
        let (status, _, text) = send(&app, "GET", "/v1/transcripts/00", Body::empty(), &[]).await;
        assert_eq!(status, StatusCode::NOT_FOUND);
        let v: Value = serde_json::from_str(&text).expect("JSON");
        assert_error(&v, INVALID, None, None, "transcript");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn body_limits_are_413_and_408() {
        let app = app(&["--max-body", "64", "--timeout", "1"]);
        let big = format!("{{\"prompt\": [0], \"pad\": \"{}\"}}", "x".repeat(100));
        let (status, v) = post(&app, TEXT, &big).await;
        assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE, "{v}");
        assert_error(&v, INVALID, None, None, "413");
        // A body that never ends.
        let stalled = Body::from_stream(tokio_stream::pending::<Result<Vec<u8>, Infallible>>());
        let (status, _, text) = send(&app, "POST", TEXT, stalled, &[]).await;
        assert_eq!(status, StatusCode::REQUEST_TIMEOUT, "{text}");
        let v: Value = serde_json::from_str(&text).expect("JSON");
        assert_error(&v, INVALID, None, None, "408");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_api_key_guards_every_route_but_health() {
        let app = app(&["--api-key", "sesame"]);
        let (status, _, _) = send(&app, "GET", "/health", Body::empty(), &[]).await;
        assert_eq!(status, StatusCode::OK);
        for (method, path) in [("GET", "/v1/models"), ("GET", "/metrics"), ("POST", TEXT)] {
            let (status, _, text) = send(
                &app,
                method,
                path,
                Body::empty(),
                &[("authorization", "Bearer no")],
            )
            .await;
            assert_eq!(status, StatusCode::UNAUTHORIZED, "{path}");
            let v: Value = serde_json::from_str(&text).expect("JSON");
            assert_error(&v, INVALID, None, Some("invalid_api_key"), path);
        }
        let auth = [("authorization", "Bearer sesame")];
        let (status, _, _) = send(&app, "GET", "/v1/models", Body::empty(), &auth).await;
        assert_eq!(status, StatusCode::OK);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_full_queue_is_429_with_retry_after() {
        let app = app(&["--max-seqs", "1", "--max-queue", "0", "--ctx", "4096"]);
        // A long stream holds the one slot while the second request comes.
        let long = json!({"prompt": [0], "max_tokens": 4000, "stream": true}).to_string();
        let (status, _, body) = {
            let req = Request::builder()
                .method("POST")
                .uri(TEXT)
                .body(Body::from(long))
                .expect("request");
            let r = app.clone().oneshot(req).await.expect("infallible");
            (r.status(), (), r.into_body())
        };
        assert_eq!(status, StatusCode::OK);
        let short = json!({"prompt": [0], "max_tokens": 1}).to_string();
        let (status, headers, text) = send(&app, "POST", TEXT, Body::from(short), &[]).await;
        drop(body); // the client goes away: the stream is cancelled
        assert_eq!(status, StatusCode::TOO_MANY_REQUESTS, "{text}");
        assert_eq!(
            headers.get(header::RETRY_AFTER).map(|v| v.as_bytes()),
            Some(&b"1"[..])
        );
        let v: Value = serde_json::from_str(&text).expect("JSON");
        assert_error(
            &v,
            "rate_limit_error",
            None,
            Some("rate_limit_exceeded"),
            "429",
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_good_request_is_served_with_its_transcript() {
        let app = app(&[]);
        let body = json!({"prompt": [0, 0], "max_tokens": 3, "temperature": 0, "logprobs": 2});
        let (status, v) = post(&app, TEXT, &body.to_string()).await;
        assert_eq!(status, StatusCode::OK, "{v}");
        assert_eq!(v["object"], "text_completion");
        let c = &v["choices"][0];
        assert_eq!(c["finish_reason"], "length");
        assert_eq!(c["detllm"]["token_ids"].as_array().map(Vec::len), Some(3));
        assert_eq!(
            c["logprobs"]["token_logprobs"].as_array().map(Vec::len),
            Some(3)
        );
        assert_eq!(v["usage"]["total_tokens"], 5);
        let id = c["detllm"]["transcript_id"].as_str().expect("id");
        let path = format!("/v1/transcripts/{id}");
        let (status, headers, text) = send(&app, "GET", &path, Body::empty(), &[]).await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(headers[header::CONTENT_TYPE], "application/json");
        let t = crate::transcript::parse(&text).expect("a transcript");
        assert_eq!(t.prompt_ids, [0, 0]);
        assert_eq!(t.final_digest, id);
    }

    /// The worker never waits for a grammar: with every compile permit
    /// held (compiles that never end), a constrained request stays
    /// unanswered while a plain one is served; freed, it is answered.
    /// (Compiled on the worker, the constrained request would be answered
    /// at once, permits or not.)
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_grammar_being_compiled_holds_no_request_back() {
        let st = state(&[]);
        let app = router(st.clone());
        let permits = st.compiles.permits().clone();
        let all = super::super::compile::MAX_CONCURRENT_COMPILES as u32;
        let held = permits.acquire_many_owned(all).await.expect("permits");
        let schema = json!({"type": "object", "properties": {"a": {"type": "integer"}}});
        let constrained = json!({"prompt": [0], "max_tokens": 2,
            "response_format": {"type": "json_schema", "json_schema": {"schema": schema}}});
        let waiting = tokio::spawn({
            let app = app.clone();
            async move { post(&app, TEXT, &constrained.to_string()).await }
        });
        let plain = json!({"prompt": [0], "max_tokens": 2}).to_string();
        let served = tokio::time::timeout(Duration::from_secs(60), post(&app, TEXT, &plain));
        let (status, v) = served
            .await
            .expect("the plain request waited for a compile");
        assert_eq!(status, StatusCode::OK, "{v}");
        let mut waiting = waiting;
        let early = tokio::time::timeout(Duration::from_millis(500), &mut waiting).await;
        assert!(
            early.is_err(),
            "the constrained request was answered without its compile: {early:?}"
        );
        drop(held);
        let (status, v) = waiting.await.expect("the constrained request");
        // The synthetic model has no end-of-generation token: its compiler
        // refuses every grammar, a 400 naming the field and the reason.
        assert_eq!(status, StatusCode::BAD_REQUEST, "{v}");
        assert_error(&v, INVALID, Some("response_format"), None, "schema");
        let why = v["error"]["message"].as_str().unwrap_or_default();
        assert!(why.contains("no end-of-generation token"), "{why}");
        let (status, v) = post(&app, TEXT, &plain).await;
        assert_eq!(status, StatusCode::OK, "{v}");
    }
}
