//! A step's sampling, across parallel lanes.
//!
//! Every completion that samples in a step is a [`Job`]: the completion
//! whose row ended the step, and — when that completion leads a request of
//! `n > 1` and draws its first token — each of its followers, from the same
//! row. [`Lanes::run`] hands the jobs to lanes (one [`Sampler`] and logprob
//! workspace each; job `j` of a batch to lane `j mod lanes`), which draw
//! every job's token, logprobs and digest from read-only inputs in one
//! parallel region; then the calling thread commits the jobs **in job
//! order**: the slot's PRNG count, digest and history, the token event,
//! the finish check. A job reads only its own slot, its own history and its
//! row (a slot is in at most one job per step), so what it draws does not
//! depend on the lane or the thread that ran it, and the events and state
//! are exactly those of sampling the jobs one after another.
//!
//! A completion under a caller's [`Constraint`] has its mask filled first,
//! on the calling thread in job order (the constraint is the caller's
//! mutable state); its lane draws from the row masked to −∞ outside it, and
//! its logprobs, digest and token event use that masked row. An empty mask
//! finishes the completion ([`FinishReason::Constraint`]) without a token.
//!
//! Errors: the first failing job in job order is returned, after the jobs
//! before it were committed (as the one-by-one loop does).
//!
//! Verified by `tests/engine/sched_props.rs`: workloads with random lane and
//! thread counts, every completion equal to its solo run.

#![forbid(unsafe_code)]

use super::FinishReason;
use super::event::{Event, RequestId, Sink, TokenEvent};
use super::logprob::{MAX_TOP_LOGPROBS, TopLogprob, logprobs};
use super::slot::{Slot, State};
use crate::audit::DigestChain;
use crate::constraint::{Completion, Constraint, TokenMask, mask_row};
use crate::sample::Sampler;
use crate::{Arena, Error, F32, Parallel, Result};

/// Most sampling lanes a scheduler may have.
pub const MAX_SAMPLE_LANES: usize = 8;

/// Jobs one lane takes per parallel region (a step with more jobs than
/// `lanes · LANE_JOBS` runs several regions).
const LANE_JOBS: usize = 4;

/// One completion to sample: its slot, the row of the step's logits it
/// samples from, and whether it is a follower drawing its first token from
/// its leader's row.
#[derive(Clone, Copy, Debug, Default, bytemuck::Pod, bytemuck::Zeroable)]
#[repr(C)]
pub(super) struct Job {
    pub slot: u32,
    pub row: u32,
    pub follower: u32,
}

/// A job's mask, as filled before the draws.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mask {
    /// Not constrained: the raw row.
    Off,
    /// Constrained, at least one token allowed.
    On,
    /// Constrained, no token allowed: the completion ends.
    Empty,
}

/// What a lane drew for one job.
#[derive(Clone, Copy, Debug)]
struct Drawn {
    /// `None`: the mask allowed no token.
    token: Option<u32>,
    /// The draw advanced the PRNG (a non-greedy draw).
    advanced: bool,
    logprob: Option<F32>,
    top: [TopLogprob; MAX_TOP_LOGPROBS],
    n_top: usize,
    /// The audit chain after the token.
    digest: [u8; 32],
}

/// One lane: its sampler, its logprob workspace, its batch's masks and
/// results.
struct Lane<'a> {
    sampler: Option<Sampler<'a>>,
    work: &'a mut [F32],
    masked: &'a mut [F32], // (vocab) the masked row of the job drawn
    masks: &'a mut [u32],  // (LANE_JOBS, words_for(vocab))
    mask: [Mask; LANE_JOBS],
    drawn: [Result<Drawn>; LANE_JOBS],
}

/// The sampling lanes of a scheduler, carved from its arena.
pub(super) struct Lanes<'a> {
    lanes: [Lane<'a>; MAX_SAMPLE_LANES],
    n: usize,
    /// A committed job's masked row, for its token event (vocab).
    row: &'a mut [F32],
}

/// The read-only inputs of a batch's draws.
#[derive(Clone, Copy)]
struct Inputs<'s> {
    slots: &'s [Slot],
    tokens: &'s [u32],
    stride: usize,
    logits: &'s [F32],
    vocab: usize,
}

impl<'a> Lanes<'a> {
    /// Arena bytes of `n` lanes for a vocabulary of `vocab` (`None` on
    /// overflow).
    pub fn bytes_required(n: usize, vocab: usize) -> Option<usize> {
        let masks = Arena::bytes_for::<u32>(TokenMask::words_for(vocab).checked_mul(LANE_JOBS)?)?;
        let one = Sampler::bytes_required(vocab)?
            .checked_add(Arena::bytes_for::<F32>(vocab)?.checked_mul(2)?)?
            .checked_add(masks)?;
        one.checked_mul(n)?
            .checked_add(Arena::bytes_for::<F32>(vocab)?)
    }

    /// `n` lanes (`1..=MAX_SAMPLE_LANES`, else [`Error::InvalidLimit`]
    /// `"sample_lanes"`) carved from `arena`.
    pub fn new(arena: &mut Arena<'a>, n: usize, vocab: usize) -> Result<Self> {
        if n == 0 || n > MAX_SAMPLE_LANES {
            return Err(Error::InvalidLimit {
                name: "sample_lanes",
                value: n,
            });
        }
        let mut lanes = core::array::from_fn(|_| Lane {
            sampler: None,
            work: &mut [],
            masked: &mut [],
            masks: &mut [],
            mask: [Mask::Off; LANE_JOBS],
            drawn: [Err(Error::SizeOverflow); LANE_JOBS],
        });
        for lane in &mut lanes[..n] {
            lane.sampler = Some(Sampler::new(arena, vocab)?);
            lane.work = arena.alloc::<F32>(vocab)?;
            lane.masked = arena.alloc::<F32>(vocab)?;
            lane.masks = arena.alloc::<u32>(TokenMask::words_for(vocab) * LANE_JOBS)?;
        }
        let row = arena.alloc::<F32>(vocab)?;
        Ok(Lanes { lanes, n, row })
    }

    /// Samples every job of the step (see the module docs) and commits them
    /// in order: each committed job adds one to `tokens_out`.
    #[allow(clippy::too_many_arguments)]
    pub fn run<P: Parallel, S: Sink + ?Sized>(
        &mut self,
        par: &P,
        jobs: &[Job],
        slots: &mut [Slot],
        tokens: &mut [u32],
        (stride, logits, vocab): (usize, &[F32], usize),
        constraint: &mut dyn Constraint,
        sink: &mut S,
        tokens_out: &mut u64,
    ) -> Result<()> {
        let n = self.n;
        let words = TokenMask::words_for(vocab);
        for batch in jobs.chunks(n * LANE_JOBS) {
            for (j, job) in batch.iter().enumerate() {
                let lane = &mut self.lanes[j % n];
                let q = j / n;
                let w = lane.masks.get_mut(q * words..(q + 1) * words);
                let w = w.ok_or(Error::SizeOverflow)?;
                lane.mask[q] = fill(job, slots, tokens, stride, vocab, constraint, w)?;
            }
            let inputs = Inputs {
                slots,
                tokens,
                stride,
                logits,
                vocab,
            };
            par.for_each_chunk(&mut self.lanes[..n], 1, &|l, lane| {
                for lane in lane.iter_mut() {
                    for (q, job) in batch.iter().skip(l).step_by(n).enumerate() {
                        lane.drawn[q] = lane.draw(job, q, inputs);
                    }
                }
            });
            for (j, job) in batch.iter().enumerate() {
                let (lane, q) = (&self.lanes[j % n], j / n);
                let d = lane.drawn[q].as_ref().map_err(|e| *e)?;
                let raw = row_of(logits, job.row as usize, vocab)?;
                let Some(token) = d.token else {
                    let slot = slots
                        .get_mut(job.slot as usize)
                        .ok_or(Error::SizeOverflow)?;
                    slot.finish(FinishReason::Constraint);
                    continue;
                };
                let row = if lane.mask[q] == Mask::On {
                    let m = lane.masks.get(q * words..(q + 1) * words);
                    mask_row(m.ok_or(Error::SizeOverflow)?, raw, self.row)?;
                    &self.row[..vocab]
                } else {
                    raw
                };
                commit(job, d, token, slots, tokens, stride, row, sink)?;
                let slot = &slots[job.slot as usize];
                if slot.constrained != 0 {
                    let who = Completion {
                        request: RequestId(slot.request),
                        index: slot.index,
                    };
                    constraint.commit(who, token);
                }
                *tokens_out += 1;
            }
        }
        Ok(())
    }
}

impl Lane<'_> {
    /// Draws `job`'s next token exactly as `model::generate` does (its
    /// sampler, its PRNG, its history as the penalty window), its logprobs
    /// if asked for, and the digest chain after it.
    fn draw(&mut self, job: &Job, q: usize, inp: Inputs<'_>) -> Result<Drawn> {
        let i = job.slot as usize;
        let slot = inp.slots.get(i).ok_or(Error::SizeOverflow)?;
        let raw = row_of(inp.logits, job.row as usize, inp.vocab)?;
        let row = match self.mask[q] {
            Mask::Off => raw,
            Mask::Empty => {
                return Ok(Drawn {
                    token: None,
                    advanced: false,
                    logprob: None,
                    top: [TopLogprob::default(); MAX_TOP_LOGPROBS],
                    n_top: 0,
                    digest: slot.digest,
                });
            }
            Mask::On => {
                let words = TokenMask::words_for(inp.vocab);
                let m = self.masks.get(q * words..(q + 1) * words);
                mask_row(m.ok_or(Error::SizeOverflow)?, raw, self.masked)?;
                &self.masked[..inp.vocab]
            }
        };
        let hist = history(inp.tokens, inp.stride, i);
        let len = slot.len as usize;
        if len >= hist.len() {
            return Err(Error::BufferTooSmall {
                needed: len + 1,
                available: hist.len(),
            });
        }
        let recent = &hist[..len];
        let params = slot.params();
        let mut rng = slot.rng();
        let before = rng;
        let sampler = self.sampler.as_mut().ok_or(Error::SizeOverflow)?;
        let token = sampler.sample(row, &params, recent, &mut rng)?;
        let mut top = [TopLogprob::default(); MAX_TOP_LOGPROBS];
        let (logprob, n_top) = if slot.logprobs > 0 {
            let k = (slot.logprobs as usize - 1).min(MAX_TOP_LOGPROBS);
            let (lp, m) = logprobs(row, &params, recent, token, self.work, &mut top[..k])?;
            (Some(lp), m)
        } else {
            (None, 0)
        };
        Ok(Drawn {
            token: Some(token),
            advanced: rng != before,
            logprob,
            top,
            n_top,
            digest: DigestChain::peek(&slot.digest, row, token),
        })
    }
}

/// Fills job's mask in `words` if its completion is constrained: asks
/// `constraint` for the tokens allowed after its generated ones.
fn fill(
    job: &Job,
    slots: &[Slot],
    tokens: &[u32],
    stride: usize,
    vocab: usize,
    constraint: &mut dyn Constraint,
    words: &mut [u32],
) -> Result<Mask> {
    let i = job.slot as usize;
    let slot = slots.get(i).ok_or(Error::SizeOverflow)?;
    if slot.constrained == 0 {
        return Ok(Mask::Off);
    }
    let hist = history(tokens, stride, i);
    let generated = hist
        .get(slot.prompt_len as usize..slot.len as usize)
        .ok_or(Error::BufferTooSmall {
            needed: slot.len as usize,
            available: hist.len(),
        })?;
    let mut mask = TokenMask::new(words, vocab)?;
    mask.clear();
    let who = Completion {
        request: RequestId(slot.request),
        index: slot.index,
    };
    constraint.fill(who, generated, &mut mask);
    Ok(if mask.is_empty() {
        Mask::Empty
    } else {
        Mask::On
    })
}

/// Commits a drawn `token` to its slot: the PRNG count, the digest, the
/// token appended to its history; reports it with `row` (the row it was
/// drawn from); marks the completion done on a stop token or at
/// `max_tokens`, and a follower that goes on as forking.
#[allow(clippy::too_many_arguments)]
fn commit<S: Sink + ?Sized>(
    job: &Job,
    d: &Drawn,
    token: u32,
    slots: &mut [Slot],
    tokens: &mut [u32],
    stride: usize,
    row: &[F32],
    sink: &mut S,
) -> Result<()> {
    let i = job.slot as usize;
    let slot = slots.get_mut(i).ok_or(Error::SizeOverflow)?;
    let at = i * stride + slot.len as usize;
    let available = tokens.len();
    let t = tokens.get_mut(at).ok_or(Error::BufferTooSmall {
        needed: at + 1,
        available,
    })?;
    *t = token;
    slot.draws += u64::from(d.advanced);
    slot.digest = d.digest;
    slot.len += 1;
    sink.event(&Event::Token(TokenEvent {
        request: RequestId(slot.request),
        index: slot.index,
        position: slot.generated() - 1,
        token,
        digest: d.digest,
        logits: row,
        logprob: d.logprob,
        top_logprobs: &d.top[..d.n_top],
    }));
    if slot.stop().contains(&token) {
        slot.finish(FinishReason::Stop);
    } else if slot.generated() >= slot.max_tokens as usize {
        slot.finish(FinishReason::Length);
    }
    if job.follower != 0 && slot.state() != State::Done {
        slot.set_state(State::Forking);
    }
    Ok(())
}

/// Row `k` of the step's logits.
fn row_of(logits: &[F32], k: usize, vocab: usize) -> Result<&[F32]> {
    logits
        .get(k * vocab..(k + 1) * vocab)
        .ok_or(Error::BufferTooSmall {
            needed: (k + 1) * vocab,
            available: logits.len(),
        })
}

/// Slot `i`'s row of the token table.
fn history(tokens: &[u32], stride: usize, i: usize) -> &[u32] {
    tokens.get(i * stride..(i + 1) * stride).unwrap_or(&[])
}
