//! [`DraftLen`]: how many draft tokens to ask for, adapted to what the
//! recent proposals were worth. A verify row costs nearly as much as a
//! plain decode step on a compute-bound CPU (about 0.7–0.85 of one here),
//! so wrong drafts are not free:
//!
//! * a fully accepted proposal doubles the length (up to `max`);
//! * a partly accepted one shrinks it to just past the accepted prefix
//!   (at least half the current length);
//! * a rejected single draft pauses drafting for a number of steps that
//!   doubles with each such miss (1, 2, 4, … 16) and resets on the next
//!   accepted draft.
//!
//! It changes only speed, never a token.

#![forbid(unsafe_code)]

/// Longest pause (decode steps without drafts) after repeated misses.
const MAX_PAUSE: usize = 16;

/// The adaptive draft length, between 1 and `max` (0 while paused).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DraftLen {
    max: usize,
    cur: usize,
    /// Steps left without drafts.
    pause: usize,
    /// The pause the next single-draft miss starts.
    backoff: usize,
}

impl DraftLen {
    /// Starts at `min(4, max)`; `max == 0` turns drafting off.
    pub const fn new(max: usize) -> Self {
        let cur = if max < 4 { max } else { 4 };
        DraftLen {
            max,
            cur,
            pause: 0,
            backoff: 1,
        }
    }

    /// Tokens to ask the draft source for next (0 while paused).
    pub const fn current(&self) -> usize {
        if self.pause > 0 { 0 } else { self.cur }
    }

    /// Records that `accepted` of `proposed` drafts were kept.
    pub fn update(&mut self, proposed: usize, accepted: usize) {
        if self.max == 0 {
            return;
        }
        if proposed == 0 {
            self.pause = self.pause.saturating_sub(1);
            return;
        }
        if accepted >= proposed {
            self.cur = self.cur.saturating_mul(2).min(self.max);
            self.backoff = 1;
        } else if accepted == 0 && proposed == 1 {
            self.pause = self.backoff;
            self.backoff = (self.backoff * 2).min(MAX_PAUSE);
        } else {
            if accepted > 0 {
                self.backoff = 1;
            }
            self.cur = (accepted + 1).max(self.cur / 2).clamp(1, self.max);
        }
    }
}
