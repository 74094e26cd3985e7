//! Chat prompts: messages rendered with the model's chat template.

#![forbid(unsafe_code)]

use crate::error::{CliError, CliResult};
use detllm::tokenizer::Tokenizer;
use detllm::tokenizer::chat::{Message, Template};

/// The model's chat template; SmolLM2's ChatML when the tokenizer has none
/// detllm knows.
pub fn template_of(tok: &Tokenizer<'_>) -> Template {
    tok.chat_template().unwrap_or(Template::SmolLm2)
}

/// `messages` rendered with `template`, ending with the assistant's turn
/// opener if `add_generation_prompt`.
pub fn render_chat(
    template: Template,
    messages: &[Message<'_>],
    add_generation_prompt: bool,
) -> CliResult<String> {
    let len = template
        .rendered_len(messages, add_generation_prompt)
        .ok_or(CliError::SizeOverflow)?;
    let mut buf = vec![0u8; len];
    let n = template.render(messages, add_generation_prompt, &mut buf)?;
    buf.truncate(n);
    String::from_utf8(buf).map_err(|_| CliError::ChatTemplateNotUtf8)
}

/// The first turn of a chat: an optional system message, then `user`, then
/// the assistant's turn opener.
pub fn chat_prompt(template: Template, system: Option<&str>, user: &str) -> CliResult<String> {
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
    render_chat(template, &messages, true)
}

/// A later turn of a chat whose earlier turns are already in the KV cache
/// (the last one ends with the model's end-of-turn token): a newline, then
/// the user turn and the assistant's turn opener in the template's format,
/// without any default system prompt.
pub fn next_user_turn(template: Template, user: &str) -> CliResult<String> {
    let bare = match template {
        Template::Gemma => Template::Gemma,
        Template::SmolLm2 | Template::Qwen25 | Template::ChatMl => Template::ChatMl,
    };
    let turn = render_chat(
        bare,
        &[Message {
            role: "user",
            content: user,
        }],
        true,
    )?;
    Ok(format!("\n{turn}"))
}
