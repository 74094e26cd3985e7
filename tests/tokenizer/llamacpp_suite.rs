//! llama.cpp's own tokenizer test suite (`test-tokenizer-0`) run against
//! detllm.
//!
//! llama.cpp ships small vocabulary-only GGUF files `ggml-vocab-<name>.gguf`
//! with test inputs (`.gguf.inp`: texts separated by
//! `"\n__ggml_vocab_test__\n"`) and the ids llama.cpp produces for them
//! (`.gguf.out`: one line of space-separated ids per text), tokenized with
//! `add_special` and `parse_special` off. `scripts/fetch-llamacpp-vocabs.sh`
//! puts them in a directory and prints it; this test reads the directory from
//! `DETLLM_LLAMACPP_VOCABS` (`scripts/test.sh` exports it).
//!
//! Every vocabulary with test cases is run, and the per-vocabulary pass
//! counts are printed. The test fails on any mismatch or load error, except
//! for the vocabularies in [`SKIP`]: their tokenizer *types* (not
//! pre-tokenizers) are ones detllm does not implement at all. A BPE or SPM
//! vocabulary is never skipped.
//!
//! Without `DETLLM_LLAMACPP_VOCABS` the test skips with a notice, or fails if
//! the run requires the reference data (`DETLLM_REQUIRE_MODEL=1`, CI).

use crate::support;

use detllm::Arena;
use detllm::gguf::File;
use detllm::tokenizer::{EncodeOptions, Tokenizer, Workspace};
use std::path::{Path, PathBuf};

/// Vocabularies whose `tokenizer.ggml.model` detllm does not implement:
/// `bert-bge` is WPM (BERT WordPiece); `gemma-4` is llama.cpp's `gemma4`
/// type (merges over raw UTF-8 with spaces escaped as `▁`, neither the
/// byte-level `gpt2` nor the scored `llama` type; not implemented yet). Only
/// the types of [`UNIMPLEMENTED_TYPES`] may be listed, never a `gpt2` or
/// `llama` vocabulary.
const SKIP: &[(&str, &str)] = &[("bert-bge", "bert"), ("gemma-4", "gemma4")];

/// `tokenizer.ggml.model` values that may be skipped: WPM, UGM (T5), RWKV,
/// and Gemma 4's.
const UNIMPLEMENTED_TYPES: &[&str] = &["bert", "t5", "rwkv", "gemma4"];

fn vocab_dir() -> Option<PathBuf> {
    match std::env::var_os("DETLLM_LLAMACPP_VOCABS").filter(|v| !v.is_empty()) {
        Some(d) => Some(PathBuf::from(d)),
        None if support::model::required() => panic!(
            "DETLLM_LLAMACPP_VOCABS is not set (DETLLM_REQUIRE_MODEL/CI make it required): \
             export DETLLM_LLAMACPP_VOCABS=\"$(bash scripts/fetch-llamacpp-vocabs.sh)\""
        ),
        None => {
            eprintln!(
                "NOTICE: DETLLM_LLAMACPP_VOCABS is not set; skipping \
                 (export DETLLM_LLAMACPP_VOCABS=\"$(bash scripts/fetch-llamacpp-vocabs.sh)\")"
            );
            None
        }
    }
}

/// The (input, expected ids) cases of one vocabulary, in file order.
fn cases(gguf: &Path) -> Vec<(String, Vec<u32>)> {
    let inp = std::fs::read_to_string(gguf.with_extension("gguf.inp")).unwrap();
    let out = std::fs::read_to_string(gguf.with_extension("gguf.out")).unwrap();
    // As test-tokenizer-0 splits: a separator at the very end ends the last case.
    let sep = "\n__ggml_vocab_test__\n";
    let mut texts: Vec<&str> = inp.split(sep).collect();
    if inp.ends_with(sep) || inp.is_empty() {
        texts.pop();
    }
    let ids: Vec<Vec<u32>> = out
        .lines()
        .map(|l| {
            l.split_ascii_whitespace()
                .map(|t| t.parse().unwrap())
                .collect()
        })
        .collect();
    assert_eq!(
        texts.len(),
        ids.len(),
        "{}: input and output files have different numbers of cases",
        gguf.display()
    );
    texts.into_iter().map(String::from).zip(ids).collect()
}

/// The `tokenizer.ggml.model` of a GGUF file.
fn model_type(file: &File<'_>) -> String {
    file.get_str("tokenizer.ggml.model")
        .unwrap()
        .unwrap_or("")
        .to_string()
}

/// Runs one vocabulary; returns (passed, total, first failures).
fn run_vocab(gguf: &Path) -> Result<(usize, usize, Vec<String>), String> {
    let bytes = std::fs::read(gguf).unwrap();
    let file = File::parse(&bytes).map_err(|e| format!("parse: {e}"))?;
    let need = Tokenizer::bytes_required_gguf(&file).map_err(|e| format!("size: {e}"))?;
    let mut mem = vec![0u8; need];
    let mut arena = Arena::new(&mut mem);
    let tok = Tokenizer::from_gguf(&file, &mut arena).map_err(|e| format!("load: {e}"))?;
    let cases = cases(gguf);
    let mut passed = 0;
    let mut failures = Vec::new();
    for (text, want) in &cases {
        let len = text.len().max(1);
        let mut wmem = vec![0u8; Workspace::bytes_required(len).unwrap()];
        let mut warena = Arena::new(&mut wmem);
        let mut ws = Workspace::new(&mut warena, len).unwrap();
        let mut out = vec![0u32; text.len() + 4];
        let opts = EncodeOptions {
            parse_special: false,
            add_special: false,
        };
        let got = tok
            .encode_with(text, opts, &mut ws, &mut out)
            .map(|n| out[..n].to_vec());
        match got {
            Ok(ids) if &ids == want => passed += 1,
            other => {
                if failures.len() < 5 {
                    failures.push(format!("{text:?}: want {want:?}, got {other:?}"));
                }
            }
        }
    }
    Ok((passed, cases.len(), failures))
}

#[test]
fn llamacpp_tokenizer_suite() {
    let Some(dir) = vocab_dir() else { return };
    let mut vocabs: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.extension().is_some_and(|x| x == "gguf") && p.with_extension("gguf.inp").is_file()
        })
        .collect();
    vocabs.sort();
    assert!(
        !vocabs.is_empty(),
        "{}: no ggml-vocab-*.gguf with test cases",
        dir.display()
    );
    let mut bad = Vec::new();
    let (mut all_passed, mut all_total) = (0, 0);
    for gguf in &vocabs {
        let stem = gguf.file_stem().unwrap().to_string_lossy();
        let name = stem.trim_start_matches("ggml-vocab-");
        if let Some(&(_, ty)) = SKIP.iter().find(|(n, _)| *n == name) {
            // Check the skip is only for a tokenizer type detllm lacks.
            let bytes = std::fs::read(gguf).unwrap();
            let file = File::parse(&bytes).unwrap();
            let found = model_type(&file);
            assert_eq!(
                found, ty,
                "{name}: skip list says {ty}, the file says {found}"
            );
            assert!(
                UNIMPLEMENTED_TYPES.contains(&ty),
                "{name}: {ty} may not be skipped"
            );
            eprintln!("{name:>16}: skipped (tokenizer type {ty} is not implemented)");
            continue;
        }
        match run_vocab(gguf) {
            Ok((passed, total, failures)) => {
                eprintln!("{name:>16}: {passed}/{total}");
                all_passed += passed;
                all_total += total;
                if passed != total {
                    bad.push(format!("{name}: {passed}/{total}; {}", failures.join("; ")));
                }
            }
            Err(e) => {
                eprintln!("{name:>16}: {e}");
                bad.push(format!("{name}: {e}"));
            }
        }
    }
    eprintln!("total: {all_passed}/{all_total} cases");
    assert!(bad.is_empty(), "mismatches:\n{}", bad.join("\n"));
}
