//! Codepoint classes as llama.cpp's pre-tokenizer sees them.
//!
//! The GPT-2 and llama-3 splitters and the `\p{N}` digit pre-split need four
//! facts per codepoint ([`class`]): letter (`\p{L}`), number (`\p{N}`),
//! whitespace (`\s`), or other; Qwen3.5's adds marks (`\p{M}`), and the
//! regex-based pre-tokenizers punctuation (`\p{P}`) and symbols (`\p{S}`)
//! ([`category`]). The categories come from the generated run table in
//! `tokenizer::unicode_table` (Unicode 15.1.0, identical to llama.cpp's
//! `unicode-data.cpp` codepoint for codepoint: checked over all codepoints
//! with `scripts/check_unicode_tables.py`; regenerate with
//! `scripts/gen_unicode_tables.py`). Whitespace is Unicode's `White_Space`
//! property, the 25 codepoints of llama.cpp's `unicode_set_whitespace`.
//!
//! In llama.cpp an unassigned codepoint carries the `UNDEFINED` flag, which is
//! non-zero, so it counts as "other" (it matches `[^\s\p{L}\p{N}]`); only a
//! position past the end of a piece has no flags at all. [`Class`] mirrors
//! that: there is no "undefined" class here.

#![forbid(unsafe_code)]

use super::unicode_table::CLASS_RUNS;

/// The class of one codepoint. Whitespace codepoints are never letters or
/// numbers, so one enum covers all four cases.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Class {
    /// `\p{L}`: general category Lu, Ll, Lt, Lm, Lo.
    Letter,
    /// `\p{N}`: general category Nd, Nl, No.
    Number,
    /// `\s`: Unicode `White_Space`.
    Whitespace,
    /// Everything else (punctuation, symbols, marks, controls, unassigned).
    Other,
}

/// The general category of a codepoint, as far as the pre-tokenizers
/// distinguish it (whitespace is not a category: see [`class`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Category {
    /// `\p{L}`.
    Letter,
    /// `\p{N}`.
    Number,
    /// `\p{P}`.
    Punctuation,
    /// `\p{M}`.
    Mark,
    /// `\p{S}`.
    Symbol,
    /// Separators, controls, format, private use, unassigned.
    Other,
}

// Run-table category codes (low 3 bits of a `CLASS_RUNS` entry).
const RUN_BITS: u32 = 3;
const RUN_LETTER: u32 = 1;
const RUN_NUMBER: u32 = 2;
const RUN_PUNCT: u32 = 3;
const RUN_MARK: u32 = 4;
const RUN_SYMBOL: u32 = 5;

/// The category of `c` from the run table.
pub fn category(c: char) -> Category {
    let cp = c as u32;
    // Last run starting at or before cp; CLASS_RUNS[0] starts at 0.
    let key = (cp << RUN_BITS) | ((1 << RUN_BITS) - 1);
    let idx = CLASS_RUNS.partition_point(|&r| r <= key);
    match idx
        .checked_sub(1)
        .and_then(|i| CLASS_RUNS.get(i))
        .map(|r| r & ((1 << RUN_BITS) - 1))
    {
        Some(RUN_LETTER) => Category::Letter,
        Some(RUN_NUMBER) => Category::Number,
        Some(RUN_PUNCT) => Category::Punctuation,
        Some(RUN_MARK) => Category::Mark,
        Some(RUN_SYMBOL) => Category::Symbol,
        _ => Category::Other,
    }
}

/// Unicode `White_Space` (PropList.txt), as llama.cpp's `unicode_set_whitespace`.
const WHITESPACE: [u32; 25] = [
    0x0009, 0x000A, 0x000B, 0x000C, 0x000D, 0x0020, 0x0085, 0x00A0, 0x1680, 0x2000, 0x2001, 0x2002,
    0x2003, 0x2004, 0x2005, 0x2006, 0x2007, 0x2008, 0x2009, 0x200A, 0x2028, 0x2029, 0x202F, 0x205F,
    0x3000,
];

/// The class of `c`.
pub fn class(c: char) -> Class {
    let cp = c as u32;
    if cp < 0x80 {
        // ASCII fast path: same answers as the tables.
        let b = cp as u8;
        return if b.is_ascii_alphabetic() {
            Class::Letter
        } else if b.is_ascii_digit() {
            Class::Number
        } else if matches!(b, 0x09..=0x0D | 0x20) {
            Class::Whitespace
        } else {
            Class::Other
        };
    }
    if is_whitespace(c) {
        return Class::Whitespace;
    }
    match category(c) {
        Category::Letter => Class::Letter,
        Category::Number => Class::Number,
        _ => Class::Other,
    }
}

/// Whether `c` is `\s` (Unicode `White_Space`).
pub fn is_whitespace(c: char) -> bool {
    let cp = c as u32;
    if cp < 0x80 {
        return matches!(cp, 0x09..=0x0D | 0x20);
    }
    WHITESPACE.binary_search(&cp).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_codepoints() {
        assert_eq!(class('a'), Class::Letter);
        assert_eq!(class('é'), Class::Letter);
        assert_eq!(class('日'), Class::Letter);
        assert_eq!(class('7'), Class::Number);
        assert_eq!(class('٣'), Class::Number); // ARABIC-INDIC DIGIT THREE
        assert_eq!(class('½'), Class::Number); // No
        assert_eq!(class('Ⅻ'), Class::Number); // Nl
        assert_eq!(class(' '), Class::Whitespace);
        assert_eq!(class('\u{3000}'), Class::Whitespace);
        assert_eq!(class('\u{85}'), Class::Whitespace);
        assert_eq!(class('\u{1C}'), Class::Other); // Python isspace, not White_Space
        assert_eq!(class('🙂'), Class::Other);
        assert_eq!(class('\u{0301}'), Class::Other); // combining mark
        assert_eq!(class('\u{E000}'), Class::Other); // private use
        assert_eq!(class('\u{10FFFF}'), Class::Other);
        // Unicode 15.1 additions (CJK Ext. I) are letters, as in llama.cpp.
        assert_eq!(class('\u{2EBF0}'), Class::Letter);
        // Unicode 15.0 (Kawi digits).
        assert_eq!(class('\u{11F50}'), Class::Number);
    }

    #[test]
    fn categories() {
        assert_eq!(category('!'), Category::Punctuation);
        assert_eq!(category('$'), Category::Symbol);
        assert_eq!(category('\u{0301}'), Category::Mark);
        assert_eq!(category('。'), Category::Punctuation);
        assert_eq!(category('€'), Category::Symbol);
        assert_eq!(category('a'), Category::Letter);
        assert_eq!(category('٣'), Category::Number);
        assert_eq!(category(' '), Category::Other);
        assert_eq!(category('\u{E000}'), Category::Other);
    }

    #[test]
    fn table_is_sorted_and_starts_at_zero() {
        assert_eq!(CLASS_RUNS[0] >> RUN_BITS, 0);
        assert!(
            CLASS_RUNS
                .windows(2)
                .all(|w| (w[0] >> RUN_BITS) < (w[1] >> RUN_BITS))
        );
        assert!(CLASS_RUNS.iter().all(|r| r & 7 <= RUN_SYMBOL));
    }
}
