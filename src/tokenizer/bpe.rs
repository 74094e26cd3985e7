//! GPT-2 byte-level BPE (llama.cpp `llm_tokenizer_bpe_session::tokenize`).
//!
//! **Byte alphabet** (`unicode_byte_to_utf8_map`): bytes `0x21..=0x7E`,
//! `0xA1..=0xAC` and `0xAE..=0xFF` stand for the codepoint of the same value;
//! the other 68 bytes, in ascending order, stand for U+0100, U+0101, … (so
//! space is `Ġ` U+0120 and `\n` is `Ċ` U+010A). Vocabulary texts and merges
//! are written in this alphabet.
//!
//! **Merge loop**, for one pre-tokenized word:
//! 1. One symbol per byte of the word, each the token of its alphabet char.
//! 2. Every adjacent pair with a merge goes into a min-queue ordered by
//!    (rank, left index).
//! 3. Pop; skip the entry if either side was merged away or changed since it
//!    was queued (ids differ: equivalent to llama.cpp's text comparison,
//!    because token texts are unique and symbols only grow). Otherwise merge
//!    the right symbol into the left and queue the two new neighbour pairs.
//! 4. Emit each remaining symbol's id. A symbol that is not a token (only
//!    possible for a byte whose alphabet char is missing from the vocabulary)
//!    falls back to the 1-byte tokens of the char's UTF-8 bytes, skipping
//!    those that do not exist, as llama.cpp does.
//!
//! Merges are checked at load to have token parts and a token result, so a
//! non-token symbol never takes part in a merge, exactly as in llama.cpp.

#![forbid(unsafe_code)]

use super::{Bigram, NONE, Sink, Symbol, Tokenizer, queue};
use crate::{Error, Result};

/// The byte-level alphabet char standing for byte `b`.
pub const fn byte_char(b: u8) -> char {
    let cp = match b {
        0x21..=0x7E | 0xA1..=0xAC | 0xAE..=0xFF => b as u32,
        // 0x00..=0x20 are the first 33 unmapped bytes.
        0x00..=0x20 => 0x100 + b as u32,
        // 0x7F..=0xA0 the next 34.
        0x7F..=0xA0 => 0x100 + 33 + (b - 0x7F) as u32,
        // 0xAD is the last one.
        _ => 0x100 + 67,
    };
    match char::from_u32(cp) {
        Some(c) => c,
        None => '\0', // unreachable: every cp above is a scalar value
    }
}

/// The byte a byte-level alphabet char stands for, if it is one.
pub const fn char_byte(c: char) -> Option<u8> {
    let cp = c as u32;
    match cp {
        0x21..=0x7E | 0xA1..=0xAC | 0xAE..=0xFF => Some(cp as u8),
        0x100..=0x120 => Some((cp - 0x100) as u8),
        0x121..=0x142 => Some((cp - 0x121 + 0x7F) as u8),
        0x143 => Some(0xAD),
        _ => None,
    }
}

/// Merge-loop scratch (borrowed from a [`super::Workspace`]).
pub(crate) struct Work<'w, 'x> {
    pub(crate) syms: &'x mut &'w mut [Symbol],
    pub(crate) heap: &'x mut &'w mut [Bigram],
}

/// Queue the pair (left, right) if it has a merge.
fn add_bigram(
    tok: &Tokenizer<'_>,
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
    if l.id == NONE || r.id == NONE {
        return Ok(());
    }
    let Some(idx) = tok.merge_index(l.id, r.id) else {
        return Ok(());
    };
    let Some(m) = tok.merge(idx as u32) else {
        return Ok(());
    };
    queue::push(
        heap,
        len,
        Bigram {
            key: m[3],
            left,
            right,
            aux: idx as u32,
        },
    )
}

/// The word's bytes written in the byte-level alphabet (UTF-8).
fn alphabet_bytes(word: &[u8]) -> impl Iterator<Item = u8> + Clone + '_ {
    word.iter().flat_map(|&b| {
        let mut buf = [0u8; 4];
        let n = byte_char(b).encode_utf8(&mut buf).len();
        buf.into_iter().take(n)
    })
}

/// Encode one pre-tokenized word (raw bytes) into `out`. With
/// `ignore_merges`, a word whose alphabet text is a token is that token
/// (llama.cpp checks this before merging).
pub(crate) fn encode_word(
    tok: &Tokenizer<'_>,
    word: &[u8],
    ignore_merges: bool,
    work: &mut Work<'_, '_>,
    out: &mut Sink<'_>,
) -> Result<()> {
    let n = word.len();
    if n == 0 {
        return Ok(());
    }
    if ignore_merges && let Some(id) = tok.vocab().find_iter(alphabet_bytes(word)) {
        return out.push(id);
    }
    let available = work.syms.len();
    let syms = work.syms.get_mut(..n).ok_or(Error::BufferTooSmall {
        needed: n,
        available,
    })?;
    let heap: &mut [Bigram] = work.heap;
    let last = (n - 1) as u32;
    for (i, (s, &b)) in syms.iter_mut().zip(word).enumerate() {
        let i = i as u32;
        *s = Symbol {
            id: tok.byte_token(b),
            prev: if i == 0 { NONE } else { i - 1 },
            next: if i == last { NONE } else { i + 1 },
            n: 1,
            start: i,
        };
    }
    let mut len = 0usize;
    for i in 1..n as u32 {
        add_bigram(tok, syms, heap, &mut len, i - 1, i)?;
    }
    while let Some(bg) = queue::pop(heap, &mut len) {
        let Some(m) = tok.merge(bg.aux) else { continue };
        let (Some(&l), Some(&r)) = (syms.get(bg.left as usize), syms.get(bg.right as usize)) else {
            continue;
        };
        // Stale: a side was merged away or has changed since queued.
        if l.n == 0 || r.n == 0 || l.id != m[0] || r.id != m[1] {
            continue;
        }
        // Merge right into left.
        if let Some(ls) = syms.get_mut(bg.left as usize) {
            ls.id = m[2];
            ls.n += r.n;
            ls.next = r.next;
        }
        if let Some(rs) = syms.get_mut(bg.right as usize) {
            rs.n = 0;
        }
        if let Some(nx) = syms.get_mut(r.next as usize) {
            nx.prev = bg.left;
        }
        add_bigram(tok, syms, heap, &mut len, l.prev, bg.left)?;
        add_bigram(tok, syms, heap, &mut len, bg.left, r.next)?;
    }
    // Emit the final symbols in order.
    let mut i = 0u32;
    while let Some(s) = syms.get(i as usize) {
        if s.id != NONE {
            out.push(s.id)?;
        } else if let Some(&b) = word.get(s.start as usize) {
            // Per-byte fallback on the UTF-8 of the alphabet char.
            let mut buf = [0u8; 4];
            for &u in byte_char(b).encode_utf8(&mut buf).as_bytes() {
                if let Some(id) = tok.vocab().find(&[u]) {
                    out.push(id)?;
                }
            }
        }
        i = s.next;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_alphabet_is_a_bijection() {
        let mut seen = [false; 0x144];
        for b in 0..=255u8 {
            let c = byte_char(b);
            assert_eq!(char_byte(c), Some(b));
            let cp = c as usize;
            assert!(cp < 0x144);
            assert!(!seen[cp]);
            seen[cp] = true;
        }
        assert_eq!(byte_char(b' '), 'Ġ');
        assert_eq!(byte_char(b'\n'), 'Ċ');
        assert_eq!(byte_char(b'a'), 'a');
        assert_eq!(byte_char(0xAD), '\u{143}');
        assert_eq!(char_byte('\u{144}'), None);
        assert_eq!(char_byte(' '), None);
    }
}
