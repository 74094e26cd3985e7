//! SmolLM2's chat template (ChatML), rendered as its GGUF Jinja template does.
//!
//! `tokenizer.chat_template` of SmolLM2-135M-Instruct:
//!
//! ```text
//! {% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}
//! {{ '<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n' }}
//! {% endif %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}
//! {% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}
//! ```
//!
//! So: when the first message is not a system message, the default system
//! prompt comes first; each message is `<|im_start|>{role}\n{content}<|im_end|>\n`;
//! the generation prompt is `<|im_start|>assistant\n`. With no messages
//! there is no default system prompt (the loop never runs). llama.cpp's
//! non-Jinja ChatML fallback differs only in never adding the default
//! system prompt. Encode the result with `parse_special = true`.

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

/// The system prompt SmolLM2's template inserts when none is given.
pub const DEFAULT_SYSTEM: &str =
    "You are a helpful AI assistant named SmolLM, trained by Hugging Face";

const IM_START: &str = "<|im_start|>";
const IM_END: &str = "<|im_end|>";

/// Visit the rendered pieces in order.
fn pieces(messages: &[Message<'_>], add_generation_prompt: bool, f: &mut dyn FnMut(&str)) {
    for (i, m) in messages.iter().enumerate() {
        if i == 0 && m.role != "system" {
            for p in [IM_START, "system\n", DEFAULT_SYSTEM, IM_END, "\n"] {
                f(p);
            }
        }
        for p in [IM_START, m.role, "\n", m.content, IM_END, "\n"] {
            f(p);
        }
    }
    if add_generation_prompt {
        f(IM_START);
        f("assistant\n");
    }
}

/// Length in bytes of the rendering (`None` on overflow).
pub fn rendered_len(messages: &[Message<'_>], add_generation_prompt: bool) -> Option<usize> {
    let mut n = Some(0usize);
    pieces(messages, add_generation_prompt, &mut |p| {
        n = n.and_then(|n| n.checked_add(p.len()));
    });
    n
}

/// Render `messages` into `out`; returns the length. If `out` is too short,
/// [`Error::BufferTooSmall`] and `out` is untouched.
pub fn render(
    messages: &[Message<'_>],
    add_generation_prompt: bool,
    out: &mut [u8],
) -> Result<usize> {
    let len = rendered_len(messages, add_generation_prompt).ok_or(Error::SizeOverflow)?;
    if len > out.len() {
        return Err(Error::BufferTooSmall {
            needed: len,
            available: out.len(),
        });
    }
    let mut w = 0usize;
    pieces(messages, add_generation_prompt, &mut |p| {
        if let Some(d) = out.get_mut(w..w + p.len()) {
            d.copy_from_slice(p.as_bytes());
            w += p.len();
        }
    });
    Ok(w)
}

/// [`render`] returning the text as `&str`.
pub fn render_str<'o>(
    messages: &[Message<'_>],
    add_generation_prompt: bool,
    out: &'o mut [u8],
) -> Result<&'o str> {
    let n = render(messages, add_generation_prompt, out)?;
    core::str::from_utf8(out.get(..n).unwrap_or(&[])).map_err(|_| Error::InvalidUtf8)
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
