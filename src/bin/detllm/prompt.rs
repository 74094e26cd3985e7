//! Chat prompts: messages rendered with the model's ChatML template.

#![forbid(unsafe_code)]

use crate::error::{CliError, CliResult};
use detllm::tokenizer::chat::{self, Message};

/// `messages` rendered as ChatML, ending with the assistant's turn opener if
/// `add_generation_prompt`.
pub fn render_chat(messages: &[Message<'_>], add_generation_prompt: bool) -> CliResult<String> {
    let len = chat::rendered_len(messages, add_generation_prompt).ok_or(CliError::SizeOverflow)?;
    let mut buf = vec![0u8; len];
    let n = chat::render(messages, add_generation_prompt, &mut buf)?;
    buf.truncate(n);
    String::from_utf8(buf).map_err(|_| CliError::ChatTemplateNotUtf8)
}

/// The first turn of a chat: an optional system message, then `user`, then
/// the assistant's turn opener.
pub fn chat_prompt(system: Option<&str>, user: &str) -> CliResult<String> {
    let mut messages = Vec::new();
    if let Some(system) = system {
        messages.push(Message {
            role: "system",
            content: system,
        });
    }
    messages.push(Message {
        role: "user",
        content: user,
    });
    render_chat(&messages, true)
}

/// A later turn of a chat whose earlier turns are already in the KV cache.
pub fn next_user_turn(user: &str) -> String {
    format!("\n<|im_start|>user\n{user}<|im_end|>\n<|im_start|>assistant\n")
}
