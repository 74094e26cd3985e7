//! The OpenAI request and response shapes `detllm serve` speaks, and their
//! validation into one internal [`GenRequest`].
//!
//! Parsing is serde's; every rejection is an [`ApiError`] naming the
//! parameter (`400 invalid_request_error`, `param: "temperature"`), never a
//! panic. Sampling floats are read from the JSON number's own digits and
//! rounded once to binary32 (`str::parse::<f32>`, as the CLI's flags are),
//! so `"temperature": 0.8` samples exactly as `--temperature 0.8`.
//!
//! The response shapes below are typed too: every body the server sends is
//! one of them (or `error::ErrorBody`), serialized by serde.

#![forbid(unsafe_code)]

use super::error::ApiError;
use detllm::F32;
use detllm::sample::SamplingParams;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use std::collections::BTreeMap;

/// Most completions one request may ask for (`n`).
pub const MAX_N: usize = 8;
/// Most `top_logprobs` per token (OpenAI's bound).
pub const MAX_TOP_LOGPROBS: usize = 20;
/// Most stop strings (OpenAI's bound).
pub const MAX_STOP: usize = 4;
/// Longest stop string in bytes.
pub const MAX_STOP_BYTES: usize = 256;

/// A JSON number kept as written, parsed once into binary32.
#[derive(Debug)]
pub struct Decimal(Box<RawValue>);

impl<'de> Deserialize<'de> for Decimal {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let raw = Box::<RawValue>::deserialize(d)?;
        let text = raw.get();
        if text.starts_with('"') || text.parse::<f64>().is_err() {
            return Err(serde::de::Error::custom("expected a number"));
        }
        Ok(Decimal(raw))
    }
}

impl Decimal {
    /// The number rounded once to binary32 (round to nearest even).
    fn to_f32(&self) -> F32 {
        let x: f32 = self.0.get().parse().unwrap_or(f32::NAN);
        F32::from_bits(x.to_bits())
    }
}

/// `stop`: one string or up to four.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub enum Stop {
    /// One stop string.
    One(String),
    /// Several.
    Many(Vec<String>),
}

/// `stream_options`.
#[derive(Debug, Default, Deserialize)]
pub struct StreamOptions {
    /// Send a last chunk with `usage` before `[DONE]`.
    #[serde(default)]
    pub include_usage: bool,
}

/// One chat message's content: a string or text parts.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub enum Content {
    /// Plain text.
    Text(String),
    /// `[{"type": "text", "text": "..."}]`.
    Parts(Vec<ContentPart>),
}

/// A content part (only text is supported).
#[derive(Debug, Deserialize)]
pub struct ContentPart {
    /// Must be `"text"`.
    #[serde(rename = "type")]
    pub kind: String,
    /// The text.
    #[serde(default)]
    pub text: String,
}

/// One chat message.
#[derive(Debug, Deserialize)]
pub struct ChatMessage {
    /// `system`, `user`, `assistant` or `tool` (`developer` is taken as
    /// `system`; a `tool` message's `tool_call_id` is accepted, and shown
    /// by no template).
    pub role: String,
    /// The text (`null` or absent: an assistant message with `tool_calls`).
    #[serde(default)]
    pub content: Option<Content>,
    /// An assistant message's calls: `[{"id", "type": "function",
    /// "function": {"name", "arguments": JSON text}}]`.
    #[serde(default)]
    pub tool_calls: Option<serde_json::Value>,
}

/// `prompt`: text, token ids, or a list of either.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub enum Prompt {
    /// One text prompt.
    Text(String),
    /// One prompt as token ids.
    Tokens(Vec<u32>),
    /// Several text prompts.
    Texts(Vec<String>),
    /// Several prompts as token ids.
    TokenLists(Vec<Vec<u32>>),
}

/// `logprobs`: a flag (chat) or a count of alternatives (completions).
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub enum LogprobsParam {
    /// Chat: report log-probabilities (`top_logprobs` gives the count).
    Flag(bool),
    /// Completions: report them with this many alternatives.
    Count(u64),
}

/// The body of `POST /v1/chat/completions` and `POST /v1/completions`:
/// every field either takes, in one struct (no `flatten`, so that the
/// sampling numbers keep their digits).
#[derive(Debug, Default, Deserialize)]
pub struct RequestBody {
    /// Chat: the conversation.
    pub messages: Option<Vec<ChatMessage>>,
    /// Completions: the prompt(s).
    pub prompt: Option<Prompt>,
    /// Model name (any value is accepted if it names the loaded model or is absent).
    pub model: Option<String>,
    /// Most tokens to generate.
    pub max_tokens: Option<u64>,
    /// Newer name of `max_tokens` (chat).
    pub max_completion_tokens: Option<u64>,
    /// 0 = greedy (default 0.8, llama.cpp's).
    pub temperature: Option<Decimal>,
    /// Nucleus threshold (default 0.95, llama.cpp's; 1 = off).
    pub top_p: Option<Decimal>,
    /// Extension: keep the k most likely (default 40, llama.cpp's; 0 = off).
    pub top_k: Option<u32>,
    /// Extension: minimum relative probability (default 0.05, llama.cpp's; 0 = off).
    pub min_p: Option<Decimal>,
    /// Extension: repetition penalty (default 1 = off).
    pub repeat_penalty: Option<Decimal>,
    /// Extension: resume a cut stream — the token ids already received;
    /// only what follows them is sent (`n = 1`; docs/SERVER.md).
    pub resume_token_ids: Option<Vec<u32>>,
    /// Seed of the request's generator; the server picks one if absent and returns it.
    pub seed: Option<u64>,
    /// Completions per prompt.
    pub n: Option<u64>,
    /// Stop strings.
    pub stop: Option<Stop>,
    /// Server-sent events.
    #[serde(default)]
    pub stream: bool,
    /// Streaming options.
    pub stream_options: Option<StreamOptions>,
    /// OpenAI penalties; only 0 is supported.
    pub presence_penalty: Option<Decimal>,
    /// OpenAI penalties; only 0 is supported.
    pub frequency_penalty: Option<Decimal>,
    /// Log-probabilities (chat: a flag; completions: the alternatives' count).
    pub logprobs: Option<LogprobsParam>,
    /// Chat: alternatives per token (≤ 20; needs `logprobs: true`).
    pub top_logprobs: Option<u64>,
    /// Extension (as llama-server's): do not stop at end-of-generation tokens.
    #[serde(default)]
    pub ignore_eos: bool,
    /// Completions: not supported (must be false).
    #[serde(default)]
    pub echo: bool,
    /// Completions: not supported (must be absent).
    pub suffix: Option<String>,
    /// OpenAI: `{"type": "text" | "json_object" | "json_schema", ...}`
    /// (checked by [`super::structured`], as the six below).
    pub response_format: Option<serde_json::Value>,
    /// llama-server: a JSON schema the answer must follow.
    pub json_schema: Option<serde_json::Value>,
    /// llama-server: a GBNF grammar.
    pub grammar: Option<serde_json::Value>,
    /// OpenAI: function tools.
    pub tools: Option<serde_json::Value>,
    /// OpenAI: `none`, `auto`, `required` or a named function.
    pub tool_choice: Option<serde_json::Value>,
    /// OpenAI: several calls in one answer (default true).
    pub parallel_tool_calls: Option<serde_json::Value>,
    /// OpenAI (legacy): functions.
    pub functions: Option<serde_json::Value>,
    /// OpenAI (legacy): `function_call`.
    pub function_call: Option<serde_json::Value>,
}

/// A prompt before tokenization.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PromptInput {
    /// Chat messages `(role, content)`, rendered with the model's template.
    Chat(Vec<(String, String)>),
    /// Text, tokenized as `detllm generate --prompt` does (BOS as the model asks).
    Text(String),
    /// Token ids, used as given.
    Tokens(Vec<u32>),
}

/// One request as the engine runs it: everything that decides the output.
#[derive(Debug, Clone)]
pub struct GenRequest {
    /// The prompt.
    pub prompt: PromptInput,
    /// Most tokens to generate (`None`: up to the context).
    pub max_tokens: Option<usize>,
    /// Sampling, seed included.
    pub params: SamplingParams,
    /// Completions of this prompt.
    pub n: usize,
    /// Stop strings.
    pub stop: Vec<String>,
    /// Alternatives per token to report, if log-probabilities are wanted.
    pub logprobs: Option<usize>,
    /// Server-sent events.
    pub stream: bool,
    /// A usage chunk before `[DONE]`.
    pub include_usage: bool,
    /// Generate through end-of-generation tokens (benchmarks).
    pub ignore_eos: bool,
    /// A JSON schema the answer must follow, and the field that gave it
    /// (compiled by the HTTP side before it is submitted, `super::compile`).
    pub constraint: Option<(&'static str, crate::constrain::Spec)>,
    /// Ids the client already holds (`resume_token_ids`): checked against
    /// the run, not sent again.
    pub resume: Vec<u32>,
    /// The function tools shown to the model (chat; `tool_choice` not `none`).
    pub tools: Option<super::tools::ToolSpec>,
}

/// What both endpoints share, validated; `seed` is the server's pick when
/// the request has none.
fn common(c: &RequestBody, default_max: Option<u64>, seed: u64) -> Result<GenRequest, ApiError> {
    let mut constraint = super::structured::constraint(c)?;
    let tools = super::tools::from_body(c)?;
    if let Some(t) = &tools {
        if let Some((field, _)) = constraint {
            return Err(ApiError::invalid(
                "tools",
                format!("give either tools or {field}, not both"),
            ));
        }
        let spec = crate::constrain::Spec {
            kind: crate::constrain::Kind::Tools,
            text: t.grammar(),
        };
        constraint = Some(("tools", spec));
    }
    for (name, v) in [
        ("presence_penalty", &c.presence_penalty),
        ("frequency_penalty", &c.frequency_penalty),
    ] {
        if let Some(v) = v
            && !v.to_f32().is_zero()
        {
            return Err(ApiError::invalid(
                name,
                format!("{name} is not supported (only 0); use repeat_penalty"),
            ));
        }
    }
    // Each sampling field not given takes llama.cpp's default (as
    // llama-server does): temperature 0.8, top-k 40, top-p 0.95, min-p 0.05.
    let d = SamplingParams::LLAMA_DEFAULTS;
    let f = |v: &Option<Decimal>, default: F32| v.as_ref().map_or(default, Decimal::to_f32);
    let params = SamplingParams {
        temperature: f(&c.temperature, d.temperature),
        top_k: c.top_k.unwrap_or(d.top_k),
        top_p: f(&c.top_p, d.top_p),
        min_p: f(&c.min_p, d.min_p),
        repeat_penalty: f(&c.repeat_penalty, d.repeat_penalty),
        penalty_last_n: d.penalty_last_n,
        seed: c.seed.unwrap_or(seed),
    };
    check_sampling(c, &params)?;
    let max_tokens = match c.max_completion_tokens.or(c.max_tokens).or(default_max) {
        Some(0) => {
            return Err(ApiError::invalid(
                "max_tokens",
                "max_tokens must be at least 1",
            ));
        }
        Some(m) => Some(usize::try_from(m).unwrap_or(usize::MAX)),
        None => None,
    };
    let n = c.n.unwrap_or(1);
    if n == 0 || n > MAX_N as u64 {
        return Err(ApiError::invalid(
            "n",
            format!("n must be between 1 and {MAX_N}"),
        ));
    }
    let resume = c.resume_token_ids.clone().unwrap_or_default();
    if !resume.is_empty() && n != 1 {
        return Err(ApiError::invalid(
            "resume_token_ids",
            "resume_token_ids needs n = 1 (one choice to resume)",
        ));
    }
    Ok(GenRequest {
        prompt: PromptInput::Tokens(Vec::new()),
        max_tokens,
        params,
        n: n as usize,
        stop: stop_strings(&c.stop)?,
        logprobs: None,
        stream: c.stream,
        include_usage: c.stream_options.as_ref().is_some_and(|o| o.include_usage),
        ignore_eos: c.ignore_eos,
        constraint,
        resume,
        tools,
    })
}

/// Each sampling float in range, named when not.
fn check_sampling(c: &RequestBody, p: &SamplingParams) -> Result<(), ApiError> {
    let finite_non_negative = |x: F32| !(x.is_nan() || x.is_infinite() || x.is_sign_negative());
    let at_most_one = |x: F32| x.le(F32::ONE);
    let checks = [
        (
            "temperature",
            c.temperature.is_some(),
            finite_non_negative(p.temperature),
        ),
        (
            "top_p",
            c.top_p.is_some(),
            finite_non_negative(p.top_p) && at_most_one(p.top_p),
        ),
        (
            "min_p",
            c.min_p.is_some(),
            finite_non_negative(p.min_p) && at_most_one(p.min_p),
        ),
        (
            "repeat_penalty",
            c.repeat_penalty.is_some(),
            finite_non_negative(p.repeat_penalty) && !p.repeat_penalty.is_zero(),
        ),
    ];
    for (name, given, ok) in checks {
        if given && !ok {
            return Err(ApiError::invalid(name, format!("{name} is out of range")));
        }
    }
    Ok(())
}

fn stop_strings(stop: &Option<Stop>) -> Result<Vec<String>, ApiError> {
    let list = match stop {
        None => Vec::new(),
        Some(Stop::One(s)) => vec![s.clone()],
        Some(Stop::Many(v)) => v.clone(),
    };
    if list.len() > MAX_STOP {
        return Err(ApiError::invalid(
            "stop",
            format!("at most {MAX_STOP} stop strings"),
        ));
    }
    if list
        .iter()
        .any(|s| s.is_empty() || s.len() > MAX_STOP_BYTES)
    {
        return Err(ApiError::invalid(
            "stop",
            format!("stop strings must be 1 to {MAX_STOP_BYTES} bytes"),
        ));
    }
    Ok(list)
}

fn top_logprobs(n: u64, param: &'static str) -> Result<usize, ApiError> {
    if n > MAX_TOP_LOGPROBS as u64 {
        return Err(ApiError::invalid(
            param,
            format!("{param} must be between 0 and {MAX_TOP_LOGPROBS}"),
        ));
    }
    Ok(n as usize)
}

/// Message `i` as `(role, text)`: content parts joined, an assistant's
/// `tool_calls` rendered after its text ([`super::tools::assistant_with_calls`]).
fn chat_message(i: usize, m: ChatMessage) -> Result<(String, String), ApiError> {
    let bad = |what: String| ApiError::invalid("messages", format!("messages[{i}]{what}"));
    let role = match m.role.as_str() {
        "system" | "developer" => "system",
        "user" => "user",
        "assistant" => "assistant",
        "tool" => "tool",
        other => {
            return Err(bad(format!(
                ".role \"{other}\" is not system, user, assistant or tool"
            )));
        }
    };
    let text = match m.content {
        Some(Content::Text(t)) => t,
        Some(Content::Parts(parts)) => {
            let mut t = String::new();
            for p in parts {
                if p.kind != "text" {
                    return Err(bad(format!(
                        ": content part type \"{}\" is not supported",
                        p.kind
                    )));
                }
                t.push_str(&p.text);
            }
            t
        }
        None if role == "assistant" => String::new(),
        None => return Err(bad(".content is required".into())),
    };
    let calls = match m.tool_calls.filter(|c| !c.is_null()) {
        None => return Ok((role.to_string(), text)),
        Some(_) if role != "assistant" => {
            return Err(bad(
                ".tool_calls: only assistant messages have tool calls".into()
            ));
        }
        Some(serde_json::Value::Array(calls)) => calls,
        Some(_) => return Err(bad(".tool_calls must be an array".into())),
    };
    let mut parsed = Vec::with_capacity(calls.len());
    for (j, c) in calls.iter().enumerate() {
        let f = c.get("function");
        let name = f
            .and_then(|f| f.get("name"))
            .and_then(serde_json::Value::as_str);
        let args = f
            .and_then(|f| f.get("arguments"))
            .and_then(serde_json::Value::as_str);
        let (Some(name), Some(args)) = (name, args) else {
            return Err(bad(format!(
                ".tool_calls[{j}] needs function.name and function.arguments (a JSON string)"
            )));
        };
        let args: serde_json::Value = serde_json::from_str(args).map_err(|e| {
            bad(format!(
                ".tool_calls[{j}].function.arguments is not JSON: {e}"
            ))
        })?;
        parsed.push((name.to_string(), args));
    }
    let text = super::tools::assistant_with_calls(&text, &parsed);
    Ok((role.to_string(), text))
}

impl RequestBody {
    /// The validated chat request (`seed`: the server's pick if none is given).
    pub fn into_chat(self, seed: u64) -> Result<GenRequest, ApiError> {
        let mut g = common(&self, None, seed)?;
        let messages = match self.messages {
            Some(m) if !m.is_empty() => m,
            _ => {
                return Err(ApiError::invalid(
                    "messages",
                    "messages must be a non-empty array",
                ));
            }
        };
        let mut msgs = Vec::with_capacity(messages.len());
        for (i, m) in messages.into_iter().enumerate() {
            msgs.push(chat_message(i, m)?);
        }
        g.prompt = PromptInput::Chat(msgs);
        let wanted = match self.logprobs {
            None | Some(LogprobsParam::Flag(false)) => false,
            Some(LogprobsParam::Flag(true)) => true,
            Some(LogprobsParam::Count(_)) => {
                return Err(ApiError::invalid(
                    "logprobs",
                    "logprobs must be true or false",
                ));
            }
        };
        g.logprobs = match (wanted, self.top_logprobs) {
            (false, Some(_)) => {
                return Err(ApiError::invalid(
                    "top_logprobs",
                    "top_logprobs needs logprobs: true",
                ));
            }
            (false, None) => None,
            (true, k) => Some(top_logprobs(k.unwrap_or(0), "top_logprobs")?),
        };
        Ok(g)
    }

    /// The validated completion requests, one per prompt (`seed`: the
    /// server's pick if none is given).
    pub fn into_completions(self, seed: u64) -> Result<Vec<GenRequest>, ApiError> {
        if self.echo {
            return Err(ApiError::invalid("echo", "echo is not supported"));
        }
        if self.suffix.is_some() {
            return Err(ApiError::invalid("suffix", "suffix is not supported"));
        }
        // OpenAI's default for the legacy endpoint.
        let g = common(&self, Some(16), seed)?;
        if g.tools.is_some() {
            return Err(ApiError::invalid(
                "tools",
                "tools need /v1/chat/completions (messages)",
            ));
        }
        let logprobs = match self.logprobs {
            None => None,
            Some(LogprobsParam::Count(k)) => Some(top_logprobs(k, "logprobs")?),
            Some(LogprobsParam::Flag(_)) => {
                return Err(ApiError::invalid(
                    "logprobs",
                    "logprobs must be an integer (0 to 20)",
                ));
            }
        };
        let prompts: Vec<PromptInput> = match self.prompt {
            None => return Err(ApiError::invalid("prompt", "prompt is required")),
            Some(Prompt::Text(t)) => vec![PromptInput::Text(t)],
            Some(Prompt::Tokens(t)) => vec![PromptInput::Tokens(t)],
            Some(Prompt::Texts(v)) => v.into_iter().map(PromptInput::Text).collect(),
            Some(Prompt::TokenLists(v)) => v.into_iter().map(PromptInput::Tokens).collect(),
        };
        if prompts.is_empty() || prompts.len() > MAX_N {
            return Err(ApiError::invalid(
                "prompt",
                format!("between 1 and {MAX_N} prompts"),
            ));
        }
        if prompts.len() > 1 && !g.resume.is_empty() {
            return Err(ApiError::invalid(
                "resume_token_ids",
                "resume_token_ids needs one prompt (one choice to resume)",
            ));
        }
        if prompts.len() * g.n > MAX_N {
            return Err(ApiError::invalid(
                "n",
                format!("prompts × n must be at most {MAX_N}"),
            ));
        }
        Ok(prompts
            .into_iter()
            .map(|prompt| GenRequest {
                prompt,
                logprobs,
                stop: g.stop.clone(),
                ..g.clone()
            })
            .collect())
    }
}

// ---- Responses. Every body the server sends is one of these types. Their
// fields are declared in alphabetical order, the order the server has
// always written them in, and log-probabilities are the f32 widened to f64
// (printed as the f64's shortest form), so the bytes are unchanged.

/// `usage`.
#[derive(Debug, Clone, Copy, Default, Serialize, PartialEq, Eq)]
pub struct Usage {
    /// Generated tokens over all choices.
    pub completion_tokens: usize,
    /// Prompt tokens (per prompt, counted once however many completions).
    pub prompt_tokens: usize,
    /// The sum.
    pub total_tokens: usize,
}

/// One alternative in `top_logprobs`.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct TopLogprob {
    /// Its bytes.
    pub bytes: Vec<u8>,
    /// Its log-probability.
    pub logprob: f64,
    /// The token's text (lossy UTF-8).
    pub token: String,
}

/// One sampled token's log-probability (chat shape).
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct TokenLogprob {
    /// Its bytes.
    pub bytes: Vec<u8>,
    /// Its log-probability.
    pub logprob: f64,
    /// The token's text (lossy UTF-8).
    pub token: String,
    /// The most likely alternatives, most likely first (ties: lowest id).
    pub top_logprobs: Vec<TopLogprob>,
}

/// A choice's (or a chunk's) `logprobs`.
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(untagged)]
pub enum Logprobs {
    /// Chat: `{"content": [...]}`.
    Chat { content: Vec<TokenLogprob> },
    /// Completions: parallel arrays, the alternatives as `{token: logprob}`.
    Text {
        token_logprobs: Vec<f64>,
        tokens: Vec<String>,
        top_logprobs: Vec<BTreeMap<String, f64>>,
    },
}

impl Logprobs {
    /// `tokens` in the shape of `chat` (chat) or completions.
    pub fn of(chat: bool, tokens: &[TokenLogprob]) -> Logprobs {
        if chat {
            return Logprobs::Chat {
                content: tokens.to_vec(),
            };
        }
        Logprobs::Text {
            token_logprobs: tokens.iter().map(|l| l.logprob).collect(),
            tokens: tokens.iter().map(|l| l.token.clone()).collect(),
            top_logprobs: tokens
                .iter()
                .map(|l| {
                    l.top_logprobs
                        .iter()
                        .map(|t| (t.token.clone(), t.logprob))
                        .collect()
                })
                .collect(),
        }
    }
}

/// The `detllm` extension object of every choice: what makes it reproducible.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct Provenance {
    /// The audit chain's final digest (`detllm verify` re-checks it).
    pub audit_digest: String,
    /// SHA-256 of every logits row the choice was sampled from (as `detllm generate` prints).
    pub digest: String,
    /// Prompt token ids.
    pub prompt_token_ids: Vec<u32>,
    /// The seed the choice was sampled with (given or chosen by the server).
    pub seed: u64,
    /// Generated token ids.
    pub token_ids: Vec<u32>,
    /// `GET /v1/transcripts/{id}` returns the audit transcript.
    pub transcript_id: String,
    /// The receipt's Ed25519 signature, hex (`serve --signing-key`; its
    /// transcript holds the whole receipt).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub signature: Option<String>,
}

/// A choice's `detllm` object: the provenance, or in a streamed token's
/// chunk that token's id (what a client whose stream is cut resumes with,
/// `resume_token_ids`).
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
#[serde(untagged)]
pub enum Detllm {
    /// The whole choice's provenance.
    Provenance(Provenance),
    /// One streamed token.
    Token {
        /// Its id.
        token_id: u32,
    },
}

/// A chat message in a response, or a streamed chunk's `delta`.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct Message {
    /// The text (a chunk's: the part that became final with it); `null`
    /// in an answer (or a chunk) that is only tool calls.
    pub content: Option<String>,
    /// `"assistant"` (in a stream: in each choice's first chunk only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub role: Option<&'static str>,
    /// The answer's tool calls (a chunk's: their new parts).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_calls: Option<Vec<ToolCall>>,
}

/// One tool call of an answer, or a streamed part of one (`index` set,
/// `id`, `type` and `function.name` in its first part only).
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct ToolCall {
    pub function: FunctionCall,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// Which call a streamed part belongs to.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub index: Option<usize>,
    /// `"function"`.
    #[serde(rename = "type", skip_serializing_if = "Option::is_none")]
    pub kind: Option<&'static str>,
}

/// A call's function: its arguments as JSON text (a streamed part's: the
/// next fragment) and its name.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct FunctionCall {
    pub arguments: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

/// One choice of a response or of a streamed chunk: exactly one of
/// `delta` (chat chunk), `message` (chat response) and `text` (completions).
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Choice {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub delta: Option<Message>,
    /// In a response always; in a stream the choice's last chunk has the
    /// provenance and each token's chunk its token id.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detllm: Option<Detllm>,
    /// `"stop"`, `"length"`, or `null` while the choice runs.
    pub finish_reason: Option<&'static str>,
    pub index: usize,
    /// `null` unless asked for.
    pub logprobs: Option<Logprobs>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<Message>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
}

/// A whole response (`chat.completion`, `text_completion`) or one streamed
/// chunk (`chat.completion.chunk`, `text_completion`).
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Completion<'a> {
    pub choices: Vec<Choice>,
    /// Unix seconds (per response).
    pub created: u64,
    /// `chatcmpl-N` / `cmpl-N` (per response).
    pub id: &'a str,
    pub model: &'a str,
    pub object: &'static str,
    /// `detllm-v1+sha256:<model file SHA-256>`.
    pub system_fingerprint: &'a str,
    /// In a response always; in a stream only in the last chunk, if asked for.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
}

/// `GET /health`.
#[derive(Debug, Serialize)]
pub struct Health {
    /// `"ok"` or `"loading"`.
    pub status: &'static str,
}

/// One entry of `GET /v1/models`, and `GET /v1/models/{id}`.
#[derive(Debug, Serialize)]
pub struct ModelObject<'a> {
    pub created: u64,
    pub id: &'a str,
    pub object: &'static str,
    pub owned_by: &'static str,
}

impl ModelObject<'_> {
    /// The served model, named `id`.
    pub fn served(id: &str) -> ModelObject<'_> {
        ModelObject {
            created: 0,
            id,
            object: "model",
            owned_by: "detllm",
        }
    }
}

/// `GET /v1/models`.
#[derive(Debug, Serialize)]
pub struct ModelList<'a> {
    pub data: Vec<ModelObject<'a>>,
    pub object: &'static str,
}

/// `POST /tokenize`'s request.
#[derive(Debug, Deserialize)]
pub struct TokenizeRequest {
    /// The text.
    pub content: String,
    /// Add BOS/EOS as the model asks and parse special tokens (default true).
    #[serde(default = "yes")]
    pub add_special: bool,
}

fn yes() -> bool {
    true
}

/// `POST /tokenize`'s answer.
#[derive(Debug, Serialize)]
pub struct Tokens {
    pub tokens: Vec<u32>,
}

/// `POST /detokenize`'s request.
#[derive(Debug, Deserialize)]
pub struct DetokenizeRequest {
    pub tokens: Vec<u32>,
}

/// `POST /detokenize`'s answer.
#[derive(Debug, Serialize)]
pub struct Detokenized {
    /// The text (lossy UTF-8).
    pub content: String,
}
