//! [`DraftLen`]: how many draft tokens to ask for, adapted to how many of
//! the last proposal were accepted. Doubling after a fully accepted
//! proposal, shrinking to just past the accepted prefix otherwise: long
//! copies from the prompt get long drafts quickly, free text costs at most
//! a row or two per step. It changes only speed, never a token.

#![forbid(unsafe_code)]

/// The adaptive draft length, between 1 and `max`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DraftLen {
    max: usize,
    cur: usize,
}

impl DraftLen {
    /// Starts at `min(4, max)`; `max == 0` turns drafting off.
    pub const fn new(max: usize) -> Self {
        let cur = if max < 4 { max } else { 4 };
        DraftLen { max, cur }
    }

    /// Tokens to ask the draft source for next.
    pub const fn current(&self) -> usize {
        self.cur
    }

    /// Records that `accepted` of `proposed` drafts were kept.
    pub fn update(&mut self, proposed: usize, accepted: usize) {
        if proposed == 0 || self.max == 0 {
            return;
        }
        self.cur = if accepted >= proposed {
            self.cur.saturating_mul(2).min(self.max)
        } else {
            (accepted + 1).max(self.cur / 2).clamp(1, self.max)
        };
    }
}
