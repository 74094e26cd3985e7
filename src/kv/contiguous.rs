//! [`ContiguousCache`]: every sequence slot owns `max_seq_len` rows per layer.
//!
//! Storage is one block `(max_seqs, n_layers, 2, max_seq_len, kv_dim)` (the
//! `2` is K then V); row `pos` of a sequence lives at the same place for the
//! sequence's whole life. `fork` copies the committed rows into a free slot.
//! It is the simplest layout and the reference the paged cache is tested
//! against.

#![forbid(unsafe_code)]

use super::rows::{RowStore, RowsRef};
use super::slots::SlotTable;
use super::{KvConfig, KvRead, KvSlice, KvStore, ReserveReq, SeqId};
use crate::{Arena, Error, F32, Result};

/// Contiguous KV cache for up to `max_seqs` sequences of `max_seq_len` tokens.
pub struct ContiguousCache<'a> {
    cfg: KvConfig,
    store: RowStore<'a>, // (max_seqs, n_layers, 2, max_seq_len, kv_dim)
    slots: SlotTable<'a>,
}

/// Read view of one layer of one sequence in a [`ContiguousCache`].
#[derive(Clone, Copy)]
pub struct ContiguousView<'s> {
    rows: RowsRef<'s>,
    kv_dim: usize,
    k_base: usize, // row index of (slot, layer, K, pos 0)
    v_base: usize, // row index of (slot, layer, V, pos 0)
    room: usize,
}

impl KvRead for ContiguousView<'_> {
    #[inline]
    fn k(&self, pos: usize) -> KvSlice<'_> {
        if pos >= self.room {
            return self.rows.empty();
        }
        self.rows.row(self.k_base + pos, self.kv_dim)
    }

    #[inline]
    fn v(&self, pos: usize) -> KvSlice<'_> {
        if pos >= self.room {
            return self.rows.empty();
        }
        self.rows.row(self.v_base + pos, self.kv_dim)
    }
}

impl ContiguousView<'_> {
    /// Readable positions (`room` of the sequence when the view was taken).
    pub fn readable(&self) -> usize {
        self.room
    }
}

/// Rows in the whole cache, `None` on overflow.
fn total_rows(cfg: &KvConfig) -> Option<usize> {
    cfg.max_seqs
        .checked_mul(cfg.n_layers)?
        .checked_mul(2)?
        .checked_mul(cfg.max_seq_len)
}

impl<'a> ContiguousCache<'a> {
    /// Exact arena bytes [`ContiguousCache::new`] needs (alignment padding
    /// included); `None` for an invalid config or on overflow. `page_size` and
    /// `n_pages` are ignored.
    pub fn bytes_required(cfg: &KvConfig) -> Option<usize> {
        cfg.validate_common().ok()?;
        RowStore::bytes_required(cfg.elem, cfg.kv_dim, total_rows(cfg)?)?
            .checked_add(SlotTable::bytes_required(cfg.max_seqs)?)
    }

    /// An empty cache carved from `arena`. Errors: [`Error::InvalidLimit`]
    /// naming the field (a zero dimension, `max_seqs > u32::MAX`),
    /// [`Error::SizeOverflow`], [`Error::ArenaExhausted`].
    pub fn new(arena: &mut Arena<'a>, cfg: KvConfig) -> Result<Self> {
        cfg.validate_common()?;
        let n_rows = total_rows(&cfg).ok_or(Error::SizeOverflow)?;
        let store = RowStore::new(arena, cfg.elem, cfg.kv_dim, n_rows)?;
        let slots = SlotTable::new(arena, cfg.max_seqs)?;
        Ok(ContiguousCache { cfg, store, slots })
    }

    /// Live sequences.
    pub fn live_seqs(&self) -> usize {
        self.slots.live()
    }

    /// Row index of `(slot, layer, kv, pos 0)`; `kv` is 0 for K, 1 for V.
    fn base(&self, slot: usize, layer: usize, kv: usize) -> usize {
        ((slot * self.cfg.n_layers + layer) * 2 + kv) * self.cfg.max_seq_len
    }

    fn check_layer(&self, layer: usize) -> Result<()> {
        if layer >= self.cfg.n_layers {
            return Err(Error::KvLayerOutOfRange {
                layer,
                n_layers: self.cfg.n_layers,
            });
        }
        Ok(())
    }
}

impl<'a> KvStore for ContiguousCache<'a> {
    type View<'s>
        = ContiguousView<'s>
    where
        Self: 's;

    fn config(&self) -> &KvConfig {
        &self.cfg
    }

    fn new_seq(&mut self) -> Result<SeqId> {
        let i = self.slots.find_free()?;
        self.slots.occupy(i, 0)
    }

    fn fork(&mut self, seq: SeqId) -> Result<SeqId> {
        let len = self.slots.get(seq)?.len;
        let child = self.slots.find_free()?;
        let parent = seq.index as usize;
        for layer in 0..self.cfg.n_layers {
            for kv in 0..2 {
                let (src, dst) = (self.base(parent, layer, kv), self.base(child, layer, kv));
                self.store.copy(src, dst, len)?;
            }
        }
        self.slots.get_mut(seq)?.room = len;
        self.slots.occupy(child, len)
    }

    fn free(&mut self, seq: SeqId) -> Result<()> {
        self.slots.retire(seq)
    }

    fn truncate(&mut self, seq: SeqId, len: usize) -> Result<()> {
        let s = self.slots.get_mut(seq)?;
        if len > s.len {
            return Err(Error::KvOutOfRange {
                pos: len,
                len: s.len,
                room: s.room,
            });
        }
        s.len = len;
        s.room = len;
        Ok(())
    }

    fn len(&self, seq: SeqId) -> Result<usize> {
        Ok(self.slots.get(seq)?.len)
    }

    fn room(&self, seq: SeqId) -> Result<usize> {
        Ok(self.slots.get(seq)?.room)
    }

    fn reserve<R: ReserveReq>(&mut self, reqs: &[R]) -> Result<()> {
        // Phase 1: validate everything; nothing changes.
        let max = self.cfg.max_seq_len;
        self.slots.check_batch(reqs, |s, n_new| {
            let target = s.len.checked_add(n_new).ok_or(Error::SizeOverflow)?;
            if target > max {
                return Err(Error::SequenceTooLong { len: target, max });
            }
            Ok(())
        })?;
        // Phase 2: extend every room, zeroing the new positions.
        for (seq, n_new) in reqs.iter().map(|r| r.req()) {
            let s = *self.slots.get(seq)?;
            let new_room = s.room.max(s.len + n_new);
            for layer in 0..self.cfg.n_layers {
                for kv in 0..2 {
                    let base = self.base(seq.index as usize, layer, kv);
                    self.store.zero(base + s.room, new_room - s.room)?;
                }
            }
            self.slots.get_mut(seq)?.room = new_room;
        }
        Ok(())
    }

    fn write(&mut self, seq: SeqId, layer: usize, pos: usize, k: &[F32], v: &[F32]) -> Result<()> {
        let s = *self.slots.get(seq)?;
        self.check_layer(layer)?;
        if pos < s.len || pos >= s.room {
            return Err(Error::KvOutOfRange {
                pos,
                len: s.len,
                room: s.room,
            });
        }
        for row in [k, v] {
            if row.len() != self.cfg.kv_dim {
                return Err(Error::ShapeMismatch {
                    expected: self.cfg.kv_dim,
                    found: row.len(),
                });
            }
        }
        let slot = seq.index as usize;
        self.store.write(self.base(slot, layer, 0) + pos, k)?;
        self.store.write(self.base(slot, layer, 1) + pos, v)
    }

    fn set_len(&mut self, seq: SeqId, len: usize) -> Result<()> {
        let s = self.slots.get_mut(seq)?;
        if len < s.len || len > s.room {
            return Err(Error::KvOutOfRange {
                pos: len,
                len: s.len,
                room: s.room,
            });
        }
        s.len = len;
        Ok(())
    }

    fn view(&self, seq: SeqId, layer: usize) -> Result<ContiguousView<'_>> {
        let s = self.slots.get(seq)?;
        self.check_layer(layer)?;
        let slot = seq.index as usize;
        Ok(ContiguousView {
            rows: self.store.rows(),
            kv_dim: self.cfg.kv_dim,
            k_base: self.base(slot, layer, 0),
            v_base: self.base(slot, layer, 1),
            room: s.room,
        })
    }
}
