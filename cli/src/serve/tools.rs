//! Function tools (`tools`, `tool_choice`, `parallel_tool_calls`): how the
//! tools reach the prompt, the grammar that makes the model's calls parse,
//! and how the generated text becomes `message.tool_calls`.
//!
//! **The call format** is Qwen2.5's (the "Hermes" format):
//! `<tool_call>\n{"name": "NAME", "arguments": ARGS}\n</tool_call>`, several
//! calls separated by `\n`. Every model answers in it; what differs is how
//! the tools are shown:
//!
//! * Qwen2.5 (its template has a tool format): the system turn becomes the
//!   system message (or Qwen's default one) followed by [`tools_text`] —
//!   the template's `# Tools` block with one `tojson` line per tool — byte
//!   for byte as the GGUF's Jinja template renders it (`tojson` as Hugging
//!   Face's renderer defines it: `json.dumps` with `", "` and `": "`, keys
//!   in the request's order, non-ASCII kept; see [`py_json`]). Tool
//!   results stay `tool` messages, which the template groups into a user
//!   turn of `<tool_response>` blocks.
//! * The generic format (SmolLM2, Gemma 3, plain ChatML: templates without
//!   tools): the same `# Tools` text appended, after a blank line, to the
//!   system message (SmolLM2: to its default system prompt when none is
//!   given); consecutive `tool` messages become one `user` message of
//!   `<tool_response>\n…\n</tool_response>` blocks joined by `\n`.
//!
//! In both, an assistant message's `tool_calls` are rendered as Qwen's
//! template renders them: after its content, each call as
//! `\n<tool_call>\n{"name": "N", "arguments": ARGS}\n</tool_call>` (ARGS:
//! the `arguments` string parsed and printed by [`py_json`]), the first
//! without its `\n` when there is no content.
//!
//! **The grammar** ([`ToolSpec::grammar`], llguidance's Lark): `required`
//! and a named function force calls whose `name` is one of the tools' (the
//! named one) and whose `arguments` follow that tool's `parameters` schema
//! (`%json`); with `parallel_tool_calls` (the default) one or more calls,
//! else exactly one. `auto` is nothing, the calls, or prose optionally
//! followed by `\n` and the calls: the prose is non-empty and holds no
//! `<tool_call>` anywhere ([`without`]'s regular expression), so the prose
//! ends at the first `<tool_call>` and the `\n` before it is the
//! separator. The split is the grammar's own, a pure function of the
//! tokens (the prose, its `\n` and the opener are one lexeme). `none`
//! shows no tools and constrains nothing.
//!
//! **The answer**: [`Splitter`] reads the text as it arrives (whole or
//! streamed, the same result however it is cut) into content and calls.
//! `auto`'s prose is streamed as it comes but for a tail that could begin
//! `\n<tool_call>`, held back until it does or cannot (so no content delta
//! holds part of the opener); the content is the prose as written without
//! the separating `\n` (prose that ends in `\n` before it keeps its own),
//! so content and calls rendered back as below give the answer's text.
//! Call ids are [`call_id`]s, a hash of the request (prompt ids, seed) and
//! the choice and call indexes.
//!
//! Verified by the unit tests below (validation, rendering, the grammar's
//! text, the grammar run through llguidance byte by byte and in longer
//! tokens on texts it must take and refuse, the prose expression against
//! texts with and without the opener, the splitter against every cut of
//! calls-only and prose-then-calls inputs and its hold-back, the Qwen
//! rendering against its Jinja template's golden
//! `tests/data/tool_templates.json`) and `cli/tests/serve.rs` (calls on
//! real models through the `openai` client, a tool transcript through
//! `detllm verify`).

#![forbid(unsafe_code)]

use super::api::RequestBody;
use super::error::ApiError;
use detllm::tokenizer::chat::{DEFAULT_SYSTEM, QWEN_SYSTEM, Template};
use serde::Serialize;
use serde_json::Value;
use sha2::{Digest, Sha256};

/// Most tools one request may give.
pub const MAX_TOOLS: usize = 128;

/// What opens a call.
pub const CALL_OPEN: &str = "<tool_call>";
/// What follows [`CALL_OPEN`] up to the function's name.
const NAME_OPEN: &str = "\n{\"name\": \"";
/// What follows the name up to the arguments (after the name's closing quote).
const ARGS_OPEN: &str = ", \"arguments\": ";
/// What closes a call (after the arguments).
const CALL_CLOSE: &str = "}\n</tool_call>";

/// Qwen2.5's tool instructions before the tool lines.
const TOOLS_HEAD: &str = "# Tools\n\nYou may call one or more functions to assist with the user query.\n\nYou are provided with function signatures within <tools></tools> XML tags:\n<tools>";
/// ... and after them.
const TOOLS_TAIL: &str = "\n</tools>\n\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": <args-json-object>}\n</tool_call>";

/// Which calls `tool_choice` asks for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Choice {
    /// Prose or calls, as the model likes.
    Auto,
    /// One or more calls of any tool.
    Required,
    /// One call of the tool at this index.
    Named(usize),
}

/// One function tool.
#[derive(Clone, Debug, PartialEq)]
pub struct Tool {
    /// `function.name`.
    pub name: String,
    /// The schema its arguments follow (`parameters`, an object schema).
    pub schema: Value,
    /// The tool object as given, for the prompt.
    pub json: Value,
}

/// The tools of a request whose `tool_choice` is not `none`.
#[derive(Clone, Debug, PartialEq)]
pub struct ToolSpec {
    /// The tools, in the request's order.
    pub tools: Vec<Tool>,
    /// What the answer may be.
    pub choice: Choice,
    /// Several calls in one answer (`parallel_tool_calls`, default true).
    pub parallel: bool,
}

fn bad(param: &str, msg: impl Into<String>) -> ApiError {
    ApiError::invalid(param, msg)
}

/// Whether `name` is a function name OpenAI accepts (`[A-Za-z0-9_-]{1,64}`).
fn valid_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// Tool `i` of the request, validated.
fn tool(i: usize, t: &Value) -> Result<Tool, ApiError> {
    let at = |what: &str| format!("tools[{i}]{what}");
    if t.get("type").and_then(Value::as_str) != Some("function") {
        return Err(bad(
            "tools",
            format!("{} must be \"function\"", at(".type")),
        ));
    }
    let Some(f) = t.get("function").filter(|f| f.is_object()) else {
        return Err(bad(
            "tools",
            format!("{} must be an object", at(".function")),
        ));
    };
    let name = f.get("name").and_then(Value::as_str).unwrap_or_default();
    if !valid_name(name) {
        return Err(bad(
            "tools",
            format!(
                "{} {name:?} is not a valid function name (1 to 64 of a-z, A-Z, 0-9, _ and -)",
                at(".function.name")
            ),
        ));
    }
    if f.get("description").is_some_and(|d| !d.is_string()) {
        return Err(bad(
            "tools",
            format!("{} must be a string", at(".function.description")),
        ));
    }
    let schema = match f.get("parameters") {
        None | Some(Value::Null) => {
            serde_json::json!({"type": "object", "properties": {}, "additionalProperties": false})
        }
        Some(Value::Object(p)) => {
            let mut p = p.clone();
            match p.get("type") {
                None => {
                    p.insert("type".into(), Value::from("object"));
                }
                Some(t) if t == "object" => {}
                Some(_) => {
                    return Err(bad(
                        "tools",
                        format!(
                            "{} must describe an object (\"type\": \"object\")",
                            at(".function.parameters")
                        ),
                    ));
                }
            }
            Value::Object(p)
        }
        Some(_) => {
            return Err(bad(
                "tools",
                format!(
                    "{} must be a JSON schema object",
                    at(".function.parameters")
                ),
            ));
        }
    };
    Ok(Tool {
        name: name.to_string(),
        schema,
        json: t.clone(),
    })
}

/// The request's tools (`None`: no tools, or `tool_choice: "none"`), or a
/// 400 naming the field at fault.
pub fn from_body(body: &RequestBody) -> Result<Option<ToolSpec>, ApiError> {
    let list = match body.tools.as_ref().filter(|t| !t.is_null()) {
        None => &[][..],
        Some(Value::Array(a)) => a.as_slice(),
        Some(_) => return Err(bad("tools", "tools must be an array")),
    };
    if list.len() > MAX_TOOLS {
        return Err(bad("tools", format!("at most {MAX_TOOLS} tools")));
    }
    let tools = list
        .iter()
        .enumerate()
        .map(|(i, t)| tool(i, t))
        .collect::<Result<Vec<_>, _>>()?;
    for (i, t) in tools.iter().enumerate() {
        if tools[..i].iter().any(|u| u.name == t.name) {
            return Err(bad(
                "tools",
                format!("tools[{i}]: the function name {:?} is given twice", t.name),
            ));
        }
    }
    let parallel = match body.parallel_tool_calls.as_ref().filter(|p| !p.is_null()) {
        None => true,
        Some(Value::Bool(b)) => *b,
        Some(_) => {
            return Err(bad(
                "parallel_tool_calls",
                "parallel_tool_calls must be true or false",
            ));
        }
    };
    let choice = match body.tool_choice.as_ref().filter(|c| !c.is_null()) {
        None if tools.is_empty() => return Ok(None),
        None => Choice::Auto,
        Some(Value::String(s)) if s == "none" => return Ok(None),
        Some(Value::String(s)) if s == "auto" => Choice::Auto,
        Some(Value::String(s)) if s == "required" => Choice::Required,
        Some(c) => {
            let name = c
                .get("function")
                .and_then(|f| f.get("name"))
                .and_then(Value::as_str)
                .filter(|_| c.get("type").and_then(Value::as_str) == Some("function"));
            let Some(name) = name else {
                return Err(bad(
                    "tool_choice",
                    "tool_choice must be \"none\", \"auto\", \"required\" or \
                     {\"type\": \"function\", \"function\": {\"name\": …}}",
                ));
            };
            match tools.iter().position(|t| t.name == name) {
                Some(i) => Choice::Named(i),
                None => {
                    return Err(bad(
                        "tool_choice",
                        format!(
                            "tool_choice names the function {name:?}, which tools does not define"
                        ),
                    ));
                }
            }
        }
    };
    if tools.is_empty() {
        return Err(bad(
            "tool_choice",
            "tool_choice needs a non-empty tools list",
        ));
    }
    Ok(Some(ToolSpec {
        tools,
        choice,
        parallel,
    }))
}

/// `serde_json`'s printer with Python `json.dumps`'s separators.
struct PyFormatter;

impl serde_json::ser::Formatter for PyFormatter {
    fn begin_array_value<W: ?Sized + std::io::Write>(
        &mut self,
        w: &mut W,
        first: bool,
    ) -> std::io::Result<()> {
        if first { Ok(()) } else { w.write_all(b", ") }
    }

    fn begin_object_key<W: ?Sized + std::io::Write>(
        &mut self,
        w: &mut W,
        first: bool,
    ) -> std::io::Result<()> {
        if first { Ok(()) } else { w.write_all(b", ") }
    }

    fn begin_object_value<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        w.write_all(b": ")
    }
}

/// `v` as Hugging Face's chat-template `tojson` prints it (Python
/// `json.dumps(v, ensure_ascii=False)`: `", "` and `": "`, keys in order).
/// Numbers are printed as `serde_json` prints them (Python writes an
/// exponent as `1e-05` where this writes `1e-5`).
pub fn py_json(v: &Value) -> String {
    let mut out = Vec::new();
    let mut ser = serde_json::Serializer::with_formatter(&mut out, PyFormatter);
    // Serializing a `Value` into a Vec cannot fail (string keys only).
    let _ = v.serialize(&mut ser);
    String::from_utf8(out).unwrap_or_default()
}

/// The `# Tools` block: instructions, one line per tool, the call format.
pub fn tools_text(spec: &ToolSpec) -> String {
    let mut s = String::from(TOOLS_HEAD);
    for t in &spec.tools {
        s.push('\n');
        s.push_str(&py_json(&t.json));
    }
    s.push_str(TOOLS_TAIL);
    s
}

/// An assistant message's content with its calls `(name, arguments)`
/// rendered as Qwen2.5's template renders them.
pub fn assistant_with_calls(content: &str, calls: &[(String, Value)]) -> String {
    let mut s = content.to_string();
    for (name, args) in calls {
        if !s.is_empty() {
            s.push('\n');
        }
        s.push_str(CALL_OPEN);
        s.push_str(NAME_OPEN);
        s.push_str(name);
        s.push('"');
        s.push_str(ARGS_OPEN);
        s.push_str(&py_json(args));
        s.push_str(CALL_CLOSE);
    }
    s
}

/// The chat messages `(role, content)` as `template` is given them: the
/// tools shown (if `spec`) and `tool` results placed, in the model's
/// native format (Qwen2.5) or the generic one (the module docs).
pub fn prompt_messages(
    template: Template,
    msgs: &[(String, String)],
    spec: Option<&ToolSpec>,
) -> Vec<(String, String)> {
    let native = template == Template::Qwen25;
    let mut out: Vec<(String, String)> = Vec::with_capacity(msgs.len() + 1);
    let mut prev_tool = false;
    for (role, content) in msgs {
        let is_tool = role == "tool";
        if is_tool && !native {
            let block = format!("<tool_response>\n{content}\n</tool_response>");
            match out.last_mut() {
                Some((_, c)) if prev_tool => {
                    c.push('\n');
                    c.push_str(&block);
                }
                _ => out.push(("user".into(), block)),
            }
        } else {
            out.push((role.clone(), content.clone()));
        }
        prev_tool = is_tool;
    }
    let Some(spec) = spec else {
        return out;
    };
    let tools = tools_text(spec);
    let default = match template {
        Template::Qwen25 => Some(QWEN_SYSTEM),
        Template::SmolLm2 => Some(DEFAULT_SYSTEM),
        Template::ChatMl | Template::Gemma => None,
    };
    match out.first_mut() {
        Some((r, c)) if r == "system" => {
            *c = format!("{c}\n\n{tools}");
        }
        _ => {
            let text = match default {
                Some(d) => format!("{d}\n\n{tools}"),
                None => tools,
            };
            out.insert(0, ("system".into(), text));
        }
    }
    out
}

impl ToolSpec {
    /// The grammar the answer is constrained by (llguidance's Lark), as
    /// the module header states it. A call is `"<tool_call>" body`, so
    /// `auto`'s prose can end in the opener: `PROSE_THEN_OPEN` is the
    /// prose, its `\n` and `<tool_call>` as one lexeme, so the prose ends
    /// where the regular expression says (at the first `<tool_call>`);
    /// with the `\n` a lexeme of its own the engine's lexer, which takes
    /// the longest match, would read `\n<tool_call` as prose and refuse
    /// the `>` (a unit test shows it).
    pub fn grammar(&self) -> String {
        let parallel = self.parallel && !matches!(self.choice, Choice::Named(_));
        let more_calls = if parallel { " (\"\\n\" call)*" } else { "" };
        let mut g = match self.choice {
            Choice::Auto => {
                format!("start: (calls | PROSE | PROSE_THEN_OPEN body{more_calls})?\n")
            }
            Choice::Required | Choice::Named(_) => "start: calls\n".to_string(),
        };
        g.push_str(&format!("calls: call{more_calls}\n"));
        g.push_str(&format!("call: {} body\n", lark_string(CALL_OPEN)));
        let chosen: Vec<usize> = match self.choice {
            Choice::Named(i) => vec![i],
            _ => (0..self.tools.len()).collect(),
        };
        let alts: Vec<String> = chosen.iter().map(|i| format!("body_{i}")).collect();
        g.push_str(&format!("body: {}\n", alts.join(" | ")));
        for &i in &chosen {
            let t = &self.tools[i];
            let head = format!("{NAME_OPEN}{}\"{ARGS_OPEN}", t.name);
            g.push_str(&format!(
                "body_{i}: {} args_{i} {}\n",
                lark_string(&head),
                lark_string(CALL_CLOSE)
            ));
            g.push_str(&format!("args_{i}: %json {}\n", t.schema));
        }
        if self.choice == Choice::Auto {
            let prose = without(CALL_OPEN);
            g.push_str(&format!("PROSE: /{prose}/\n"));
            g.push_str(&format!("PROSE_THEN_OPEN: /{prose}\\n{CALL_OPEN}/\n"));
        }
        g
    }
}

/// `s` as a Lark string literal (JSON's escapes).
fn lark_string(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_default()
}

/// A regular expression for the non-empty texts in which `lit` does not
/// occur. `lit` must be at least two characters, its first character `f`
/// must occur nowhere else in it, and none of its characters may be a
/// regex metacharacter (true of [`CALL_OPEN`]: a unit test checks). Such a
/// text is a run without `f`, then runs that each begin with `f` and have
/// no other `f`; `lit` occurs exactly when one of those runs begins with
/// all of `lit`. So a run after `f` is nothing, a proper prefix of `lit`'s
/// rest, or such a prefix then a character that breaks it then anything
/// but `f`: built from the last character back, `([^fc][^f]*|c(…))?`.
fn without(lit: &str) -> String {
    let mut chars = lit.chars();
    let first = chars.next().unwrap_or('<');
    let rest: Vec<char> = chars.collect();
    let mut after_first = String::new();
    for (k, &c) in rest.iter().enumerate().rev() {
        let breaks = format!("[^{first}{c}][^{first}]*");
        after_first = if k + 1 == rest.len() {
            format!("({breaks})?")
        } else {
            format!("({breaks}|{c}{after_first})?")
        };
    }
    let run = format!("{first}{after_first}");
    format!("([^{first}]+({run})*|({run})+)")
}

/// Why a constraint did not compile, as the client's field says it: for
/// `tools`, the tool whose `parameters` failed and the engine's first line
/// (`tools[1].function.parameters: invalid schema: …`); `grammar` is an
/// invalid grammar; else an invalid schema.
pub fn compile_error(field: &str, spec: &crate::constrain::Spec, error: &str) -> String {
    let first = error.lines().next().unwrap_or_default();
    match field {
        "tools" => {
            // llguidance names the grammar's line: `at LINE(COLUMN): why`.
            let at = first
                .strip_prefix("at ")
                .and_then(|r| r.split_once('('))
                .and_then(|(l, _)| l.parse::<usize>().ok());
            let tool = at
                .and_then(|l| spec.text.lines().nth(l.wrapping_sub(1)))
                .and_then(|line| line.strip_prefix("args_"))
                .and_then(|r| r.split_once(':'))
                .and_then(|(i, _)| i.parse::<usize>().ok());
            let why = first.split_once("): ").map_or(first, |(_, w)| w);
            match tool {
                Some(i) => format!("tools[{i}].function.parameters: invalid schema: {why}"),
                None => format!("invalid tools: {first}"),
            }
        }
        "grammar" => format!("invalid grammar: {error}"),
        _ => format!("invalid schema: {error}"),
    }
}

/// A tool call's id: `call_` and 24 hex digits of SHA-256 over the request
/// (its prompt ids and seed) and the choice and call indexes, so the same
/// request gets the same ids.
pub fn call_id(prompt_ids: &[u32], seed: u64, choice: usize, call: usize) -> String {
    let mut h = Sha256::new();
    h.update(b"detllm tool call\0");
    h.update((prompt_ids.len() as u64).to_le_bytes());
    for id in prompt_ids {
        h.update(id.to_le_bytes());
    }
    h.update(seed.to_le_bytes());
    h.update((choice as u64).to_le_bytes());
    h.update((call as u64).to_le_bytes());
    let d = h.finalize();
    let hex: String = d.iter().map(|b| format!("{b:02x}")).collect();
    format!("call_{}", &hex[..24])
}

/// A piece of one call in a streamed answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CallDelta {
    /// The call's index in the answer.
    pub index: usize,
    /// The function's name (in the call's first delta only).
    pub name: Option<String>,
    /// The next fragment of its arguments' JSON text.
    pub arguments: String,
}

/// What one piece of text added to an answer.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Piece {
    /// Prose.
    pub content: String,
    /// Call deltas, in order.
    pub calls: Vec<CallDelta>,
}

/// Where the splitter is in the text.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    /// `auto`'s prose: passed on as content but for a tail that could
    /// begin `\n<tool_call>` ([`held_back_from`]), until [`CALL_OPEN`].
    Prose,
    /// Expecting [`CALL_OPEN`] and [`NAME_OPEN`].
    Open,
    /// Reading the name.
    Name,
    /// Expecting [`ARGS_OPEN`].
    AfterName,
    /// Reading the arguments' JSON.
    Args,
    /// Expecting [`CALL_CLOSE`].
    Close,
    /// After a call: `\n` and another, or the end.
    Between,
    /// The text left the format (only without the grammar): the rest is prose.
    Broken,
}

/// Turns an answer's text, fed in pieces, into prose and calls; the
/// result does not depend on where the text is cut.
#[derive(Clone, Debug)]
pub struct Splitter {
    state: State,
    buf: String,
    calls: usize,
    /// The arguments' scan: nesting depth, inside a string, after `\`.
    depth: u32,
    in_string: bool,
    escaped: bool,
}

impl Splitter {
    /// A splitter for an answer under `choice`.
    pub fn new(choice: &Choice) -> Splitter {
        Splitter {
            state: match choice {
                Choice::Auto => State::Prose,
                Choice::Required | Choice::Named(_) => State::Open,
            },
            buf: String::new(),
            calls: 0,
            depth: 0,
            in_string: false,
            escaped: false,
        }
    }

    /// Calls begun so far.
    pub fn calls(&self) -> usize {
        self.calls
    }

    /// Whether the answer has reached its calls (it is past its prose).
    pub fn in_calls(&self) -> bool {
        !matches!(self.state, State::Prose | State::Broken)
    }

    /// What `text`, the answer's next piece, adds.
    pub fn feed(&mut self, text: &str) -> Piece {
        self.buf.push_str(text);
        let mut out = Piece::default();
        while self.step(&mut out) {}
        out
    }

    /// What is left at the end of the answer (prose held back because it
    /// could still have begun a call is prose after all).
    pub fn finish(&mut self) -> Piece {
        let mut out = Piece::default();
        if matches!(self.state, State::Prose | State::Broken) {
            out.content = std::mem::take(&mut self.buf);
            self.state = State::Prose;
        }
        out
    }

    /// Consumes `lit` from the buffer: `Some(true)` done, `Some(false)` more
    /// text needed, `None` the text differs.
    fn expect(&mut self, lit: &str) -> Option<bool> {
        if self.buf.len() < lit.len() {
            return lit.starts_with(self.buf.as_str()).then_some(false);
        }
        if !self.buf.starts_with(lit) {
            return None;
        }
        self.buf.drain(..lit.len());
        Some(true)
    }

    /// One move; `false` when more text is needed.
    fn step(&mut self, out: &mut Piece) -> bool {
        match self.state {
            State::Prose => {
                if let Some(at) = self.buf.find(CALL_OPEN) {
                    // The `\n` before the opener separates; it is not prose.
                    let prose = self.buf[..at].strip_suffix('\n').unwrap_or(&self.buf[..at]);
                    out.content.push_str(prose);
                    self.buf.drain(..at);
                    self.state = State::Open;
                    return true;
                }
                let held = held_back_from(&self.buf);
                out.content.push_str(&self.buf[..held]);
                self.buf.drain(..held);
                false
            }
            State::Broken => {
                out.content.push_str(&self.buf);
                self.buf.clear();
                false
            }
            State::Open => self.literal(&format!("{CALL_OPEN}{NAME_OPEN}"), State::Name),
            State::Name => {
                let Some(end) = self.buf.find('"') else {
                    return false;
                };
                let name: String = self.buf.drain(..=end).take(end).collect();
                out.calls.push(CallDelta {
                    index: self.calls,
                    name: Some(name),
                    arguments: String::new(),
                });
                self.calls += 1;
                self.state = State::AfterName;
                true
            }
            State::AfterName => self.literal(ARGS_OPEN, State::Args),
            State::Args => self.args(out),
            State::Close => {
                let ws = self.buf.len() - self.buf.trim_start().len();
                self.buf.drain(..ws);
                self.literal(CALL_CLOSE, State::Between)
            }
            State::Between => {
                if self.buf.is_empty() {
                    return false;
                }
                self.literal("\n", State::Open)
            }
        }
    }

    /// Consumes `lit`, then moves to `next` (or, if the text differs, to
    /// [`State::Broken`]).
    fn literal(&mut self, lit: &str, next: State) -> bool {
        match self.expect(lit) {
            Some(true) => {
                self.state = next;
                true
            }
            Some(false) => false,
            None => {
                self.state = State::Broken;
                true
            }
        }
    }

    /// Scans the arguments' JSON value, passing it on as fragments.
    fn args(&mut self, out: &mut Piece) -> bool {
        let mut taken = 0;
        let mut frag = String::new();
        let mut done = false;
        for (i, c) in self.buf.char_indices() {
            taken = i + c.len_utf8();
            if self.depth == 0 {
                if c.is_whitespace() {
                    continue;
                }
                if c != '{' && c != '[' {
                    self.state = State::Broken;
                    taken = i;
                    break;
                }
            }
            frag.push(c);
            if self.in_string {
                if self.escaped {
                    self.escaped = false;
                } else if c == '\\' {
                    self.escaped = true;
                } else if c == '"' {
                    self.in_string = false;
                }
                continue;
            }
            match c {
                '"' => self.in_string = true,
                '{' | '[' => self.depth += 1,
                '}' | ']' => {
                    self.depth = self.depth.saturating_sub(1);
                    if self.depth == 0 {
                        done = true;
                        break;
                    }
                }
                _ => {}
            }
        }
        self.buf.drain(..taken);
        if !frag.is_empty() {
            out.calls.push(CallDelta {
                index: self.calls.saturating_sub(1),
                name: None,
                arguments: frag,
            });
        }
        if done {
            self.state = State::Close;
        }
        done || self.state == State::Broken
    }
}

/// Where the tail of `prose` that could begin `\n<tool_call>` (or
/// [`CALL_OPEN`] itself, at an answer's start) begins: the first position
/// whose rest is a proper prefix of either; `prose.len()` if none.
fn held_back_from(prose: &str) -> usize {
    let opens = ["\n".to_string() + CALL_OPEN, CALL_OPEN.to_string()];
    let tail_start = prose.len().saturating_sub(CALL_OPEN.len());
    (tail_start..prose.len())
        .filter(|&i| prose.is_char_boundary(i))
        .find(|&i| opens.iter().any(|o| o.starts_with(&prose[i..])))
        .unwrap_or(prose.len())
}

/// A whole answer's prose (`None` when it is only calls) and calls
/// `(name, arguments)`.
pub fn split_whole(choice: &Choice, text: &str) -> (Option<String>, Vec<(String, String)>) {
    let mut s = Splitter::new(choice);
    let mut a = s.feed(text);
    let b = s.finish();
    a.content.push_str(&b.content);
    a.calls.extend(b.calls);
    let calls = merge(a.calls);
    let content = (!a.content.is_empty() || calls.is_empty()).then_some(a.content);
    (content, calls)
}

/// Call deltas folded into whole calls `(name, arguments)`.
pub fn merge(deltas: Vec<CallDelta>) -> Vec<(String, String)> {
    let mut calls: Vec<(String, String)> = Vec::new();
    for d in deltas {
        if let Some(name) = d.name {
            calls.push((name, String::new()));
        }
        if let Some(c) = calls.get_mut(d.index) {
            c.1.push_str(&d.arguments);
        }
    }
    calls
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body(extra: &str) -> RequestBody {
        let json = format!(r#"{{"messages":[{{"role":"user","content":"hi"}}]{extra}}}"#);
        serde_json::from_str(&json).expect("body")
    }

    const WEATHER: &str = r#"{"type":"function","function":{"name":"get_weather","description":"Weather in a city.","parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}}"#;
    const TIME: &str = r#"{"type":"function","function":{"name":"get_time"}}"#;

    fn spec(extra: &str) -> ToolSpec {
        from_body(&body(&format!(r#","tools":[{WEATHER},{TIME}]{extra}"#)))
            .expect("valid")
            .expect("tools")
    }

    #[test]
    fn tool_choice_and_parallel_are_read() {
        assert_eq!(spec("").choice, Choice::Auto);
        assert!(spec("").parallel);
        assert_eq!(
            spec(r#","tool_choice":"required""#).choice,
            Choice::Required
        );
        assert_eq!(
            spec(r#","tool_choice":{"type":"function","function":{"name":"get_time"}}"#).choice,
            Choice::Named(1)
        );
        assert!(!spec(r#","parallel_tool_calls":false"#).parallel);
        let none = from_body(&body(&format!(
            r#","tools":[{WEATHER}],"tool_choice":"none""#
        )));
        assert_eq!(none.expect("valid"), None);
        assert_eq!(from_body(&body(r#","tools":[]"#)).expect("valid"), None);
        // No parameters: the call takes exactly `{}`.
        assert_eq!(
            spec("").tools[1].schema,
            serde_json::json!({"type":"object","properties":{},"additionalProperties":false})
        );
    }

    #[test]
    fn bad_tools_are_refused_naming_the_field() {
        let cases = [
            (r#","tools":{}"#.to_string(), "tools", "must be an array"),
            (r#","tools":[{"type":"x"}]"#.into(), "tools", "tools[0].type"),
            (r#","tools":[{"type":"function"}]"#.into(), "tools", "tools[0].function"),
            (
                r#","tools":[{"type":"function","function":{"name":"a b"}}]"#.into(),
                "tools",
                "not a valid function name",
            ),
            (
                r#","tools":[{"type":"function","function":{"name":"f","parameters":{"type":"string"}}}]"#.into(),
                "tools",
                "must describe an object",
            ),
            (
                r#","tools":[{"type":"function","function":{"name":"f","parameters":3}}]"#.into(),
                "tools",
                "parameters must be a JSON schema object",
            ),
            (format!(r#","tools":[{TIME},{TIME}]"#), "tools", "given twice"),
            (
                format!(r#","tools":[{TIME}],"tool_choice":{{"type":"function","function":{{"name":"nope"}}}}"#),
                "tool_choice",
                "\"nope\"",
            ),
            (format!(r#","tools":[{TIME}],"tool_choice":"sometimes""#), "tool_choice", "must be"),
            (r#","tool_choice":"required""#.into(), "tool_choice", "non-empty tools"),
            (
                format!(r#","tools":[{TIME}],"parallel_tool_calls":1"#),
                "parallel_tool_calls",
                "true or false",
            ),
        ];
        for (extra, param, what) in cases {
            let e = from_body(&body(&extra)).expect_err(&extra);
            assert_eq!(e.param.as_deref(), Some(param), "{extra}");
            assert!(e.message.contains(what), "{extra}: {}", e.message);
        }
    }

    #[test]
    fn py_json_prints_as_python_json_dumps() {
        let v: Value =
            serde_json::from_str(r#"{"b":[1,2.5,{"x":null}],"a":"é\n\"q\"","c":true}"#).unwrap();
        assert_eq!(
            py_json(&v),
            r#"{"b": [1, 2.5, {"x": null}], "a": "é\n\"q\"", "c": true}"#
        );
    }

    #[test]
    fn generic_format_puts_tools_in_the_system_turn_and_results_in_a_user_turn() {
        let s = spec(r#","tool_choice":"required""#);
        let m = |r: &str, c: &str| (r.to_string(), c.to_string());
        let msgs = vec![
            m("user", "weather?"),
            m("assistant", "<tool_call>x</tool_call>"),
            m("tool", "sunny"),
            m("tool", "rainy"),
            m("user", "thanks"),
            m("tool", "late"),
        ];
        let out = prompt_messages(Template::SmolLm2, &msgs, Some(&s));
        assert_eq!(out[0].0, "system");
        assert_eq!(out[0].1, format!("{DEFAULT_SYSTEM}\n\n{}", tools_text(&s)));
        assert_eq!(
            out[3],
            m(
                "user",
                "<tool_response>\nsunny\n</tool_response>\n<tool_response>\nrainy\n</tool_response>"
            )
        );
        assert_eq!(out[4], m("user", "thanks"));
        assert_eq!(out[5], m("user", "<tool_response>\nlate\n</tool_response>"));
        assert_eq!(out.len(), 6);
        // Gemma: no default system prompt; Qwen keeps `tool` messages.
        let g = prompt_messages(Template::Gemma, &msgs[..1], Some(&s));
        assert_eq!(g[0], m("system", &tools_text(&s)));
        let q = prompt_messages(Template::Qwen25, &msgs, None);
        assert_eq!(q, msgs);
    }

    #[test]
    fn assistant_calls_render_as_qwen_renders_them() {
        let args: Value = serde_json::from_str(r#"{"city":"Paris"}"#).unwrap();
        let one = vec![("get_weather".to_string(), args)];
        assert_eq!(
            assistant_with_calls("", &one),
            "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>"
        );
        assert!(assistant_with_calls("Sure.", &one).starts_with("Sure.\n<tool_call>\n"));
        // An `auto` answer's content and calls render back as its text.
        let time = ("get_time".to_string(), serde_json::json!({}));
        let both = vec![one[0].clone(), time];
        for content in ["", "Sure.", "Two lines\nand one more.\n"] {
            let text = assistant_with_calls(content, &both);
            let (got, calls) = split_whole(&Choice::Auto, &text);
            assert_eq!(got.unwrap_or_default(), content, "{text:?}");
            let args: Vec<Value> = calls
                .iter()
                .map(|(_, a)| serde_json::from_str(a).expect("JSON"))
                .collect();
            assert_eq!(args, [both[0].1.clone(), both[1].1.clone()], "{text:?}");
        }
    }

    #[test]
    fn the_grammar_names_each_tool_and_its_schema() {
        let g = spec(r#","tool_choice":"required""#).grammar();
        assert!(
            g.starts_with("start: calls\ncalls: call (\"\\n\" call)*\ncall: \"<tool_call>\" body\nbody: body_0 | body_1\n"),
            "{g}"
        );
        assert!(g.contains(r#"body_0: "\n{\"name\": \"get_weather\", \"arguments\": " args_0 "}\n</tool_call>""#), "{g}");
        assert!(g.contains(r#"args_0: %json {"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}"#), "{g}");
        assert!(!g.contains("PROSE"), "{g}");
        let named =
            spec(r#","tool_choice":{"type":"function","function":{"name":"get_time"}}"#).grammar();
        assert!(
            named.contains("calls: call\ncall: \"<tool_call>\" body\nbody: body_1\n"),
            "{named}"
        );
        assert!(!named.contains("body_0"), "{named}");
        let auto = spec("").grammar();
        assert!(
            auto.starts_with("start: (calls | PROSE | PROSE_THEN_OPEN body (\"\\n\" call)*)?\ncalls: call (\"\\n\" call)*\n"),
            "{auto}"
        );
        let prose = without(CALL_OPEN);
        assert!(
            auto.ends_with(&format!(
                "PROSE: /{prose}/\nPROSE_THEN_OPEN: /{prose}\\n<tool_call>/\n"
            )),
            "{auto}"
        );
        let single = spec(r#","parallel_tool_calls":false"#).grammar();
        assert!(
            single.starts_with("start: (calls | PROSE | PROSE_THEN_OPEN body)?\ncalls: call\n"),
            "{single}"
        );
    }

    /// Runs `tokens` through the engine under `grammar`, with a vocabulary
    /// of the 256 bytes and the tokens themselves: `Ok` when each token was
    /// in its mask and the grammar may end after the last, else `Err(k)`:
    /// token `k` was refused (`k == tokens.len()`: the end was).
    fn engine_follows(grammar: &str, tokens: &[&[u8]]) -> Result<(), usize> {
        use llguidance::api::TopLevelGrammar;
        use llguidance::toktrie::{ApproximateTokEnv, TokEnv, TokRxInfo, TokTrie};
        use llguidance::{Matcher, ParserFactory};
        let mut words: Vec<Vec<u8>> = (0..=255u8).map(|b| vec![b]).collect();
        for t in tokens {
            if !words.iter().any(|w| w == t) {
                words.push(t.to_vec());
            }
        }
        words.push(b"\xFF<|end|>".to_vec());
        let n = u32::try_from(words.len()).expect("a small vocabulary");
        let trie = TokTrie::from(&TokRxInfo::new(n, n - 1), &words);
        let env: TokEnv = std::sync::Arc::new(ApproximateTokEnv::new(trie));
        let mut factory = ParserFactory::new_simple(&env).expect("a factory");
        factory.quiet();
        let parser = factory
            .create_parser(TopLevelGrammar::from_lark(grammar.to_string()))
            .expect("the grammar compiles");
        let mut m = Matcher::new(Ok(parser));
        assert_eq!(m.get_error(), None);
        for (k, t) in tokens.iter().enumerate() {
            let id = words
                .iter()
                .position(|w| w == t)
                .expect("in the vocabulary") as u32;
            // A stopped matcher allows only the end.
            if m.is_stopped() || !m.compute_mask().expect("a mask").is_allowed(id) {
                return Err(k);
            }
            m.consume_token(id).expect("an allowed token is consumed");
        }
        if m.is_accepting().expect("a state") {
            Ok(())
        } else {
            Err(tokens.len())
        }
    }

    /// `text` cut into tokens of `size` bytes (the last shorter).
    fn tokens_of(text: &str, size: usize) -> Vec<&[u8]> {
        text.as_bytes().chunks(size).collect()
    }

    fn weather_call(city: &str) -> String {
        format!(
            "<tool_call>\n{{\"name\": \"get_weather\", \"arguments\": {{\"city\": \"{city}\"}}}}\n</tool_call>"
        )
    }

    #[test]
    fn call_open_fits_the_prose_expression() {
        // `without`'s conditions on its literal.
        let mut chars = CALL_OPEN.chars();
        let first = chars.next().expect("not empty");
        assert!(CALL_OPEN.len() >= 2 && !chars.clone().any(|c| c == first));
        assert!(
            CALL_OPEN
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "<>_".contains(c))
        );
    }

    #[test]
    fn the_prose_expression_refuses_exactly_texts_holding_the_opener() {
        let g = format!("start: PROSE\nPROSE: /{}/\n", without(CALL_OPEN));
        let parts = [
            "<",
            "<t",
            "<tool_call",
            ">",
            "tool_call>",
            "x",
            "\n",
            "<tool_call>",
        ];
        let mut texts = vec![String::new()];
        for _ in 0..3 {
            let longer: Vec<String> = texts
                .iter()
                .flat_map(|t| parts.iter().map(move |p| format!("{t}{p}")))
                .collect();
            texts.extend(longer);
        }
        texts.sort();
        texts.dedup();
        for t in &texts {
            let prose = !t.is_empty() && !t.contains(CALL_OPEN);
            assert_eq!(engine_follows(&g, &tokens_of(t, 1)).is_ok(), prose, "{t:?}");
        }
    }

    #[test]
    fn auto_takes_prose_then_calls() {
        let g = spec("").grammar();
        let paris = weather_call("Paris");
        let time = "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n</tool_call>";
        let accepted = [
            String::new(),
            "Hello".into(),
            "a < b, <b>bold</b>, <tool_cal and <tool_calx>\n".into(),
            paris.clone(),
            format!("{paris}\n{time}"),
            format!("Let me check.\n{paris}"),
            format!("Two lines\nand <tags>.\n\n{paris}\n{time}"),
        ];
        for text in &accepted {
            for size in [1, 3, 7, 64] {
                assert_eq!(
                    engine_follows(&g, &tokens_of(text, size)),
                    Ok(()),
                    "{text:?} in {size}-byte tokens"
                );
            }
        }
        // Tokens as Qwen2.5 cuts them: the opener one token after `.\n`.
        let qwen: [&[u8]; 6] = [
            b"I will look",
            b".\n",
            b"<tool_call>",
            b"\n",
            b"{\"",
            b"name\": \"get_time\", \"arguments\": {}}\n</tool_call>",
        ];
        assert_eq!(engine_follows(&g, &qwen), Ok(()));
        // Refused at the byte given: an opener inside prose not after a
        // `\n`, an empty prose before the `\n`, an unknown function, an
        // argument off its schema, prose after a call.
        let refused = [
            (format!("Sure.{paris}"), "Sure.<tool_call".len()),
            (format!("\n{paris}"), "\n<tool_call".len()),
            (
                "ok\n<tool_call>\n{\"name\": \"get_rain".into(),
                "ok\n<tool_call>\n{\"name\": \"get_".len(),
            ),
            (
                "ok\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"town".into(),
                "ok\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"".len(),
            ),
            (format!("ok\n{paris} thanks"), format!("ok\n{paris}").len()),
        ];
        for (text, at) in &refused {
            assert_eq!(
                engine_follows(&g, &tokens_of(text, 1)),
                Err(*at),
                "{text:?}"
            );
        }
        // Without parallel calls, one call after the prose.
        let single = spec(r#","parallel_tool_calls":false"#).grammar();
        let one = format!("Checking.\n{paris}");
        assert_eq!(engine_follows(&single, &tokens_of(&one, 1)), Ok(()));
        let two = format!("{one}\n{time}");
        assert_eq!(engine_follows(&single, &tokens_of(&two, 1)), Err(one.len()));
    }

    #[test]
    fn a_separate_newline_lexeme_would_refuse_prose_then_a_call() {
        let g = spec("").grammar();
        let naive = g.replace(
            "start: (calls | PROSE | PROSE_THEN_OPEN body (\"\\n\" call)*)?",
            "start: (calls | PROSE (\"\\n\" calls)?)?",
        );
        assert_ne!(g, naive);
        let text = format!("Let me check.\n{}", weather_call("Paris"));
        assert_eq!(
            engine_follows(&naive, &tokens_of(&text, 1)),
            Err("Let me check.\n<tool_call".len())
        );
        assert_eq!(engine_follows(&g, &tokens_of(&text, 1)), Ok(()));
    }

    #[test]
    fn required_and_named_take_no_prose() {
        let paris = weather_call("Paris");
        for choice in [
            r#","tool_choice":"required""#,
            r#","tool_choice":{"type":"function","function":{"name":"get_weather"}}"#,
        ] {
            let g = spec(choice).grammar();
            assert_eq!(
                engine_follows(&g, &tokens_of(&paris, 5)),
                Ok(()),
                "{choice}"
            );
            let prose = format!("Sure.\n{paris}");
            assert_eq!(
                engine_follows(&g, &tokens_of(&prose, 1)),
                Err(0),
                "{choice}"
            );
            assert_eq!(engine_follows(&g, &[]), Err(0), "{choice}");
        }
    }

    const TWO_CALLS: &str = "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Pa}ris\\\"\", \"n\": [1, {\"a\": 2}]}}\n</tool_call>\n<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n</tool_call>";

    /// The calls in [`TWO_CALLS`].
    fn two_calls() -> Vec<(String, String)> {
        vec![
            (
                "get_weather".to_string(),
                r#"{"city": "Pa}ris\"", "n": [1, {"a": 2}]}"#.to_string(),
            ),
            ("get_time".to_string(), "{}".to_string()),
        ]
    }

    /// Asserts that `text` cut in three at any two places (the second
    /// every seventh character) splits into what it splits into whole.
    fn assert_split_alike_however_cut(choice: &Choice, text: &str) {
        let (content, calls) = split_whole(choice, text);
        let content = content.unwrap_or_default();
        let chars: Vec<usize> = text.char_indices().map(|(i, _)| i).collect();
        for &a in &chars {
            for &b in chars.iter().filter(|&&b| b >= a).step_by(7) {
                let mut s = Splitter::new(choice);
                let mut deltas = Vec::new();
                let mut streamed = String::new();
                for part in [&text[..a], &text[a..b], &text[b..]] {
                    let p = s.feed(part);
                    streamed += &p.content;
                    deltas.extend(p.calls);
                }
                streamed += &s.finish().content;
                assert_eq!(
                    (streamed.as_str(), merge(deltas)),
                    (content.as_str(), calls.clone()),
                    "{text:?} cut at {a} {b}"
                );
            }
        }
    }

    #[test]
    fn calls_are_split_out_the_same_however_the_text_is_cut() {
        for choice in [Choice::Auto, Choice::Required] {
            assert_eq!(split_whole(&choice, TWO_CALLS), (None, two_calls()));
            assert_split_alike_however_cut(&choice, TWO_CALLS);
        }
    }

    #[test]
    fn prose_then_calls_split_the_same_however_the_text_is_cut() {
        let cases = [
            ("Let me check.", "\n"),
            (
                "Two lines\nwith a < sign, <b>, <tool_cal and \n<tool_calx>.\n",
                "\n",
            ),
            ("É\n", "\n"),
        ];
        for (prose, sep) in cases {
            let text = format!("{prose}{sep}{TWO_CALLS}");
            assert_eq!(
                split_whole(&Choice::Auto, &text),
                (Some(prose.to_string()), two_calls()),
                "{text:?}"
            );
            assert_split_alike_however_cut(&Choice::Auto, &text);
        }
    }

    #[test]
    fn auto_prose_is_content() {
        for t in [
            "The weather is fine.",
            "<b>bold</b>",
            "<tool",
            "",
            "cut short\n<tool_cal",
            "a\n\n",
        ] {
            assert_eq!(split_whole(&Choice::Auto, t), (Some(t.to_string()), vec![]));
            assert_split_alike_however_cut(&Choice::Auto, t);
        }
    }

    #[test]
    fn prose_that_could_begin_a_call_is_held_back() {
        let mut s = Splitter::new(&Choice::Auto);
        assert_eq!(s.feed("Sure.\n<tool").content, "Sure.");
        assert_eq!(s.feed("_ca").content, "");
        assert!(!s.in_calls());
        assert_eq!(s.feed("ll>\n").content, "");
        assert!(s.in_calls());
        let mut s = Splitter::new(&Choice::Auto);
        assert_eq!(s.feed("Sure.\n").content, "Sure.");
        assert_eq!(s.feed("<b>").content, "\n<b>");
        assert_eq!(s.feed("x <").content, "x ");
        assert_eq!(s.finish().content, "<");
    }

    /// `tests/data/tool_templates.json`: requests rendered by Qwen2.5's
    /// Jinja template (`scripts/tool_template_golden.py`).
    #[test]
    fn qwen_rendering_matches_its_jinja_template() {
        use super::super::api::PromptInput;
        use detllm::tokenizer::chat::Message;
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../tests/data/tool_templates.json"
        );
        let text = std::fs::read_to_string(path).expect("the golden file");
        let g: Value = serde_json::from_str(&text).expect("JSON");
        let cases = g["cases"].as_array().expect("cases");
        assert!(cases.len() >= 7);
        for case in cases {
            let body: RequestBody =
                serde_json::from_str(&case["request"].to_string()).expect("a request");
            let req = body.into_chat(0).expect("valid");
            let PromptInput::Chat(msgs) = &req.prompt else {
                panic!("a chat prompt");
            };
            let msgs = prompt_messages(Template::Qwen25, msgs, req.tools.as_ref());
            let m: Vec<Message<'_>> = msgs
                .iter()
                .map(|(role, content)| Message { role, content })
                .collect();
            let got = crate::prompt::render_chat(Template::Qwen25, &m, true).expect("renders");
            assert_eq!(
                got,
                case["text"].as_str().expect("text"),
                "{}",
                case["request"]
            );
        }
    }

    #[test]
    fn call_ids_depend_on_request_choice_and_call() {
        let a = call_id(&[1, 2, 3], 7, 0, 0);
        assert!(a.starts_with("call_") && a.len() == 29, "{a}");
        assert_eq!(a, call_id(&[1, 2, 3], 7, 0, 0));
        for b in [
            call_id(&[1, 2, 4], 7, 0, 0),
            call_id(&[1, 2, 3], 8, 0, 0),
            call_id(&[1, 2, 3], 7, 1, 0),
            call_id(&[1, 2, 3], 7, 0, 1),
        ] {
            assert_ne!(a, b);
        }
    }

    #[test]
    fn a_compile_error_names_the_tool_whose_parameters_failed() {
        let s = spec(r#","tool_choice":"required""#);
        let spec = crate::constrain::Spec {
            kind: crate::constrain::Kind::Tools,
            text: s.grammar(),
        };
        let line = 1 + spec
            .text
            .lines()
            .position(|l| l.starts_with("args_1:"))
            .unwrap();
        let e =
            format!("at {line}(9): failed to compile JSON schema: Invalid type: strin\n   3 | …");
        assert_eq!(
            compile_error("tools", &spec, &e),
            "tools[1].function.parameters: invalid schema: failed to compile JSON schema: Invalid type: strin"
        );
        assert!(compile_error("tools", &spec, "at 1(1): x").starts_with("invalid tools: "));
        assert_eq!(compile_error("grammar", &spec, "e"), "invalid grammar: e");
        assert_eq!(
            compile_error("json_schema", &spec, "e"),
            "invalid schema: e"
        );
    }
}
