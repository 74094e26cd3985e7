//! [`PagedCache`]: a pool of fixed-size pages, page tables, reference counts,
//! copy-on-write forks.
//!
//! A page holds `page_size` consecutive positions of every layer's K and V:
//! the pool is `(n_pages, n_layers, 2, page_size, kv_dim)`. Sequence `s` holds
//! `ceil(room / page_size)` pages, listed in its page table
//! `(max_seqs, pages_per_seq)`; position `pos` lives in page
//! `table[pos / page_size]` at offset `pos % page_size`.
//!
//! * `fork` copies the parent's table entries covering its committed rows and
//!   bumps their reference counts (no row is copied).
//! * `reserve` is two-phase. Phase 1 validates every request and counts
//!   exactly the pages phase 2 will take; if that exceeds the free pages it
//!   returns [`Error::KvPagesExhausted`] having changed nothing. Phase 2 walks
//!   the requests in order; for each, every held page covering a new position
//!   that is still shared (reference count > 1) is copied to a fresh page
//!   (copy-on-write), then zeroed fresh pages extend the room. A page with
//!   count `c` that `k` requests of the batch must privatize is therefore
//!   copied `min(k, c - 1)` times — when the whole batch shares it, the last
//!   request keeps the original. Phase 1 counts it the same way: an
//!   occurrence is copied iff fewer than `c - 1` earlier requests of the batch
//!   hold the same page as a candidate. So a pool of
//!   `max_seqs · pages_per_seq` pages never runs out.
//! * `truncate` and `free` drop references; a page whose count reaches zero
//!   returns to the free stack.
//!
//! Free pages form a stack; the initial order hands out page 0 first, so the
//! page assignment is a pure function of the operation sequence.

#![forbid(unsafe_code)]

use super::rows::{RowStore, RowsRef};
use super::slots::SlotTable;
use super::{KvConfig, KvRead, KvSlice, KvStore, ReserveReq, SeqId};
use crate::{Arena, Error, F32, Result};

/// Paged KV cache with copy-on-write forks.
pub struct PagedCache<'a> {
    cfg: KvConfig,
    pages_per_seq: usize,
    store: RowStore<'a>,     // (n_pages, n_layers, 2, page_size, kv_dim)
    refcount: &'a mut [u32], // (n_pages,) owners of each page; 0 = free
    free: &'a mut [u32],     // (n_pages,) stack: free[..n_free] are the free pages
    n_free: usize,
    tables: &'a mut [u32], // (max_seqs, pages_per_seq) page ids, first ceil(room/page_size) valid
    slots: SlotTable<'a>,
}

/// Read view of one layer of one sequence in a [`PagedCache`]: one
/// page-table lookup per row.
#[derive(Clone, Copy)]
pub struct PagedView<'s> {
    rows: RowsRef<'s>,
    table: &'s [u32], // the sequence's held pages
    kv_dim: usize,
    page_size: usize,
    page_shift: Option<u32>, // log2(page_size) when it is a power of two
    page_rows: usize,        // rows per page: n_layers * 2 * page_size
    k_off: usize,            // row offset of (layer, K, 0) inside a page
    room: usize,
}

impl PagedView<'_> {
    #[inline]
    fn row(&self, pos: usize, off: usize) -> KvSlice<'_> {
        if pos >= self.room {
            return self.rows.empty();
        }
        // (page index, offset): a shift and a mask for power-of-two page sizes.
        let (j, o) = match self.page_shift {
            Some(sh) => (pos >> sh, pos & (self.page_size - 1)),
            None => (pos / self.page_size, pos % self.page_size),
        };
        match self.table.get(j) {
            Some(&p) => self
                .rows
                .row(p as usize * self.page_rows + off + o, self.kv_dim),
            None => self.rows.empty(),
        }
    }

    /// Readable positions (`room` of the sequence when the view was taken).
    pub fn readable(&self) -> usize {
        self.room
    }
}

impl KvRead for PagedView<'_> {
    #[inline]
    fn k(&self, pos: usize) -> KvSlice<'_> {
        self.row(pos, self.k_off)
    }

    #[inline]
    fn v(&self, pos: usize) -> KvSlice<'_> {
        self.row(pos, self.k_off + self.page_size)
    }
}

/// Rows per page and in the pool, `None` on overflow.
fn geometry(cfg: &KvConfig) -> Option<(usize, usize)> {
    let page_rows = cfg.n_layers.checked_mul(2)?.checked_mul(cfg.page_size)?;
    Some((page_rows, page_rows.checked_mul(cfg.n_pages)?))
}

fn validate(cfg: &KvConfig) -> Result<()> {
    cfg.validate_common()?;
    if cfg.page_size == 0 {
        return Err(Error::InvalidLimit {
            name: "page_size",
            value: cfg.page_size,
        });
    }
    if u32::try_from(cfg.n_pages).is_err() {
        return Err(Error::InvalidLimit {
            name: "n_pages",
            value: cfg.n_pages,
        });
    }
    Ok(())
}

impl<'a> PagedCache<'a> {
    /// Exact arena bytes [`PagedCache::new`] needs (alignment padding
    /// included); `None` for an invalid config or on overflow.
    pub fn bytes_required(cfg: &KvConfig) -> Option<usize> {
        validate(cfg).ok()?;
        let (_, pool_rows) = geometry(cfg)?;
        let table_len = cfg.max_seqs.checked_mul(cfg.pages_per_seq())?;
        RowStore::bytes_required(cfg.elem, cfg.kv_dim, pool_rows)?
            .checked_add(Arena::bytes_for::<u32>(cfg.n_pages)?)?
            .checked_add(Arena::bytes_for::<u32>(cfg.n_pages)?)?
            .checked_add(Arena::bytes_for::<u32>(table_len)?)?
            .checked_add(SlotTable::bytes_required(cfg.max_seqs)?)
    }

    /// An empty cache carved from `arena`, every page free. Errors:
    /// [`Error::InvalidLimit`] naming the field (a zero dimension or page
    /// size, `max_seqs` or `n_pages` above `u32::MAX`),
    /// [`Error::SizeOverflow`], [`Error::ArenaExhausted`].
    pub fn new(arena: &mut Arena<'a>, cfg: KvConfig) -> Result<Self> {
        validate(&cfg)?;
        let (_, pool_rows) = geometry(&cfg).ok_or(Error::SizeOverflow)?;
        let pages_per_seq = cfg.pages_per_seq();
        let table_len = cfg
            .max_seqs
            .checked_mul(pages_per_seq)
            .ok_or(Error::SizeOverflow)?;
        let store = RowStore::new(arena, cfg.elem, cfg.kv_dim, pool_rows)?;
        let refcount = arena.alloc::<u32>(cfg.n_pages)?;
        let free = arena.alloc::<u32>(cfg.n_pages)?;
        let tables = arena.alloc::<u32>(table_len)?;
        let slots = SlotTable::new(arena, cfg.max_seqs)?;
        // Top of the stack is page 0.
        let mut id = cfg.n_pages as u32;
        for f in free.iter_mut() {
            id -= 1;
            *f = id;
        }
        Ok(PagedCache {
            cfg,
            pages_per_seq,
            store,
            refcount,
            free,
            n_free: cfg.n_pages,
            tables,
            slots,
        })
    }

    /// Pages in the free pool.
    pub fn free_pages(&self) -> usize {
        self.n_free
    }

    /// Pages in the pool.
    pub fn n_pages(&self) -> usize {
        self.cfg.n_pages
    }

    /// Pages one sequence may hold: `ceil(max_seq_len / page_size)`.
    pub fn pages_per_seq(&self) -> usize {
        self.pages_per_seq
    }

    /// Live sequences.
    pub fn live_seqs(&self) -> usize {
        self.slots.live()
    }

    /// Page ids held by `seq`, in position order (`ceil(room / page_size)` of them).
    pub fn page_table(&self, seq: SeqId) -> Result<&[u32]> {
        let s = self.slots.get(seq)?;
        Ok(self.table(seq.index as usize, self.held(s.room)))
    }

    /// Owners of `page` (0 = free), `None` past the pool.
    pub fn refcount(&self, page: u32) -> Option<u32> {
        self.refcount.get(page as usize).copied()
    }

    /// Full consistency check, for tests and fuzzing (cost
    /// `O(n_pages · (max_seqs · pages_per_seq + n_pages))`): every reference
    /// count equals the number of page-table entries naming the page; the free
    /// stack holds exactly the pages with count 0, once each; every live
    /// sequence has `len ≤ room ≤ max_seq_len`, and every page covering
    /// `[len, room)` has count 1 (so no write can reach a shared page).
    pub fn audit(&self) -> bool {
        let ps = self.cfg.page_size;
        for (i, s) in self.slots.iter() {
            if s.live == 0 {
                continue;
            }
            if s.len > s.room || s.room > self.cfg.max_seq_len {
                return false;
            }
            let table = self.table(i, self.held(s.room));
            let writable = if s.room > s.len {
                s.len / ps
            } else {
                table.len()
            };
            for &p in table.iter().skip(writable) {
                if self.refcount.get(p as usize) != Some(&1) {
                    return false;
                }
            }
        }
        for (p, &rc) in self.refcount.iter().enumerate() {
            let refs = self
                .slots
                .iter()
                .filter(|(_, s)| s.live == 1)
                .map(|(i, s)| {
                    let t = self.table(i, self.held(s.room));
                    t.iter().filter(|&&q| q as usize == p).count()
                })
                .sum::<usize>();
            if refs != rc as usize {
                return false;
            }
            let in_free = self.free[..self.n_free]
                .iter()
                .filter(|&&q| q as usize == p)
                .count();
            if in_free != usize::from(rc == 0) {
                return false;
            }
        }
        true
    }

    /// Pages covering `room` positions.
    fn held(&self, room: usize) -> usize {
        room.div_ceil(self.cfg.page_size)
    }

    /// The first `n` entries of slot `i`'s page table.
    fn table(&self, i: usize, n: usize) -> &[u32] {
        let start = i * self.pages_per_seq;
        self.tables.get(start..start + n).unwrap_or(&[])
    }

    /// Rows per page.
    fn page_rows(&self) -> usize {
        self.cfg.n_layers * 2 * self.cfg.page_size
    }

    /// Takes a page from the free stack (reference count 1), zeroed if `zero`.
    fn pop(&mut self, zero: bool) -> Result<u32> {
        let exhausted = Error::KvPagesExhausted { needed: 1, free: 0 };
        let top = self.n_free.checked_sub(1).ok_or(exhausted)?;
        let p = self.free[top];
        self.n_free = top;
        self.refcount[p as usize] = 1;
        if zero {
            let rows = self.page_rows();
            self.store.zero(p as usize * rows, rows)?;
        }
        Ok(p)
    }

    /// Drops one reference to page `p`, returning it to the pool at zero.
    fn release(&mut self, p: u32) {
        let rc = &mut self.refcount[p as usize];
        *rc -= 1;
        if *rc == 0 {
            self.free[self.n_free] = p;
            self.n_free += 1;
        }
    }

    /// Drops slot `i`'s pages from index `keep` up to `held`.
    fn release_tail(&mut self, i: usize, keep: usize, held: usize) {
        for j in keep..held {
            let p = self.tables[i * self.pages_per_seq + j];
            self.release(p);
        }
    }

    /// Held pages of request `(seq, n_new)` that phase 2 of `reserve` visits
    /// for copy-on-write (those covering new positions) and that are shared
    /// now. Empty for `n_new = 0` or an unknown handle.
    fn cow_candidates(&self, (seq, n_new): (SeqId, usize)) -> impl Iterator<Item = u32> + '_ {
        let (from, held) = match self.slots.get(seq) {
            Ok(s) if n_new > 0 => (s.len / self.cfg.page_size, self.held(s.room)),
            _ => (0, 0),
        };
        self.table(seq.index as usize, held)
            .iter()
            .skip(from)
            .copied()
            .filter(|&p| self.refcount[p as usize] > 1)
    }

    /// Exactly the pages phase 2 of `reserve` takes for `reqs` (validated).
    fn pages_needed<R: ReserveReq>(&self, reqs: &[R]) -> Result<usize> {
        let mut needed = 0usize;
        for (r, (seq, n_new)) in reqs.iter().map(|q| q.req()).enumerate() {
            if n_new == 0 {
                continue;
            }
            let s = self.slots.get(seq)?;
            let new_room = s.room.max(s.len + n_new);
            needed += self.held(new_room) - self.held(s.room);
            for p in self.cow_candidates((seq, n_new)) {
                // Earlier requests that privatize the same page first.
                let earlier = reqs[..r]
                    .iter()
                    .map(|req| self.cow_candidates(req.req()).filter(|&q| q == p).count())
                    .sum::<usize>();
                if earlier < self.refcount[p as usize] as usize - 1 {
                    needed += 1;
                }
            }
        }
        Ok(needed)
    }
}

impl<'a> KvStore for PagedCache<'a> {
    type View<'s>
        = PagedView<'s>
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
        let s = *self.slots.get(seq)?;
        let child = self.slots.find_free()?;
        let parent = seq.index as usize;
        // End the parent's reservation: room = len.
        let keep = self.held(s.len);
        self.release_tail(parent, keep, self.held(s.room));
        self.slots.get_mut(seq)?.room = s.len;
        // Share the pages covering the committed rows.
        let pps = self.pages_per_seq;
        self.tables
            .copy_within(parent * pps..parent * pps + keep, child * pps);
        for j in 0..keep {
            let p = self.tables[parent * pps + j];
            self.refcount[p as usize] += 1;
        }
        self.slots.occupy(child, s.len)
    }

    fn free(&mut self, seq: SeqId) -> Result<()> {
        let s = *self.slots.get(seq)?;
        self.release_tail(seq.index as usize, 0, self.held(s.room));
        self.slots.retire(seq)
    }

    fn truncate(&mut self, seq: SeqId, len: usize) -> Result<()> {
        let s = *self.slots.get(seq)?;
        if len > s.len {
            return Err(Error::KvOutOfRange {
                pos: len,
                len: s.len,
                room: s.room,
            });
        }
        self.release_tail(seq.index as usize, self.held(len), self.held(s.room));
        let slot = self.slots.get_mut(seq)?;
        slot.len = len;
        slot.room = len;
        Ok(())
    }

    fn len(&self, seq: SeqId) -> Result<usize> {
        Ok(self.slots.get(seq)?.len)
    }

    fn room(&self, seq: SeqId) -> Result<usize> {
        Ok(self.slots.get(seq)?.room)
    }

    fn reserve<R: ReserveReq>(&mut self, reqs: &[R]) -> Result<()> {
        // Phase 1: validate and count; nothing changes.
        let max = self.cfg.max_seq_len;
        self.slots.check_batch(reqs, |s, n_new| {
            let target = s.len.checked_add(n_new).ok_or(Error::SizeOverflow)?;
            if target > max {
                return Err(Error::SequenceTooLong { len: target, max });
            }
            Ok(())
        })?;
        let needed = self.pages_needed(reqs)?;
        if needed > self.n_free {
            return Err(Error::KvPagesExhausted {
                needed,
                free: self.n_free,
            });
        }
        // Phase 2: takes exactly `needed` pages, so it cannot run out.
        let (pps, page_rows) = (self.pages_per_seq, self.page_rows());
        for (seq, n_new) in reqs.iter().map(|r| r.req()) {
            if n_new == 0 {
                continue;
            }
            let s = *self.slots.get(seq)?;
            let i = seq.index as usize;
            let new_room = s.room.max(s.len + n_new);
            let (held, new_held) = (self.held(s.room), self.held(new_room));
            // Copy-on-write: privatize held pages covering new positions.
            for j in s.len / self.cfg.page_size..held {
                let p = self.tables[i * pps + j];
                if self.refcount[p as usize] > 1 {
                    let q = self.pop(false)?;
                    self.store
                        .copy(p as usize * page_rows, q as usize * page_rows, page_rows)?;
                    self.refcount[p as usize] -= 1;
                    self.tables[i * pps + j] = q;
                }
            }
            // Fresh pages for the rest of the room.
            for j in held..new_held {
                let q = self.pop(true)?;
                self.tables[i * pps + j] = q;
            }
            self.slots.get_mut(seq)?.room = new_room;
        }
        Ok(())
    }

    fn write(&mut self, seq: SeqId, layer: usize, pos: usize, k: &[F32], v: &[F32]) -> Result<()> {
        let s = *self.slots.get(seq)?;
        if layer >= self.cfg.n_layers {
            return Err(Error::KvLayerOutOfRange {
                layer,
                n_layers: self.cfg.n_layers,
            });
        }
        let out_of_range = Error::KvOutOfRange {
            pos,
            len: s.len,
            room: s.room,
        };
        if pos < s.len || pos >= s.room {
            return Err(out_of_range);
        }
        for row in [k, v] {
            if row.len() != self.cfg.kv_dim {
                return Err(Error::ShapeMismatch {
                    expected: self.cfg.kv_dim,
                    found: row.len(),
                });
            }
        }
        let ps = self.cfg.page_size;
        let p = self.tables[seq.index as usize * self.pages_per_seq + pos / ps];
        // Never write a shared page (unreachable by the invariant; checked anyway).
        if self.refcount[p as usize] != 1 {
            return Err(out_of_range);
        }
        let k_row = p as usize * self.page_rows() + layer * 2 * ps + pos % ps;
        self.store.write(k_row, k)?;
        self.store.write(k_row + ps, v)
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

    fn view(&self, seq: SeqId, layer: usize) -> Result<PagedView<'_>> {
        let s = self.slots.get(seq)?;
        if layer >= self.cfg.n_layers {
            return Err(Error::KvLayerOutOfRange {
                layer,
                n_layers: self.cfg.n_layers,
            });
        }
        Ok(PagedView {
            rows: self.store.rows(),
            table: self.table(seq.index as usize, self.held(s.room)),
            kv_dim: self.cfg.kv_dim,
            page_size: self.cfg.page_size,
            page_shift: self
                .cfg
                .page_size
                .is_power_of_two()
                .then(|| self.cfg.page_size.trailing_zeros()),
            page_rows: self.page_rows(),
            k_off: layer * 2 * self.cfg.page_size,
            room: s.room,
        })
    }
}
