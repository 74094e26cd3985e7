//! 1500 pseudo-random texts (every whitespace kind, contractions in both
//! cases, many scripts, non-ASCII numbers, marks, emoji, unassigned and
//! private-use codepoints, special-token texts with `parse_special` on and
//! off) tokenized by llama.cpp itself: `tests/data/tokenizer_llamacpp.tsv`,
//! regenerated with `scripts/tokenizer_golden.py` (see its docs). Every id
//! must match. Needs the model (see `tests/support/model.rs` for when a
//! missing model fails the test and when it only skips it).
//!
//! EXTENDED: `DETLLM_TOKENIZER_GOLDEN=FILE cargo test --release --features std
//! --test tokenizer -- --nocapture golden::` compares any file of the same format.

use crate::support;

use detllm::Arena;
use detllm::gguf::File;
use detllm::tokenizer::{EncodeOptions, Tokenizer, Workspace};
use std::path::PathBuf;

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

#[test]
fn random_texts_match_llama_cpp() {
    let Some(path) = support::model::path() else {
        return;
    };
    let bytes = std::fs::read(path).unwrap();
    let file = File::parse(&bytes).unwrap();
    let mut mem = vec![0u8; Tokenizer::bytes_required_gguf(&file).unwrap()];
    let mut arena = Arena::new(&mut mem);
    let tok = Tokenizer::from_gguf(&file, &mut arena).unwrap();

    // EXTENDED: `DETLLM_TOKENIZER_GOLDEN=FILE` compares another file of the same format.
    let extended = std::env::var_os("DETLLM_TOKENIZER_GOLDEN").map(PathBuf::from);
    let golden_path = extended
        .clone()
        .unwrap_or_else(|| support::model::data_path("tokenizer_llamacpp.tsv"));
    let golden = std::fs::read_to_string(golden_path).unwrap();
    const MAX: usize = 4096;
    let mut wmem = vec![0u8; Workspace::bytes_required(MAX).unwrap()];
    let mut warena = Arena::new(&mut wmem);
    let mut ws = Workspace::new(&mut warena, MAX).unwrap();
    let mut out = vec![0u32; MAX];
    let (mut n, mut bad) = (0, Vec::new());
    for line in golden.lines() {
        let mut f = line.split('\t');
        let text = String::from_utf8(unhex(f.next().unwrap())).unwrap();
        let parse_special = f.next().unwrap() == "1";
        let want: Vec<u32> = f
            .next()
            .unwrap()
            .split(' ')
            .filter(|s| !s.is_empty())
            .map(|s| s.parse().unwrap())
            .collect();
        let opts = EncodeOptions {
            parse_special,
            add_special: false,
        };
        let k = tok.encode_with(&text, opts, &mut ws, &mut out).unwrap();
        if out[..k] != want[..] {
            bad.push((text, parse_special, want, out[..k].to_vec()));
        }
        n += 1;
    }
    if extended.is_none() {
        assert_eq!(n, 1500);
    }
    eprintln!("{n} texts compared, {} differ", bad.len());
    assert!(
        bad.is_empty(),
        "{} of {n} differ; first: {:?}",
        bad.len(),
        bad.first()
    );
}
