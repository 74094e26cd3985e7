//! The tokenizer on small hand-built vocabularies: BPE merge order and
//! staleness, the two pre-tokenizers, special-token partition, SentencePiece
//! scores and byte fallback, malformed vocabularies. Every expected id list
//! below was worked out by hand from llama.cpp's algorithm (LLAMACPP-FACTS.md
//! §6); the derivations are in the comments.

use detllm::tokenizer::{
    EncodeOptions, SliceVocab, StreamDecoder, Tokenizer, TokenizerError, Workspace, bpe,
};
use detllm::{Arena, Error};
use proptest::prelude::*;

const NORMAL: i32 = 1;
const UNKNOWN: i32 = 2;
const CONTROL: i32 = 3;
const USER_DEFINED: i32 = 4;
const BYTE: i32 = 6;

/// A vocabulary kept alive for the whole test binary.
struct Vocab {
    base: &'static [u8],
    tokens: Vec<&'static [u8]>,
    types: Vec<i32>,
    scores: Option<Vec<u32>>,
    merges: Vec<&'static [u8]>,
}

impl Vocab {
    fn new(entries: &[(String, i32)], scores: Option<Vec<f32>>, merges: &[&str]) -> Vocab {
        let texts: Vec<String> = entries.iter().map(|(t, _)| t.clone()).collect();
        let joined = texts.concat().into_bytes();
        let base: &'static [u8] = Box::leak(joined.into_boxed_slice());
        let mut tokens = Vec::new();
        let mut at = 0;
        for t in &texts {
            tokens.push(&base[at..at + t.len()]);
            at += t.len();
        }
        Vocab {
            base,
            tokens,
            types: entries.iter().map(|&(_, ty)| ty).collect(),
            scores: scores.map(|s| s.iter().map(|x| x.to_bits()).collect()),
            merges: merges
                .iter()
                .map(|m| &*Box::leak(m.as_bytes().to_vec().into_boxed_slice()))
                .collect(),
        }
    }

    fn source(
        &'static self,
        model: &'static str,
        pre: Option<&'static str>,
    ) -> SliceVocab<'static, 'static> {
        SliceVocab {
            model,
            pre,
            base: self.base,
            tokens: &self.tokens,
            token_types: Some(&self.types),
            scores: self.scores.as_deref(),
            merges: (model == "gpt2").then_some(&self.merges[..]),
            ..SliceVocab::default()
        }
    }
}

fn build(src: &SliceVocab<'static, 'static>) -> Result<Tokenizer<'static>, Error> {
    let need = Tokenizer::bytes_required_for(src)?;
    let buf: &'static mut [u8] = Box::leak(vec![0u8; need].into_boxed_slice());
    let mut arena = Arena::new(buf);
    let t = Tokenizer::build(src, &mut arena)?;
    Ok(t)
}

fn enc(t: &Tokenizer<'_>, text: &str, parse_special: bool, add_special: bool) -> Vec<u32> {
    let mut mem = vec![0u8; Workspace::bytes_required(text.len()).unwrap()];
    let mut arena = Arena::new(&mut mem);
    let mut ws = Workspace::new(&mut arena, text.len()).unwrap();
    let mut out = vec![0u32; 2 * text.len() + 4];
    let opts = EncodeOptions {
        parse_special,
        add_special,
    };
    let n = t.encode_with(text, opts, &mut ws, &mut out).unwrap();
    out.truncate(n);
    out
}

fn id(t: &Tokenizer<'_>, text: &str) -> u32 {
    t.find_token(text.as_bytes())
        .unwrap_or_else(|| panic!("no token {text:?}"))
}

// ---------------------------------------------------------------- BPE

/// 256 byte-level chars (ids 0..256), four special tokens, merged tokens.
fn bpe_entries() -> Vec<(String, i32)> {
    let mut e: Vec<(String, i32)> = (0..=255u8)
        .map(|b| (bpe::byte_char(b).to_string(), NORMAL))
        .collect();
    for (t, ty) in [
        ("<|endoftext|>", CONTROL),
        ("<|im_end|>", CONTROL),
        ("<tool>", USER_DEFINED),
        ("<|im_start|>", CONTROL),
        ("abcd", CONTROL),
        ("xab", CONTROL),
        ("<x>", CONTROL),
        ("<x>y", USER_DEFINED),
    ] {
        e.push((t.to_string(), ty));
    }
    for t in [
        "he", "ll", "hell", "hello", "Ġw", "or", "Ġwor", "Ġworl", "Ġworld", "Ġh", "12",
    ] {
        e.push((t.to_string(), NORMAL));
    }
    e
}

const BPE_MERGES: &[&str] = &[
    "h e",     // 0
    "l l",     // 1
    "he ll",   // 2
    "hell o",  // 3
    "Ġ w",     // 4
    "o r",     // 5
    "Ġw or",   // 6
    "Ġwor l",  // 7
    "Ġworl d", // 8
    "Ġ h",     // 9: loses to "h e" (rank 0) in " hello"
    "1 2",     // 10
];

fn bpe_vocab() -> &'static Vocab {
    static V: std::sync::OnceLock<Vocab> = std::sync::OnceLock::new();
    V.get_or_init(|| Vocab::new(&bpe_entries(), None, BPE_MERGES))
}

fn bpe_tok(pre: &'static str) -> Tokenizer<'static> {
    let mut src = bpe_vocab().source("gpt2", Some(pre));
    src.eos = Some(256);
    src.bos = Some(256);
    build(&src).unwrap()
}

#[test]
fn bpe_merges_by_rank_then_left() {
    let t = bpe_tok("gpt-2");
    // "hello": h e l l o → (h,e)#0 → he l l o → (l,l)#1 → he ll o → (he,ll)#2 → hell o → #3.
    assert_eq!(enc(&t, "hello", false, false), [id(&t, "hello")]);
    // " world": Ġ w o r l d → #4 Ġw, #5 or, #6 Ġwor, #7 Ġworl, #8 Ġworld.
    assert_eq!(enc(&t, " world", false, false), [id(&t, "Ġworld")]);
    // " hello": (Ġ,h)#9 is queued but (h,e)#0 wins; then (Ġ,h) is stale and
    // "Ġ hello" has no merge.
    assert_eq!(
        enc(&t, " hello", false, false),
        [id(&t, "Ġ"), id(&t, "hello")]
    );
    // Equal ranks: leftmost first. "lll" → ll l, not l ll.
    assert_eq!(enc(&t, "lll", false, false), [id(&t, "ll"), id(&t, "l")]);
    assert_eq!(enc(&t, "llll", false, false), [id(&t, "ll"), id(&t, "ll")]);
    // No merges: one token per byte.
    assert_eq!(enc(&t, "é", false, false), [id(&t, "Ã"), id(&t, "©")]);
}

#[test]
fn bpe_pre_tokenizers() {
    let g = bpe_tok("gpt-2");
    let d = bpe_tok("smollm");
    // gpt-2 keeps digit runs together: "12" merges.
    assert_eq!(enc(&g, "12", false, false), [id(&g, "12")]);
    // smollm splits digits first: "12" stays two tokens.
    assert_eq!(enc(&d, "12", false, false), [id(&d, "1"), id(&d, "2")]);
    // " 1": smollm's digit split leaves the space alone.
    assert_eq!(enc(&d, " 1", false, false), [id(&d, "Ġ"), id(&d, "1")]);
    // Whitespace run before a word keeps its last space for the word.
    assert_eq!(
        enc(&g, "  world", false, false),
        [id(&g, "Ġ"), id(&g, "Ġworld")]
    );
    // Unsupported pre-tokenizers are typed errors naming the pre string.
    let mut src = bpe_vocab().source("gpt2", Some("tekken"));
    match build(&src) {
        Err(Error::Tokenizer(e @ TokenizerError::UnsupportedPre { name: Some(_) })) => {
            assert!(e.to_string().contains("\"tekken\""), "{e}");
        }
        other => panic!("expected UnsupportedPre, got {:?}", other.err()),
    }
    src.pre = None;
    assert!(matches!(
        build(&src),
        Err(Error::Tokenizer(TokenizerError::UnsupportedPre { .. }))
    ));
}

#[test]
fn special_partition() {
    let t = bpe_tok("gpt-2");
    let (x, y, z) = (id(&t, "x"), id(&t, "y"), id(&t, "z"));
    let im_end = id(&t, "<|im_end|>");
    // Control tokens only with parse_special.
    assert_eq!(enc(&t, "x<|im_end|>y", true, false), [x, im_end, y]);
    let off = enc(&t, "x<|im_end|>y", false, false);
    assert!(!off.contains(&im_end));
    assert_eq!(off.len(), 12);
    // User-defined tokens always.
    let tool = id(&t, "<tool>");
    assert_eq!(enc(&t, "<tool>", false, false), [tool]);
    assert_eq!(enc(&t, "<tool>", true, false), [tool]);
    // Longest first, not leftmost first: "abcd" (4) is claimed before "xab" (3).
    assert_eq!(enc(&t, "xabcd", true, false), [x, id(&t, "abcd")]);
    assert_eq!(enc(&t, "xabc", true, false), [id(&t, "xab"), id(&t, "c")]);
    // "<x>y" (user-defined, longer) beats "<x>" (control).
    assert_eq!(enc(&t, "<x>y", true, false), [id(&t, "<x>y")]);
    assert_eq!(enc(&t, "<x>z", true, false), [id(&t, "<x>"), z]);
    assert_eq!(enc(&t, "<x>y", false, false), [id(&t, "<x>y")]);
    // Back-to-back and repeated occurrences.
    assert_eq!(
        enc(&t, "<|im_end|><|im_end|>x<|im_end|>", true, false),
        [im_end, im_end, x, im_end]
    );
}

#[test]
fn bos_eos_and_eog() {
    let mut src = bpe_vocab().source("gpt2", Some("gpt-2"));
    src.bos = Some(259);
    src.eos = Some(256);
    src.add_bos = Some(true);
    src.add_eos = Some(true);
    let t = build(&src).unwrap();
    let h = id(&t, "hello");
    assert_eq!(enc(&t, "hello", false, true), [259, h, 256]);
    assert_eq!(enc(&t, "hello", false, false), [h]);
    assert_eq!(enc(&t, "", false, true), [259, 256]);
    // EOG: eos plus the texts llama.cpp recognises.
    assert_eq!(t.eog_ids(), &[256, 257]);
    // Out-of-range ids in metadata keep the default (11 for gpt2).
    src.bos = Some(1_000_000);
    assert_eq!(build(&src).unwrap().bos(), Some(11));
}

#[test]
fn malformed_vocabularies_are_errors() {
    let entries = bpe_entries();
    // Duplicate token.
    let mut dup = entries.clone();
    dup.push(("hello".to_string(), NORMAL));
    let v: &'static Vocab = Box::leak(Box::new(Vocab::new(&dup, None, BPE_MERGES)));
    assert!(matches!(
        build(&v.source("gpt2", Some("gpt-2"))),
        Err(Error::Tokenizer(TokenizerError::DuplicateToken { id: 275 }))
    ));
    // Empty token.
    let mut empty = entries.clone();
    empty.push((String::new(), NORMAL));
    let v: &'static Vocab = Box::leak(Box::new(Vocab::new(&empty, None, BPE_MERGES)));
    assert!(matches!(
        build(&v.source("gpt2", Some("gpt-2"))),
        Err(Error::Tokenizer(TokenizerError::EmptyToken { id: 275 }))
    ));
    // Merge with a result that is not a token.
    let v: &'static Vocab = Box::leak(Box::new(Vocab::new(&entries, None, &["h e", "x y"])));
    assert!(matches!(
        build(&v.source("gpt2", Some("gpt-2"))),
        Err(Error::Tokenizer(TokenizerError::BadMerge { rank: 1 }))
    ));
    // Missing merges, unknown model.
    let mut src = bpe_vocab().source("gpt2", Some("gpt-2"));
    src.merges = None;
    assert!(matches!(
        build(&src),
        Err(Error::Tokenizer(TokenizerError::MissingMerges))
    ));
    src.model = "bert";
    assert!(matches!(
        build(&src),
        Err(Error::Tokenizer(TokenizerError::UnsupportedModel { .. }))
    ));
    // token_type array of the wrong length.
    let mut src = bpe_vocab().source("gpt2", Some("gpt-2"));
    let short = &bpe_vocab().types[..10];
    src.token_types = Some(short);
    assert!(matches!(
        build(&src),
        Err(Error::Tokenizer(TokenizerError::ArrayLength {
            found: 10,
            ..
        }))
    ));
    // A token outside the base buffer.
    let mut src = bpe_vocab().source("gpt2", Some("gpt-2"));
    src.base = &bpe_vocab().base[1..];
    assert!(matches!(
        build(&src),
        Err(Error::Tokenizer(TokenizerError::TokenOutsideBase { id: 0 }))
    ));
    // A merge without a space is ignored, as in llama.cpp.
    let v: &'static Vocab = Box::leak(Box::new(Vocab::new(&entries, None, &["he", "h e"])));
    let t = build(&v.source("gpt2", Some("gpt-2"))).unwrap();
    assert_eq!(enc(&t, "he", false, false), [id(&t, "he")]);
}

#[test]
fn arena_too_small_is_an_error() {
    let src = bpe_vocab().source("gpt2", Some("gpt-2"));
    let need = Tokenizer::bytes_required_for(&src).unwrap();
    let buf: &'static mut [u8] = Box::leak(vec![0u8; need / 2].into_boxed_slice());
    let mut arena = Arena::new(buf);
    assert!(matches!(
        Tokenizer::build(&src, &mut arena),
        Err(Error::ArenaExhausted { .. })
    ));
}

fn stream(t: &Tokenizer<'_>, ids: &[u32]) -> String {
    let mut d = StreamDecoder::new(false);
    let mut buf = vec![0u8; StreamDecoder::max_output(t)];
    let mut s = String::new();
    for &i in ids {
        s.push_str(d.push(t, i, &mut buf).unwrap());
    }
    s.push_str(d.finish(&mut buf).unwrap());
    s
}

#[test]
fn stream_decoder_replaces_ill_formed_bytes() {
    let t = bpe_tok("gpt-2");
    let b = |x: u8| id(&t, &bpe::byte_char(x).to_string());
    // E2 82 AC = "€" split over three tokens: nothing until the last.
    let mut d = StreamDecoder::new(false);
    let mut buf = vec![0u8; StreamDecoder::max_output(&t)];
    assert_eq!(d.push(&t, b(0xE2), &mut buf).unwrap(), "");
    assert_eq!(d.push(&t, b(0x82), &mut buf).unwrap(), "");
    assert_eq!(d.push(&t, b(0xAC), &mut buf).unwrap(), "€");
    // Ill-formed: lone continuation, truncated sequence, surrogate, overlong.
    assert_eq!(stream(&t, &[b(0x80)]), "\u{FFFD}");
    assert_eq!(stream(&t, &[b(0xE2), b(0x82), b(b'a')]), "\u{FFFD}a");
    assert_eq!(
        stream(&t, &[b(0xED), b(0xA0), b(0x80)]),
        "\u{FFFD}\u{FFFD}\u{FFFD}"
    );
    assert_eq!(stream(&t, &[b(0xC0), b(0xAF)]), "\u{FFFD}\u{FFFD}");
    assert_eq!(stream(&t, &[b(0xF0), b(0x9F)]), "\u{FFFD}");
    // Same as std's lossy conversion on random byte strings.
    for seed in 0..200u32 {
        let bytes: Vec<u8> = (0..16u32)
            .map(|i| {
                (seed
                    .wrapping_mul(2654435761)
                    .wrapping_add(i.wrapping_mul(40503))
                    >> 7) as u8
            })
            .collect();
        let ids: Vec<u32> = bytes.iter().map(|&x| b(x)).collect();
        assert_eq!(stream(&t, &ids), String::from_utf8_lossy(&bytes));
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1000))]

    #[test]
    fn bpe_roundtrip_synthetic(s in any::<String>(), digits in any::<bool>()) {
        let t = bpe_tok(if digits { "smollm" } else { "gpt-2" });
        let ids = enc(&t, &s, false, false);
        prop_assert_eq!(stream(&t, &ids), s);
    }

    #[test]
    fn bpe_roundtrip_merge_heavy(s in "[helowrd1 2]{0,40}") {
        let t = bpe_tok("gpt-2");
        let ids = enc(&t, &s, false, false);
        prop_assert_eq!(stream(&t, &ids), s);
    }

    #[test]
    fn stream_matches_lossy(bytes in prop::collection::vec(any::<u8>(), 0..40)) {
        let t = bpe_tok("gpt-2");
        let ids: Vec<u32> = bytes
            .iter()
            .map(|&x| id(&t, &bpe::byte_char(x).to_string()))
            .collect();
        prop_assert_eq!(stream(&t, &ids), String::from_utf8_lossy(&bytes));
    }
}

// ---------------------------------------------------------------- SPM

/// `<unk> <s> </s>`, 256 byte tokens, then scored pieces.
fn spm_vocab() -> &'static Vocab {
    static V: std::sync::OnceLock<Vocab> = std::sync::OnceLock::new();
    V.get_or_init(|| {
        let mut e: Vec<(String, i32)> = vec![
            ("<unk>".into(), UNKNOWN),
            ("<s>".into(), CONTROL),
            ("</s>".into(), CONTROL),
        ];
        let mut scores = vec![0.0f32, 0.0, 0.0];
        for b in 0..=255u8 {
            e.push((format!("<0x{b:02X}>"), BYTE));
            scores.push(0.0);
        }
        for (t, s) in [
            ("▁", -1.0f32),
            ("a", -2.0),
            ("b", -3.0),
            ("c", -4.0),
            ("ab", -5.0),
            ("bc", -1.5),
            ("▁a", -0.5),
            ("aa", -1.0),
            ("▁b", -10.0),
            ("x", -2.0),
            ("y", -2.0),
            ("xy", -3.0),
            ("yx", -3.0),
        ] {
            e.push((t.into(), NORMAL));
            scores.push(s);
        }
        Vocab::new(&e, Some(scores), &[])
    })
}

fn spm_tok() -> Tokenizer<'static> {
    build(&spm_vocab().source("llama", None)).unwrap()
}

#[test]
fn spm_merges_by_score() {
    let t = spm_tok();
    let i = |s: &str| id(&t, s);
    assert!(t.add_bos() && t.add_space_prefix());
    assert_eq!(t.bos(), Some(1));
    // "▁abc": pairs ▁a (-0.5), ab (-5), bc (-1.5). ▁a first, then bc;
    // "▁abc" is not a token.
    assert_eq!(enc(&t, "abc", false, true), [1, i("▁a"), i("bc")]);
    // "▁aaa": ▁a (-0.5) first; then the two "aa" (-1) pairs: the left one
    // (symbols 1,2) is stale (symbol 1 merged), the right one merges.
    assert_eq!(enc(&t, "aaa", false, true), [1, i("▁a"), i("aa")]);
    // Equal scores xy / yx (-3): "xyx" → left pair first → xy x.
    assert_eq!(enc(&t, "xyx", false, false)[1..], [i("xy"), i("x")]);
    // Spaces become ▁: "▁b▁c": ▁b (-10) merges, "▁c" is not a token.
    assert_eq!(enc(&t, "b c", false, false), [i("▁b"), i("▁"), i("c")]);
    // Byte fallback, uppercase hex: "é" = C3 A9.
    assert_eq!(
        enc(&t, "é", false, false),
        [i("▁"), i("<0xC3>"), i("<0xA9>")]
    );
    // A special token resets the space prefix.
    assert_eq!(enc(&t, "<s>ab", true, true), [1, 1, i("▁a"), i("b")]);
    assert_eq!(enc(&t, "", false, true), [1]);
}

#[test]
fn spm_decode() {
    let t = spm_tok();
    let ids = enc(&t, "abc é", false, true);
    let mut out = [0u8; 64];
    // As llama_detokenize: the leading space is stripped from the first
    // piece only; a removed BOS turns the stripping off, and a kept BOS is
    // itself the first piece ("" without `special`).
    let n = t.detokenize(&ids, true, false, &mut out).unwrap();
    assert_eq!(&out[..n], " abc é".as_bytes());
    let n = t.detokenize(&ids, false, false, &mut out).unwrap();
    assert_eq!(&out[..n], " abc é".as_bytes());
    let n = t.detokenize(&ids[1..], false, false, &mut out).unwrap();
    assert_eq!(&out[..n], "abc é".as_bytes());
    let n = t.detokenize(&ids, false, true, &mut out).unwrap();
    assert_eq!(&out[..n], "<s> abc é".as_bytes());
    assert_eq!(t.token_bytes(id(&t, "<0x41>")), Some(&b"A"[..]));
    assert_eq!(t.token_bytes(id(&t, "▁a")), Some(&b" a"[..]));
}

#[test]
fn spm_nan_score_is_an_error() {
    let v = spm_vocab();
    let mut scores = v.scores.clone().unwrap();
    scores[270] = f32::NAN.to_bits();
    let scores: &'static [u32] = Box::leak(scores.into_boxed_slice());
    let mut src = v.source("llama", None);
    src.scores = Some(scores);
    assert!(matches!(
        build(&src),
        Err(Error::Tokenizer(TokenizerError::NanScore { id: 270 }))
    ));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1000))]

    #[test]
    fn spm_roundtrip(s in "[abcxy é日\u{1F600}]{0,24}") {
        let t = spm_tok();
        let ids = enc(&t, &s, false, false);
        let mut out = vec![0u8; 4 * s.len() + 8];
        let n = t.detokenize(&ids, false, false, &mut out).unwrap();
        prop_assert_eq!(&out[..n], s.as_bytes());
    }
}
