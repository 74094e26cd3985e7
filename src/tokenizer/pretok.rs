//! Pre-tokenizers: split a raw text fragment into words before BPE.
//!
//! Each follows llama.cpp's `unicode_regex_split` for the named pre-tokenizer:
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
//! * [`Pre::Llama3`], [`Pre::Dbrx`] and [`Pre::Qwen2`]: the llama-3 pattern
//!   `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
//!   as llama.cpp's hand-written `unicode_regex_split_custom_llama3` matches
//!   it (Qwen2's `unicode_regex_split_custom_qwen2` is the same with `\p{N}`
//!   for `\p{N}{1,3}`): contractions in either case; a letter run with at
//!   most one leading codepoint that is not `\r`, `\n` or a number; a number
//!   run cut every 3 (Qwen2: every 1) codepoints; an optional space and an
//!   "other" run with the `\r`/`\n` after it; a whitespace run up to and
//!   including its last `\r`/`\n`; otherwise whitespace as for GPT-2.
//!   `Llama3` also takes a word that is a token whole ([`Pre::ignore_merges`]).
//!
//! * [`Pre::Qwen35`]: Qwen2's with `[\p{L}\p{M}]+` letter runs and marks
//!   not "other" (`unicode_regex_split_custom_qwen35`).
//! * [`Pre::DeepseekLlm`], [`Pre::DeepseekCoder`], [`Pre::Falcon`]: sequences
//!   of regexes that llama.cpp runs with `std::regex`, each splitting the
//!   words of the one before, keeping the text between matches as words
//!   (`unicode_regex_split_stl`); each regex is matched here by hand,
//!   leftmost match first, with `\s` as llama.cpp's collapsed text sees it
//!   (ASCII whitespace and every non-ASCII `White_Space` codepoint).
//!
//! The names llama.cpp gives these pre-tokenizers are mapped in
//! `tokenizer::vocab`. Checked against llama.cpp's own tokenizer test suite
//! (`tests/tokenizer/llamacpp_suite.rs`) and its ids on random texts.
//!
//! Codepoint classes are llama.cpp's ([`super::unicode`]). Words are yielded
//! as sub-slices of the input: no copying, no buffers.

#![forbid(unsafe_code)]

use super::unicode::{Category, Class, category, class};
use crate::Result;

/// A pre-tokenizer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pre {
    /// The GPT-2 pattern alone.
    Gpt2,
    /// Each `\p{N}` codepoint split off first, then the GPT-2 pattern.
    Digits,
    /// The llama-3 pattern (numbers in runs of at most 3); a word that is a
    /// token is taken whole, without merges (llama.cpp's `ignore_merges`).
    Llama3,
    /// The llama-3 pattern with ordinary merges (llama.cpp's DBRX and SMAUG).
    Dbrx,
    /// The llama-3 pattern with single-codepoint numbers (Qwen2).
    Qwen2,
    /// Qwen2's pattern with marks (`\p{M}`) joining letter runs (Qwen3.5).
    Qwen35,
    /// DeepSeek Coder's regex sequence (`[\r\n]`, `\s?\p{L}+`, `\s?\p{P}+`,
    /// a CJK run, `\p{N}`).
    DeepseekCoder,
    /// Falcon's regex sequence (punctuation runs, GPT-2, `[0-9][0-9][0-9]`).
    Falcon,
    /// DeepSeek LLM's regex sequence (`[\r\n]`, `\s?` + a letter list,
    /// `\s?` + a punctuation list, `\s+$`, a CJK run, `\p{N}+`).
    DeepseekLlm,
}

impl Pre {
    /// Whether a word that is itself a token skips the merge loop.
    pub const fn ignore_merges(self) -> bool {
        matches!(self, Pre::Llama3)
    }
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

/// End (byte index) of the llama-3-style word starting at `pos` (< `s.len()`):
/// llama.cpp's `unicode_regex_split_custom_llama3` for
/// `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,max_digits}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`.
///
/// With `marks` (Qwen3.5's `unicode_regex_split_custom_qwen35`), `\p{M}`
/// counts as a letter in the letter run and not as "other".
fn llama3_word_end(s: &str, pos: usize, max_digits: usize, marks: bool) -> usize {
    let Some((c, clen)) = at(s, pos) else {
        return s.len();
    };
    let k = class(c);
    let letterlike = |ch: char| {
        let k = class(ch);
        k == Class::Letter || (marks && k == Class::Other && category(ch) == Category::Mark)
    };
    let other = |ch: char| class(ch) == Class::Other && !(marks && category(ch) == Category::Mark);
    // (?i:'s|'t|'re|'ve|'m|'ll|'d)
    if c == '\''
        && let Some((c1, _)) = at(s, pos + 1)
    {
        let c1 = c1.to_ascii_lowercase();
        if matches!(c1, 's' | 't' | 'm' | 'd') {
            return pos + 2;
        }
        if let Some((c2, _)) = at(s, pos + 2)
            && matches!(
                (c1, c2.to_ascii_lowercase()),
                ('r', 'e') | ('v', 'e') | ('l', 'l')
            )
        {
            return pos + 3;
        }
    }
    // [^\r\n\p{L}\p{N}]?\p{L}+
    if c != '\r' && c != '\n' && k != Class::Number {
        let start = if letterlike(c) {
            Some(pos)
        } else {
            let next = pos + clen;
            at(s, next)
                .is_some_and(|(n, _)| letterlike(n))
                .then_some(next)
        };
        if let Some(mut p) = start {
            while let Some((ch, l)) = at(s, p) {
                if !letterlike(ch) {
                    break;
                }
                p += l;
            }
            return p;
        }
    }
    // \p{N}{1,max_digits}
    if k == Class::Number {
        let mut p = pos;
        let mut n = 0usize;
        while n < max_digits
            && let Some((ch, l)) = at(s, p)
            && class(ch) == Class::Number
        {
            p += l;
            n += 1;
        }
        return p;
    }
    // ` ?[^\s\p{L}\p{N}]+[\r\n]*`
    let first = if c == ' ' { pos + 1 } else { pos };
    if at(s, first).is_some_and(|(ch, _)| other(ch)) {
        let mut p = first;
        while let Some((ch, l)) = at(s, p) {
            if !other(ch) {
                break;
            }
            p += l;
        }
        while let Some((ch, l)) = at(s, p) {
            if ch != '\r' && ch != '\n' {
                break;
            }
            p += l;
        }
        return p;
    }
    // Whitespace run: `\s*[\r\n]+`, `\s+(?!\S)`, `\s+`.
    let mut p = pos;
    let mut last_start = pos;
    let mut count = 0usize;
    let mut after_newline = None;
    while let Some((ch, l)) = at(s, p) {
        if class(ch) != Class::Whitespace {
            break;
        }
        last_start = p;
        p += l;
        count += 1;
        if ch == '\r' || ch == '\n' {
            after_newline = Some(p);
        }
    }
    if let Some(e) = after_newline {
        return e;
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

/// Split `s` into the words `word_end` delimits, calling `f` on each.
fn split_by(
    s: &str,
    word_end: &dyn Fn(&str, usize) -> usize,
    f: &mut dyn FnMut(&str) -> Result<()>,
) -> Result<()> {
    let mut pos = 0usize;
    while pos < s.len() {
        let end = word_end(s, pos).clamp(pos + 1, s.len());
        if let Some(w) = s.get(pos..end) {
            f(w)?;
        }
        pos = end;
    }
    Ok(())
}

/// One regex of a sequence: its words are split further by the next one.
enum Stage<'m> {
    /// A regex llama.cpp runs with `std::regex` (`regex_iterator`): the
    /// leftmost match from each position, `m(s, i)` giving the end of the
    /// match starting at byte `i` (never empty), if any; the text between
    /// matches is kept as words too.
    Matches(&'m dyn Fn(&str, usize) -> Option<usize>),
    /// The GPT-2 pattern (llama.cpp's hand-written splitter).
    Gpt2,
    /// `\s+$`: the whitespace run at the end of the word is split off.
    TrailingWhitespace,
}

/// Split `s` by `stages[0]`, each word by `stages[1]`, and so on; `f` gets
/// the words of the last stage.
fn chain(s: &str, stages: &[Stage<'_>], f: &mut dyn FnMut(&str) -> Result<()>) -> Result<()> {
    let Some((first, rest)) = stages.split_first() else {
        return if s.is_empty() { Ok(()) } else { f(s) };
    };
    let mut next = |w: &str| chain(w, rest, f);
    match first {
        Stage::Gpt2 => gpt2_split(s, &mut next),
        Stage::TrailingWhitespace => {
            let mut cut = s.len();
            for (i, c) in s.char_indices().rev() {
                if class(c) != Class::Whitespace {
                    break;
                }
                cut = i;
            }
            let (body, tail) = s.split_at_checked(cut).unwrap_or((s, ""));
            for w in [body, tail] {
                if !w.is_empty() {
                    next(w)?;
                }
            }
            Ok(())
        }
        Stage::Matches(m) => {
            let mut gap = 0usize;
            let mut i = 0usize;
            while let Some((_, l)) = at(s, i) {
                match m(s, i).filter(|&e| e > i) {
                    Some(end) => {
                        if let Some(g) = s.get(gap..i).filter(|g| !g.is_empty()) {
                            next(g)?;
                        }
                        if let Some(w) = s.get(i..end) {
                            next(w)?;
                        }
                        i = end;
                        gap = end;
                    }
                    None => i += l,
                }
            }
            match s.get(gap..) {
                Some(g) if !g.is_empty() => next(g),
                _ => Ok(()),
            }
        }
    }
}

/// End of the run of codepoints satisfying `p` from byte `i`.
fn run_end(s: &str, mut i: usize, p: &dyn Fn(char) -> bool) -> usize {
    while let Some((c, l)) = at(s, i) {
        if !p(c) {
            break;
        }
        i += l;
    }
    i
}

/// `[\r\n]`.
fn newline(s: &str, i: usize) -> Option<usize> {
    at(s, i)
        .filter(|(c, _)| matches!(c, '\r' | '\n'))
        .map(|(_, l)| i + l)
}

/// `\s?X+` for the class `p`: an optional whitespace codepoint, then a run.
fn ws_then_run(s: &str, i: usize, p: &dyn Fn(char) -> bool) -> Option<usize> {
    let (c, l) = at(s, i)?;
    let start = if p(c) {
        i
    } else if class(c) == Class::Whitespace && at(s, i + l).is_some_and(|(n, _)| p(n)) {
        i + l
    } else {
        return None;
    };
    Some(run_end(s, start, p))
}

/// `[一-龥ࠀ-一가-퟿]+`: U+4E00–U+9FA5, U+0800–U+4E00 (together
/// U+0800–U+9FA5) and U+AC00–U+D7FF.
fn cjk_run(s: &str, i: usize) -> Option<usize> {
    let cjk = |c: char| matches!(c as u32, 0x0800..=0x9FA5 | 0xAC00..=0xD7FF);
    let end = run_end(s, i, &cjk);
    (end > i).then_some(end)
}

/// The letter list of DeepSeek LLM's second regex (inclusive ranges).
const DEEPSEEK_LETTERS: [(u32, u32); 87] = [
    (0x0041, 0x005A),
    (0x0061, 0x007A),
    (0x00B5, 0x00B5),
    (0x00C0, 0x00D6),
    (0x00D8, 0x00F6),
    (0x00F8, 0x01BA),
    (0x01BC, 0x01BF),
    (0x01C4, 0x0293),
    (0x0295, 0x02AF),
    (0x0370, 0x0373),
    (0x0376, 0x0376),
    (0x0377, 0x0377),
    (0x037B, 0x037D),
    (0x037F, 0x037F),
    (0x0386, 0x0386),
    (0x0388, 0x038A),
    (0x038C, 0x038C),
    (0x038E, 0x03A1),
    (0x03A3, 0x03F5),
    (0x03F7, 0x0481),
    (0x048A, 0x052F),
    (0x0531, 0x0556),
    (0x10A0, 0x10C5),
    (0x13A0, 0x13F5),
    (0x13F8, 0x13FD),
    (0x1C90, 0x1CBA),
    (0x1CBD, 0x1CBF),
    (0x1D00, 0x1D2B),
    (0x1D6B, 0x1D77),
    (0x1D79, 0x1D9A),
    (0x1E00, 0x1F15),
    (0x1F18, 0x1F1D),
    (0x1F20, 0x1F45),
    (0x1F48, 0x1F4D),
    (0x1F50, 0x1F57),
    (0x1F59, 0x1F59),
    (0x1F5B, 0x1F5B),
    (0x1F5D, 0x1F5D),
    (0x1F5F, 0x1F7D),
    (0x1F80, 0x1FB4),
    (0x1FB6, 0x1FBC),
    (0x1FBE, 0x1FBE),
    (0x1FC2, 0x1FC4),
    (0x1FC6, 0x1FCC),
    (0x1FD0, 0x1FD3),
    (0x1FD6, 0x1FDB),
    (0x1FE0, 0x1FEC),
    (0x1FF2, 0x1FF4),
    (0x1FF6, 0x1FFC),
    (0x2102, 0x2102),
    (0x2107, 0x2107),
    (0x210A, 0x2113),
    (0x2115, 0x2115),
    (0x2119, 0x211D),
    (0x2124, 0x2124),
    (0x2126, 0x2126),
    (0x2128, 0x2128),
    (0x212A, 0x212D),
    (0x212F, 0x2134),
    (0x2139, 0x2139),
    (0x213C, 0x213F),
    (0x2145, 0x2149),
    (0x214E, 0x214E),
    (0x2183, 0x2183),
    (0x2184, 0x2184),
    (0x2C00, 0x2C7B),
    (0x2C7E, 0x2CE4),
    (0x2CEB, 0x2CEE),
    (0x2CF2, 0x2CF2),
    (0x2CF3, 0x2CF3),
    (0xA640, 0xA66D),
    (0xA680, 0xA69B),
    (0xA722, 0xA76F),
    (0xA771, 0xA787),
    (0xA78B, 0xA78E),
    (0xAB70, 0xABBF),
    (0xFB00, 0xFB06),
    (0xFB13, 0xFB17),
    (0xFF21, 0xFF3A),
    (0xFF41, 0xFF5A),
    (0x10400, 0x1044F),
    (0x104B0, 0x104D3),
    (0x104D8, 0x104FB),
    (0x10C80, 0x10CB2),
    (0x10CC0, 0x10CF2),
    (0x118A0, 0x118DF),
    (0x1E900, 0x1E943),
];

/// The punctuation list of DeepSeek LLM's third regex: `!-/`, `:-~`,
/// `！-／`, `：-～`, `‘-‟`, `　-。`. llama.cpp matches it on text in which
/// non-ASCII whitespace was replaced by U+000B, so U+3000 never matches.
fn deepseek_punct(c: char) -> bool {
    let cp = c as u32;
    matches!(cp, 0x21..=0x2F | 0x3A..=0x7E | 0xFF01..=0xFF0F | 0xFF1A..=0xFF5E | 0x2018..=0x201F | 0x3001..=0x3002)
}

fn deepseek_letter(c: char) -> bool {
    let cp = c as u32;
    DEEPSEEK_LETTERS
        .iter()
        .any(|&(lo, hi)| lo <= cp && cp <= hi)
}

/// `\p{N}+`: a run of number codepoints.
fn number_run(s: &str, i: usize) -> Option<usize> {
    let end = run_end(s, i, &|c| class(c) == Class::Number);
    (end > i).then_some(end)
}

/// `\p{N}`: one number codepoint.
fn one_number(s: &str, i: usize) -> Option<usize> {
    at(s, i)
        .filter(|&(c, _)| class(c) == Class::Number)
        .map(|(_, l)| i + l)
}

/// `[\p{P}\$\+<=>\^~\|\`]+`: punctuation and the ASCII symbols.
fn falcon_punct_run(s: &str, i: usize) -> Option<usize> {
    let p = |c: char| {
        category(c) == Category::Punctuation
            || matches!(c, '$' | '+' | '<' | '=' | '>' | '^' | '~' | '|' | '`')
    };
    let end = run_end(s, i, &p);
    (end > i).then_some(end)
}

/// `[0-9][0-9][0-9]`.
fn three_ascii_digits(s: &str, i: usize) -> Option<usize> {
    let b = s.as_bytes().get(i..i + 3)?;
    b.iter().all(u8::is_ascii_digit).then_some(i + 3)
}

/// Split `s` with the GPT-2 pattern, calling `f` on each word.
fn gpt2_split(s: &str, f: &mut dyn FnMut(&str) -> Result<()>) -> Result<()> {
    split_by(s, &gpt2_word_end, f)
}

/// Split the raw fragment `s` into words with `pre`, calling `f` on each.
pub fn for_each_word(s: &str, pre: Pre, f: &mut dyn FnMut(&str) -> Result<()>) -> Result<()> {
    match pre {
        Pre::Llama3 | Pre::Dbrx => split_by(s, &|s, p| llama3_word_end(s, p, 3, false), f),
        Pre::Qwen2 => split_by(s, &|s, p| llama3_word_end(s, p, 1, false), f),
        Pre::Qwen35 => split_by(s, &|s, p| llama3_word_end(s, p, 1, true), f),
        Pre::DeepseekCoder => chain(
            s,
            &[
                Stage::Matches(&newline),
                Stage::Matches(&|s, i| ws_then_run(s, i, &|c| class(c) == Class::Letter)),
                Stage::Matches(&|s, i| {
                    ws_then_run(s, i, &|c| category(c) == Category::Punctuation)
                }),
                Stage::Matches(&cjk_run),
                Stage::Matches(&one_number),
            ],
            f,
        ),
        Pre::DeepseekLlm => chain(
            s,
            &[
                Stage::Matches(&newline),
                Stage::Matches(&|s, i| ws_then_run(s, i, &deepseek_letter)),
                Stage::Matches(&|s, i| ws_then_run(s, i, &deepseek_punct)),
                Stage::TrailingWhitespace,
                Stage::Matches(&cjk_run),
                Stage::Matches(&number_run),
            ],
            f,
        ),
        Pre::Falcon => chain(
            s,
            &[
                Stage::Matches(&falcon_punct_run),
                Stage::Gpt2,
                Stage::Matches(&three_ascii_digits),
            ],
            f,
        ),
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

    /// Splits read off the llama-3 regex by hand.
    #[test]
    fn llama3_pattern() {
        use Pre::{Llama3, Qwen2};
        assert_eq!(words("Hello world", Llama3), ["Hello", " world"]);
        assert_eq!(words("IT'S it'Re", Llama3), ["IT", "'S", " it", "'Re"]);
        assert_eq!(words("1234567", Llama3), ["123", "456", "7"]);
        assert_eq!(words("1234567", Qwen2), ["1", "2", "3", "4", "5", "6", "7"]);
        assert_eq!(words("(word", Llama3), ["(word"]);
        assert_eq!(words("\tword", Llama3), ["\tword"]);
        assert_eq!(words("\nword", Llama3), ["\n", "word"]);
        assert_eq!(words(" ...\n\nx", Llama3), [" ...\n\n", "x"]);
        assert_eq!(words("a \n \n  b", Llama3), ["a", " \n \n", " ", " b"]);
        assert_eq!(words("a   b", Llama3), ["a", "  ", " b"]);
        assert_eq!(words("a  ", Llama3), ["a", "  "]);
        assert_eq!(words(" 12", Llama3), [" ", "12"]);
        assert_eq!(words("", Llama3), [] as [&str; 0]);
    }
}
