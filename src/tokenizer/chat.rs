//! Chat templates: the prompt formats of the models detllm runs, rendered
//! byte for byte as the model's own Jinja template (or, for a model without
//! one, llama.cpp's built-in format) renders them. Encode the result with
//! `parse_special = true`.
//!
//! [`Template`] has four formats:
//!
//! * [`Template::SmolLm2`], SmolLM2-135M-Instruct's `tokenizer.chat_template`:
//!
//!   ```text
//!   {% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}
//!   {{ '<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n' }}
//!   {% endif %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}
//!   {% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}
//!   ```
//!
//!   When the first message is not a system message, the default system
//!   prompt comes first; each message is
//!   `<|im_start|>{role}\n{content}<|im_end|>\n`; the generation prompt is
//!   `<|im_start|>assistant\n`. With no messages there is no default system
//!   prompt (the loop never runs).
//! * [`Template::Qwen25`], Qwen2.5's template without tools: a system turn
//!   always comes first (the first message if it is a system message, else
//!   [`QWEN_SYSTEM`]); then user, assistant and later system messages as
//!   ChatML; consecutive `tool` messages are grouped into one user turn of
//!   `\n<tool_response>\n{content}\n</tool_response>` parts; other roles
//!   render nothing. (The Jinja template fails on an empty list; here that
//!   gives the default system turn.)
//! * [`Template::ChatMl`], plain ChatML (llama.cpp's `chatml`): every message
//!   as a ChatML turn, no default system prompt.
//! * [`Template::Gemma`], llama.cpp's `gemma` format: system messages are
//!   trimmed, concatenated and put, followed by `\n\n`, at the start of the
//!   next turn that is not the model's; `assistant` is called `model`; each
//!   turn is `<start_of_turn>{role}\n{trimmed content}<end_of_turn>\n`; the
//!   generation prompt is `<start_of_turn>model\n`. Trimming removes ASCII
//!   whitespace (C `isspace`) at both ends, as llama.cpp does.
//!
//! [`Template::detect`] follows llama.cpp's `llm_chat_detect_template` for
//! these formats; within ChatML it tells the SmolLM2 and Qwen2.5 templates
//! apart by their default system prompts.

#![forbid(unsafe_code)]

use crate::{Error, Result};

/// One chat message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Message<'m> {
    /// `system`, `user`, `assistant`, …
    pub role: &'m str,
    /// The message text.
    pub content: &'m str,
}

/// A chat prompt format (see the module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Template {
    /// SmolLM2's ChatML with its default system prompt.
    SmolLm2,
    /// Qwen2.5's ChatML with its default system prompt.
    Qwen25,
    /// Plain ChatML.
    ChatMl,
    /// Gemma's `<start_of_turn>` turns.
    Gemma,
}

/// The system prompt SmolLM2's template inserts when none is given.
pub const DEFAULT_SYSTEM: &str =
    "You are a helpful AI assistant named SmolLM, trained by Hugging Face";

/// The system prompt Qwen2.5's template inserts when none is given.
pub const QWEN_SYSTEM: &str =
    "You are Qwen, created by Alibaba Cloud. You are a helpful assistant.";

const IM_START: &str = "<|im_start|>";
const IM_END: &str = "<|im_end|>";
const START_OF_TURN: &str = "<start_of_turn>";
const END_OF_TURN: &str = "<end_of_turn>";

impl Template {
    /// The format of a model whose `tokenizer.chat_template` is `tmpl`
    /// (`None` if absent), as llama.cpp's `llm_chat_detect_template` picks it:
    /// a template name (`chatml`, `gemma`), else `<|im_start|>` (without
    /// `<|im_sep|>` or `<end_of_utterance>`) for ChatML and
    /// `<start_of_turn>` for Gemma, unless an earlier rule of llama.cpp's
    /// claims the template (`[INST]`, `<|assistant|>`, …: `None`). A model
    /// without a template whose vocabulary has a `<start_of_turn>` token
    /// (`has_start_of_turn`) is Gemma. `None`: not one of these formats.
    pub fn detect(tmpl: Option<&str>, has_start_of_turn: bool) -> Option<Template> {
        let Some(t) = tmpl else {
            return has_start_of_turn.then_some(Template::Gemma);
        };
        match t {
            "chatml" => return Some(Template::ChatMl),
            "gemma" => return Some(Template::Gemma),
            _ => {}
        }
        let has = |p: &str| t.contains(p);
        if has(IM_START) {
            if has("<|im_sep|>") || has("<end_of_utterance>") {
                return None;
            }
            return Some(if has(QWEN_SYSTEM) {
                Template::Qwen25
            } else if has(DEFAULT_SYSTEM) {
                Template::SmolLm2
            } else {
                Template::ChatMl
            });
        }
        // llama.cpp's rules that come before Gemma's.
        let earlier = t.starts_with("mistral")
            || has("[INST]")
            || (has("<|assistant|>") && (has("<|end|>") || has("<|user|>")))
            || has("[gMASK]<sop>")
            || (has("<|{{ item['role'] }}|>") && has("<|begin_of_image|>"))
            || (has("<|user|>") && has("<|endoftext|>"))
            || has("bos_token + message['role']");
        if !earlier && has(START_OF_TURN) {
            return Some(Template::Gemma);
        }
        None
    }

    /// Length in bytes of the rendering (`None` on overflow).
    pub fn rendered_len(
        self,
        messages: &[Message<'_>],
        add_generation_prompt: bool,
    ) -> Option<usize> {
        let mut n = Some(0usize);
        self.pieces(messages, add_generation_prompt, &mut |p| {
            n = n.and_then(|n| n.checked_add(p.len()));
        });
        n
    }

    /// Render `messages` into `out`; returns the length. If `out` is too
    /// short, [`Error::BufferTooSmall`] and `out` is untouched.
    pub fn render(
        self,
        messages: &[Message<'_>],
        add_generation_prompt: bool,
        out: &mut [u8],
    ) -> Result<usize> {
        let len = self
            .rendered_len(messages, add_generation_prompt)
            .ok_or(Error::SizeOverflow)?;
        if len > out.len() {
            return Err(Error::BufferTooSmall {
                needed: len,
                available: out.len(),
            });
        }
        let mut w = 0usize;
        self.pieces(messages, add_generation_prompt, &mut |p| {
            if let Some(d) = out.get_mut(w..w + p.len()) {
                d.copy_from_slice(p.as_bytes());
                w += p.len();
            }
        });
        Ok(w)
    }

    /// [`Template::render`] returning the text as `&str`.
    pub fn render_str<'o>(
        self,
        messages: &[Message<'_>],
        add_generation_prompt: bool,
        out: &'o mut [u8],
    ) -> Result<&'o str> {
        let n = self.render(messages, add_generation_prompt, out)?;
        core::str::from_utf8(out.get(..n).unwrap_or(&[])).map_err(|_| Error::InvalidUtf8)
    }

    /// Visit the rendered pieces in order.
    fn pieces(
        self,
        messages: &[Message<'_>],
        add_generation_prompt: bool,
        f: &mut dyn FnMut(&str),
    ) {
        match self {
            Template::SmolLm2 | Template::ChatMl => {
                for (i, m) in messages.iter().enumerate() {
                    if self == Template::SmolLm2 && i == 0 && m.role != "system" {
                        chatml_turn("system", DEFAULT_SYSTEM, f);
                    }
                    chatml_turn(m.role, m.content, f);
                }
            }
            Template::Qwen25 => qwen_pieces(messages, f),
            Template::Gemma => gemma_pieces(messages, f),
        }
        if add_generation_prompt {
            match self {
                Template::Gemma => {
                    f(START_OF_TURN);
                    f("model\n");
                }
                _ => {
                    f(IM_START);
                    f("assistant\n");
                }
            }
        }
    }
}

fn chatml_turn(role: &str, content: &str, f: &mut dyn FnMut(&str)) {
    for p in [IM_START, role, "\n", content, IM_END, "\n"] {
        f(p);
    }
}

fn qwen_pieces(messages: &[Message<'_>], f: &mut dyn FnMut(&str)) {
    match messages.first() {
        Some(m) if m.role == "system" => chatml_turn("system", m.content, f),
        _ => chatml_turn("system", QWEN_SYSTEM, f),
    }
    for (i, m) in messages.iter().enumerate() {
        match m.role {
            "user" | "assistant" => chatml_turn(m.role, m.content, f),
            "system" if i > 0 => chatml_turn(m.role, m.content, f),
            "tool" => {
                let prev_tool = i
                    .checked_sub(1)
                    .and_then(|j| messages.get(j))
                    .is_some_and(|p| p.role == "tool");
                if !prev_tool {
                    f(IM_START);
                    f("user");
                }
                for p in ["\n<tool_response>\n", m.content, "\n</tool_response>"] {
                    f(p);
                }
                let next_tool = messages.get(i + 1).is_some_and(|n| n.role == "tool");
                if !next_tool {
                    f(IM_END);
                    f("\n");
                }
            }
            _ => {}
        }
    }
}

/// `s` without leading and trailing ASCII whitespace (C `isspace`).
fn trim(s: &str) -> &str {
    s.trim_matches(|c: char| matches!(c, ' ' | '\t' | '\n' | '\x0B' | '\x0C' | '\r'))
}

fn gemma_pieces(messages: &[Message<'_>], f: &mut dyn FnMut(&str)) {
    // System messages not yet emitted start at `pending`.
    let mut pending = 0usize;
    for (i, m) in messages.iter().enumerate() {
        if m.role == "system" {
            continue;
        }
        let role = if m.role == "assistant" {
            "model"
        } else {
            m.role
        };
        f(START_OF_TURN);
        f(role);
        f("\n");
        if role != "model" {
            let system = messages.get(pending..i).unwrap_or(&[]);
            let system = system.iter().filter(|s| s.role == "system");
            if system.clone().any(|s| !trim(s.content).is_empty()) {
                for s in system {
                    f(trim(s.content));
                }
                f("\n\n");
            }
            pending = i + 1;
        }
        f(trim(m.content));
        f(END_OF_TURN);
        f("\n");
    }
}

/// Length in bytes of the SmolLM2 rendering (`None` on overflow).
pub fn rendered_len(messages: &[Message<'_>], add_generation_prompt: bool) -> Option<usize> {
    Template::SmolLm2.rendered_len(messages, add_generation_prompt)
}

/// Render `messages` with SmolLM2's template into `out`; returns the length.
/// If `out` is too short, [`Error::BufferTooSmall`] and `out` is untouched.
pub fn render(
    messages: &[Message<'_>],
    add_generation_prompt: bool,
    out: &mut [u8],
) -> Result<usize> {
    Template::SmolLm2.render(messages, add_generation_prompt, out)
}

/// [`render`] returning the text as `&str`.
pub fn render_str<'o>(
    messages: &[Message<'_>],
    add_generation_prompt: bool,
    out: &'o mut [u8],
) -> Result<&'o str> {
    Template::SmolLm2.render_str(messages, add_generation_prompt, out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn facts_section_7() {
        let mut buf = [0u8; 512];
        let s = render_str(
            &[Message {
                role: "user",
                content: "What is 2+2?",
            }],
            true,
            &mut buf,
        )
        .unwrap();
        assert_eq!(
            s,
            "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n"
        );
    }

    #[test]
    fn explicit_system_and_no_prompt() {
        let mut buf = [0u8; 512];
        let msgs = [
            Message {
                role: "system",
                content: "Be brief.",
            },
            Message {
                role: "user",
                content: "Hi",
            },
            Message {
                role: "assistant",
                content: "Hello!",
            },
        ];
        let s = render_str(&msgs, false, &mut buf).unwrap();
        assert_eq!(
            s,
            "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\nHello!<|im_end|>\n"
        );
        assert_eq!(
            render_str(&[], true, &mut buf).unwrap(),
            "<|im_start|>assistant\n"
        );
        let mut small = [7u8; 10];
        assert!(matches!(
            render(&msgs, false, &mut small),
            Err(Error::BufferTooSmall { .. })
        ));
        assert_eq!(small, [7u8; 10]);
    }
}
