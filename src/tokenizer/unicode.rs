//! Codepoint classes as llama.cpp's pre-tokenizer sees them.
//!
//! The GPT-2 splitter (`unicode_regex_split_custom_gpt2`) and the `\p{N}`
//! digit pre-split need four facts per codepoint: letter (`\p{L}`), number
//! (`\p{N}`), whitespace (`\s`), or other. Letter and number come from the
//! generated run table in `tokenizer::unicode_table` (Unicode 15.1.0, identical
//! to llama.cpp's `unicode-data.cpp` for these classes; regenerate with
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

// Run-table class codes (low 2 bits of a `CLASS_RUNS` entry).
const RUN_LETTER: u32 = 1;
const RUN_NUMBER: u32 = 2;

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
    if WHITESPACE.binary_search(&cp).is_ok() {
        return Class::Whitespace;
    }
    // Last run starting at or before cp; CLASS_RUNS[0] starts at 0.
    let key = (cp << 2) | 3;
    let idx = CLASS_RUNS.partition_point(|&r| r <= key);
    match idx.checked_sub(1).and_then(|i| CLASS_RUNS.get(i)) {
        Some(r) if r & 3 == RUN_LETTER => Class::Letter,
        Some(r) if r & 3 == RUN_NUMBER => Class::Number,
        _ => Class::Other,
    }
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
    fn table_is_sorted_and_starts_at_zero() {
        assert_eq!(CLASS_RUNS[0] >> 2, 0);
        assert!(CLASS_RUNS.windows(2).all(|w| (w[0] >> 2) < (w[1] >> 2)));
        assert!(CLASS_RUNS.iter().all(|r| r & 3 != 3));
    }
}
