//! [`SlotTable`]: sequence slots, handles and their generations.
//!
//! One job: map a [`SeqId`] to a live slot or reject it. A new sequence takes
//! the lowest free slot (deterministic); freeing bumps the slot's generation
//! (wrapping), so handles of freed sequences are stale.

#![forbid(unsafe_code)]

use super::SeqId;
use crate::{Arena, Error, Result};
use bytemuck::{Pod, Zeroable};

/// State of one sequence slot.
#[derive(Clone, Copy, Debug, Pod, Zeroable)]
#[repr(C)]
pub(crate) struct Slot {
    /// Committed length in tokens.
    pub(crate) len: usize,
    /// Secured positions, `len ≤ room ≤ max_seq_len`.
    pub(crate) room: usize,
    /// Generation of the current (or next) occupant.
    pub(crate) generation: u32,
    /// 1 while a sequence lives in the slot, else 0.
    pub(crate) live: u32,
}

/// Fixed-capacity table of sequence slots.
pub(crate) struct SlotTable<'a> {
    slots: &'a mut [Slot], // (max_seqs,)
}

impl<'a> SlotTable<'a> {
    /// Exact worst-case arena bytes for `max_seqs` slots.
    pub(crate) fn bytes_required(max_seqs: usize) -> Option<usize> {
        Arena::bytes_for::<Slot>(max_seqs)
    }

    /// `max_seqs` free slots.
    pub(crate) fn new(arena: &mut Arena<'a>, max_seqs: usize) -> Result<Self> {
        Ok(SlotTable {
            slots: arena.alloc::<Slot>(max_seqs)?,
        })
    }

    /// The live slot `id` names.
    pub(crate) fn get(&self, id: SeqId) -> Result<&Slot> {
        match self.slots.get(id.index as usize) {
            Some(s) if s.live == 1 && s.generation == id.generation => Ok(s),
            _ => Err(Error::UnknownSequence { index: id.index }),
        }
    }

    /// The live slot `id` names, mutably.
    pub(crate) fn get_mut(&mut self, id: SeqId) -> Result<&mut Slot> {
        match self.slots.get_mut(id.index as usize) {
            Some(s) if s.live == 1 && s.generation == id.generation => Ok(s),
            _ => Err(Error::UnknownSequence { index: id.index }),
        }
    }

    /// The lowest free slot index (nothing changes), or `TooManySequences`.
    pub(crate) fn find_free(&self) -> Result<usize> {
        self.slots
            .iter()
            .position(|s| s.live == 0)
            .ok_or(Error::TooManySequences {
                max: self.slots.len(),
            })
    }

    /// Makes free slot `i` live with `len = room = len`; returns its handle.
    pub(crate) fn occupy(&mut self, i: usize, len: usize) -> Result<SeqId> {
        let index = u32::try_from(i).map_err(|_| Error::SizeOverflow)?;
        let max = self.slots.len();
        let s = self
            .slots
            .get_mut(i)
            .filter(|s| s.live == 0)
            .ok_or(Error::TooManySequences { max })?;
        s.live = 1;
        s.len = len;
        s.room = len;
        Ok(SeqId {
            index,
            generation: s.generation,
        })
    }

    /// Retires the live slot `id` names (its handle becomes stale).
    pub(crate) fn retire(&mut self, id: SeqId) -> Result<()> {
        let s = self.get_mut(id)?;
        s.live = 0;
        s.len = 0;
        s.room = 0;
        s.generation = s.generation.wrapping_add(1);
        Ok(())
    }

    /// Every slot, live or not, with its index.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (usize, &Slot)> {
        self.slots.iter().enumerate()
    }

    /// Number of live sequences.
    pub(crate) fn live(&self) -> usize {
        self.slots.iter().filter(|s| s.live == 1).count()
    }

    /// Validates a reservation batch: at most one entry per slot, each handle
    /// live and not repeated. Calls `f(slot, n_new)` for each entry in order
    /// (and stops at its first error). Changes nothing.
    pub(crate) fn check_batch<F, R: super::ReserveReq>(&self, reqs: &[R], mut f: F) -> Result<()>
    where
        F: FnMut(&Slot, usize) -> Result<()>,
    {
        if reqs.len() > self.slots.len() {
            return Err(Error::BatchTooLarge {
                requested: reqs.len(),
                max: self.slots.len(),
            });
        }
        for (i, (id, n_new)) in reqs.iter().map(|r| r.req()).enumerate() {
            let slot = self.get(id)?;
            if reqs.iter().take(i).any(|o| o.req().0.index == id.index) {
                return Err(Error::DuplicateSequence { index: id.index });
            }
            f(slot, n_new)?;
        }
        Ok(())
    }
}
