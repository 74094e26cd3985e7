//! Pre-tokenizers: split a raw text fragment into words before BPE.
//!
//! Both follow llama.cpp's `unicode_regex_split` for the named pre-tokenizer:
//!
//! * [`Pre::Gpt2`] (`gpt-2` and friends): the GPT-2 pattern
//!   `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`
//!   as llama.cpp's hand-written `unicode_regex_split_custom_gpt2` matches it:
//!   - contractions, lowercase only;
//!   - an optional single leading space `' '` (U+0020 only) then a run of
//!     letters, a run of numbers, or a run of "other" (not whitespace,
//!     letter or number);
//!   - a whitespace run of n > 1 followed by more text gives n − 1
//!     whitespace codepoints (the last one starts the next word), otherwise
//!     the whole run;
//!   - anything else is a single codepoint.
//! * [`Pre::Digits`] (`smollm`, `starcoder`, `refact`, `command-r`,
//!   `codeshell`, `exaone`, `minerva-7b`): first `\p{N}` — every number
//!   codepoint becomes its own piece and the text between them is kept as
//!   pieces — then the GPT-2 pattern inside each piece. A piece boundary acts
//!   as the end of the text for the second pass (so `" 2"` gives `" "`, `"2"`).
//!
//! Codepoint classes are llama.cpp's ([`super::unicode`]). Words are yielded
//! as sub-slices of the input: no copying, no buffers.

#![forbid(unsafe_code)]

use super::unicode::{Class, class};
use crate::Result;

/// A pre-tokenizer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pre {
    /// The GPT-2 pattern alone.
    Gpt2,
    /// Each `\p{N}` codepoint split off first, then the GPT-2 pattern.
    Digits,
}

/// The char starting at byte `pos` of `s` and its length, if any.
#[inline]
fn at(s: &str, pos: usize) -> Option<(char, usize)> {
    let c = s.get(pos..)?.chars().next()?;
    Some((c, c.len_utf8()))
}

#[inline]
fn class_at(s: &str, pos: usize) -> Option<Class> {
    at(s, pos).map(|(c, _)| class(c))
}

/// End (byte index) of the GPT-2 word starting at `pos` (< `s.len()`).
fn gpt2_word_end(s: &str, pos: usize) -> usize {
    let Some((c, clen)) = at(s, pos) else {
        return s.len();
    };
    // 's|'t|'re|'ve|'m|'ll|'d
    if c == '\''
        && let Some((c1, _)) = at(s, pos + 1)
    {
        if matches!(c1, 's' | 't' | 'm' | 'd') {
            return pos + 2;
        }
        if matches!(c1, 'r' | 'v' | 'l')
            && let Some((c2, _)) = at(s, pos + 2)
            && matches!((c1, c2), ('r', 'e') | ('v', 'e') | ('l', 'l'))
        {
            return pos + 3;
        }
    }
    // ` ?\p{L}+`, ` ?\p{N}+`, ` ?[^\s\p{L}\p{N}]+`: the class after an optional space.
    let first = if c == ' ' { pos + 1 } else { pos };
    if let Some(k) = class_at(s, first)
        && k != Class::Whitespace
    {
        let mut p = first;
        while let Some((ch, l)) = at(s, p) {
            if class(ch) != k {
                break;
            }
            p += l;
        }
        return p;
    }
    // `\s+(?!\S)` and `\s+`.
    let mut p = pos;
    let mut last_start = pos;
    let mut count = 0usize;
    while let Some((ch, l)) = at(s, p) {
        if class(ch) != Class::Whitespace {
            break;
        }
        last_start = p;
        p += l;
        count += 1;
    }
    if count > 1 && p < s.len() {
        return last_start;
    }
    if count > 0 {
        return p;
    }
    // No match: one codepoint.
    pos + clen
}

/// Split `s` with the GPT-2 pattern, calling `f` on each word.
fn gpt2_split(s: &str, f: &mut dyn FnMut(&str) -> Result<()>) -> Result<()> {
    let mut pos = 0usize;
    while pos < s.len() {
        let end = gpt2_word_end(s, pos).clamp(pos + 1, s.len());
        if let Some(w) = s.get(pos..end) {
            f(w)?;
        }
        pos = end;
    }
    Ok(())
}

/// Split the raw fragment `s` into words with `pre`, calling `f` on each.
pub fn for_each_word(s: &str, pre: Pre, f: &mut dyn FnMut(&str) -> Result<()>) -> Result<()> {
    match pre {
        Pre::Gpt2 => gpt2_split(s, f),
        Pre::Digits => {
            let mut run = 0usize;
            for (i, c) in s.char_indices() {
                if class(c) == Class::Number {
                    if let Some(piece) = s.get(run..i) {
                        gpt2_split(piece, f)?;
                    }
                    let end = i + c.len_utf8();
                    if let Some(d) = s.get(i..end) {
                        f(d)?;
                    }
                    run = end;
                }
            }
            if let Some(piece) = s.get(run..) {
                gpt2_split(piece, f)?;
            }
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use std::vec::Vec;

    fn words(s: &str, pre: Pre) -> Vec<&str> {
        // Words are consecutive sub-slices of `s`: recover them by length.
        let mut ends = Vec::new();
        let mut pos = 0;
        for_each_word(s, pre, &mut |w| {
            assert_eq!(&s[pos..pos + w.len()], w);
            pos += w.len();
            ends.push(pos);
            Ok(())
        })
        .unwrap();
        assert_eq!(pos, s.len());
        let mut start = 0;
        ends.into_iter()
            .map(|e| {
                let w = &s[start..e];
                start = e;
                w
            })
            .collect()
    }

    #[test]
    fn gpt2_pattern() {
        use Pre::Gpt2;
        assert_eq!(words("Hello world", Gpt2), ["Hello", " world"]);
        assert_eq!(
            words(" Hello  world!\n\n  x", Gpt2),
            [" Hello", " ", " world", "!", "\n\n ", " x"]
        );
        assert_eq!(
            words("it's they'd've", Gpt2),
            ["it", "'s", " they", "'d", "'ve"]
        );
        assert_eq!(words("IT'S", Gpt2), ["IT", "'", "S"]);
        assert_eq!(words("x  ", Gpt2), ["x", "  "]);
        assert_eq!(words("a 123 b", Gpt2), ["a", " 123", " b"]);
        assert_eq!(words("?!? ...", Gpt2), ["?!?", " ..."]);
        assert_eq!(words("a\u{3000}b", Gpt2), ["a", "\u{3000}", "b"]);
        assert_eq!(words("", Gpt2), [] as [&str; 0]);
    }

    #[test]
    fn digits_split_first() {
        use Pre::Digits;
        assert_eq!(words(" 2+2?", Digits), [" ", "2", "+", "2", "?"]);
        assert_eq!(
            words("12345 it's", Digits),
            ["1", "2", "3", "4", "5", " it", "'s"]
        );
        assert_eq!(words("x ½y", Digits), ["x", " ", "½", "y"]);
    }
}
