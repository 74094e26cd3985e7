//! Fuzz the tokenizer: arbitrary bytes never panic; valid UTF-8 round-trips
//! (decode(encode(s)) == s) on synthetic BPE and SentencePiece vocabularies;
//! hostile vocabularies built from the input give a typed error or a working
//! tokenizer. The property lives in `tests/tokenizer/fuzz_check.rs`, which
//! `cargo test` also runs over random inputs.
//!
//! Run: `cargo +nightly fuzz run tokenizer` (seed corpus:
//! `python3 scripts/tokenizer_fuzz_seeds.py`).
#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "../../tests/tokenizer/fuzz_check.rs"]
mod check;

fuzz_target!(|data: &[u8]| {
    check::check(data);
});
