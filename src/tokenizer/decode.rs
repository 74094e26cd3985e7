//! Token → bytes, and a streaming decoder that yields complete UTF-8 only.
//!
//! **Pieces** follow llama.cpp's `token_to_piece` and are computed once at
//! load (its `cache_token_to_piece`, rendered with `special = true`):
//!
//! | attribute | BPE (`gpt2`) | SPM (`llama`) |
//! |---|---|---|
//! | CONTROL, UNKNOWN, USER_DEFINED | text as is | text as is |
//! | NORMAL | each char → its byte ([`super::bpe::char_byte`]) | `▁` → `' '` |
//! | BYTE | `""` | the byte `0xXX` of `<0xXX>` |
//! | UNUSED, UNDEFINED | `""` | `""` |
//!
//! With `special = false`, CONTROL and UNKNOWN tokens give `""`.
//!
//! **Streaming**: a token may end in the middle of a UTF-8 character (byte
//! tokens, or BPE tokens that split a multi-byte char). [`StreamDecoder`]
//! keeps such an unfinished sequence (at most 3 bytes) until the next token
//! completes it, and writes only whole characters. Bytes that can never
//! form a character are replaced by U+FFFD, one per maximal ill-formed
//! subpart (the Unicode / WHATWG rule, the same as `String::from_utf8_lossy`),
//! so the output is always valid UTF-8.

#![forbid(unsafe_code)]

use super::{Tokenizer, attr, bpe, spm};
use crate::{Error, Result};

/// Decode one token's text into `dst` (special = true); returns the length.
/// The result is never longer than `text`.
pub(crate) fn decode_token(is_spm: bool, a: u8, text: &[u8], dst: &mut [u8]) -> Result<usize> {
    let mut n = 0usize;
    let mut put = |b: &[u8]| -> Result<()> {
        let d = dst.get_mut(n..n + b.len()).ok_or(Error::SizeOverflow)?;
        d.copy_from_slice(b);
        n += b.len();
        Ok(())
    };
    if a & (attr::CONTROL | attr::UNKNOWN | attr::USER_DEFINED) != 0 {
        put(text)?;
    } else if a & attr::NORMAL != 0 {
        if is_spm {
            let mut rest = text;
            while !rest.is_empty() {
                if rest.starts_with(spm::SPACE_MARK) {
                    put(b" ")?;
                    rest = rest.get(3..).unwrap_or(&[]);
                } else if let Some((&b, tail)) = rest.split_first() {
                    put(&[b])?;
                    rest = tail;
                }
            }
        } else {
            match core::str::from_utf8(text) {
                Ok(s) => {
                    let mut buf = [0u8; 4];
                    for c in s.chars() {
                        match bpe::char_byte(c) {
                            Some(b) => put(&[b])?,
                            None => put(c.encode_utf8(&mut buf).as_bytes())?,
                        }
                    }
                }
                Err(_) => put(text)?,
            }
        }
    } else if a & attr::BYTE != 0 && is_spm {
        put(&[byte_token_value(text)])?;
    }
    Ok(n)
}

/// Value of a `<0xXX>` byte token: the hex digits at positions 3..5 (as
/// llama.cpp's `strtol(text.substr(3, 2), 16)`, reading hex digits only).
fn byte_token_value(text: &[u8]) -> u8 {
    let mut v = 0u8;
    for &c in text.iter().skip(3).take(2) {
        let d = match c {
            b'0'..=b'9' => c - b'0',
            b'a'..=b'f' => c - b'a' + 10,
            b'A'..=b'F' => c - b'A' + 10,
            _ => break,
        };
        v = (v << 4) | d;
    }
    v
}

/// `llama_detokenize` without `clean_spaces` (see [`Tokenizer::detokenize`]).
pub(crate) fn detokenize(
    tok: &Tokenizer<'_>,
    mut ids: &[u32],
    remove_special: bool,
    special: bool,
    out: &mut [u8],
) -> Result<usize> {
    let mut remove_space = tok.add_space_prefix();
    if remove_special && tok.add_bos() && ids.first().is_some_and(|&f| Some(f) == tok.bos()) {
        remove_space = false;
        ids = ids.get(1..).unwrap_or(&[]);
    }
    if remove_special && tok.add_eos() && ids.last().is_some_and(|&l| Some(l) == tok.eos()) {
        ids = ids.get(..ids.len() - 1).unwrap_or(&[]);
    }
    let mut n = 0usize;
    for &id in ids {
        let mut p = tok.piece(id, special).ok_or(Error::TokenOutOfRange {
            token: id,
            vocab_size: tok.vocab_size(),
        })?;
        if remove_space && let Some(rest) = p.strip_prefix(b" ") {
            p = rest;
        }
        remove_space = false;
        let available = out.len();
        let d = out.get_mut(n..n + p.len()).ok_or(Error::BufferTooSmall {
            needed: n + p.len(),
            available,
        })?;
        d.copy_from_slice(p);
        n += p.len();
    }
    Ok(n)
}

/// U+FFFD REPLACEMENT CHARACTER.
const REPLACEMENT: &[u8; 3] = b"\xEF\xBF\xBD";

/// Turns a stream of token ids into valid UTF-8, holding back a token that
/// ends in the middle of a character.
#[derive(Clone, Copy, Debug, Default)]
pub struct StreamDecoder {
    /// Bytes of the unfinished character.
    pending: [u8; 4],
    n_pending: u8,
    /// Continuation bytes still needed.
    need: u8,
    /// Allowed range of the next continuation byte.
    lo: u8,
    hi: u8,
    special: bool,
    strip_space: bool,
}

impl StreamDecoder {
    /// A decoder; with `special`, control tokens render as their text.
    pub const fn new(special: bool) -> Self {
        StreamDecoder {
            pending: [0; 4],
            n_pending: 0,
            need: 0,
            lo: 0,
            hi: 0,
            special,
            strip_space: false,
        }
    }

    /// As [`StreamDecoder::new`], and the first token's piece loses one
    /// leading space (SentencePiece `add_space_prefix`, as `llama_detokenize`).
    pub const fn with_leading_space_stripped(special: bool) -> Self {
        let mut d = Self::new(special);
        d.strip_space = true;
        d
    }

    /// Output buffer length that always suffices for [`StreamDecoder::push`]
    /// with this tokenizer.
    pub fn max_output(tok: &Tokenizer<'_>) -> usize {
        tok.max_piece_len().saturating_mul(3).saturating_add(8)
    }

    /// Feed one token; returns the complete characters it finishes (maybe
    /// none). Errors (unknown id, `out` shorter than 3 × piece + 8 bytes)
    /// leave the decoder unchanged.
    pub fn push<'o>(&mut self, tok: &Tokenizer<'_>, id: u32, out: &'o mut [u8]) -> Result<&'o str> {
        let mut piece = tok.piece(id, self.special).ok_or(Error::TokenOutOfRange {
            token: id,
            vocab_size: tok.vocab_size(),
        })?;
        let needed = piece.len().saturating_mul(3).saturating_add(8);
        if out.len() < needed {
            return Err(Error::BufferTooSmall {
                needed,
                available: out.len(),
            });
        }
        if self.strip_space {
            if let Some(rest) = piece.strip_prefix(b" ") {
                piece = rest;
            }
            self.strip_space = false;
        }
        let mut w = 0usize;
        for &b in piece {
            self.byte(b, out, &mut w);
        }
        Ok(as_str(out, w))
    }

    /// End of stream: an unfinished character becomes U+FFFD.
    pub fn finish<'o>(&mut self, out: &'o mut [u8]) -> Result<&'o str> {
        if self.n_pending == 0 {
            return Ok("");
        }
        let available = out.len();
        let dst = out.get_mut(..3).ok_or(Error::BufferTooSmall {
            needed: 3,
            available,
        })?;
        dst.copy_from_slice(REPLACEMENT);
        self.reset();
        Ok(as_str(out, 3))
    }

    fn reset(&mut self) {
        self.n_pending = 0;
        self.need = 0;
    }

    fn emit(out: &mut [u8], w: &mut usize, bytes: &[u8]) {
        if let Some(d) = out.get_mut(*w..*w + bytes.len()) {
            d.copy_from_slice(bytes);
            *w += bytes.len();
        }
    }

    /// One input byte (Unicode Table 3-7 well-formed sequences).
    fn byte(&mut self, b: u8, out: &mut [u8], w: &mut usize) {
        if self.need > 0 {
            if (self.lo..=self.hi).contains(&b) {
                if let Some(p) = self.pending.get_mut(self.n_pending as usize) {
                    *p = b;
                }
                self.n_pending += 1;
                self.need -= 1;
                self.lo = 0x80;
                self.hi = 0xBF;
                if self.need == 0 {
                    let n = self.n_pending as usize;
                    let pending = self.pending;
                    Self::emit(out, w, pending.get(..n).unwrap_or(&[]));
                    self.reset();
                }
                return;
            }
            // Ill-formed: replace the unfinished prefix, then start over with b.
            Self::emit(out, w, REPLACEMENT);
            self.reset();
        }
        let (need, lo, hi) = match b {
            0x00..=0x7F => {
                Self::emit(out, w, &[b]);
                return;
            }
            0xC2..=0xDF => (1, 0x80, 0xBF),
            0xE0 => (2, 0xA0, 0xBF),
            0xE1..=0xEC | 0xEE..=0xEF => (2, 0x80, 0xBF),
            0xED => (2, 0x80, 0x9F),
            0xF0 => (3, 0x90, 0xBF),
            0xF1..=0xF3 => (3, 0x80, 0xBF),
            0xF4 => (3, 0x80, 0x8F),
            _ => {
                Self::emit(out, w, REPLACEMENT);
                return;
            }
        };
        self.pending[0] = b;
        self.n_pending = 1;
        self.need = need;
        self.lo = lo;
        self.hi = hi;
    }
}

/// `out[..w]`, which the decoder wrote as whole UTF-8 characters.
fn as_str(out: &[u8], w: usize) -> &str {
    core::str::from_utf8(out.get(..w).unwrap_or(&[])).unwrap_or("")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_token_values() {
        assert_eq!(byte_token_value(b"<0x0A>"), 0x0A);
        assert_eq!(byte_token_value(b"<0xFF>"), 0xFF);
        assert_eq!(byte_token_value(b"<0xe9>"), 0xE9);
        assert_eq!(byte_token_value(b"<0x"), 0);
    }

    #[test]
    fn bpe_normal_piece() {
        let mut d = [0u8; 16];
        let n = decode_token(false, attr::NORMAL, "ĠcafÃ©".as_bytes(), &mut d).unwrap();
        assert_eq!(&d[..n], " café".as_bytes());
        let n = decode_token(false, attr::CONTROL, b"<|im_end|>", &mut d).unwrap();
        assert_eq!(&d[..n], b"<|im_end|>");
        let n = decode_token(false, attr::UNUSED, b"abc", &mut d).unwrap();
        assert_eq!(n, 0);
    }

    #[test]
    fn spm_pieces() {
        let mut d = [0u8; 16];
        let n = decode_token(true, attr::NORMAL, "▁he▁llo".as_bytes(), &mut d).unwrap();
        assert_eq!(&d[..n], b" he llo");
        let n = decode_token(true, attr::BYTE, b"<0xE2>", &mut d).unwrap();
        assert_eq!(&d[..n], &[0xE2]);
    }
}
