//! The tokenizer fuzz property, shared by the cargo-fuzz target
//! `fuzz/fuzz_targets/tokenizer.rs` (which includes this file with `#[path]`)
//! and by the proptest run below, so it is exercised on every `cargo test`.
//!
//! `check(data)`: the first byte picks a mode, the rest is the input.
//! * modes 0-1: a synthetic byte-level BPE vocabulary (all 256 byte chars,
//!   merges, control and user-defined tokens), pre-tokenizer `gpt-2` or
//!   `smollm`, `parse_special` on or off. Arbitrary bytes never panic; for
//!   valid UTF-8, streaming decode(encode(s)) == s.
//! * mode 2: a synthetic SentencePiece vocabulary with scores and all 256
//!   byte tokens; for valid UTF-8, detokenize(encode(s)) == s.
//! * mode 3: a hostile vocabulary made from the input bytes (token texts,
//!   merges and token types all attacker-chosen): building it gives a
//!   tokenizer or a typed error, never a panic, and encoding/decoding text
//!   with whatever was built never panics.
#![allow(dead_code)]

use detllm::Arena;
use detllm::tokenizer::{EncodeOptions, SliceVocab, StreamDecoder, Tokenizer, Workspace, bpe};
use std::sync::OnceLock;

/// Leak `texts` into one buffer and return (base, slices). Only the base is
/// leaked (the tokenizer keeps it); everything else the builders below use
/// is dropped after `build`, so LeakSanitizer stays quiet.
fn leak_tokens(texts: &[Vec<u8>]) -> (&'static [u8], Vec<&'static [u8]>) {
    let base: &'static [u8] = Box::leak(texts.concat().into_boxed_slice());
    let mut out = Vec::with_capacity(texts.len());
    let mut at = 0;
    for t in texts {
        out.push(&base[at..at + t.len()]);
        at += t.len();
    }
    (base, out)
}

fn build_leaked(src: &SliceVocab<'static, '_>) -> detllm::Result<Tokenizer<'static>> {
    let need = Tokenizer::bytes_required_for(src)?;
    let buf: &'static mut [u8] = Box::leak(vec![0u8; need].into_boxed_slice());
    let mut arena = Arena::new(buf);
    Tokenizer::build(src, &mut arena)
}

/// Synthetic byte-level BPE tokenizers: [gpt-2, smollm].
fn bpe_toks() -> &'static [Tokenizer<'static>; 2] {
    static T: OnceLock<[Tokenizer<'static>; 2]> = OnceLock::new();
    T.get_or_init(|| {
        let mut texts: Vec<Vec<u8>> = (0..=255u8)
            .map(|b| bpe::byte_char(b).to_string().into_bytes())
            .collect();
        let mut types = vec![1i32; 256];
        for (t, ty) in [
            ("<|endoftext|>", 3),
            ("<|im_start|>", 3),
            ("<|im_end|>", 3),
            ("<tool>", 4),
            ("ab", 3),
        ] {
            texts.push(t.as_bytes().to_vec());
            types.push(ty);
        }
        let merges = [
            "Ġ t", "h e", "Ġt he", "i n", "Ġ a", "e r", "o n", "Ġ 1", "1 2", "Ġa n", "Ġan d",
        ];
        for m in merges {
            let joined: String = m.split(' ').collect();
            texts.push(joined.into_bytes());
            types.push(1);
        }
        let (base, tokens) = leak_tokens(&texts);
        let merges: Vec<&'static [u8]> = merges.iter().map(|m| m.as_bytes()).collect();
        let mk = |pre: &'static str| {
            build_leaked(&SliceVocab {
                model: "gpt2",
                pre: Some(pre),
                base,
                tokens: &tokens,
                token_types: Some(&types),
                merges: Some(&merges),
                eos: Some(258),
                ..SliceVocab::default()
            })
            .unwrap()
        };
        [mk("gpt-2"), mk("smollm")]
    })
}

/// Synthetic SentencePiece tokenizer.
fn spm_tok() -> &'static Tokenizer<'static> {
    static T: OnceLock<Tokenizer<'static>> = OnceLock::new();
    T.get_or_init(|| {
        let mut texts: Vec<Vec<u8>> = vec![b"<unk>".to_vec(), b"<s>".to_vec(), b"</s>".to_vec()];
        let mut types = vec![2i32, 3, 3];
        let mut scores = vec![0u32; 3];
        for b in 0..=255u8 {
            texts.push(format!("<0x{b:02X}>").into_bytes());
            types.push(6);
            scores.push(0);
        }
        for (i, t) in [
            "▁", "a", "b", "ab", "▁a", "▁b", "aa", "ba", "▁ab", "é", "日本",
        ]
        .iter()
        .enumerate()
        {
            texts.push(t.as_bytes().to_vec());
            types.push(1);
            scores.push((-(i as f32) * 0.75).to_bits());
        }
        let (base, tokens) = leak_tokens(&texts);
        build_leaked(&SliceVocab {
            model: "llama",
            base,
            tokens: &tokens,
            token_types: Some(&types),
            scores: Some(&scores),
            ..SliceVocab::default()
        })
        .unwrap()
    })
}

fn encode(t: &Tokenizer<'_>, text: &str, opts: EncodeOptions) -> detllm::Result<Vec<u32>> {
    let mut mem = vec![0u8; Workspace::bytes_required(text.len()).unwrap()];
    let mut arena = Arena::new(&mut mem);
    let mut ws = Workspace::new(&mut arena, text.len())?;
    let mut out = vec![0u32; 2 * text.len() + 4];
    let n = t.encode_with(text, opts, &mut ws, &mut out)?;
    out.truncate(n);
    Ok(out)
}

fn stream(t: &Tokenizer<'_>, ids: &[u32], special: bool) -> String {
    let mut d = StreamDecoder::new(special);
    let mut buf = vec![0u8; StreamDecoder::max_output(t)];
    let mut s = String::new();
    for &id in ids {
        s.push_str(d.push(t, id, &mut buf).unwrap());
    }
    s.push_str(d.finish(&mut buf).unwrap());
    s
}

/// The fuzz property (see the module docs). Panics only on a violation.
pub fn check(data: &[u8]) {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let parse_special = mode & 0x10 != 0;
    let opts = EncodeOptions {
        parse_special,
        add_special: false,
    };
    match mode % 4 {
        0 | 1 => {
            let t = &bpe_toks()[(mode % 2) as usize];
            match std::str::from_utf8(rest) {
                Ok(s) => {
                    let ids = encode(t, s, opts).unwrap();
                    assert_eq!(stream(t, &ids, parse_special), s);
                }
                Err(_) => {
                    let s = String::from_utf8_lossy(rest);
                    let ids = encode(t, &s, opts).unwrap();
                    let _ = stream(t, &ids, true);
                }
            }
        }
        2 => {
            // SentencePiece cannot round-trip a literal U+2581 (it decodes
            // to a space) nor a special token (a space is prefixed after it).
            let t = spm_tok();
            let s = String::from_utf8_lossy(rest);
            let opts = EncodeOptions {
                parse_special: false,
                add_special: false,
            };
            let ids = encode(t, &s, opts).unwrap();
            let mut out = vec![0u8; 4 * s.len() + 64];
            let n = t.detokenize(&ids, false, false, &mut out).unwrap();
            if !s.contains('\u{2581}') {
                assert_eq!(&out[..n], s.as_bytes());
            }
        }
        _ => hostile(mode, rest),
    }
}

/// Hostile vocabularies that built (for the test below).
pub static BUILT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// Mode 3: a vocabulary built from the input.
fn hostile(mode: u8, rest: &[u8]) {
    // Layout: vocabulary bytes, 0x00, text. Tokens are separated by 0x01;
    // a token's first byte also chooses its type; consecutive token pairs
    // become merges "A B".
    let (vocab, text) = match rest.iter().position(|&b| b == 0) {
        Some(p) => (&rest[..p], &rest[p + 1..]),
        None => (rest, &[][..]),
    };
    let texts: Vec<Vec<u8>> = vocab.split(|&b| b == 1).map(<[u8]>::to_vec).collect();
    let types: Vec<i32> = texts
        .iter()
        .map(|t| t.first().map_or(1, |&b| i32::from(b % 8)))
        .collect();
    let scores: Vec<u32> = texts
        .iter()
        .enumerate()
        .map(|(i, t)| (t.len() as f32 - i as f32).to_bits())
        .collect();
    let merges: Vec<Vec<u8>> = texts
        .windows(2)
        .map(|w| [&w[0][..], b" ", &w[1][..]].concat())
        .collect();
    let merge_refs: Vec<&[u8]> = merges.iter().map(Vec::as_slice).collect();
    // Owned buffers (no leaks: this runs once per fuzz input).
    let base = texts.concat();
    let mut tokens = Vec::with_capacity(texts.len());
    let mut at = 0;
    for t in &texts {
        tokens.push(&base[at..at + t.len()]);
        at += t.len();
    }
    let src = SliceVocab {
        model: if mode & 0x20 != 0 { "llama" } else { "gpt2" },
        pre: Some(if mode & 0x40 != 0 { "smollm" } else { "gpt-2" }),
        base: &base,
        tokens: &tokens,
        token_types: Some(&types),
        scores: Some(&scores),
        merges: Some(&merge_refs),
        bos: Some(u32::from(mode)),
        eos: Some(u32::from(mode) / 2),
        add_bos: Some(mode & 0x80 != 0),
        add_eos: Some(mode & 0x08 != 0),
        add_space_prefix: Some(mode & 0x04 != 0),
    };
    let Ok(need) = Tokenizer::bytes_required_for(&src) else {
        return;
    };
    let mut mem = vec![0u8; need];
    let mut arena = Arena::new(&mut mem);
    let Ok(t) = Tokenizer::build(&src, &mut arena) else {
        return;
    };
    BUILT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let s = String::from_utf8_lossy(text);
    for parse_special in [false, true] {
        let opts = EncodeOptions {
            parse_special,
            add_special: true,
        };
        if let Ok(ids) = encode(&t, &s, opts) {
            let _ = stream(&t, &ids, parse_special);
            let mut out = vec![0u8; 8 * s.len() + 4 * t.max_piece_len() + 64];
            let _ = t.detokenize(&ids, true, parse_special, &mut out);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn seeds() {
        for s in [
            &b"\x00Hello, world!"[..],
            b"\x10<|im_start|>user\nhi<|im_end|>",
            b"\x01 2+2? 12345 it's caf\xc3\xa9",
            b"\x02abc \xc3\xa9 \xe6\x97\xa5",
            b"\x12<s>ab</s>",
            b"\x03a\x01b\x01ab\x00ab ab",
            b"\x23\xe2\x96\x81\x01a\x01\xe2\x96\x81a\x00 a a",
            b"\x00\xff\xfe invalid",
        ] {
            check(s);
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(3000))]

        #[test]
        fn arbitrary_bytes(data in prop::collection::vec(any::<u8>(), 0..64)) {
            check(&data);
        }

        #[test]
        fn arbitrary_text(mode in any::<u8>(), s in any::<String>()) {
            let mut data = vec![mode & !3];
            data.extend_from_slice(s.as_bytes());
            check(&data);
            data[0] |= 2;
            check(&data);
        }

        #[test]
        fn hostile_vocabularies(mode in any::<u8>(), toks in prop::collection::vec("[a-c\u{2581} <>|]{0,4}", 0..12), text in "[a-c\u{2581} <>|é]{0,16}") {
            let mut data = vec![(mode & !3) | 3];
            data.extend_from_slice(toks.join("\u{1}").as_bytes());
            data.push(0);
            data.extend_from_slice(text.as_bytes());
            check(&data);
        }
    }

    #[test]
    fn some_hostile_vocabularies_build() {
        // Distinct non-empty tokens, merges of existing pairs: must build.
        check(b"\x23a\x01b\x01ab\x00ab ba");
        check(b"\x03a\x01b\x01ab\x00ab ba");
        assert!(BUILT.load(std::sync::atomic::Ordering::Relaxed) >= 1);
    }
}
