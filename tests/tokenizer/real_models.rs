//! Qwen2.5-Coder-0.5B (BPE, `qwen2` pre-tokenizer) and Gemma 3 270M
//! (SentencePiece with byte fallback, `add_space_prefix` false) tokenize
//! exactly as llama.cpp does: `tests/data/tokenizer_qwen2.5-coder.json` and
//! `tests/data/tokenizer_gemma3.json` hold llama.cpp's ids for a probe set
//! (English, code, whitespace runs, digits, CJK, emoji, accented letters,
//! the model's special-token texts; each with `parse_special` off and on) and
//! 300 seeded random texts, all with `add_special` (BOS as each vocabulary
//! says), plus `llama_detokenize(ids, remove_special, unparse_special =
//! parse_special)` of them. Regenerate with `scripts/tokenizer_golden.py
//! real` (see tests/data/README.md).
//!
//! Checked per case: detllm's ids equal llama.cpp's, detllm's detokenized
//! bytes equal llama.cpp's, and give the text back wherever llama.cpp's do.
//! The golden's model SHA-256 must be the model's. Needs the models (see
//! `tests/support/model.rs`: skipped when absent, a failure under
//! `DETLLM_REQUIRE_MODEL=1`).
#![cfg(feature = "std")]

use crate::support;

use detllm::Arena;
use detllm::gguf::File;
use detllm::tokenizer::{EncodeOptions, Tokenizer, Workspace};
use serde_json::Value;
use sha2::{Digest, Sha256};

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

fn check(file: &str, fetch_name: &str, golden: &str, cases: usize) {
    let Some(path) = support::model::real_model(file, fetch_name) else {
        return;
    };
    let bytes = std::fs::read(&path).unwrap();
    let g: Value =
        serde_json::from_str(&std::fs::read_to_string(support::model::data_path(golden)).unwrap())
            .unwrap();
    let sha = format!("{:x}", Sha256::digest(&bytes));
    assert_eq!(
        g["model_sha256"].as_str(),
        Some(sha.as_str()),
        "{golden} was made from another {file}"
    );
    let gguf = File::parse(&bytes).unwrap();
    let mut mem = vec![0u8; Tokenizer::bytes_required_gguf(&gguf).unwrap()];
    let mut arena = Arena::new(&mut mem);
    let tok = Tokenizer::from_gguf(&gguf, &mut arena).unwrap();
    assert_eq!(
        Some(tok.add_bos()),
        g["add_bos"].as_bool(),
        "{file}: add_bos"
    );

    const MAX: usize = 4096;
    let mut wmem = vec![0u8; Workspace::bytes_required(MAX).unwrap()];
    let mut warena = Arena::new(&mut wmem);
    let mut ws = Workspace::new(&mut warena, MAX).unwrap();
    let mut out = vec![0u32; MAX];
    let mut text_out = vec![0u8; 8 * MAX];
    let list = g["cases"].as_array().unwrap();
    assert_eq!(list.len(), cases, "{golden}: number of cases");
    let (mut bad_ids, mut bad_text) = (Vec::new(), Vec::new());
    let mut roundtrips = 0;
    for c in list {
        let text = c["text"].as_str().unwrap();
        let parse_special = c["parse_special"].as_bool().unwrap();
        let want: Vec<u32> = c["ids"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| u32::try_from(v.as_u64().unwrap()).unwrap())
            .collect();
        let want_text = unhex(c["detok"].as_str().unwrap());
        let roundtrip = c["roundtrip"].as_bool().unwrap();
        assert_eq!(
            roundtrip,
            want_text == text.as_bytes(),
            "{golden}: {text:?}"
        );
        let opts = EncodeOptions {
            parse_special,
            add_special: true,
        };
        let k = tok.encode_with(text, opts, &mut ws, &mut out).unwrap();
        if out[..k] != want[..] {
            bad_ids.push((text, parse_special, want.clone(), out[..k].to_vec()));
        }
        // Detokenize llama.cpp's ids, so a text mismatch is the decoder's own.
        let m = tok
            .detokenize(&want, true, parse_special, &mut text_out)
            .unwrap();
        if text_out[..m] != want_text[..] {
            bad_text.push((
                text,
                parse_special,
                String::from_utf8_lossy(&want_text).into_owned(),
                String::from_utf8_lossy(&text_out[..m]).into_owned(),
            ));
        } else if roundtrip {
            roundtrips += 1;
        }
    }
    eprintln!(
        "{file}: {} cases, {} ids differ, {} detokenized texts differ, {roundtrips} round-trip",
        list.len(),
        bad_ids.len(),
        bad_text.len()
    );
    assert!(
        bad_ids.is_empty(),
        "{file}: {} of {} differ in ids; first (text, parse_special, llama.cpp, detllm): {:?}",
        bad_ids.len(),
        list.len(),
        bad_ids.first()
    );
    assert!(
        bad_text.is_empty(),
        "{file}: {} of {} differ in detokenized text; first (text, parse_special, llama.cpp, detllm): {:?}",
        bad_text.len(),
        list.len(),
        bad_text.first()
    );
}

#[test]
fn qwen25_coder_tokenizes_as_llamacpp() {
    check(
        "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
        "qwen2.5-coder-0.5b",
        "tokenizer_qwen2.5-coder.json",
        408,
    );
}

#[test]
fn gemma3_270m_tokenizes_as_llamacpp() {
    check(
        "gemma-3-270m-q4_k_m.gguf",
        "gemma3-270m",
        "tokenizer_gemma3.json",
        404,
    );
}
