//! The vocabulary: token texts borrowed zero-copy, a sorted index for
//! text → id, attributes, scores, decoded pieces; and `build` (behind
//! [`Tokenizer::build`]), which reads
//! a [`VocabSource`] (a GGUF file, or plain slices in tests) into a
//! [`Tokenizer`].
//!
//! Token texts are stored as `(start, len)` spans into the source's `base`
//! buffer (the model bytes), found from each string slice's address. Lookup by
//! text is a binary search over ids sorted by text (`O(log V)` comparisons).
//! Merges `"A B"` are resolved to `(id(A), id(B)) → (id(AB), rank)` once and
//! sorted by the id pair, so the BPE loop never compares strings.

#![forbid(unsafe_code)]

use super::{
    MAX_EOG, Model, NONE, Tokenizer, TokenizerError, attr, bpe, chat, decode, pretok, spm,
};
use crate::error::Name;
use crate::{Arena, Error, Result};
use core::cmp::Ordering;

/// Metadata keys read by [`Tokenizer::build`] (llama.cpp's names).
pub mod keys {
    /// Vocabulary type: `gpt2` or `llama`.
    pub const MODEL: &str = "tokenizer.ggml.model";
    /// Pre-tokenizer name.
    pub const PRE: &str = "tokenizer.ggml.pre";
    /// Token texts (array of strings).
    pub const TOKENS: &str = "tokenizer.ggml.tokens";
    /// Token types (array of i32).
    pub const TOKEN_TYPE: &str = "tokenizer.ggml.token_type";
    /// SentencePiece scores (array of f32).
    pub const SCORES: &str = "tokenizer.ggml.scores";
    /// BPE merges (array of strings `"A B"`).
    pub const MERGES: &str = "tokenizer.ggml.merges";
    /// BOS id.
    pub const BOS: &str = "tokenizer.ggml.bos_token_id";
    /// EOS id.
    pub const EOS: &str = "tokenizer.ggml.eos_token_id";
    /// EOT id.
    pub const EOT: &str = "tokenizer.ggml.eot_token_id";
    /// EOM id.
    pub const EOM: &str = "tokenizer.ggml.eom_token_id";
    /// FIM pad id.
    pub const FIM_PAD: &str = "tokenizer.ggml.fim_pad_token_id";
    /// FIM repo id.
    pub const FIM_REP: &str = "tokenizer.ggml.fim_rep_token_id";
    /// FIM separator id.
    pub const FIM_SEP: &str = "tokenizer.ggml.fim_sep_token_id";
    /// Add BOS when encoding.
    pub const ADD_BOS: &str = "tokenizer.ggml.add_bos_token";
    /// Add EOS when encoding.
    pub const ADD_EOS: &str = "tokenizer.ggml.add_eos_token";
    /// SentencePiece: prefix a space.
    pub const ADD_SPACE_PREFIX: &str = "tokenizer.ggml.add_space_prefix";
    /// The model's Jinja chat template.
    pub const CHAT_TEMPLATE: &str = "tokenizer.chat_template";
}

/// Where a vocabulary comes from. `from_gguf` implements it over a GGUF
/// file; tests implement it over plain slices. Every `&'a [u8]` handed out
/// must lie inside [`VocabSource::base`].
pub trait VocabSource<'a> {
    /// The buffer all token strings are borrowed from (the model bytes).
    fn base(&self) -> &'a [u8];
    /// A string value (`Ok(None)` if absent; `Err` if present with another type).
    fn get_str(&self, key: &str) -> Result<Option<&'a [u8]>>;
    /// A u32 value.
    fn get_u32(&self, key: &str) -> Result<Option<u32>>;
    /// A bool value.
    fn get_bool(&self, key: &str) -> Result<Option<bool>>;
    /// Number of tokens (`Err` if the token array is missing or mistyped).
    fn n_tokens(&self) -> Result<usize>;
    /// Calls `f(id, text)` for every token in id order.
    fn for_each_token(&self, f: &mut dyn FnMut(usize, &'a [u8]) -> Result<()>) -> Result<()>;
    /// Number of merges, `None` if there is no merge array.
    fn n_merges(&self) -> Result<Option<usize>>;
    /// Calls `f(rank, "A B")` for every merge in order.
    fn for_each_merge(&self, f: &mut dyn FnMut(usize, &'a [u8]) -> Result<()>) -> Result<()>;
    /// Length of the token-type array, `None` if absent.
    fn n_token_types(&self) -> Result<Option<usize>>;
    /// Token type `i` (llama.cpp `llama_token_type`).
    fn token_type(&self, i: usize) -> Result<i32>;
    /// Length of the score array, `None` if absent.
    fn n_scores(&self) -> Result<Option<usize>>;
    /// Score `i` as f32 bits.
    fn score_bits(&self, i: usize) -> Result<u32>;
}

/// Token texts, index, attributes, scores and decoded pieces.
pub(crate) struct Vocab<'a> {
    base: &'a [u8],
    /// (n_vocab, 2): start, len of each token text in `base`.
    spans: &'a [[u32; 2]],
    /// (n_vocab,): ids sorted by text.
    sorted: &'a [u32],
    /// (n_vocab,): first 8 text bytes of `sorted[i]`, big-endian, zero-padded:
    /// most binary-search probes compare these without touching the texts.
    keys: &'a [u64],
    /// (257,): `sorted[bucket[b]..bucket[b + 1]]` are the ids whose text starts with byte `b`.
    bucket: [u32; 257],
    /// (n_vocab,): attribute bits.
    attrs: &'a [u8],
    /// (n_vocab,) for SPM, empty for BPE: scores as order-preserving keys.
    scores: &'a [u32],
    /// Decoded pieces (special = true): bytes and (n_vocab, 2) spans into them.
    pieces: &'a [u8],
    piece_spans: &'a [[u32; 2]],
    max_piece_len: usize,
}

impl<'a> Vocab<'a> {
    pub(crate) fn len(&self) -> usize {
        self.spans.len()
    }

    #[inline]
    pub(crate) fn text(&self, id: u32) -> Option<&'a [u8]> {
        let [s, n] = *self.spans.get(id as usize)?;
        self.base
            .get(s as usize..(s as usize).checked_add(n as usize)?)
    }

    #[inline]
    fn text_or_empty(&self, id: u32) -> &'a [u8] {
        self.text(id).unwrap_or(&[])
    }

    pub(crate) fn attr(&self, id: u32) -> Option<u8> {
        self.attrs.get(id as usize).copied()
    }

    /// Order-preserving key of the token's score (0 if there are no scores).
    pub(crate) fn score_key(&self, id: u32) -> u32 {
        self.scores.get(id as usize).copied().unwrap_or(0)
    }

    /// The id whose text is `text`.
    pub(crate) fn find(&self, text: &[u8]) -> Option<u32> {
        let qk = prefix_key(text, &[]);
        self.search(*text.first()?, qk, |t| t.cmp(text))
    }

    /// Binary search in the bucket of `first` for the text `cmp` accepts,
    /// comparing prefix keys first. `cmp(t)` orders a vocabulary text `t`
    /// against the query; `qk` is the query's prefix key.
    #[inline]
    fn search(&self, first: u8, qk: u64, cmp: impl Fn(&[u8]) -> Ordering) -> Option<u32> {
        let mut lo = self.bucket[first as usize] as usize;
        let mut hi = self.bucket[first as usize + 1] as usize;
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            let k = *self.keys.get(mid)?;
            let id = *self.sorted.get(mid)?;
            // Keys order like the texts whenever they differ.
            let o = k.cmp(&qk).then_with(|| cmp(self.text_or_empty(id)));
            match o {
                Ordering::Less => lo = mid + 1,
                Ordering::Greater => hi = mid,
                Ordering::Equal => return Some(id),
            }
        }
        None
    }

    /// The id whose text is the byte sequence `it` yields.
    pub(crate) fn find_iter<I: Iterator<Item = u8> + Clone>(&self, it: I) -> Option<u32> {
        let mut k = [0u8; 8];
        for (slot, x) in k.iter_mut().zip(it.clone()) {
            *slot = x;
        }
        let first = it.clone().next()?;
        self.search(first, u64::from_be_bytes(k), |t| {
            t.iter().copied().cmp(it.clone())
        })
    }

    /// The id whose text is `a` followed by `b`.
    fn find_concat(&self, a: &[u8], b: &[u8]) -> Option<u32> {
        let first = *a.first().or(b.first())?;
        self.search(first, prefix_key(a, b), |t| cmp_concat(t, a, b))
    }

    pub(crate) fn piece(&self, id: u32, special: bool) -> Option<&'a [u8]> {
        let a = self.attr(id)?;
        if !special && a & (attr::CONTROL | attr::UNKNOWN) != 0 {
            return Some(&[]);
        }
        let [s, n] = *self.piece_spans.get(id as usize)?;
        self.pieces
            .get(s as usize..(s as usize).checked_add(n as usize)?)
    }

    pub(crate) fn max_piece_len(&self) -> usize {
        self.max_piece_len
    }
}

/// The first 8 bytes of `a ++ b`, big-endian, zero-padded. For two texts
/// whose keys differ, the keys order like the texts (a shorter text padded
/// with 0 sorts first, as a prefix does).
fn prefix_key(a: &[u8], b: &[u8]) -> u64 {
    let mut k = [0u8; 8];
    for (slot, &x) in k.iter_mut().zip(a.iter().chain(b)) {
        *slot = x;
    }
    u64::from_be_bytes(k)
}

/// `t` compared with the concatenation `a ++ b`.
fn cmp_concat(t: &[u8], a: &[u8], b: &[u8]) -> Ordering {
    let k = t.len().min(a.len());
    match t.get(..k).cmp(&a.get(..k)) {
        Ordering::Equal => {}
        o => return o,
    }
    if t.len() < a.len() {
        return Ordering::Less;
    }
    t.get(a.len()..).unwrap_or(&[]).cmp(b)
}

/// Order-preserving u32 key of f32 bits (`-0` equals `+0`; NaN rejected by the caller).
pub(crate) fn score_key(bits: u32) -> u32 {
    const SIGN: u32 = 0x8000_0000;
    let bits = if bits == SIGN { 0 } else { bits };
    if bits & SIGN != 0 { !bits } else { bits | SIGN }
}

fn is_nan(bits: u32) -> bool {
    const ABS: u32 = 0x7FFF_FFFF;
    const INF: u32 = 0x7F80_0000;
    bits & ABS > INF
}

/// `(n_tokens, total text bytes)` of a source.
pub(crate) fn count_tokens<'a, S: VocabSource<'a>>(src: &S) -> Result<(usize, usize)> {
    let n = src.n_tokens()?;
    let mut total = 0usize;
    src.for_each_token(&mut |_, t| {
        total = total.checked_add(t.len()).ok_or(Error::SizeOverflow)?;
        Ok(())
    })?;
    Ok((n, total))
}

/// Offset of `s` inside `base`, if it lies there.
fn span_in(base: &[u8], s: &[u8]) -> Option<[u32; 2]> {
    let b0 = base.as_ptr() as usize;
    let s0 = s.as_ptr() as usize;
    let off = s0.checked_sub(b0)?;
    let end = off.checked_add(s.len())?;
    if end > base.len() {
        return None;
    }
    Some([u32::try_from(off).ok()?, u32::try_from(s.len()).ok()?])
}

/// Pre-tokenizer of a `gpt2` vocabulary, from llama.cpp's name table
/// (`tokenizer.ggml.pre` → pre-type in `llama_vocab::impl::load`, llama.cpp
/// as vendored by llama-cpp-python 0.3.36), for the pre-types whose split
/// this crate implements.
fn pre_of(name: Option<&[u8]>) -> Result<pretok::Pre> {
    // STARCODER, REFACT, COMMAND_R, SMOLLM, CODESHELL, EXAONE, MINERVA.
    const DIGITS: [&[u8]; 7] = [
        b"smollm",
        b"starcoder",
        b"refact",
        b"command-r",
        b"codeshell",
        b"exaone",
        b"minerva-7b",
    ];
    // GPT2, MPT, OLMO, JAIS.
    const GPT2: [&[u8]; 18] = [
        b"gpt-2",
        b"gpt2",
        b"phi-2",
        b"jina-es",
        b"jina-de",
        b"gigachat",
        b"jina-v1-en",
        b"jina-v2-es",
        b"jina-v2-de",
        b"jina-v2-code",
        b"roberta-bpe",
        b"a.x-4.0",
        b"mellum",
        b"modern-bert",
        b"exaone4",
        b"mpt",
        b"olmo",
        b"jais",
    ];
    // LLAMA3 (which also sets ignore_merges and add_bos).
    const LLAMA3: [&[u8]; 9] = [
        b"llama3",
        b"llama-v3",
        b"llama-bpe",
        b"falcon3",
        b"falcon-h1",
        b"pixtral",
        b"midm-2.0",
        b"lfm2",
        b"jina-v5-nano",
    ];
    // DBRX, SMAUG: the llama-3 split with plain merges.
    const DBRX: [&[u8]; 2] = [b"dbrx", b"smaug-bpe"];
    // QWEN2, STABLELM2.
    const QWEN2: [&[u8]; 6] = [
        b"qwen2",
        b"deepseek-r1-qwen",
        b"kormo",
        b"f2llmv2",
        b"megrez",
        b"stablelm2",
    ];
    match name {
        Some(n) if DIGITS.contains(&n) => Ok(pretok::Pre::Digits),
        Some(n) if GPT2.contains(&n) => Ok(pretok::Pre::Gpt2),
        Some(n) if LLAMA3.contains(&n) => Ok(pretok::Pre::Llama3),
        Some(n) if DBRX.contains(&n) => Ok(pretok::Pre::Dbrx),
        Some(n) if QWEN2.contains(&n) => Ok(pretok::Pre::Qwen2),
        Some(b"qwen35") => Ok(pretok::Pre::Qwen35),
        Some(b"deepseek-coder") => Ok(pretok::Pre::DeepseekCoder),
        Some(b"deepseek-llm") => Ok(pretok::Pre::DeepseekLlm),
        Some(b"falcon") => Ok(pretok::Pre::Falcon),
        _ => Err(TokenizerError::UnsupportedPre {
            name: name.map(name_of),
        }
        .into()),
    }
}

// Token texts llama.cpp recognises (src/llama-vocab.cpp, February 2025).
const EOT_TEXTS: [&[u8]; 7] = [
    b"<|eot_id|>",
    b"<|im_end|>",
    b"<|end|>",
    b"<end_of_turn>",
    b"<|endoftext|>",
    b"<EOT>",
    "<｜end▁of▁sentence｜>".as_bytes(),
];
const EOM_TEXTS: [&[u8]; 1] = [b"<|eom_id|>"];
const FIM_PRE_TEXTS: [&[u8]; 4] = [
    b"<|fim_prefix|>",
    b"<fim-prefix>",
    "<｜fim▁begin｜>".as_bytes(),
    b"<PRE>",
];
const FIM_SUF_TEXTS: [&[u8]; 4] = [
    b"<|fim_suffix|>",
    b"<fim-suffix>",
    "<｜fim▁hole｜>".as_bytes(),
    b"<SUF>",
];
const FIM_MID_TEXTS: [&[u8]; 4] = [
    b"<|fim_middle|>",
    b"<fim-middle>",
    "<｜fim▁end｜>".as_bytes(),
    b"<MID>",
];
const FIM_PAD_TEXTS: [&[u8]; 3] = [b"<|fim_pad|>", b"<fim-pad>", b"<PAD>"];
const FIM_REP_TEXTS: [&[u8]; 4] = [b"<|fim_repo|>", b"<|repo_name|>", b"<fim-repo>", b"<REPO>"];
const FIM_SEP_TEXTS: [&[u8]; 1] = [b"<|file_sep|>"];
const EOG_TEXTS: [&[u8]; 7] = [
    b"<|eot_id|>",
    b"<|im_end|>",
    b"<|end|>",
    b"<end_of_turn>",
    b"<|endoftext|>",
    b"<|eom_id|>",
    b"<EOT>",
];

/// Build a [`Tokenizer`] (see [`Tokenizer::build`]).
///
/// One named step per part of the tokenizer. Each reads or carves what the
/// later ones need; their order fixes the arena layout and which error a
/// malformed vocabulary reports first, so keep it.
pub(crate) fn build<'a, S: VocabSource<'a>>(
    src: &S,
    arena: &mut Arena<'a>,
) -> Result<Tokenizer<'a>> {
    let model = read_model(src)?;
    let is_spm = model == Model::Spm;
    let n = src.n_tokens()?;
    if n == 0 || n >= (NONE - 1) as usize {
        return Err(TokenizerError::BadTokenCount { n }.into());
    }
    let base = src.base();
    let (spans, total_bytes) = token_spans(src, base, n, arena)?;
    let attrs = token_attrs(src, n, arena)?;
    let scores = token_scores(src, n, is_spm, arena)?;
    let mut vocab = index_texts(base, spans, scores, arena)?;
    let flags = read_flags(src, model, n as u32)?;
    let (eog, n_eog) = mark_special_ids(src, &vocab, attrs, flags.eos)?;
    let attrs: &'a [u8] = attrs;
    vocab.attrs = attrs;
    let specials = special_cache(&vocab, arena)?;
    decode_pieces(&mut vocab, is_spm, total_bytes, arena)?;
    let byte_token = byte_tokens(&vocab, is_spm);
    let merges = if is_spm {
        &[]
    } else {
        merge_table(src, &vocab, arena)?
    };
    let merges_by_left = index_merges_by_left(merges, n, is_spm, arena)?;
    // A template that is missing, mistyped or not UTF-8 is "no template".
    let tmpl = src
        .get_str(keys::CHAT_TEMPLATE)
        .ok()
        .flatten()
        .and_then(|t| core::str::from_utf8(t).ok());
    let chat_template = chat::Template::detect(tmpl, vocab.find(b"<start_of_turn>").is_some());
    Ok(Tokenizer {
        model,
        vocab,
        merges,
        merges_by_left,
        byte_token,
        specials,
        bos: flags.bos,
        eos: flags.eos,
        add_bos: flags.add_bos,
        add_eos: flags.add_eos,
        add_space_prefix: flags.add_space_prefix,
        eog,
        n_eog,
        chat_template,
    })
}

/// The vocabulary type and, for `gpt2`, its pre-tokenizer (llama.cpp
/// `llama_vocab::impl::load`).
fn read_model<'a, S: VocabSource<'a>>(src: &S) -> Result<Model> {
    let name = src
        .get_str(keys::MODEL)?
        .ok_or(TokenizerError::MissingModel)?;
    match name {
        b"gpt2" => Ok(Model::Bpe(pre_of(src.get_str(keys::PRE)?)?)),
        b"llama" => Ok(Model::Spm),
        _ => Err(TokenizerError::UnsupportedModel {
            name: name_of(name),
        }
        .into()),
    }
}

/// `bytes` as an inline [`Name`] for an error message (its valid UTF-8 prefix).
fn name_of(bytes: &[u8]) -> Name {
    let text = match core::str::from_utf8(bytes) {
        Ok(s) => s,
        Err(e) => core::str::from_utf8(bytes.get(..e.valid_up_to()).unwrap_or(&[])).unwrap_or(""),
    };
    Name::new(text)
}

/// `text` of token `id` given the spans into `base` (empty if out of range).
fn span_text<'a>(base: &'a [u8], spans: &[[u32; 2]], id: u32) -> &'a [u8] {
    spans
        .get(id as usize)
        .and_then(|&[s, l]| base.get(s as usize..(s as usize).checked_add(l as usize)?))
        .unwrap_or(&[])
}

/// (n,): each token's text as a `(start, len)` span into `base` (non-empty,
/// inside `base`); and the texts' total length.
fn token_spans<'a, S: VocabSource<'a>>(
    src: &S,
    base: &'a [u8],
    n: usize,
    arena: &mut Arena<'a>,
) -> Result<(&'a [[u32; 2]], usize)> {
    let spans: &'a mut [[u32; 2]] = arena.alloc(n)?;
    let mut total_bytes = 0usize;
    let mut seen = 0usize;
    src.for_each_token(&mut |i, t| {
        let id = i as u32;
        if t.is_empty() {
            return Err(TokenizerError::EmptyToken { id }.into());
        }
        let sp = span_in(base, t).ok_or(TokenizerError::TokenOutsideBase { id })?;
        *spans
            .get_mut(i)
            .ok_or(TokenizerError::BadTokenCount { n: i + 1 })? = sp;
        total_bytes = total_bytes
            .checked_add(t.len())
            .ok_or(Error::SizeOverflow)?;
        seen = i + 1;
        Ok(())
    })?;
    if seen != n {
        return Err(TokenizerError::BadTokenCount { n: seen }.into());
    }
    Ok((spans, total_bytes))
}

/// (n,): attribute bits from `token_type` (all [`attr::NORMAL`] without one).
fn token_attrs<'a, S: VocabSource<'a>>(
    src: &S,
    n: usize,
    arena: &mut Arena<'a>,
) -> Result<&'a mut [u8]> {
    let attrs: &'a mut [u8] = arena.alloc_filled(n, attr::NORMAL)?;
    if let Some(len) = src.n_token_types()? {
        check_array_len(keys::TOKEN_TYPE, n, len)?;
        for (i, a) in attrs.iter_mut().enumerate() {
            *a = attr::from_token_type(src.token_type(i)?);
        }
    }
    Ok(attrs)
}

/// (n,) for SPM, empty for BPE: scores as order-preserving keys (0.0
/// without a score array; NaN rejected).
fn token_scores<'a, S: VocabSource<'a>>(
    src: &S,
    n: usize,
    is_spm: bool,
    arena: &mut Arena<'a>,
) -> Result<&'a [u32]> {
    let scores: &'a mut [u32] = arena.alloc(if is_spm { n } else { 0 })?;
    if is_spm && let Some(len) = src.n_scores()? {
        check_array_len(keys::SCORES, n, len)?;
        for (i, s) in scores.iter_mut().enumerate() {
            let bits = src.score_bits(i)?;
            if is_nan(bits) {
                return Err(TokenizerError::NanScore { id: i as u32 }.into());
            }
            *s = score_key(bits);
        }
    } else if is_spm {
        scores.fill(score_key(0));
    }
    Ok(scores)
}

/// `Err(ArrayLength)` unless the per-token array `key` has `found == n` entries.
fn check_array_len(key: &'static str, n: usize, found: usize) -> Result<()> {
    if found != n {
        return Err(TokenizerError::ArrayLength {
            key,
            expected: n,
            found,
        }
        .into());
    }
    Ok(())
}

/// A [`Vocab`] with its text → id index (ids sorted by text, first-byte
/// buckets, prefix keys); attributes and pieces are filled in later.
/// Two tokens with the same text are an error.
fn index_texts<'a>(
    base: &'a [u8],
    spans: &'a [[u32; 2]],
    scores: &'a [u32],
    arena: &mut Arena<'a>,
) -> Result<Vocab<'a>> {
    let text_of = |id: u32| span_text(base, spans, id);
    let sorted: &'a mut [u32] = arena.alloc(spans.len())?;
    for (i, s) in sorted.iter_mut().enumerate() {
        *s = i as u32;
    }
    sorted.sort_unstable_by(|&a, &b| text_of(a).cmp(text_of(b)).then(a.cmp(&b)));
    for w in sorted.windows(2) {
        if let [a, b] = *w
            && text_of(a) == text_of(b)
        {
            return Err(TokenizerError::DuplicateToken { id: a.max(b) }.into());
        }
    }
    let sorted: &'a [u32] = sorted;
    // First-byte buckets (texts are non-empty).
    let mut bucket = [0u32; 257];
    for (b, slot) in bucket.iter_mut().enumerate() {
        *slot = sorted
            .partition_point(|&id| text_of(id).first().is_some_and(|&f| usize::from(f) < b))
            as u32;
    }
    bucket[256] = sorted.len() as u32;
    let keys: &'a mut [u64] = arena.alloc(spans.len())?;
    for (k, &id) in keys.iter_mut().zip(sorted) {
        *k = prefix_key(text_of(id), &[]);
    }
    Ok(Vocab {
        base,
        spans,
        sorted,
        keys,
        bucket,
        attrs: &[],
        scores,
        pieces: &[],
        piece_spans: &[],
        max_piece_len: 0,
    })
}

/// BOS/EOS and the add-token flags: the vocabulary type's defaults,
/// overridden by metadata.
struct Flags {
    bos: Option<u32>,
    eos: Option<u32>,
    add_bos: bool,
    add_eos: bool,
    add_space_prefix: bool,
}

/// A special-token id from metadata; `None` if absent or not below `n_vocab`
/// (an out-of-range id keeps the default, as in llama.cpp).
fn id_in_vocab<'a, S: VocabSource<'a>>(src: &S, key: &str, n_vocab: u32) -> Result<Option<u32>> {
    Ok(src.get_u32(key)?.filter(|&id| id < n_vocab))
}

/// [`Flags`] of a vocabulary of `n_vocab` tokens.
fn read_flags<'a, S: VocabSource<'a>>(src: &S, model: Model, n_vocab: u32) -> Result<Flags> {
    let is_spm = model == Model::Spm;
    let (default_bos, default_eos) = if is_spm { (1u32, 2u32) } else { (11, 11) };
    let bos = id_in_vocab(src, keys::BOS, n_vocab)?.unwrap_or(default_bos);
    let eos = id_in_vocab(src, keys::EOS, n_vocab)?.unwrap_or(default_eos);
    // llama.cpp's LLAMA3 pre-type adds BOS unless the file says otherwise.
    let add_bos_default = is_spm || model == Model::Bpe(pretok::Pre::Llama3);
    let add_bos = src.get_bool(keys::ADD_BOS)?.unwrap_or(add_bos_default);
    let add_eos = src.get_bool(keys::ADD_EOS)?.unwrap_or(false);
    let add_space_prefix = src.get_bool(keys::ADD_SPACE_PREFIX)?.unwrap_or(is_spm);
    Ok(Flags {
        bos: (bos < n_vocab).then_some(bos),
        eos: (eos < n_vocab).then_some(eos),
        add_bos,
        add_eos,
        add_space_prefix,
    })
}

/// Detects the special tokens llama.cpp recognises by text (EOT, EOM, FIM),
/// forces them to CONTROL in `attrs`, and returns the sorted
/// end-of-generation set: FIM pad/repo/separator, the [`EOG_TEXTS`] present
/// (also forced to CONTROL), EOS, EOT and EOM.
fn mark_special_ids<'a, S: VocabSource<'a>>(
    src: &S,
    vocab: &Vocab<'a>,
    attrs: &mut [u8],
    eos: Option<u32>,
) -> Result<([u32; MAX_EOG], usize)> {
    let n_vocab = vocab.len() as u32;
    // The id from metadata, else the first listed text present; either way
    // forced to CONTROL only when found by text, as llama.cpp does.
    let mut force_control = |list: &[&[u8]], key: Option<u32>| -> Option<u32> {
        if key.is_some() {
            return key;
        }
        let id = list.iter().find_map(|t| vocab.find(t))?;
        if let Some(a) = attrs.get_mut(id as usize) {
            *a = attr::CONTROL;
        }
        Some(id)
    };
    let eot = force_control(&EOT_TEXTS, id_in_vocab(src, keys::EOT, n_vocab)?);
    let eom = force_control(&EOM_TEXTS, id_in_vocab(src, keys::EOM, n_vocab)?);
    let _ = force_control(&FIM_PRE_TEXTS, None);
    let _ = force_control(&FIM_SUF_TEXTS, None);
    let _ = force_control(&FIM_MID_TEXTS, None);
    let fim_pad = force_control(&FIM_PAD_TEXTS, id_in_vocab(src, keys::FIM_PAD, n_vocab)?);
    let fim_rep = force_control(&FIM_REP_TEXTS, id_in_vocab(src, keys::FIM_REP, n_vocab)?);
    let fim_sep = force_control(&FIM_SEP_TEXTS, id_in_vocab(src, keys::FIM_SEP, n_vocab)?);

    let mut eog = [0u32; MAX_EOG];
    let mut n_eog = 0usize;
    let mut add_eog = |id: u32| -> Result<()> {
        if eog.get(..n_eog).is_some_and(|s| s.contains(&id)) {
            return Ok(());
        }
        *eog.get_mut(n_eog).ok_or(TokenizerError::TooManyEog)? = id;
        n_eog += 1;
        Ok(())
    };
    for id in [fim_pad, fim_rep, fim_sep].into_iter().flatten() {
        add_eog(id)?;
    }
    for t in EOG_TEXTS {
        if let Some(id) = vocab.find(t) {
            if let Some(a) = attrs.get_mut(id as usize) {
                *a = attr::CONTROL;
            }
            add_eog(id)?;
        }
    }
    for id in [eos, eot, eom].into_iter().flatten() {
        add_eog(id)?;
    }
    if let Some(s) = eog.get_mut(..n_eog) {
        s.sort_unstable();
    }
    Ok((eog, n_eog))
}

/// The special-token cache: ids of control, user-defined and unknown tokens
/// whose text is UTF-8, longest text first (ties to the lower id).
fn special_cache<'a>(vocab: &Vocab<'a>, arena: &mut Arena<'a>) -> Result<&'a [u32]> {
    let n_vocab = vocab.len() as u32;
    let is_special = |id: u32| {
        let a = vocab.attr(id).unwrap_or(0);
        a & (attr::CONTROL | attr::USER_DEFINED | attr::UNKNOWN) != 0
            && core::str::from_utf8(vocab.text_or_empty(id)).is_ok()
    };
    let n_special = (0..n_vocab).filter(|&id| is_special(id)).count();
    let specials: &'a mut [u32] = arena.alloc(n_special)?;
    for (slot, id) in specials
        .iter_mut()
        .zip((0..n_vocab).filter(|&id| is_special(id)))
    {
        *slot = id;
    }
    let len_of = |id: u32| vocab.text_or_empty(id).len();
    specials.sort_unstable_by(|&a, &b| len_of(b).cmp(&len_of(a)).then(a.cmp(&b)));
    Ok(specials)
}

/// Fills `vocab`'s decoded pieces (as decoded with `special = true`): one
/// buffer of at most `total_bytes` and a span per token.
fn decode_pieces<'a>(
    vocab: &mut Vocab<'a>,
    is_spm: bool,
    total_bytes: usize,
    arena: &mut Arena<'a>,
) -> Result<()> {
    let pieces: &'a mut [u8] = arena.alloc(total_bytes)?;
    let piece_spans: &'a mut [[u32; 2]] = arena.alloc(vocab.len())?;
    let mut at = 0usize;
    let mut max_piece_len = 0usize;
    for (id, span) in piece_spans.iter_mut().enumerate() {
        let id = id as u32;
        let a = vocab.attr(id).unwrap_or(0);
        let dst = pieces.get_mut(at..).ok_or(Error::SizeOverflow)?;
        let len = decode::decode_token(is_spm, a, vocab.text_or_empty(id), dst)?;
        *span = [at as u32, len as u32];
        at += len;
        max_piece_len = max_piece_len.max(len);
    }
    vocab.pieces = pieces;
    vocab.piece_spans = piece_spans;
    vocab.max_piece_len = max_piece_len;
    Ok(())
}

/// Byte → token: SPM's `<0xXX>` (else the 1-byte token), or BPE's
/// byte-level character; [`NONE`] where the vocabulary has neither.
fn byte_tokens(vocab: &Vocab<'_>, is_spm: bool) -> [u32; 256] {
    let mut byte_token = [NONE; 256];
    for (b, slot) in byte_token.iter_mut().enumerate() {
        let b = b as u8;
        *slot = if is_spm {
            let hex = spm::byte_token_text(b);
            vocab
                .find(&hex)
                .or_else(|| vocab.find(&[b]))
                .unwrap_or(NONE)
        } else {
            let mut buf = [0u8; 4];
            vocab
                .find(bpe::byte_char(b).encode_utf8(&mut buf).as_bytes())
                .unwrap_or(NONE)
        };
    }
    byte_token
}

/// BPE merges resolved to `[left, right, result, rank]`, sorted by
/// `(left, right)`, keeping the lowest rank of each pair.
fn merge_table<'a, S: VocabSource<'a>>(
    src: &S,
    vocab: &Vocab<'a>,
    arena: &mut Arena<'a>,
) -> Result<&'a [[u32; 4]]> {
    let n_merges = src.n_merges()?.ok_or(TokenizerError::MissingMerges)?;
    let table: &'a mut [[u32; 4]] = arena.alloc(n_merges)?;
    let mut used = 0usize;
    src.for_each_merge(&mut |rank, m| {
        let r = rank as u32;
        // Split at the first space after the first byte (`find(' ', 1)`).
        let Some(pos) = m.iter().skip(1).position(|&c| c == b' ').map(|p| p + 1) else {
            return Ok(()); // ("", "") in llama.cpp: never matches
        };
        let (a, b) = (m.get(..pos).unwrap_or(&[]), m.get(pos + 1..).unwrap_or(&[]));
        let bad = || Error::from(TokenizerError::BadMerge { rank: r });
        let l = vocab.find(a).ok_or_else(bad)?;
        let rt = vocab.find(b).ok_or_else(bad)?;
        let res = vocab.find_concat(a, b).ok_or_else(bad)?;
        *table.get_mut(used).ok_or_else(bad)? = [l, rt, res, r];
        used += 1;
        Ok(())
    })?;
    let table = table.get_mut(..used).unwrap_or(&mut []);
    table.sort_unstable();
    // Keep the first (lowest-rank) entry of each (left, right) pair.
    let mut w = 0usize;
    for i in 0..table.len() {
        let keep = w == 0 || table[w - 1][..2] != table[i][..2];
        if keep {
            table[w] = table[i];
            w += 1;
        }
    }
    let table: &'a [[u32; 4]] = table;
    Ok(table.get(..w).unwrap_or(&[]))
}

/// (n_vocab + 1,) for BPE, empty for SPM: `merges[by_left[l]..by_left[l + 1]]`
/// have left id `l`.
fn index_merges_by_left<'a>(
    merges: &[[u32; 4]],
    n_vocab: usize,
    is_spm: bool,
    arena: &mut Arena<'a>,
) -> Result<&'a [u32]> {
    let by_left: &'a mut [u32] = arena.alloc(if is_spm { 0 } else { n_vocab + 1 })?;
    let mut m = 0usize;
    for (l, slot) in by_left.iter_mut().enumerate() {
        while merges.get(m).is_some_and(|e| (e[0] as usize) < l) {
            m += 1;
        }
        *slot = m as u32;
    }
    Ok(by_left)
}

impl<'a> Tokenizer<'a> {
    pub(crate) fn vocab(&self) -> &Vocab<'a> {
        &self.vocab
    }

    pub(crate) fn specials(&self) -> &'a [u32] {
        self.specials
    }

    pub(crate) fn byte_token(&self, b: u8) -> u32 {
        self.byte_token[b as usize]
    }

    /// The merge entry `[left, right, result, rank]` for a pair of ids.
    pub(crate) fn merge_index(&self, left: u32, right: u32) -> Option<usize> {
        let lo = *self.merges_by_left.get(left as usize)? as usize;
        let hi = *self.merges_by_left.get(left as usize + 1)? as usize;
        let i = self
            .merges
            .get(lo..hi)?
            .binary_search_by(|m| m[1].cmp(&right))
            .ok()?;
        Some(lo + i)
    }

    pub(crate) fn merge(&self, idx: u32) -> Option<[u32; 4]> {
        self.merges.get(idx as usize).copied()
    }
}

/// A [`VocabSource`] over plain slices (hand-built vocabularies, tests,
/// fuzzing). Every token text must be a sub-slice of `base`.
#[derive(Clone, Copy, Debug, Default)]
pub struct SliceVocab<'a, 's> {
    /// `tokenizer.ggml.model` (`"gpt2"` or `"llama"`).
    pub model: &'a str,
    /// `tokenizer.ggml.pre`.
    pub pre: Option<&'a str>,
    /// Buffer holding every token text.
    pub base: &'a [u8],
    /// Token texts in id order.
    pub tokens: &'s [&'a [u8]],
    /// Token types (GGUF `token_type`), if any.
    pub token_types: Option<&'s [i32]>,
    /// Scores as f32 bits, if any.
    pub scores: Option<&'s [u32]>,
    /// Merges `"A B"` in rank order, if any.
    pub merges: Option<&'s [&'a [u8]]>,
    /// `bos_token_id`.
    pub bos: Option<u32>,
    /// `eos_token_id`.
    pub eos: Option<u32>,
    /// `add_bos_token`.
    pub add_bos: Option<bool>,
    /// `add_eos_token`.
    pub add_eos: Option<bool>,
    /// `add_space_prefix`.
    pub add_space_prefix: Option<bool>,
}

impl<'a> VocabSource<'a> for SliceVocab<'a, '_> {
    fn base(&self) -> &'a [u8] {
        self.base
    }

    fn get_str(&self, key: &str) -> Result<Option<&'a [u8]>> {
        Ok(match key {
            keys::MODEL => Some(self.model.as_bytes()),
            keys::PRE => self.pre.map(str::as_bytes),
            _ => None,
        })
    }

    fn get_u32(&self, key: &str) -> Result<Option<u32>> {
        Ok(match key {
            keys::BOS => self.bos,
            keys::EOS => self.eos,
            _ => None,
        })
    }

    fn get_bool(&self, key: &str) -> Result<Option<bool>> {
        Ok(match key {
            keys::ADD_BOS => self.add_bos,
            keys::ADD_EOS => self.add_eos,
            keys::ADD_SPACE_PREFIX => self.add_space_prefix,
            _ => None,
        })
    }

    fn n_tokens(&self) -> Result<usize> {
        Ok(self.tokens.len())
    }

    fn for_each_token(&self, f: &mut dyn FnMut(usize, &'a [u8]) -> Result<()>) -> Result<()> {
        for (i, &t) in self.tokens.iter().enumerate() {
            f(i, t)?;
        }
        Ok(())
    }

    fn n_merges(&self) -> Result<Option<usize>> {
        Ok(self.merges.map(<[_]>::len))
    }

    fn for_each_merge(&self, f: &mut dyn FnMut(usize, &'a [u8]) -> Result<()>) -> Result<()> {
        for (i, &m) in self.merges.unwrap_or(&[]).iter().enumerate() {
            f(i, m)?;
        }
        Ok(())
    }

    fn n_token_types(&self) -> Result<Option<usize>> {
        Ok(self.token_types.map(<[_]>::len))
    }

    fn token_type(&self, i: usize) -> Result<i32> {
        self.token_types
            .and_then(|t| t.get(i).copied())
            .ok_or(Error::MissingMetadata {
                key: crate::error::Name::new("tokenizer.ggml.token_type"),
            })
    }

    fn n_scores(&self) -> Result<Option<usize>> {
        Ok(self.scores.map(<[_]>::len))
    }

    fn score_bits(&self, i: usize) -> Result<u32> {
        self.scores
            .and_then(|t| t.get(i).copied())
            .ok_or(Error::MissingMetadata {
                key: crate::error::Name::new("tokenizer.ggml.scores"),
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefix_keys_order_like_texts() {
        let texts: [&[u8]; 12] = [
            b"",
            b"\0",
            b"\0\0",
            b"a",
            b"a\0",
            b"a\0b",
            b"ab",
            b"abcdefgh",
            b"abcdefghi",
            b"abcdefgh\0",
            b"b",
            b"\xff\xff\xff\xff\xff\xff\xff\xff\xff",
        ];
        for x in texts {
            for y in texts {
                let (kx, ky) = (prefix_key(x, &[]), prefix_key(y, &[]));
                if kx != ky {
                    assert_eq!(kx.cmp(&ky), x.cmp(y), "{x:?} {y:?}");
                }
                // Split anywhere: the key of a ++ b is the key of the concatenation.
                for i in 0..=x.len() {
                    assert_eq!(prefix_key(&x[..i], &x[i..]), kx);
                    assert_eq!(cmp_concat(y, &x[..i], &x[i..]), y.cmp(x));
                }
            }
        }
        assert_eq!(score_key(0x8000_0000), score_key(0));
        assert!(score_key(0xBF80_0000) < score_key(0x8000_0001)); // -1 < -tiny
        assert!(score_key(0x3F80_0000) > score_key(0x0000_0001)); // 1 > tiny
    }
}
