//! Tokenizers built from a GGUF vocabulary, matching llama.cpp token for token.
//!
//! Two vocabulary types are supported, selected by `tokenizer.ggml.model`:
//!
//! * `"gpt2"`: GPT-2 byte-level BPE ([`bpe`]), with the pre-tokenizer named by
//!   `tokenizer.ggml.pre` ([`pretok`]): the GPT-2 pattern (`gpt-2`, …), with
//!   digits split first (`smollm`, `starcoder`, …), the llama-3 pattern
//!   (`llama-bpe`, `dbrx`, …), Qwen2's and Qwen3.5's (`qwen2`,
//!   `deepseek-r1-qwen`, `qwen35`, …), and the regex sequences of
//!   `deepseek-llm`, `deepseek-coder` and `falcon`, as llama.cpp maps the names.
//! * `"llama"`: SentencePiece BPE with scores ([`spm`]).
//!
//! Encoding a text runs the same stages as llama.cpp's `llama_tokenize`:
//!
//! 1. **Special-token partition** ([`special`]): control / user-defined /
//!    unknown tokens found in the text become single ids (control and unknown
//!    only with `parse_special`), longest token text first.
//! 2. Each remaining raw fragment is **pre-tokenized** into words and each
//!    word is **merged** (BPE ranks, or SPM scores) into ids.
//! 3. BOS / EOS are added when the vocabulary asks for them and the caller
//!    passes `add_special`.
//!
//! Decoding ([`decode`]) maps ids back to bytes (the byte-level alphabet
//! inverted, `▁` → space, `<0xXX>` → a byte) and a [`StreamDecoder`] turns a
//! token stream into complete UTF-8 only, holding back a token that ends in
//! the middle of a character. [`chat`] renders the chat templates of the
//! supported models (SmolLM2 and Qwen2.5 ChatML, plain ChatML, Gemma).
//!
//! ## Memory
//!
//! Nothing is allocated: the vocabulary's token bytes are borrowed from the
//! model file, and the indices (sorted token index, merge table, decoded
//! pieces) are carved from an [`Arena`]; [`Tokenizer::bytes_required`] sizes
//! it. Encoding works in a caller-provided [`Workspace`] whose capacity (the
//! longest input in bytes) is fixed when it is carved; a longer input is
//! [`TokenizerError::InputTooLong`]. Lookups are binary searches over sorted
//! index arrays, so encoding is `O(n log V)` per word, never a scan of the
//! vocabulary.
//!
//! ## Where this differs from llama.cpp (all on malformed or exotic vocabularies)
//!
//! * An empty or duplicated token text is an error (llama.cpp renames empty
//!   tokens to `[EMPTY_i]` and aborts on duplicates).
//! * A BPE merge whose parts or concatenation are not tokens is an error
//!   (llama.cpp keeps it; with such a merge its symbols could stop being
//!   tokens). A merge without a space after its first byte is ignored, as in
//!   llama.cpp where it can never match.
//! * Special tokens of equal length are tried in id order (llama.cpp's
//!   `std::sort` leaves that order unspecified); special tokens whose text is
//!   not valid UTF-8 are never matched in text.
//! * LSTRIP / RSTRIP attributes (set by llama.cpp only for a few model names)
//!   are not applied, and `clean_spaces` post-processing of `llama_detokenize`
//!   is not applied: decoding is the concatenation of `token_to_piece`.
//! * A byte-level token containing a codepoint outside the GPT-2 byte alphabet
//!   decodes to that codepoint's UTF-8 (llama.cpp emits `[UNK_BYTE_0x…]`).
//! * Pre-tokenizers other than those above are
//!   [`TokenizerError::UnsupportedPre`] (naming the `tokenizer.ggml.pre` string).

#![forbid(unsafe_code)]

use crate::error::Name;
use crate::{Arena, Error, Result};
use core::fmt;

pub mod bpe;
pub mod chat;
pub mod decode;
pub mod gguf;
pub mod pretok;
pub mod special;
pub mod spm;
pub mod unicode;
mod unicode_table;
pub mod vocab;

pub use chat::{Message, Template};
pub use decode::StreamDecoder;
pub use vocab::{SliceVocab, VocabSource};

/// What is wrong with a vocabulary, or why an input cannot be encoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum TokenizerError {
    /// `tokenizer.ggml.model` is missing.
    MissingModel,
    /// `tokenizer.ggml.model` is neither `gpt2` nor `llama`.
    UnsupportedModel {
        /// The vocabulary type the file names (its UTF-8 prefix, if it is not UTF-8).
        name: Name,
    },
    /// `tokenizer.ggml.pre` names a pre-tokenizer this crate does not implement,
    /// or is missing (`None`) for a `gpt2` vocabulary.
    UnsupportedPre {
        /// The pre-tokenizer the file names.
        name: Option<Name>,
    },
    /// `tokenizer.ggml.tokens` is missing or empty, or has more than `u32::MAX - 2` entries.
    BadTokenCount {
        /// Number of tokens found.
        n: usize,
    },
    /// A token's text is empty.
    EmptyToken {
        /// The token id.
        id: u32,
    },
    /// Two tokens have the same text.
    DuplicateToken {
        /// The larger of the two ids.
        id: u32,
    },
    /// A token's bytes do not lie inside the source's base buffer.
    TokenOutsideBase {
        /// The token id.
        id: u32,
    },
    /// A per-token array (`token_type`, `scores`) has the wrong length.
    ArrayLength {
        /// The array's metadata key ([`vocab::keys::TOKEN_TYPE`] or [`vocab::keys::SCORES`]).
        key: &'static str,
        /// Expected length (the number of tokens).
        expected: usize,
        /// Length found.
        found: usize,
    },
    /// A `gpt2` vocabulary without `tokenizer.ggml.merges`.
    MissingMerges,
    /// A merge whose left part, right part or concatenation is not a token.
    BadMerge {
        /// Index (rank) of the merge.
        rank: u32,
    },
    /// A token score is NaN.
    NanScore {
        /// The token id.
        id: u32,
    },
    /// More end-of-generation tokens than [`MAX_EOG`].
    TooManyEog,
    /// The input text is longer than the workspace was carved for.
    InputTooLong {
        /// Input length in bytes.
        len: usize,
        /// The workspace capacity in bytes.
        max: usize,
    },
    /// SentencePiece byte fallback needs `<0xXX>` (or the 1-byte token) for this byte, and the vocabulary has neither.
    NoByteToken {
        /// The byte.
        byte: u8,
    },
    /// The BOS or EOS token must be added but the vocabulary has none.
    NoSpecialToken {
        /// Which token: `"BOS"` or `"EOS"`.
        which: &'static str,
    },
}

impl fmt::Display for TokenizerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use TokenizerError as E;
        match *self {
            E::MissingModel => write!(f, "{} is missing", vocab::keys::MODEL),
            E::UnsupportedModel { name } => write!(
                f,
                "unsupported vocabulary type \"{name}\" ({}; gpt2 and llama are supported)",
                vocab::keys::MODEL
            ),
            E::UnsupportedPre { name: Some(name) } => {
                write!(
                    f,
                    "unsupported pre-tokenizer \"{name}\" ({})",
                    vocab::keys::PRE
                )
            }
            E::UnsupportedPre { name: None } => {
                write!(
                    f,
                    "{} is missing (a gpt2 vocabulary needs it)",
                    vocab::keys::PRE
                )
            }
            E::BadTokenCount { n } => write!(
                f,
                "{} has {n} tokens (need 1 to {})",
                vocab::keys::TOKENS,
                NONE - 2
            ),
            E::EmptyToken { id } => write!(f, "token {id} has empty text"),
            E::DuplicateToken { id } => {
                write!(f, "token {id} repeats the text of a token with a lower id")
            }
            E::TokenOutsideBase { id } => write!(
                f,
                "token {id}: text lies outside the buffer the vocabulary is borrowed from"
            ),
            E::ArrayLength {
                key,
                expected,
                found,
            } => write!(
                f,
                "{key} has {found} entries, expected {expected} (one per token)"
            ),
            E::MissingMerges => write!(
                f,
                "{} is missing (a gpt2 vocabulary needs it)",
                vocab::keys::MERGES
            ),
            E::BadMerge { rank } => write!(
                f,
                "merge {rank}: its left part, right part or their concatenation is not a token"
            ),
            E::NanScore { id } => write!(f, "token {id} has a NaN score"),
            E::TooManyEog => write!(f, "more than {MAX_EOG} end-of-generation tokens"),
            E::InputTooLong { len, max } => write!(
                f,
                "input of {len} bytes is longer than the workspace's {max}"
            ),
            E::NoByteToken { byte } => write!(
                f,
                "no token for byte 0x{byte:02X} (neither <0x{byte:02X}> nor the byte itself)"
            ),
            E::NoSpecialToken { which } => write!(
                f,
                "the {which} token must be added but the vocabulary has none"
            ),
        }
    }
}

impl core::error::Error for TokenizerError {}

/// Token attributes (llama.cpp's `llama_token_attr` bits, from `tokenizer.ggml.token_type`).
pub mod attr {
    /// `<unk>`-like token (type 2).
    pub const UNKNOWN: u8 = 1 << 0;
    /// Unused slot (type 5).
    pub const UNUSED: u8 = 1 << 1;
    /// Ordinary token (type 1, and the default without a `token_type` array).
    pub const NORMAL: u8 = 1 << 2;
    /// Control token such as `<|im_start|>` (type 3).
    pub const CONTROL: u8 = 1 << 3;
    /// User-defined token, always matched in text (type 4).
    pub const USER_DEFINED: u8 = 1 << 4;
    /// SentencePiece byte token `<0xXX>` (type 6).
    pub const BYTE: u8 = 1 << 5;
    /// Undefined type (type 0 or out of range): no attribute bits.
    pub const UNDEFINED: u8 = 0;

    /// The attribute of a GGUF `token_type` value.
    pub const fn from_token_type(t: i32) -> u8 {
        match t {
            1 => NORMAL,
            2 => UNKNOWN,
            3 => CONTROL,
            4 => USER_DEFINED,
            5 => UNUSED,
            6 => BYTE,
            _ => UNDEFINED,
        }
    }
}

/// Largest workspace capacity (bytes): symbol indices are `u32`.
pub const MAX_INPUT_BYTES: usize = (u32::MAX / 4) as usize;

/// Largest number of end-of-generation ids a tokenizer records.
pub const MAX_EOG: usize = 16;

/// "No symbol / no token" marker in index arrays.
pub(crate) const NONE: u32 = u32::MAX;

/// The vocabulary type (`tokenizer.ggml.model`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Model {
    /// `gpt2`: byte-level BPE with merge ranks.
    Bpe(pretok::Pre),
    /// `llama`: SentencePiece BPE with scores.
    Spm,
}

/// Options of one [`Tokenizer::encode_with`] call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EncodeOptions {
    /// Match control and unknown tokens (e.g. `<|im_start|>`) in the text.
    /// User-defined tokens are matched either way.
    pub parse_special: bool,
    /// Add BOS / EOS if the vocabulary says so (`add_bos_token`, `add_eos_token`).
    pub add_special: bool,
}

/// A tokenizer over a vocabulary borrowed from the model bytes (`'a`).
pub struct Tokenizer<'a> {
    model: Model,
    vocab: vocab::Vocab<'a>,
    /// (n_merges_unique, 4): `[left_id, right_id, result_id, rank]`, sorted by (left, right). BPE only.
    merges: &'a [[u32; 4]],
    /// (n_vocab + 1,) for BPE: `merges[by_left[l]..by_left[l + 1]]` start with left id `l`.
    merges_by_left: &'a [u32],
    /// Byte → id of its byte-level character (BPE) or of `<0xXX>` / the 1-byte token (SPM); NONE if absent.
    byte_token: [u32; 256],
    /// Special-token ids (control, user-defined, unknown), longest text first.
    specials: &'a [u32],
    bos: Option<u32>,
    eos: Option<u32>,
    add_bos: bool,
    add_eos: bool,
    add_space_prefix: bool,
    eog: [u32; MAX_EOG],
    n_eog: usize,
    chat_template: Option<chat::Template>,
}

impl<'a> Tokenizer<'a> {
    /// Arena bytes [`Tokenizer::build`] needs, at most, for a vocabulary of
    /// `n_vocab` tokens whose texts total `token_bytes` bytes, with `n_merges`
    /// merges. `None` on arithmetic overflow.
    pub const fn bytes_required(
        n_vocab: usize,
        n_merges: usize,
        token_bytes: usize,
    ) -> Option<usize> {
        let parts = [
            Arena::bytes_for::<[u32; 2]>(n_vocab),  // token spans
            Arena::bytes_for::<u8>(n_vocab),        // attributes
            Arena::bytes_for::<u32>(n_vocab),       // scores
            Arena::bytes_for::<u32>(n_vocab),       // sorted index
            Arena::bytes_for::<u64>(n_vocab),       // prefix keys
            Arena::bytes_for::<[u32; 4]>(n_merges), // merge table
            Arena::bytes_for::<u32>(n_vocab.saturating_add(1)), // merges by left id
            Arena::bytes_for::<[u32; 2]>(n_vocab),  // piece spans
            Arena::bytes_for::<u8>(token_bytes),    // piece bytes
            Arena::bytes_for::<u32>(n_vocab),       // special list
        ];
        let mut total = 0usize;
        let mut i = 0;
        while i < parts.len() {
            match parts[i] {
                Some(b) => match total.checked_add(b) {
                    Some(t) => total = t,
                    None => return None,
                },
                None => return None,
            }
            i += 1;
        }
        Some(total)
    }

    /// Arena bytes needed for the vocabulary in `src` (one pass over its strings).
    pub fn bytes_required_for<S: VocabSource<'a>>(src: &S) -> Result<usize> {
        let (n_vocab, token_bytes) = vocab::count_tokens(src)?;
        let n_merges = src.n_merges()?.unwrap_or(0);
        Self::bytes_required(n_vocab, n_merges, token_bytes).ok_or(Error::SizeOverflow)
    }

    /// Build a tokenizer from a vocabulary source, carving its indices from `arena`.
    ///
    /// On error the arena may have been partly consumed; nothing else changes.
    pub fn build<S: VocabSource<'a>>(src: &S, arena: &mut Arena<'a>) -> Result<Tokenizer<'a>> {
        vocab::build(src, arena)
    }

    /// The vocabulary type and pre-tokenizer.
    pub fn model(&self) -> Model {
        self.model
    }

    /// Number of tokens.
    pub fn vocab_size(&self) -> usize {
        self.vocab.len()
    }

    /// Beginning-of-sequence id, if the vocabulary has a valid one.
    pub fn bos(&self) -> Option<u32> {
        self.bos
    }

    /// End-of-sequence id, if the vocabulary has a valid one.
    pub fn eos(&self) -> Option<u32> {
        self.eos
    }

    /// Whether `encode` adds BOS (`tokenizer.ggml.add_bos_token`).
    pub fn add_bos(&self) -> bool {
        self.add_bos
    }

    /// Whether `encode` adds EOS (`tokenizer.ggml.add_eos_token`).
    pub fn add_eos(&self) -> bool {
        self.add_eos
    }

    /// Whether SentencePiece encoding prefixes a space (`tokenizer.ggml.add_space_prefix`).
    pub fn add_space_prefix(&self) -> bool {
        self.add_space_prefix
    }

    /// The model's chat format, detected from `tokenizer.chat_template` (or,
    /// without one, from a `<start_of_turn>` token) by
    /// [`chat::Template::detect`]; `None` if it is none of the formats
    /// [`chat::Template`] renders.
    pub fn chat_template(&self) -> Option<chat::Template> {
        self.chat_template
    }

    /// End-of-generation ids: EOS, EOT, EOM, FIM pad/repo/sep, and every token
    /// whose text is one of llama.cpp's EOG texts (`<|im_end|>`,
    /// `<|endoftext|>`, `<|eot_id|>`, …). Sorted ascending.
    pub fn eog_ids(&self) -> &[u32] {
        self.eog.get(..self.n_eog).unwrap_or(&[])
    }

    /// Whether `id` ends generation.
    pub fn is_eog(&self, id: u32) -> bool {
        self.eog_ids().binary_search(&id).is_ok()
    }

    /// The token's text as stored in the vocabulary (byte-level or `▁` form).
    pub fn token_text(&self, id: u32) -> Option<&'a [u8]> {
        self.vocab.text(id)
    }

    /// The token's attribute bits ([`attr`]).
    pub fn token_attr(&self, id: u32) -> Option<u8> {
        self.vocab.attr(id)
    }

    /// The id of the token whose text is exactly `text`.
    pub fn find_token(&self, text: &[u8]) -> Option<u32> {
        self.vocab.find(text)
    }

    /// Decoded bytes of a token, as llama.cpp's `token_to_piece(special = false)`:
    /// control and unknown tokens give `""`.
    pub fn token_bytes(&self, id: u32) -> Option<&'a [u8]> {
        self.piece(id, false)
    }

    /// Decoded bytes of a token; with `special`, control and unknown tokens
    /// give their text (llama.cpp's `token_to_piece(.., special)`).
    pub fn piece(&self, id: u32, special: bool) -> Option<&'a [u8]> {
        self.vocab.piece(id, special)
    }

    /// Whether byte `b` has a token of its own: its byte-level char (BPE) or
    /// `<0xXX>` / the 1-byte token (SPM). A BPE word holding a byte without
    /// one loses that byte, exactly as in llama.cpp; SmolLM2's vocabulary
    /// lacks 0x04, 0x06, 0x13, 0x14, 0x16, 0x1D, 0xC0, 0xC1, 0xF1, 0xF2 and
    /// 0xF5..=0xFF, so control characters U+0004, U+0006, U+0013, U+0014,
    /// U+0016, U+001D and codepoints U+40000..=U+BFFFF do not round-trip.
    pub fn byte_has_token(&self, b: u8) -> bool {
        self.byte_token(b) != NONE
    }

    /// Longest decoded piece in bytes.
    pub fn max_piece_len(&self) -> usize {
        self.vocab.max_piece_len()
    }

    /// Encode `text` with `add_special = true` (BOS/EOS as the vocabulary says),
    /// writing ids to `out`; returns how many were written.
    pub fn encode(
        &self,
        text: &str,
        parse_special: bool,
        work: &mut Workspace<'_>,
        out: &mut [u32],
    ) -> Result<usize> {
        self.encode_with(
            text,
            EncodeOptions {
                parse_special,
                add_special: true,
            },
            work,
            out,
        )
    }

    /// Encode `text` with explicit options; returns the number of ids written to `out`.
    ///
    /// Errors: [`TokenizerError::InputTooLong`] if `text` is longer than the
    /// workspace capacity, [`Error::BufferTooSmall`] if `out` fills up (its
    /// first elements are then overwritten, nothing else changes).
    pub fn encode_with(
        &self,
        text: &str,
        opts: EncodeOptions,
        work: &mut Workspace<'_>,
        out: &mut [u32],
    ) -> Result<usize> {
        if text.len() > work.max_bytes {
            return Err(TokenizerError::InputTooLong {
                len: text.len(),
                max: work.max_bytes,
            }
            .into());
        }
        let mut sink = Sink { buf: out, n: 0 };
        if opts.add_special && self.add_bos {
            sink.push(
                self.bos
                    .ok_or(TokenizerError::NoSpecialToken { which: "BOS" })?,
            )?;
        }
        let Workspace {
            marks,
            syms,
            heap,
            text: scratch,
            ..
        } = work;
        let marks = marks.get_mut(..text.len()).ok_or(Error::SizeOverflow)?;
        special::partition(self, text.as_bytes(), opts.parse_special, marks);
        // SPM: a space is prefixed to the first raw fragment and to every raw
        // fragment that follows a special token.
        let mut prev_special = true;
        let mut walk = special::Fragments::new(text, marks);
        while let Some(frag) = walk.next_fragment(self)? {
            match frag {
                special::Fragment::Token(id) => {
                    sink.push(id)?;
                    prev_special = true;
                }
                special::Fragment::Raw(raw) => {
                    match self.model {
                        Model::Bpe(pre) => {
                            let mut ws = bpe::Work { syms, heap };
                            pretok::for_each_word(raw, pre, &mut |word| {
                                bpe::encode_word(
                                    self,
                                    word.as_bytes(),
                                    pre.ignore_merges(),
                                    &mut ws,
                                    &mut sink,
                                )
                            })?;
                        }
                        Model::Spm => {
                            let prefix = self.add_space_prefix && prev_special;
                            let mut ws = spm::Work {
                                syms,
                                heap,
                                text: scratch,
                            };
                            spm::encode_fragment(self, raw, prefix, &mut ws, &mut sink)?;
                        }
                    }
                    prev_special = false;
                }
            }
        }
        if opts.add_special && self.add_eos {
            sink.push(
                self.eos
                    .ok_or(TokenizerError::NoSpecialToken { which: "EOS" })?,
            )?;
        }
        Ok(sink.n)
    }

    /// Decode `ids` into `out` as llama.cpp's `llama_detokenize` does
    /// (without its `clean_spaces` pass): with `remove_special`, a leading BOS
    /// and a trailing EOS that the vocabulary adds are dropped; with
    /// `special`, control tokens render as their text; when
    /// `add_space_prefix` is set the first piece loses one leading space,
    /// except after a removed BOS (llama.cpp's rule). Bytes are copied as
    /// they are (not UTF-8 checked); returns the length.
    pub fn detokenize(
        &self,
        ids: &[u32],
        remove_special: bool,
        special: bool,
        out: &mut [u8],
    ) -> Result<usize> {
        decode::detokenize(self, ids, remove_special, special, out)
    }
}

/// Output ids with a capacity check.
pub(crate) struct Sink<'o> {
    buf: &'o mut [u32],
    n: usize,
}

impl Sink<'_> {
    pub(crate) fn push(&mut self, id: u32) -> Result<()> {
        match self.buf.get_mut(self.n) {
            Some(slot) => {
                *slot = id;
                self.n += 1;
                Ok(())
            }
            None => Err(Error::BufferTooSmall {
                needed: self.n + 1,
                available: self.buf.len(),
            }),
        }
    }
}

/// One merge-loop symbol: a span of the word and its current token.
#[derive(Clone, Copy, Debug, Default, bytemuck::Pod, bytemuck::Zeroable)]
#[repr(C)]
pub struct Symbol {
    /// Current token id, or NONE if the span is not a token.
    pub id: u32,
    /// Previous live symbol, or NONE.
    pub prev: u32,
    /// Next live symbol, or NONE.
    pub next: u32,
    /// Length in bytes (0 once merged into its left neighbour).
    pub n: u32,
    /// First byte of the span in the word.
    pub start: u32,
}

/// A candidate merge in the work queue; the queue pops the smallest
/// `(key, left)` first (BPE: key = rank; SPM: key = !score).
#[derive(Clone, Copy, Debug, Default, bytemuck::Pod, bytemuck::Zeroable)]
#[repr(C)]
pub struct Bigram {
    /// Priority, smaller first.
    pub key: u32,
    /// Left symbol index.
    pub left: u32,
    /// Right symbol index.
    pub right: u32,
    /// BPE: index into the merge table; SPM: byte size of the merged text.
    pub aux: u32,
}

/// Scratch memory for [`Tokenizer::encode`], carved once for inputs of up to
/// `max_bytes` bytes and reused by every call.
pub struct Workspace<'w> {
    max_bytes: usize,
    /// (max_bytes,): special-token partition marks.
    marks: &'w mut [u32],
    /// (max_bytes + 1,): merge-loop symbols.
    syms: &'w mut [Symbol],
    /// (3 * (max_bytes + 1),): merge work queue (a binary heap).
    heap: &'w mut [Bigram],
    /// (3 * (max_bytes + 1),): SPM text with `▁` for spaces.
    text: &'w mut [u8],
}

impl<'w> Workspace<'w> {
    /// Arena bytes a workspace for inputs of up to `max_bytes` bytes needs.
    pub const fn bytes_required(max_bytes: usize) -> Option<usize> {
        let Some(n_sym) = max_bytes.checked_add(1) else {
            return None;
        };
        let Some(n_heap) = n_sym.checked_mul(3) else {
            return None;
        };
        let parts = [
            Arena::bytes_for::<u32>(max_bytes),
            Arena::bytes_for::<Symbol>(n_sym),
            Arena::bytes_for::<Bigram>(n_heap),
            Arena::bytes_for::<u8>(n_heap),
        ];
        let mut total = 0usize;
        let mut i = 0;
        while i < parts.len() {
            match parts[i] {
                Some(b) => match total.checked_add(b) {
                    Some(t) => total = t,
                    None => return None,
                },
                None => return None,
            }
            i += 1;
        }
        Some(total)
    }

    /// Carve a workspace for inputs of up to `max_bytes` bytes.
    pub fn new(arena: &mut Arena<'w>, max_bytes: usize) -> Result<Workspace<'w>> {
        // Symbol indices and lengths are u32.
        if max_bytes > MAX_INPUT_BYTES {
            return Err(Error::SizeOverflow);
        }
        let n_sym = max_bytes.checked_add(1).ok_or(Error::SizeOverflow)?;
        let n_heap = n_sym.checked_mul(3).ok_or(Error::SizeOverflow)?;
        Ok(Workspace {
            max_bytes,
            marks: arena.alloc(max_bytes)?,
            syms: arena.alloc(n_sym)?,
            heap: arena.alloc(n_heap)?,
            text: arena.alloc(n_heap)?,
        })
    }

    /// The longest input (bytes) this workspace accepts.
    pub fn max_bytes(&self) -> usize {
        self.max_bytes
    }
}

/// A binary min-heap over `heap[..*len]` ordered by `(key, left)`.
pub(crate) mod queue {
    use super::Bigram;
    use crate::{Error, Result};

    #[inline]
    fn before(a: &Bigram, b: &Bigram) -> bool {
        (a.key, a.left) < (b.key, b.left)
    }

    /// Push `item`; `Err` if the heap is full (never for a workspace sized by `Workspace::new`).
    pub fn push(heap: &mut [Bigram], len: &mut usize, item: Bigram) -> Result<()> {
        let cap = heap.len();
        let mut i = *len;
        if i >= cap {
            return Err(Error::BufferTooSmall {
                needed: i + 1,
                available: cap,
            });
        }
        heap[i] = item;
        *len += 1;
        while i > 0 {
            let parent = (i - 1) / 2;
            if before(&heap[i], &heap[parent]) {
                heap.swap(i, parent);
                i = parent;
            } else {
                break;
            }
        }
        Ok(())
    }

    /// Pop the smallest item.
    pub fn pop(heap: &mut [Bigram], len: &mut usize) -> Option<Bigram> {
        let n = (*len).min(heap.len());
        if n == 0 {
            return None;
        }
        let top = heap[0];
        let last = n - 1;
        heap[0] = heap[last];
        *len = last;
        let mut i = 0;
        loop {
            let l = 2 * i + 1;
            let r = l + 1;
            let mut m = i;
            if l < last && before(&heap[l], &heap[m]) {
                m = l;
            }
            if r < last && before(&heap[r], &heap[m]) {
                m = r;
            }
            if m == i {
                break;
            }
            heap.swap(i, m);
            i = m;
        }
        Some(top)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use core::fmt::Write;

    /// One `Display` output in a fixed buffer (the library tests run without `std`).
    struct Line {
        buf: [u8; 200],
        len: usize,
    }

    impl Write for Line {
        fn write_str(&mut self, s: &str) -> fmt::Result {
            let end = self.len + s.len();
            self.buf
                .get_mut(self.len..end)
                .ok_or(fmt::Error)?
                .copy_from_slice(s.as_bytes());
            self.len = end;
            Ok(())
        }
    }

    fn shown(e: impl fmt::Display, out: &mut Line) -> &str {
        out.len = 0;
        write!(out, "{e}").unwrap();
        core::str::from_utf8(&out.buf[..out.len]).unwrap()
    }

    #[test]
    fn errors_display_what_and_where() {
        let mut l = Line {
            buf: [0; 200],
            len: 0,
        };
        let pre = TokenizerError::UnsupportedPre {
            name: Some(Name::new("qwen2")),
        };
        assert_eq!(
            shown(pre, &mut l),
            "unsupported pre-tokenizer \"qwen2\" (tokenizer.ggml.pre)"
        );
        assert_eq!(
            shown(Error::from(pre), &mut l),
            "tokenizer: unsupported pre-tokenizer \"qwen2\" (tokenizer.ggml.pre)"
        );
        assert_eq!(
            shown(
                TokenizerError::ArrayLength {
                    key: vocab::keys::SCORES,
                    expected: 12,
                    found: 10
                },
                &mut l
            ),
            "tokenizer.ggml.scores has 10 entries, expected 12 (one per token)"
        );
        assert_eq!(
            shown(TokenizerError::NoByteToken { byte: 0xE2 }, &mut l),
            "no token for byte 0xE2 (neither <0xE2> nor the byte itself)"
        );
        // Every variant: one non-empty line.
        let all = [
            TokenizerError::MissingModel,
            TokenizerError::UnsupportedModel {
                name: Name::new("bert"),
            },
            TokenizerError::UnsupportedPre { name: None },
            TokenizerError::BadTokenCount { n: 0 },
            TokenizerError::EmptyToken { id: 3 },
            TokenizerError::DuplicateToken { id: 3 },
            TokenizerError::TokenOutsideBase { id: 3 },
            TokenizerError::MissingMerges,
            TokenizerError::BadMerge { rank: 7 },
            TokenizerError::NanScore { id: 3 },
            TokenizerError::TooManyEog,
            TokenizerError::InputTooLong { len: 5, max: 4 },
            TokenizerError::NoSpecialToken { which: "BOS" },
        ];
        for e in all {
            let s = shown(e, &mut l);
            assert!(!s.is_empty() && !s.contains('\n'), "{e:?}");
        }
    }
}
