//! One completion's state as plain integers, so that a table of them is
//! carved from the arena (`bytemuck::Pod`).
//!
//! The sampling state is what [`model::generate`](crate::model::generate)
//! keeps for a sequence, in a form that can live in such a table:
//!
//! * the PRNG is `SplitMix64::new(seed)` advanced once per non-greedy draw;
//!   after `k` draws its state is `seed + k·γ` (SplitMix64 adds
//!   `γ = 0x9E3779B97F4A7C15` per draw), so the slot keeps `(seed, draws)`
//!   and rebuilds the generator as `SplitMix64::new(seed + draws·γ)`;
//! * the audit chain is its last digest, advanced with
//!   [`DigestChain::peek`] (the same function `DigestChain::step` uses).
//!
//! The unit tests check both against the library's own types.

#![forbid(unsafe_code)]

use crate::F32;
use crate::audit::DigestChain;
use crate::kv::SeqId;
use crate::sample::{SamplingParams, SplitMix64};
use crate::spec::DraftLen;

/// Stop tokens a request may list.
pub const MAX_STOP: usize = 16;

/// SplitMix64's per-draw increment of its state.
const GAMMA: u64 = 0x9E37_79B9_7F4A_7C15;

/// Where a completion is in its life.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum State {
    /// The slot is unused.
    Free,
    /// Waiting for admission, holding no KV sequence (new, or preempted).
    Queued,
    /// Holding a KV sequence: prefilling (`len - fed > 1`) or decoding
    /// (`len - fed == 1`).
    Active,
    /// A completion `index > 0` waiting for its leader (completion 0) to
    /// sample the first token; it then forks the leader's sequence. Holds an
    /// empty placeholder sequence while the leader is active.
    Follower,
    /// Sampled its first token from the leader's row this step; forks the
    /// leader's sequence at the end of the step.
    Forking,
    /// Finished this step (`reason` set); released at the end of the step.
    Done,
}

impl State {
    const ALL: [State; 6] = [
        State::Free,
        State::Queued,
        State::Active,
        State::Follower,
        State::Forking,
        State::Done,
    ];
}

/// One completion: identity, sampling parameters and state, history
/// bookkeeping (its tokens live in the scheduler's token table).
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
#[repr(C)]
pub(crate) struct Slot {
    /// Request id (also the admission order: lower ids first).
    pub request: u64,
    /// PRNG seed of this completion (`params.seed + index`, wrapping).
    pub seed: u64,
    /// PRNG draws so far.
    pub draws: u64,
    /// Repetition-penalty window.
    pub penalty_last_n: u64,
    /// The KV sequence, valid when `has_seq == 1`.
    pub seq: SeqId,
    /// The audit chain's current digest.
    pub digest: [u8; 32],
    state: u32,
    reason: u32,
    /// Completion index within the request.
    pub index: u32,
    /// 1 when `seq` is a live sequence of the engine.
    pub has_seq: u32,
    /// Prompt tokens at the start of the history.
    pub prompt_len: u32,
    /// History length: prompt plus generated tokens.
    pub len: u32,
    /// History tokens whose KV rows are committed (the sequence's length).
    pub fed: u32,
    /// Tokens to generate at most.
    pub max_tokens: u32,
    temperature: u32,
    top_k: u32,
    top_p: u32,
    min_p: u32,
    repeat_penalty: u32,
    /// 0: no logprobs; `1 + k`: the token's logprob and the top `k`.
    pub logprobs: u32,
    n_stop: u32,
    stop: [u32; MAX_STOP],
    /// 1: sampled under the caller's constraint.
    pub constrained: u32,
    /// Proposed tokens after the history in the token table (a resumed
    /// completion's ids not yet checked): fed with the history and drawn
    /// for row by row, each kept only while it equals its draw.
    pub forced: u32,
    /// 1: the `forced` tokens are the completion's own drafts (speculation:
    /// dropped at will), not a client's resumed ids.
    pub drafted: u32,
    /// How many drafts to propose next (speculation): adapted after each
    /// verify entry to how many were kept; `max() == 0` until the
    /// scheduler's first proposal sets it up.
    pub draft: DraftLen,
}

const _: () = assert!(core::mem::size_of::<Slot>() == 224);

impl Slot {
    /// A completion of `request` sampled with `params` (its seed already
    /// derived), holding a `prompt_len`-token prompt.
    pub fn new(
        request: u64,
        index: u32,
        params: &SamplingParams,
        prompt_len: u32,
        max_tokens: u32,
        stop: &[u32],
        logprobs: u32,
    ) -> Slot {
        let mut stops = [0u32; MAX_STOP];
        let n_stop = stop.len().min(MAX_STOP);
        stops[..n_stop].copy_from_slice(&stop[..n_stop]);
        Slot {
            request,
            seed: params.seed,
            draws: 0,
            penalty_last_n: params.penalty_last_n as u64,
            seq: bytemuck::Zeroable::zeroed(),
            digest: DigestChain::new(params).digest(),
            state: State::Queued as u32,
            reason: 0,
            index,
            has_seq: 0,
            prompt_len,
            len: prompt_len,
            fed: 0,
            max_tokens,
            temperature: params.temperature.to_bits(),
            top_k: params.top_k,
            top_p: params.top_p.to_bits(),
            min_p: params.min_p.to_bits(),
            repeat_penalty: params.repeat_penalty.to_bits(),
            logprobs,
            n_stop: n_stop as u32,
            stop: stops,
            constrained: 0,
            forced: 0,
            drafted: 0,
            draft: DraftLen::new(0),
        }
    }

    pub fn state(&self) -> State {
        State::ALL
            .get(self.state as usize)
            .copied()
            .unwrap_or(State::Free)
    }

    pub fn set_state(&mut self, s: State) {
        self.state = s as u32;
    }

    /// Why it finished (meaningful in [`State::Done`]).
    pub fn reason(&self) -> super::FinishReason {
        match self.reason {
            1 => super::FinishReason::Stop,
            2 => super::FinishReason::Cancelled,
            3 => super::FinishReason::Constraint,
            _ => super::FinishReason::Length,
        }
    }

    /// Marks it finished for `reason`.
    pub fn finish(&mut self, reason: super::FinishReason) {
        self.reason = match reason {
            super::FinishReason::Length => 0,
            super::FinishReason::Stop => 1,
            super::FinishReason::Cancelled => 2,
            super::FinishReason::Constraint => 3,
        };
        self.set_state(State::Done);
    }

    /// The sampling parameters (with this completion's seed).
    pub fn params(&self) -> SamplingParams {
        SamplingParams {
            temperature: F32::from_bits(self.temperature),
            top_k: self.top_k,
            top_p: F32::from_bits(self.top_p),
            min_p: F32::from_bits(self.min_p),
            repeat_penalty: F32::from_bits(self.repeat_penalty),
            penalty_last_n: usize::try_from(self.penalty_last_n).unwrap_or(usize::MAX),
            seed: self.seed,
        }
    }

    /// The PRNG after `draws` draws.
    pub fn rng(&self) -> SplitMix64 {
        SplitMix64::new(self.seed.wrapping_add(self.draws.wrapping_mul(GAMMA)))
    }

    /// The stop tokens.
    pub fn stop(&self) -> &[u32] {
        &self.stop[..(self.n_stop as usize).min(MAX_STOP)]
    }

    /// Tokens generated so far.
    pub fn generated(&self) -> usize {
        self.len.saturating_sub(self.prompt_len) as usize
    }

    /// Tokens of the history and the proposals not yet in the KV cache.
    pub fn unfed(&self) -> u32 {
        (self.len + self.forced).saturating_sub(self.fed)
    }

    /// A decode row: exactly the last history token to feed, no proposals.
    pub fn decodes(&self) -> bool {
        self.forced == 0 && self.len.saturating_sub(self.fed) == 1
    }

    /// In decode, with or without its own drafts after the last token (a
    /// client's resumed ids are not drafts).
    pub fn in_decode(&self) -> bool {
        (self.forced == 0 || self.drafted == 1) && self.len.saturating_sub(self.fed) == 1
    }

    /// Drops its drafts, if it has any (the proposal tokens stay in the
    /// token table, unread). True if there were some.
    pub fn drop_drafts(&mut self) -> bool {
        let had = self.drafted == 1 && self.forced > 0;
        if self.drafted == 1 {
            self.forced = 0;
            self.drafted = 0;
        }
        had
    }

    /// Admission order: request id, then completion index.
    pub fn key(&self) -> (u64, u32) {
        (self.request, self.index)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rng_after_k_draws_is_seed_plus_k_gamma() {
        for seed in [0u64, 1, 42, u64::MAX, 0x1234_5678_9ABC_DEF0] {
            let mut rng = SplitMix64::new(seed);
            let mut slot = Slot::new(
                0,
                0,
                &SamplingParams {
                    seed,
                    ..SamplingParams::GREEDY
                },
                1,
                1,
                &[],
                0,
            );
            for _ in 0..100 {
                assert_eq!(slot.rng(), rng);
                rng.next_u64();
                slot.draws += 1;
            }
        }
    }

    #[test]
    fn params_round_trip() {
        let p = SamplingParams {
            temperature: F32::from_bits(0x3F4C_CCCD),
            top_k: 7,
            top_p: F32::from_bits(0x3F66_6666),
            min_p: F32::from_bits(0x3D4C_CCCD),
            repeat_penalty: F32::from_bits(0x3F8C_CCCD),
            penalty_last_n: 33,
            seed: 99,
        };
        let s = Slot::new(3, 1, &p, 4, 5, &[1, 2], 3);
        assert_eq!(s.params(), p);
        assert_eq!(s.digest, DigestChain::new(&p).digest());
        assert_eq!(s.stop(), &[1, 2]);
        assert_eq!(s.state(), State::Queued);
    }
}
