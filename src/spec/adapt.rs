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
const MAX_PAUSE: u32 = 16;

/// The adaptive draft length, between 1 and `max` (0 while paused).
///
/// Plain `u32`s (`bytemuck::Pod`), so that the scheduler keeps one per
/// completion in its slot table; all zero is `DraftLen::new(0)`, drafting
/// off.
#[derive(Clone, Copy, Debug, PartialEq, Eq, bytemuck::Pod, bytemuck::Zeroable)]
#[repr(C)]
pub struct DraftLen {
    max: u32,
    cur: u32,
    /// Steps left without drafts.
    pause: u32,
    /// The pause the next single-draft miss starts.
    backoff: u32,
}

impl DraftLen {
    /// Starts at `min(4, max)`; `max == 0` turns drafting off (a `max`
    /// beyond `u32` is `u32::MAX`).
    pub const fn new(max: usize) -> Self {
        let max = if max > u32::MAX as usize {
            u32::MAX
        } else {
            max as u32
        };
        let cur = if max < 4 { max } else { 4 };
        DraftLen {
            max,
            cur,
            pause: 0,
            backoff: 1,
        }
    }

    /// The longest length it may reach (0: drafting off).
    pub const fn max(&self) -> usize {
        self.max as usize
    }

    /// Tokens to ask the draft source for next (0 while paused).
    pub const fn current(&self) -> usize {
        if self.pause > 0 { 0 } else { self.cur as usize }
    }

    /// Records that `accepted` of `proposed` drafts were kept (`proposed
    /// == 0`: a step without drafts, which counts down a pause).
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
            // `accepted < proposed ≤ u32::MAX` in every caller's use; saturate anyway.
            let past = u32::try_from(accepted)
                .unwrap_or(u32::MAX)
                .saturating_add(1);
            self.cur = past.max(self.cur / 2).clamp(1, self.max);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The rules of the module header, step by step.
    #[test]
    fn grows_shrinks_and_pauses() {
        let mut d = DraftLen::new(8);
        assert_eq!(d.current(), 4);
        d.update(4, 4); // all kept: doubles
        assert_eq!(d.current(), 8);
        d.update(8, 8); // capped at max
        assert_eq!(d.current(), 8);
        d.update(8, 1); // partly kept: max(1 + 1, 8 / 2)
        assert_eq!(d.current(), 4);
        d.update(4, 0); // none of several kept: halves
        assert_eq!(d.current(), 2);
        d.update(2, 0);
        assert_eq!(d.current(), 1);
        d.update(1, 0); // a single miss: pauses one step
        assert_eq!(d.current(), 0);
        d.update(0, 0);
        assert_eq!(d.current(), 1);
        d.update(1, 0); // the next miss pauses two
        d.update(0, 0);
        assert_eq!(d.current(), 0);
        d.update(0, 0);
        assert_eq!(d.current(), 1);
        d.update(1, 1); // a hit resets the backoff and doubles
        assert_eq!(d.current(), 2);
        d.update(2, 0);
        d.update(1, 0);
        d.update(0, 0);
        assert_eq!(d.current(), 1, "the backoff restarted at one step");
        // Off, and its zeroed form.
        let mut off = DraftLen::new(0);
        off.update(3, 3);
        assert_eq!(off.current(), 0);
        // All zero (a fresh slot's) is off too: the scheduler's "not set up".
        let zeroed: DraftLen = bytemuck::Zeroable::zeroed();
        assert_eq!((zeroed.max(), zeroed.current()), (0, 0));
        assert_eq!(DraftLen::new(2).current(), 2);
        assert_eq!(DraftLen::new(usize::MAX).max(), u32::MAX as usize);
    }
}
