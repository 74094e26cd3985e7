//! The tokenizer on the real SmolLM2-135M-Instruct vocabulary against
//! llama.cpp's own token ids.
//!
//! Golden ids: `PROBES` / `PROMPTS` are copied from
//! `tests/data/smollm2-llamacpp.json` (llama.cpp's tokenizer through
//! llama-cpp-python; provenance in `tests/data/README.md`); `FACTS` are the test
//! vectors of LLAMACPP-FACTS.md §6. They are an independent implementation's
//! output, so these tests can fail.
//!
//! The model is found by `support::model::path()` (the rule of
//! `scripts/fetch-model.sh`); if it is absent every test fails when the run
//! requires the model (`scripts/test.sh`, CI) and otherwise skips with a
//! notice.

use crate::support;

use detllm::gguf::File;
use detllm::tokenizer::{EncodeOptions, Message, StreamDecoder, Tokenizer, Workspace, chat};
use detllm::{Arena, Error};
use proptest::prelude::*;
use std::sync::OnceLock;

/// The tokenizer of the real model (built once; memory leaked for `'static`).
fn tok() -> Option<&'static Tokenizer<'static>> {
    static TOK: OnceLock<Option<Tokenizer<'static>>> = OnceLock::new();
    TOK.get_or_init(|| {
        let path = support::model::path()?;
        let bytes: &'static [u8] = Box::leak(std::fs::read(path).unwrap().into_boxed_slice());
        let file = File::parse(bytes).unwrap();
        let need = Tokenizer::bytes_required_gguf(&file).unwrap();
        let buf: &'static mut [u8] = Box::leak(vec![0u8; need].into_boxed_slice());
        let mut arena = Arena::new(buf);
        Some(Tokenizer::from_gguf(&file, &mut arena).unwrap())
    })
    .as_ref()
}

fn encode(t: &Tokenizer<'_>, text: &str, parse_special: bool) -> Vec<u32> {
    let mut mem = vec![0u8; Workspace::bytes_required(text.len()).unwrap()];
    let mut arena = Arena::new(&mut mem);
    let mut ws = Workspace::new(&mut arena, text.len()).unwrap();
    let mut out = vec![0u32; text.len() + 2];
    let n = t.encode(text, parse_special, &mut ws, &mut out).unwrap();
    out.truncate(n);
    out
}

/// Decode through the streaming decoder, checking every chunk is whole UTF-8.
fn decode_stream(t: &Tokenizer<'_>, ids: &[u32], special: bool) -> String {
    let mut d = StreamDecoder::new(special);
    let mut buf = vec![0u8; StreamDecoder::max_output(t)];
    let mut s = String::new();
    for &id in ids {
        s.push_str(d.push(t, id, &mut buf).unwrap());
    }
    s.push_str(d.finish(&mut buf).unwrap());
    s
}

/// `tokenize` probes of tests/data/smollm2-llamacpp.json (llama.cpp, special = true, no BOS).
const PROBES: &[(&str, &[u32])] = &[
    ("Hello, world!", &[19556, 28, 905, 17]),
    (
        "The quick brown fox jumps over the lazy dog.",
        &[504, 2365, 6354, 16438, 27003, 690, 260, 23790, 2767, 30],
    ),
    (
        "  leading spaces and trailing  ",
        &[216, 2899, 5600, 284, 35079, 256],
    ),
    (
        "numbers 1234567 and 3.14159, dates 2026-12-02",
        &[
            28707, 216, 33, 34, 35, 36, 37, 38, 39, 284, 216, 35, 30, 33, 36, 33, 37, 41, 28, 8151,
            216, 34, 32, 34, 38, 29, 33, 34, 29, 32, 34,
        ],
    ),
    (
        "unicode: café naïve 日本語 emoji 🙂 ümlaut",
        &[
            35852, 42, 37366, 15486, 46494, 17097, 241, 115, 40993, 179, 120, 248, 649, 33777,
            47526, 5549, 137, 3566, 1648,
        ],
    ),
    (
        "<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n",
        &[
            1, 4093, 198, 1780, 314, 216, 34, 27, 34, 47, 2, 198, 1, 520, 9531, 198,
        ],
    ),
    (
        "def f(x):\n    return x * 2\n\n\nprint(f(21))",
        &[
            1604, 275, 24, 104, 727, 472, 1003, 1792, 1672, 216, 34, 1116, 198, 3272, 24, 86, 24,
            34, 33, 1292,
        ],
    ),
    (
        "It's a can't-won't situation; they'd've said 'no'.",
        &[
            1589, 506, 253, 416, 982, 29, 38955, 982, 3223, 43, 502, 6737, 3543, 1137, 637, 4607,
            4289,
        ],
    ),
];
/// `greedy[*].prompt` / `prompt_ids` of the same file.
const PROMPTS: &[(&str, &[u32])] = &[
    (
        "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n<|im_start|>user\nWhat is the capital of France?<|im_end|>\n<|im_start|>assistant\n",
        &[
            1, 9690, 198, 2683, 359, 253, 5356, 5646, 11173, 3365, 3511, 308, 34519, 28, 7018, 411,
            407, 19712, 8182, 2, 198, 1, 4093, 198, 1780, 314, 260, 3575, 282, 4649, 47, 2, 198, 1,
            520, 9531, 198,
        ],
    ),
    (
        "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n<|im_start|>user\nWrite a haiku about the sea.<|im_end|>\n<|im_start|>assistant\n",
        &[
            1, 9690, 198, 2683, 359, 253, 5356, 5646, 11173, 3365, 3511, 308, 34519, 28, 7018, 411,
            407, 19712, 8182, 2, 198, 1, 4093, 198, 19161, 253, 421, 30614, 563, 260, 3426, 30, 2,
            198, 1, 520, 9531, 198,
        ],
    ),
    ("Once upon a time", &[6403, 1980, 253, 655]),
];

/// LLAMACPP-FACTS.md §6 test vectors (llama-cpp-python, special = true, no BOS).
const FACTS: &[(&str, &[u32])] = &[
    ("Hello world", &[19556, 905]),
    (" Hello  world!\n\n  x", &[38699, 216, 905, 17, 8866, 1792]),
    ("12345 it's café", &[33, 34, 35, 36, 37, 357, 506, 37366]),
];

/// FACTS §7 rendering of `[user: "What is 2+2?"]` with the generation prompt, and its §6 ids.
const CHAT_TEXT: &str = "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n";
const CHAT_IDS: &[u32] = &[
    1, 9690, 198, 2683, 359, 253, 5356, 5646, 11173, 3365, 3511, 308, 34519, 28, 7018, 411, 407,
    19712, 8182, 2, 198, 1, 4093, 198, 1780, 314, 216, 34, 27, 34, 47, 2, 198, 1, 520, 9531, 198,
];

#[test]
fn vocabulary_facts() {
    let Some(t) = tok() else { return };
    assert_eq!(t.vocab_size(), 49152);
    assert_eq!(t.bos(), Some(1));
    assert_eq!(t.eos(), Some(2));
    assert!(!t.add_bos());
    assert_eq!(t.eog_ids(), &[0, 2]);
    assert!(t.is_eog(2) && t.is_eog(0) && !t.is_eog(1));
    assert_eq!(t.token_text(1), Some(&b"<|im_start|>"[..]));
    assert_eq!(t.token_bytes(2), Some(&b""[..]));
    assert_eq!(t.piece(2, true), Some(&b"<|im_end|>"[..]));
    assert_eq!(t.token_bytes(216), Some(&b" "[..]));
    assert_eq!(t.token_bytes(198), Some(&b"\n"[..]));
    assert_eq!(t.token_bytes(49152), None);
}

#[test]
fn reference_probes_match_llama_cpp() {
    let Some(t) = tok() else { return };
    for &(text, ids) in PROBES.iter().chain(FACTS).chain(PROMPTS) {
        assert_eq!(encode(t, text, true), ids, "text {text:?}");
        // And back (special = true renders the control tokens).
        assert_eq!(decode_stream(t, ids, true), text, "ids {ids:?}");
    }
}

#[test]
fn chat_template_renders_facts_and_ids() {
    let Some(t) = tok() else { return };
    let mut buf = [0u8; 512];
    let msgs = [Message {
        role: "user",
        content: "What is 2+2?",
    }];
    let text = chat::render_str(&msgs, true, &mut buf).unwrap();
    assert_eq!(text, CHAT_TEXT);
    assert_eq!(encode(t, text, true), CHAT_IDS);
}

#[test]
fn special_tokens_on_and_off() {
    let Some(t) = tok() else { return };
    let text = "<|im_start|>user\nHi<|im_end|>";
    let on = encode(t, text, true);
    assert_eq!(on.first(), Some(&1));
    assert_eq!(on.last(), Some(&2));
    let off = encode(t, text, false);
    // FACTS §6: `<|im_start|>` as ordinary text starts with these ids.
    assert_eq!(off[..7], [44, 108, 306, 79, 3738, 108, 46]);
    assert!(!off.contains(&1) && !off.contains(&2));
    assert_eq!(decode_stream(t, &off, false), text);
    // Control tokens decode to nothing unless special.
    assert_eq!(decode_stream(t, &on, false), "user\nHi");
    assert_eq!(decode_stream(t, &on, true), text);
    // Every control token's text, parsed, is that single id.
    for id in 0..17u32 {
        let s = std::str::from_utf8(t.token_text(id).unwrap()).unwrap();
        assert_eq!(encode(t, s, true), [id]);
    }
}

#[test]
fn stream_decoder_holds_back_split_characters() {
    let Some(t) = tok() else { return };
    let text = "emoji 🙂 日本語 ümlaut";
    let ids = encode(t, text, false);
    let mut d = StreamDecoder::new(false);
    let mut buf = vec![0u8; StreamDecoder::max_output(t)];
    let mut s = String::new();
    let mut held = 0;
    for &id in &ids {
        let chunk = d.push(t, id, &mut buf).unwrap();
        let piece = t.token_bytes(id).unwrap();
        if chunk.as_bytes() != piece {
            held += 1;
        }
        s.push_str(chunk);
    }
    assert!(held > 0, "expected at least one token ending mid-character");
    assert_eq!(d.finish(&mut buf).unwrap(), "");
    assert_eq!(s, text);
    // A buffer too small is an error and changes nothing.
    let mut tiny = [0u8; 2];
    assert!(matches!(
        d.push(t, ids[0], &mut tiny),
        Err(Error::BufferTooSmall { .. })
    ));
}

#[test]
fn errors_are_typed() {
    let Some(t) = tok() else { return };
    let mut mem = vec![0u8; Workspace::bytes_required(4).unwrap()];
    let mut arena = Arena::new(&mut mem);
    let mut ws = Workspace::new(&mut arena, 4).unwrap();
    let mut out = [0u32; 8];
    assert!(matches!(
        t.encode("hello", false, &mut ws, &mut out),
        Err(Error::Tokenizer(
            detllm::tokenizer::TokenizerError::InputTooLong { len: 5, max: 4 }
        ))
    ));
    let mut one = [0u32; 1];
    assert!(matches!(
        t.encode("a b", false, &mut ws, &mut one),
        Err(Error::BufferTooSmall { .. })
    ));
    let opts = EncodeOptions {
        parse_special: false,
        add_special: false,
    };
    assert_eq!(t.encode_with("", opts, &mut ws, &mut out).unwrap(), 0);
}

/// `s` without the characters whose UTF-8 uses a byte the vocabulary has no
/// token for (see `Tokenizer::byte_has_token`): those are dropped by
/// llama.cpp too, so they cannot round-trip.
fn encodable(t: &Tokenizer<'_>, s: &str) -> String {
    s.chars()
        .filter(|c| c.to_string().bytes().all(|b| t.byte_has_token(b)))
        .collect()
}

#[test]
fn bytes_without_tokens_are_dropped_like_llama_cpp() {
    let Some(t) = tok() else { return };
    let missing: Vec<u8> = (0..=255u8).filter(|&b| !t.byte_has_token(b)).collect();
    assert_eq!(
        missing,
        [
            4, 6, 0x13, 0x14, 0x16, 0x1D, 0xC0, 0xC1, 0xF1, 0xF2, 0xF5, 0xF6, 0xF7, 0xF8, 0xF9,
            0xFA, 0xFB, 0xFC, 0xFD, 0xFE, 0xFF
        ]
    );
    assert!(encode(t, "\u{4}", false).is_empty());
    let a = encode(t, "a", false);
    assert_eq!(encode(t, "a\u{40000}", false)[..1], a[..]);
}

/// Text mixing the cases the pre-tokenizer distinguishes.
fn text_strategy() -> impl Strategy<Value = String> {
    let atom = prop_oneof![
        Just(" ".to_string()),
        Just("  ".to_string()),
        Just("\n".to_string()),
        Just("\t".to_string()),
        Just("'s".to_string()),
        Just("'ll".to_string()),
        Just("<|im_start|>".to_string()),
        "[a-zA-Z]{1,8}",
        "[0-9]{1,5}",
        "[!-/:-@\\[-`{-~]{1,3}",
        "[à-ÿ]{1,3}",
        "[\u{3040}-\u{30ff}\u{4e00}-\u{4e40}]{1,3}",
        "[\u{1f600}-\u{1f64f}]",
        "[\u{2000}-\u{200b}\u{3000}\u{85}\u{a0}]",
        any::<char>().prop_map(|c| c.to_string()),
    ];
    prop::collection::vec(atom, 0..24).prop_map(|v| v.concat())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn roundtrip_structured(s in text_strategy()) {
        let Some(t) = tok() else { return Ok(()) };
        let s = encodable(t, &s);
        let ids = encode(t, &s, false);
        prop_assert_eq!(decode_stream(t, &ids, false), s);
    }

    #[test]
    fn roundtrip_arbitrary(s in any::<String>()) {
        let Some(t) = tok() else { return Ok(()) };
        let s = encodable(t, &s);
        let ids = encode(t, &s, false);
        prop_assert_eq!(decode_stream(t, &ids, false), s);
    }

    #[test]
    fn roundtrip_special_parsed(s in text_strategy()) {
        let Some(t) = tok() else { return Ok(()) };
        let s = encodable(t, &s);
        let ids = encode(t, &s, true);
        prop_assert_eq!(decode_stream(t, &ids, true), s);
    }
}
