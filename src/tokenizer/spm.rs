//! SentencePiece BPE with scores (llama.cpp `llm_tokenizer_spm_session`),
//! for `tokenizer.ggml.model = "llama"`.
//!
//! For each raw fragment:
//! 1. Prepend `" "` if `add_space_prefix` is set and the fragment is the
//!    first one or follows a special token.
//! 2. Replace every `' '` with `"▁"` (U+2581).
//! 3. One symbol per UTF-8 character.
//! 4. Every adjacent pair whose concatenated text is a token is queued with
//!    that token's score; the queue pops the highest score first, ties to the
//!    smaller left index.
//! 5. Pop; skip the entry if either side was merged away or the combined
//!    length changed; otherwise merge and queue the two new neighbour pairs.
//! 6. Emit each final symbol as its token; a symbol that is not a token
//!    (always a single character, since merges only form tokens) becomes one
//!    byte token per UTF-8 byte: `<0xXX>` (uppercase hex), else the 1-byte
//!    token, else [`TokenizerError::NoByteToken`] (llama.cpp throws).
//!
//! llama.cpp's `rev_merge` resegmentation never fires for the same reason as
//! in step 6 (a merged symbol is always a token), so it is not needed here.
//!
//! Scores are compared as order-preserving integer keys of their f32 bits
//! (NaN rejected at load, `-0 == +0`), which is IEEE `<` on the remaining values.

#![forbid(unsafe_code)]

use super::{Bigram, NONE, Sink, Symbol, Tokenizer, TokenizerError, queue};
use crate::{Error, Result};

/// `"▁"` (U+2581) in UTF-8.
pub const SPACE_MARK: &[u8; 3] = b"\xE2\x96\x81";

/// The text of the byte token for `b`: `<0xXX>`, uppercase hex.
pub const fn byte_token_text(b: u8) -> [u8; 6] {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    [
        b'<',
        b'0',
        b'x',
        HEX[(b >> 4) as usize],
        HEX[(b & 15) as usize],
        b'>',
    ]
}

/// Merge-loop scratch (borrowed from a [`super::Workspace`]).
pub(crate) struct Work<'w, 'x> {
    pub(crate) syms: &'x mut &'w mut [Symbol],
    pub(crate) heap: &'x mut &'w mut [Bigram],
    pub(crate) text: &'x mut &'w mut [u8],
}

/// Length of the UTF-8 sequence a lead byte starts (llama.cpp `unicode_len_utf8`).
const fn utf8_len(lead: u8) -> usize {
    match lead >> 4 {
        0xC | 0xD => 2,
        0xE => 3,
        0xF => 4,
        _ => 1,
    }
}

/// Queue the pair (left, right) if its concatenation is a token.
fn try_add_bigram(
    tok: &Tokenizer<'_>,
    text: &[u8],
    syms: &[Symbol],
    heap: &mut [Bigram],
    len: &mut usize,
    left: u32,
    right: u32,
) -> Result<()> {
    if left == NONE || right == NONE {
        return Ok(());
    }
    let (Some(l), Some(r)) = (syms.get(left as usize), syms.get(right as usize)) else {
        return Ok(());
    };
    let size = (l.n + r.n) as usize;
    let start = l.start as usize;
    let Some(t) = text.get(start..start + size) else {
        return Ok(());
    };
    let Some(id) = tok.vocab().find(t) else {
        return Ok(());
    };
    queue::push(
        heap,
        len,
        Bigram {
            key: !tok.vocab().score_key(id),
            left,
            right,
            aux: size as u32,
        },
    )
}

/// Encode one raw fragment (SentencePiece) into `out`: the module's steps
/// 1–6, one call each.
pub(crate) fn encode_fragment(
    tok: &Tokenizer<'_>,
    raw: &str,
    space_prefix: bool,
    work: &mut Work<'_, '_>,
    out: &mut Sink<'_>,
) -> Result<()> {
    let text = escape_spaces(raw, space_prefix, work.text)?;
    if text.is_empty() {
        return Ok(());
    }
    let syms = split_chars(text, work.syms)?;
    merge_by_score(tok, text, syms, work.heap)?;
    emit_symbols(tok, text, syms, out)
}

/// Steps 1–2: `raw` with `"▁"` for every space (and one in front if
/// `space_prefix`), written into `buf`; returns the written part.
fn escape_spaces<'b>(raw: &str, space_prefix: bool, buf: &'b mut [u8]) -> Result<&'b [u8]> {
    let cap = buf.len();
    let mut n = 0usize;
    let mut put = |bytes: &[u8]| -> Result<()> {
        let dst = buf
            .get_mut(n..n + bytes.len())
            .ok_or(Error::BufferTooSmall {
                needed: n + bytes.len(),
                available: cap,
            })?;
        dst.copy_from_slice(bytes);
        n += bytes.len();
        Ok(())
    };
    if space_prefix {
        put(SPACE_MARK)?;
    }
    for &b in raw.as_bytes() {
        if b == b' ' {
            put(SPACE_MARK)?;
        } else {
            put(&[b])?;
        }
    }
    Ok(buf.get(..n).unwrap_or(&[]))
}

/// Step 3: one symbol per UTF-8 character of `text` (non-empty), linked in
/// order; returns the used part of `syms`.
fn split_chars<'s>(text: &[u8], syms: &'s mut [Symbol]) -> Result<&'s mut [Symbol]> {
    let mut count = 0usize;
    let mut off = 0usize;
    while off < text.len() {
        let l = utf8_len(text[off]).min(text.len() - off);
        let i = count as u32;
        let s = syms.get_mut(count).ok_or(Error::BufferTooSmall {
            needed: count + 1,
            available: 0,
        })?;
        off += l;
        *s = Symbol {
            id: NONE,
            prev: if count == 0 { NONE } else { i - 1 },
            next: if off == text.len() { NONE } else { i + 1 },
            n: l as u32,
            start: (off - l) as u32,
        };
        count += 1;
    }
    Ok(syms.get_mut(..count).unwrap_or(&mut []))
}

/// Steps 4–5: queue every adjacent pair that forms a token, then merge the
/// best-scoring valid pair and queue its two new neighbour pairs until the
/// queue is empty. Merged-away symbols are left with `n == 0`.
fn merge_by_score(
    tok: &Tokenizer<'_>,
    text: &[u8],
    syms: &mut [Symbol],
    heap: &mut [Bigram],
) -> Result<()> {
    let mut len = 0usize;
    for i in 1..syms.len() as u32 {
        try_add_bigram(tok, text, syms, heap, &mut len, i - 1, i)?;
    }
    while let Some(bg) = queue::pop(heap, &mut len) {
        let (Some(&l), Some(&r)) = (syms.get(bg.left as usize), syms.get(bg.right as usize)) else {
            continue;
        };
        if l.n == 0 || r.n == 0 || l.n + r.n != bg.aux {
            continue;
        }
        if let Some(ls) = syms.get_mut(bg.left as usize) {
            ls.n += r.n;
            ls.next = r.next;
        }
        if let Some(rs) = syms.get_mut(bg.right as usize) {
            rs.n = 0;
        }
        if let Some(nx) = syms.get_mut(r.next as usize) {
            nx.prev = bg.left;
        }
        try_add_bigram(tok, text, syms, heap, &mut len, l.prev, bg.left)?;
        try_add_bigram(tok, text, syms, heap, &mut len, bg.left, r.next)?;
    }
    Ok(())
}

/// Step 6: each remaining symbol as its token, or as byte tokens.
fn emit_symbols(
    tok: &Tokenizer<'_>,
    text: &[u8],
    syms: &[Symbol],
    out: &mut Sink<'_>,
) -> Result<()> {
    let mut i = 0u32;
    while let Some(s) = syms.get(i as usize) {
        let start = s.start as usize;
        let t = text.get(start..start + s.n as usize).unwrap_or(&[]);
        if let Some(id) = tok.vocab().find(t) {
            out.push(id)?;
        } else {
            for &b in t {
                let id = tok.byte_token(b);
                if id == NONE {
                    return Err(TokenizerError::NoByteToken { byte: b }.into());
                }
                out.push(id)?;
            }
        }
        i = s.next;
    }
    Ok(())
}
