//! Chat templates against the models' own Jinja templates.
//!
//! `tests/data/chat_templates.json` holds renderings made by Jinja (jinja2)
//! from the template strings in the SmolLM2 and Qwen2.5-Coder GGUF files,
//! plain ChatML, and Gemma 3's published template
//! (`scripts/chat_template_golden.py`; see `tests/data/README.md`). Every case
//! is rendered by [`Template`] and compared byte for byte.
#![cfg(feature = "std")]

use crate::support;

use detllm::Error;
use detllm::tokenizer::{Message, Template};
use serde_json::Value;

fn golden() -> Value {
    let path = support::model::data_path("chat_templates.json");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap()
}

fn check(key: &str, template: Template) {
    let g = golden();
    let cases = g[key]
        .as_array()
        .unwrap_or_else(|| panic!("no {key} cases"));
    assert!(cases.len() >= 10, "{key}: only {} cases", cases.len());
    for case in cases {
        let msgs: Vec<(String, String)> = case["messages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| {
                (
                    m[0].as_str().unwrap().to_string(),
                    m[1].as_str().unwrap().to_string(),
                )
            })
            .collect();
        let messages: Vec<Message<'_>> = msgs
            .iter()
            .map(|(r, c)| Message {
                role: r,
                content: c,
            })
            .collect();
        let add_gen = case["add_generation_prompt"].as_bool().unwrap();
        let want = case["text"].as_str().unwrap();
        let len = template.rendered_len(&messages, add_gen).unwrap();
        assert_eq!(len, want.len(), "{key} {msgs:?} gen={add_gen}: length");
        let mut buf = vec![0u8; len];
        let got = template.render_str(&messages, add_gen, &mut buf).unwrap();
        assert_eq!(got, want, "{key} {msgs:?} gen={add_gen}");
        if len > 0 {
            let mut small = vec![0u8; len - 1];
            assert!(matches!(
                template.render(&messages, add_gen, &mut small),
                Err(Error::BufferTooSmall { .. })
            ));
        }
    }
}

#[test]
fn smollm2_matches_its_jinja_template() {
    check("smollm2", Template::SmolLm2);
}

#[test]
fn qwen25_matches_its_jinja_template() {
    check("qwen25", Template::Qwen25);
}

#[test]
fn chatml_matches_jinja() {
    check("chatml", Template::ChatMl);
}

#[test]
fn gemma_matches_gemma3_jinja_template() {
    check("gemma", Template::Gemma);
}

/// llama.cpp's Gemma format trims and concatenates every system message and
/// puts them before the next non-model turn (its `llm_chat_apply_template`).
#[test]
fn gemma_system_messages_as_llama_cpp_folds_them() {
    let msgs = [
        Message {
            role: "system",
            content: " A. ",
        },
        Message {
            role: "assistant",
            content: "x",
        },
        Message {
            role: "system",
            content: "B.\n",
        },
        Message {
            role: "user",
            content: "hi",
        },
        Message {
            role: "system",
            content: "   ",
        },
        Message {
            role: "user",
            content: "again",
        },
    ];
    let mut buf = [0u8; 512];
    let s = Template::Gemma.render_str(&msgs, false, &mut buf).unwrap();
    let mut want = String::new();
    want += "<start_of_turn>model\nx<end_of_turn>\n";
    want += "<start_of_turn>user\nA.B.\n\nhi<end_of_turn>\n";
    want += "<start_of_turn>user\nagain<end_of_turn>\n";
    assert_eq!(s, want);
}

#[test]
fn detection_follows_llama_cpp() {
    let d = |t: &str| Template::detect(Some(t), false);
    assert_eq!(d("chatml"), Some(Template::ChatMl));
    assert_eq!(d("gemma"), Some(Template::Gemma));
    assert_eq!(d("{{ '<|im_start|>' + role }}"), Some(Template::ChatMl));
    assert_eq!(
        d(
            "'<|im_start|>system\\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>'"
        ),
        Some(Template::Qwen25)
    );
    assert_eq!(
        d(
            "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face"
        ),
        Some(Template::SmolLm2)
    );
    assert_eq!(d("<|im_start|><|im_sep|>"), None);
    assert_eq!(d("{{ '<start_of_turn>' + role }}"), Some(Template::Gemma));
    assert_eq!(d("[INST] <start_of_turn>"), None);
    assert_eq!(d("{{ bos_token }}"), None);
    assert_eq!(Template::detect(None, true), Some(Template::Gemma));
    assert_eq!(Template::detect(None, false), None);
}
