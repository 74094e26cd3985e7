//! Special-token partition (llama.cpp `tokenizer_st_partition`).
//!
//! The special tokens (attribute CONTROL, USER_DEFINED or UNKNOWN) are tried
//! one after another, longest text first. Each one is searched left to right
//! in every stretch of text not yet claimed by an earlier token; every
//! non-overlapping occurrence lying wholly inside such a stretch is claimed.
//! With `parse_special = false`, CONTROL and UNKNOWN tokens are skipped (so
//! `<|im_start|>` stays ordinary text); USER_DEFINED tokens are always matched.
//!
//! llama.cpp keeps a linked list of fragments; here one mark per input byte
//! records the same partition (`FREE`, a token id at the first byte of an
//! occurrence, `CLAIMED` on its other bytes), so the work is bounded by the
//! workspace and nothing is allocated. An occurrence is accepted iff all its
//! bytes are `FREE`, which is exactly "inside one remaining fragment".

#![forbid(unsafe_code)]

use super::{Tokenizer, attr};
use crate::Result;

/// Byte not claimed by a special token.
const FREE: u32 = u32::MAX;
/// Byte inside a claimed occurrence, after its first byte.
const CLAIMED: u32 = u32::MAX - 1;

/// Mark the special-token occurrences of `text` in `marks` (`marks.len() == text.len()`).
pub(crate) fn partition(tok: &Tokenizer<'_>, text: &[u8], parse_special: bool, marks: &mut [u32]) {
    marks.fill(FREE);
    for &id in tok.specials() {
        let a = tok.token_attr(id).unwrap_or(0);
        if !parse_special && a & (attr::CONTROL | attr::UNKNOWN) != 0 {
            continue;
        }
        let Some(t) = tok.token_text(id) else {
            continue;
        };
        let Some((&first, _)) = t.split_first() else {
            continue;
        };
        let mut p = 0usize;
        while p + t.len() <= text.len() {
            // Skip to the next position holding the token's first byte.
            match text
                .get(p..)
                .and_then(|r| r.iter().position(|&b| b == first))
            {
                Some(off) => p += off,
                None => break,
            }
            let end = p + t.len();
            let hit = text.get(p..end) == Some(t)
                && marks
                    .get(p..end)
                    .is_some_and(|m| m.iter().all(|&x| x == FREE));
            if hit {
                if let Some(m) = marks.get_mut(p..end) {
                    m.fill(CLAIMED);
                    if let Some(m0) = m.first_mut() {
                        *m0 = id;
                    }
                }
                p = end;
            } else {
                p += 1;
            }
        }
    }
}

/// One piece of a partitioned text.
pub(crate) enum Fragment<'t> {
    /// A special token.
    Token(u32),
    /// Raw text between special tokens.
    Raw(&'t str),
}

/// Walks a partitioned text fragment by fragment.
pub(crate) struct Fragments<'t, 'm> {
    text: &'t str,
    marks: &'m [u32],
    pos: usize,
}

impl<'t, 'm> Fragments<'t, 'm> {
    pub(crate) fn new(text: &'t str, marks: &'m [u32]) -> Self {
        Fragments {
            text,
            marks,
            pos: 0,
        }
    }

    /// The next fragment, or `None` at the end. Never yields empty raw text.
    pub(crate) fn next_fragment(&mut self, tok: &Tokenizer<'_>) -> Result<Option<Fragment<'t>>> {
        loop {
            let Some(&m) = self.marks.get(self.pos) else {
                return Ok(None);
            };
            if m == CLAIMED {
                // Not reachable (occurrences are skipped whole); step over it.
                self.pos += 1;
                continue;
            }
            if m != FREE {
                let len = tok.token_text(m).map_or(1, |t| t.len().max(1));
                self.pos += len;
                return Ok(Some(Fragment::Token(m)));
            }
            let start = self.pos;
            let rest = self.marks.get(start..).unwrap_or(&[]);
            let run = rest.iter().position(|&x| x != FREE).unwrap_or(rest.len());
            self.pos = start + run;
            // Occurrences are valid UTF-8 inside valid UTF-8, so both ends
            // are char boundaries; `get` keeps this panic-free regardless.
            if let Some(raw) = self.text.get(start..start + run) {
                return Ok(Some(Fragment::Raw(raw)));
            }
        }
    }
}
