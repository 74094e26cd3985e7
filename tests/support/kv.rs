//! Shared by `tests/kv_*.rs` (as `support::kv`) and `fuzz/fuzz_targets/kv_ops.rs`: a plain
//! reference model of the KV caches, an operation language, and a harness that
//! applies each operation to a cache and to the model and compares everything.
//!
//! The model keeps each sequence as its own `Vec` of rows (no pages, no
//! sharing: a fork clones the rows), converts f32 to f16 with the `half` crate
//! (an independent implementation, NaN canonicalised to `0x7E00` as
//! docs/ARITHMETIC.md specifies), and — for the paged cache — counts pages
//! with abstract page ids and a `HashMap` of reference counts, so it predicts
//! exactly when a reservation runs out of pages and how many pages are free.
//!
//! After every operation the harness checks, for every live sequence: length,
//! room, every written row of every layer (bits), that rows past the room
//! read as empty; stale handles are rejected; the pool's free count equals
//! the model's; `PagedCache::audit` holds. Every failing operation must
//! return exactly the model's error and leave the full state (lengths, rooms,
//! page tables, reference counts, free count, every readable row) identical.
//! Before every write the harness checks that the target page is private.
#![allow(dead_code)] // also compiled into fuzz/fuzz_targets/kv_ops.rs

use detllm::kv::{ContiguousCache, KvConfig, KvRead, KvSlice, KvStore, KvType, PagedCache, SeqId};
use detllm::{Arena, Error, F32};
use std::collections::HashMap;

// ---------------------------------------------------------------- values

/// SplitMix64 step.
pub fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Row values written for (seed, pos, layer, kv): a mix of arbitrary bit
/// patterns (NaN, ∞, subnormals) and values around the binary16 range
/// (normal, subnormal, overflowing, ties).
pub fn row_values(seed: u64, pos: usize, layer: usize, kv: usize, dim: usize) -> Vec<F32> {
    (0..dim)
        .map(|j| {
            let h = mix(seed
                ^ mix((pos as u64) << 24 | (layer as u64) << 8 | (kv as u64) << 4)
                ^ (j as u64).wrapping_mul(0xA24B_AED4_963E_E407));
            let bits = if h & 3 == 0 {
                (h >> 32) as u32
            } else {
                let sign = ((h >> 2) & 1) as u32;
                let exp = 98 + ((h >> 3) % 50) as u32; // 2^-29 .. 2^20
                let man = (h >> 16) as u32 & 0x7F_FFFF;
                let man = if h & 4 == 0 {
                    man & !0x1FFF | 0x1000
                } else {
                    man
                }; // some f16 ties
                sign << 31 | exp << 23 | man
            };
            F32::from_bits(bits)
        })
        .collect()
}

/// What the cache must store for `x` (bits widened to u32).
pub fn stored(elem: KvType, x: F32) -> u32 {
    match elem {
        KvType::F32 => x.to_bits(),
        KvType::F16 => {
            let f = f32::from_bits(x.to_bits());
            if f.is_nan() {
                0x7E00
            } else {
                half::f16::from_f32(f).to_bits() as u32
            }
        }
    }
}

/// Bits of a row read back.
pub fn bits(s: KvSlice<'_>) -> Vec<u32> {
    match s {
        KvSlice::F16(x) => x.iter().map(|&h| h as u32).collect(),
        KvSlice::F32(x) => x.iter().map(|v| v.to_bits()).collect(),
    }
}

// ---------------------------------------------------------------- inspection

/// Test-side access to cache internals.
pub trait Inspect: KvStore {
    /// (free pages, pages in pool) for a paged cache.
    fn pool(&self) -> Option<(usize, usize)>;
    fn audit(&self) -> bool;
    /// True if a write at (seq, pos) would land in a page nobody else holds.
    fn target_private(&self, seq: SeqId, pos: usize) -> bool;
    fn table(&self, seq: SeqId) -> Option<Vec<u32>>;
    fn refcounts(&self) -> Option<Vec<u32>>;
}

impl Inspect for ContiguousCache<'_> {
    fn pool(&self) -> Option<(usize, usize)> {
        None
    }
    fn audit(&self) -> bool {
        true
    }
    fn target_private(&self, _: SeqId, _: usize) -> bool {
        true
    }
    fn table(&self, _: SeqId) -> Option<Vec<u32>> {
        None
    }
    fn refcounts(&self) -> Option<Vec<u32>> {
        None
    }
}

impl Inspect for PagedCache<'_> {
    fn pool(&self) -> Option<(usize, usize)> {
        Some((self.free_pages(), self.n_pages()))
    }
    fn audit(&self) -> bool {
        PagedCache::audit(self)
    }
    fn target_private(&self, seq: SeqId, pos: usize) -> bool {
        let ps = self.config().page_size;
        match self
            .page_table(seq)
            .ok()
            .and_then(|t| t.get(pos / ps).copied())
        {
            Some(p) => self.refcount(p) == Some(1),
            None => true, // the write must then fail; checked by the model
        }
    }
    fn table(&self, seq: SeqId) -> Option<Vec<u32>> {
        self.page_table(seq).ok().map(|t| t.to_vec())
    }
    fn refcounts(&self) -> Option<Vec<u32>> {
        Some(
            (0..self.n_pages() as u32)
                .map(|p| self.refcount(p).unwrap())
                .collect(),
        )
    }
}

/// (handle, len, room, page table, every readable row of every layer).
type SeqState = (SeqId, usize, usize, Option<Vec<u32>>, Vec<Vec<u32>>);

/// Everything observable about a cache.
#[derive(Debug, PartialEq)]
pub struct Snapshot {
    seqs: Vec<SeqState>,
    refcounts: Option<Vec<u32>>,
    pool: Option<(usize, usize)>,
}

pub fn snapshot<C: Inspect>(c: &C, ids: &[SeqId]) -> Snapshot {
    let n_layers = c.config().n_layers;
    let seqs = ids
        .iter()
        .map(|&id| {
            let room = c.room(id).unwrap();
            let mut rows = Vec::new();
            for layer in 0..n_layers {
                let v = c.view(id, layer).unwrap();
                for pos in 0..room {
                    rows.push(bits(v.k(pos)));
                    rows.push(bits(v.v(pos)));
                }
            }
            (id, c.len(id).unwrap(), room, c.table(id), rows)
        })
        .collect();
    Snapshot {
        seqs,
        refcounts: c.refcounts(),
        pool: c.pool(),
    }
}

// ---------------------------------------------------------------- model

/// One sequence of the model.
#[derive(Clone, Debug)]
pub struct MSeq {
    pub id: SeqId,
    pub len: usize,
    /// (room, n_layers): K bits ++ V bits once written.
    pub cells: Vec<Vec<Option<Vec<u32>>>>,
    /// Abstract page ids (paged model only).
    pages: Vec<u64>,
}

/// Page accounting of the paged model.
#[derive(Clone, Debug)]
struct Pool {
    rc: HashMap<u64, u32>,
    free: usize,
    next: u64,
    ps: usize,
}

impl Pool {
    fn take(&mut self) -> u64 {
        self.free -= 1;
        self.next += 1;
        self.rc.insert(self.next, 1);
        self.next
    }
    fn drop_ref(&mut self, p: u64) {
        let rc = self.rc.get_mut(&p).unwrap();
        *rc -= 1;
        if *rc == 0 {
            self.rc.remove(&p);
            self.free += 1;
        }
    }
    fn held(&self, room: usize) -> usize {
        room.div_ceil(self.ps)
    }
}

/// The reference model.
#[derive(Clone, Debug)]
pub struct Model {
    pub cfg: KvConfig,
    pub seqs: Vec<MSeq>,
    pub stale: Vec<SeqId>,
    pool: Option<Pool>,
}

impl Model {
    pub fn new(cfg: KvConfig, paged: bool) -> Model {
        Model {
            cfg,
            seqs: Vec::new(),
            stale: Vec::new(),
            pool: paged.then(|| Pool {
                rc: HashMap::new(),
                free: cfg.n_pages,
                next: 0,
                ps: cfg.page_size,
            }),
        }
    }

    pub fn free_pages(&self) -> Option<usize> {
        self.pool.as_ref().map(|p| p.free)
    }

    fn find(&self, id: SeqId) -> Result<usize, Error> {
        self.seqs
            .iter()
            .position(|s| s.id == id)
            .ok_or(Error::UnknownSequence { index: id.index() })
    }

    fn oor(s: &MSeq, pos: usize) -> Error {
        Error::KvOutOfRange {
            pos,
            len: s.len,
            room: s.cells.len(),
        }
    }

    /// Slot index the next new sequence gets (lowest free), or the error.
    pub fn next_slot(&self) -> Result<u32, Error> {
        if self.seqs.len() >= self.cfg.max_seqs {
            return Err(Error::TooManySequences {
                max: self.cfg.max_seqs,
            });
        }
        Ok((0..)
            .find(|i| self.seqs.iter().all(|s| s.id.index() != *i))
            .unwrap())
    }

    pub fn new_seq(&mut self, id: SeqId) {
        self.seqs.push(MSeq {
            id,
            len: 0,
            cells: Vec::new(),
            pages: Vec::new(),
        });
    }

    /// Shortens the room of seq `i` to `room`, dropping pages past it.
    fn shrink(&mut self, i: usize, room: usize) {
        let s = &mut self.seqs[i];
        s.cells.truncate(room);
        if let Some(pool) = &mut self.pool {
            let keep = pool.held(room);
            for p in s.pages.drain(keep..) {
                pool.drop_ref(p);
            }
        }
    }

    pub fn fork(&mut self, parent: SeqId, child: SeqId) {
        let i = self.find(parent).unwrap();
        let len = self.seqs[i].len;
        self.shrink(i, len);
        let mut c = self.seqs[i].clone();
        c.id = child;
        if let Some(pool) = &mut self.pool {
            for p in &c.pages {
                *pool.rc.get_mut(p).unwrap() += 1;
            }
        }
        self.seqs.push(c);
    }

    pub fn free(&mut self, id: SeqId) -> Result<(), Error> {
        let i = self.find(id)?;
        self.shrink(i, 0);
        self.seqs.remove(i);
        self.stale.push(id);
        Ok(())
    }

    pub fn truncate(&mut self, id: SeqId, len: usize) -> Result<(), Error> {
        let i = self.find(id)?;
        if len > self.seqs[i].len {
            return Err(Self::oor(&self.seqs[i], len));
        }
        self.seqs[i].len = len;
        self.shrink(i, len);
        Ok(())
    }

    pub fn reserve(&mut self, reqs: &[(SeqId, usize)]) -> Result<(), Error> {
        if reqs.len() > self.cfg.max_seqs {
            return Err(Error::BatchTooLarge {
                requested: reqs.len(),
                max: self.cfg.max_seqs,
            });
        }
        for (k, &(id, n)) in reqs.iter().enumerate() {
            let i = self.find(id)?;
            if reqs[..k].iter().any(|(o, _)| o.index() == id.index()) {
                return Err(Error::DuplicateSequence { index: id.index() });
            }
            let s = &self.seqs[i];
            if s.len + n > self.cfg.max_seq_len {
                return Err(Error::SequenceTooLong {
                    len: s.len + n,
                    max: self.cfg.max_seq_len,
                });
            }
        }
        // Pages needed: run the allocation on a copy with an unlimited pool.
        if let Some(pool) = &self.pool {
            let mut sim = self.clone();
            let sp = sim.pool.as_mut().unwrap();
            sp.free = usize::MAX / 2;
            sim.grow(reqs);
            let needed = usize::MAX / 2 - sim.pool.unwrap().free;
            if needed > pool.free {
                return Err(Error::KvPagesExhausted {
                    needed,
                    free: pool.free,
                });
            }
        }
        self.grow(reqs);
        Ok(())
    }

    /// Reservation after validation: copy still-shared pages covering new
    /// positions, then take fresh ones.
    fn grow(&mut self, reqs: &[(SeqId, usize)]) {
        for &(id, n) in reqs {
            if n == 0 {
                continue;
            }
            let i = self.find(id).unwrap();
            let s = &mut self.seqs[i];
            let room = s.cells.len().max(s.len + n);
            s.cells.resize(room, vec![None; self.cfg.n_layers]);
            if let Some(pool) = &mut self.pool {
                for j in s.len / pool.ps..s.pages.len() {
                    if pool.rc[&s.pages[j]] > 1 {
                        pool.drop_ref(s.pages[j]);
                        s.pages[j] = pool.take();
                    }
                }
                while s.pages.len() < pool.held(room) {
                    let p = pool.take();
                    s.pages.push(p);
                }
            }
        }
    }

    pub fn write(
        &mut self,
        id: SeqId,
        layer: usize,
        pos: usize,
        k: &[F32],
        v: &[F32],
    ) -> Result<(), Error> {
        let i = self.find(id)?;
        if layer >= self.cfg.n_layers {
            return Err(Error::KvLayerOutOfRange {
                layer,
                n_layers: self.cfg.n_layers,
            });
        }
        let s = &mut self.seqs[i];
        if pos < s.len || pos >= s.cells.len() {
            return Err(Self::oor(s, pos));
        }
        for r in [k, v] {
            if r.len() != self.cfg.kv_dim {
                return Err(Error::ShapeMismatch {
                    expected: self.cfg.kv_dim,
                    found: r.len(),
                });
            }
        }
        let e = self.cfg.elem;
        s.cells[pos][layer] = Some(k.iter().chain(v).map(|&x| stored(e, x)).collect());
        Ok(())
    }

    pub fn set_len(&mut self, id: SeqId, len: usize) -> Result<(), Error> {
        let i = self.find(id)?;
        let s = &mut self.seqs[i];
        if len < s.len || len > s.cells.len() {
            return Err(Self::oor(s, len));
        }
        s.len = len;
        Ok(())
    }
}

// ---------------------------------------------------------------- operations

/// One step of a random schedule; sequence operands pick a live sequence
/// modulo the live count.
#[derive(Clone, Debug)]
pub enum Op {
    New,
    /// reserve + write every row of every layer + set_len.
    Append {
        seq: u16,
        n: u16,
        seed: u64,
    },
    /// A multi-sequence step (up to 3 distinct sequences): one reserve for all.
    Batch {
        picks: [u16; 3],
        ns: [u16; 3],
        count: u8,
        seed: u64,
    },
    /// reserve n, write only the first `written` positions, no set_len (an
    /// engine step that failed half-way).
    Partial {
        seq: u16,
        n: u16,
        written: u16,
        seed: u64,
    },
    Fork {
        seq: u16,
    },
    Free {
        seq: u16,
    },
    Truncate {
        seq: u16,
        to: u16,
    },
    /// A call that must fail with a typed error and change nothing.
    Misuse {
        seq: u16,
        kind: u8,
    },
}

impl Op {
    /// Decodes five raw numbers (from proptest or fuzz bytes) into an op.
    pub fn from_raw(kind: u8, a: u16, b: u16, c: u16, seed: u64) -> Op {
        match kind % 16 {
            0 | 1 => Op::New,
            2..=5 => Op::Append {
                seq: a,
                n: if seed & 7 == 0 { b % 64 } else { b % 9 },
                seed,
            },
            6 | 7 => Op::Batch {
                picks: [a, b, c],
                ns: [0, 1, 2].map(|i| {
                    let n = (seed >> (8 * i)) as u16 % 9;
                    if (seed >> 40) & 3 == 0 { n * 5 } else { n }
                }),
                count: 1 + (seed >> 32) as u8 % 3,
                seed,
            },
            8 => Op::Partial {
                seq: a,
                n: b % 12,
                written: c,
                seed,
            },
            9 | 10 => Op::Fork { seq: a },
            11 => Op::Free { seq: a },
            12 | 13 => Op::Truncate { seq: a, to: b },
            _ => Op::Misuse {
                seq: a,
                kind: (b % 16) as u8,
            },
        }
    }
}

/// Decodes a cache config from fuzz bytes (8 bytes used).
pub fn config_from_bytes(b: &[u8; 8]) -> KvConfig {
    let max_seqs = 1 + b[3] as usize % 6;
    let max_seq_len = 1 + b[4] as usize % 48;
    let page_size = 1 + b[5] as usize % 9;
    let pps = max_seq_len.div_ceil(page_size);
    KvConfig {
        n_layers: 1 + b[0] as usize % 3,
        kv_dim: 1 + b[1] as usize % 6,
        elem: if b[2] & 1 == 0 {
            KvType::F16
        } else {
            KvType::F32
        },
        max_seqs,
        max_seq_len,
        page_size,
        n_pages: b[6] as usize % (max_seqs * pps + 3),
    }
}

/// Decodes a schedule from fuzz bytes: 8 bytes per op.
pub fn ops_from_bytes(data: &[u8]) -> Vec<Op> {
    data.chunks_exact(8)
        .map(|c| {
            let seed = u64::from(u32::from_le_bytes([c[4], c[5], c[6], c[7]]));
            Op::from_raw(c[0], c[1] as u16, c[2] as u16, c[3] as u16, mix(seed))
        })
        .collect()
}

// ---------------------------------------------------------------- harness

/// How often a schedule reached the interesting paths (paged cache).
#[derive(Clone, Copy, Debug, Default)]
pub struct Stats {
    /// Successful reserves.
    pub reserves: usize,
    /// Pages privatized by copy-on-write.
    pub cow_copies: usize,
    /// Reserves that failed with `KvPagesExhausted`.
    pub exhausted: usize,
    /// Multi-sequence reserves that failed with `KvPagesExhausted`.
    pub batch_exhausted: usize,
    /// Forks of a sequence whose tail page was partly filled.
    pub forks_partial_tail: usize,
    /// Truncations to a position inside a page shared with another sequence.
    pub truncate_into_shared: usize,
    /// Failing calls checked for an unchanged state.
    pub failures_checked: usize,
}

/// A cache and the model, applied in lockstep.
pub struct Harness<C> {
    pub cache: C,
    pub model: Model,
    pub stats: Stats,
}

/// Runs `f` with a paged cache built on a buffer of exactly `bytes_required`.
pub fn with_paged<R>(cfg: KvConfig, f: impl FnOnce(Harness<PagedCache<'_>>) -> R) -> R {
    let mut buf = vec![0u8; PagedCache::bytes_required(&cfg).unwrap()];
    let mut arena = Arena::new(&mut buf);
    let cache = PagedCache::new(&mut arena, cfg).unwrap();
    f(Harness {
        cache,
        model: Model::new(cfg, true),
        stats: Stats::default(),
    })
}

/// Runs `f` with a contiguous cache built on a buffer of exactly `bytes_required`.
pub fn with_contiguous<R>(cfg: KvConfig, f: impl FnOnce(Harness<ContiguousCache<'_>>) -> R) -> R {
    let mut buf = vec![0u8; ContiguousCache::bytes_required(&cfg).unwrap()];
    let mut arena = Arena::new(&mut buf);
    let cache = ContiguousCache::new(&mut arena, cfg).unwrap();
    f(Harness {
        cache,
        model: Model::new(cfg, false),
        stats: Stats::default(),
    })
}

impl<C: Inspect> Harness<C> {
    fn ids(&self) -> Vec<SeqId> {
        self.model.seqs.iter().map(|s| s.id).collect()
    }

    fn snap(&self) -> Snapshot {
        snapshot(&self.cache, &self.ids())
    }

    fn pick(&self, a: u16) -> Option<SeqId> {
        let n = self.model.seqs.len();
        (n > 0).then(|| self.model.seqs[a as usize % n].id)
    }

    /// Asserts a failing call returned the model's error and changed nothing.
    fn expect_err<T: std::fmt::Debug>(
        &mut self,
        want: Error,
        call: impl FnOnce(&mut C) -> Result<T, Error>,
    ) {
        let before = self.snap();
        let got = call(&mut self.cache);
        assert_eq!(got.err(), Some(want), "error mismatch");
        assert_eq!(self.snap(), before, "failed call changed the state");
        self.stats.failures_checked += 1;
    }

    /// A reserve through cache and model; on error, state unchanged.
    fn reserve(&mut self, reqs: &[(SeqId, usize)]) -> bool {
        let mut m = self.model.clone();
        match m.reserve(reqs) {
            Ok(()) => {
                let before: Vec<_> = reqs.iter().map(|r| self.cache.table(r.0)).collect();
                self.cache.reserve(reqs).unwrap();
                for (r, old) in reqs.iter().zip(before) {
                    if let (Some(old), Some(new)) = (old, self.cache.table(r.0)) {
                        self.stats.cow_copies +=
                            old.iter().zip(&new).filter(|(a, b)| a != b).count();
                    }
                }
                self.stats.reserves += 1;
                self.model = m;
                true
            }
            Err(e) => {
                if matches!(e, Error::KvPagesExhausted { .. }) {
                    self.stats.exhausted += 1;
                    self.stats.batch_exhausted += usize::from(reqs.len() > 1);
                }
                self.expect_err(e, |c| c.reserve(reqs));
                false
            }
        }
    }

    /// Writes every layer's K and V at `pos` (checking the page is private).
    fn write_pos(&mut self, id: SeqId, pos: usize, seed: u64) {
        let dim = self.model.cfg.kv_dim;
        for layer in 0..self.model.cfg.n_layers {
            let k = row_values(seed, pos, layer, 0, dim);
            let v = row_values(seed, pos, layer, 1, dim);
            assert!(
                self.cache.target_private(id, pos),
                "write into a shared page"
            );
            self.model.write(id, layer, pos, &k, &v).unwrap();
            self.cache.write(id, layer, pos, &k, &v).unwrap();
        }
    }

    pub fn apply(&mut self, op: &Op) {
        match *op {
            Op::New => match self.model.next_slot() {
                Ok(slot) => {
                    let id = self.cache.new_seq().unwrap();
                    assert_eq!(id.index(), slot);
                    self.model.new_seq(id);
                }
                Err(e) => self.expect_err(e, |c| c.new_seq()),
            },
            Op::Append { seq, n, seed } => {
                let Some(id) = self.pick(seq) else { return };
                let n = n as usize;
                if self.reserve(&[(id, n)]) {
                    let len = self.cache.len(id).unwrap();
                    for pos in len..len + n {
                        self.write_pos(id, pos, seed);
                    }
                    self.model.set_len(id, len + n).unwrap();
                    self.cache.set_len(id, len + n).unwrap();
                }
            }
            Op::Batch {
                picks,
                ns,
                count,
                seed,
            } => {
                let mut reqs: Vec<(SeqId, usize)> = Vec::new();
                for k in 0..count as usize {
                    if let Some(id) = self.pick(picks[k])
                        && reqs.iter().all(|(o, _)| *o != id)
                    {
                        reqs.push((id, ns[k] as usize));
                    }
                }
                if self.reserve(&reqs) {
                    let lens: Vec<usize> =
                        reqs.iter().map(|r| self.cache.len(r.0).unwrap()).collect();
                    for (&(id, n), &len) in reqs.iter().zip(&lens) {
                        for pos in len..len + n {
                            self.write_pos(id, pos, seed);
                        }
                    }
                    for (&(id, n), &len) in reqs.iter().zip(&lens) {
                        self.model.set_len(id, len + n).unwrap();
                        self.cache.set_len(id, len + n).unwrap();
                    }
                }
            }
            Op::Partial {
                seq,
                n,
                written,
                seed,
            } => {
                let Some(id) = self.pick(seq) else { return };
                if self.reserve(&[(id, n as usize)]) {
                    let len = self.cache.len(id).unwrap();
                    let room = self.cache.room(id).unwrap();
                    let w = (written as usize) % (room - len + 1);
                    for pos in len..len + w {
                        self.write_pos(id, pos, seed);
                    }
                }
            }
            Op::Fork { seq } => {
                let Some(id) = self.pick(seq) else { return };
                match self.model.next_slot() {
                    Ok(slot) => {
                        let len = self.cache.len(id).unwrap();
                        self.stats.forks_partial_tail +=
                            usize::from(!len.is_multiple_of(self.model.cfg.page_size));
                        let child = self.cache.fork(id).unwrap();
                        assert_eq!(child.index(), slot);
                        self.model.fork(id, child);
                    }
                    Err(e) => self.expect_err(e, |c| c.fork(id)),
                }
            }
            Op::Free { seq } => {
                let Some(id) = self.pick(seq) else { return };
                self.model.free(id).unwrap();
                self.cache.free(id).unwrap();
            }
            Op::Truncate { seq, to } => {
                let Some(id) = self.pick(seq) else { return };
                let len = self.cache.len(id).unwrap();
                let to = to as usize % (len + 1);
                let ps = self.model.cfg.page_size;
                if let (Some(t), Some(rc)) = (self.cache.table(id), self.cache.refcounts())
                    && !to.is_multiple_of(ps)
                    && rc[t[to / ps] as usize] > 1
                {
                    self.stats.truncate_into_shared += 1;
                }
                self.model.truncate(id, to).unwrap();
                self.cache.truncate(id, to).unwrap();
            }
            Op::Misuse { seq, kind } => self.misuse(seq, kind),
        }
    }

    fn misuse(&mut self, seq: u16, kind: u8) {
        let cfg = self.model.cfg;
        let row = vec![F32::ONE; cfg.kv_dim];
        if kind < 6 {
            // A stale handle in every entry point.
            let Some(&id) = self.model.stale.last() else {
                return;
            };
            let e = Error::UnknownSequence { index: id.index() };
            match kind {
                0 => self.expect_err(e, |c| c.len(id)),
                1 => self.expect_err(e, |c| c.write(id, 0, 0, &row, &row)),
                2 => self.expect_err(e, |c| c.fork(id)),
                3 => self.expect_err(e, |c| c.free(id)),
                4 => self.expect_err(e, |c| c.truncate(id, 0)),
                _ => {
                    self.expect_err(e, |c| c.set_len(id, 0));
                    self.expect_err(e, |c| c.view(id, 0).map(|_| ()));
                    // A stale handle after a live one: nothing reserved for the live one.
                    if let Some(live) = self.pick(seq) {
                        let reqs = [(live, 1), (id, 1)];
                        let e = self.model.clone().reserve(&reqs).unwrap_err();
                        self.expect_err(e, |c| c.reserve(&reqs));
                    }
                }
            }
            return;
        }
        let Some(id) = self.pick(seq) else { return };
        let s = self.model.seqs.iter().find(|s| s.id == id).unwrap().clone();
        let (len, room) = (s.len, s.cells.len());
        let oor = |pos| Error::KvOutOfRange { pos, len, room };
        match kind {
            6 => self.expect_err(oor(room), |c| c.write(id, 0, room, &row, &row)),
            7 if len > 0 => self.expect_err(oor(len - 1), |c| c.write(id, 0, len - 1, &row, &row)),
            8 => {
                let reqs = [(id, 0), (id, 0)];
                let e = if cfg.max_seqs >= 2 {
                    Error::DuplicateSequence { index: id.index() }
                } else {
                    Error::BatchTooLarge {
                        requested: 2,
                        max: 1,
                    }
                };
                assert_eq!(self.model.clone().reserve(&reqs), Err(e));
                self.expect_err(e, |c| c.reserve(&reqs));
            }
            9 if len > 0 => self.expect_err(oor(len - 1), |c| c.set_len(id, len - 1)),
            10 => self.expect_err(oor(room + 1), |c| c.set_len(id, room + 1)),
            11 => {
                let e = Error::KvLayerOutOfRange {
                    layer: cfg.n_layers,
                    n_layers: cfg.n_layers,
                };
                self.expect_err(e, |c| c.write(id, cfg.n_layers, len, &row, &row));
                self.expect_err(e, |c| c.view(id, cfg.n_layers).map(|_| ()));
            }
            12 if room > len => {
                let short = vec![F32::ONE; cfg.kv_dim - 1];
                let e = Error::ShapeMismatch {
                    expected: cfg.kv_dim,
                    found: cfg.kv_dim - 1,
                };
                self.expect_err(e, |c| c.write(id, 0, len, &row, &short));
            }
            13 => self.expect_err(oor(len + 1), |c| c.truncate(id, len + 1)),
            14 => {
                let n = cfg.max_seq_len - len + 1;
                let e = Error::SequenceTooLong {
                    len: cfg.max_seq_len + 1,
                    max: cfg.max_seq_len,
                };
                self.expect_err(e, |c| c.reserve(&[(id, n)]));
            }
            _ => {
                // Too many entries: one more than there are slots.
                let reqs = vec![(id, 0); cfg.max_seqs + 1];
                let e = Error::BatchTooLarge {
                    requested: cfg.max_seqs + 1,
                    max: cfg.max_seqs,
                };
                self.expect_err(e, |c| c.reserve(&reqs));
            }
        }
    }

    /// Compares everything observable with the model.
    pub fn check(&self) {
        let cfg = self.model.cfg;
        for s in &self.model.seqs {
            assert_eq!(self.cache.len(s.id), Ok(s.len));
            assert_eq!(self.cache.room(s.id), Ok(s.cells.len()));
            for layer in 0..cfg.n_layers {
                let v = self.cache.view(s.id, layer).unwrap();
                for (pos, cell) in s.cells.iter().enumerate() {
                    let (k, vv) = (bits(v.k(pos)), bits(v.v(pos)));
                    assert_eq!(k.len(), cfg.kv_dim);
                    assert_eq!(vv.len(), cfg.kv_dim);
                    if let Some(want) = &cell[layer] {
                        assert_eq!(
                            &k[..],
                            &want[..cfg.kv_dim],
                            "K seq {:?} layer {layer} pos {pos}",
                            s.id
                        );
                        assert_eq!(
                            &vv[..],
                            &want[cfg.kv_dim..],
                            "V seq {:?} layer {layer} pos {pos}",
                            s.id
                        );
                    } else {
                        assert!(pos >= s.len, "committed row never written");
                    }
                }
                assert!(v.k(s.cells.len()).is_empty());
                assert!(v.v(s.cells.len() + 7).is_empty());
            }
        }
        for &id in self.model.stale.iter().rev().take(4) {
            if self.model.seqs.iter().all(|s| s.id != id) {
                assert_eq!(
                    self.cache.len(id),
                    Err(Error::UnknownSequence { index: id.index() })
                );
            }
        }
        if let Some(free) = self.model.free_pages() {
            assert_eq!(self.cache.pool().unwrap().0, free, "free pages");
        }
        assert!(self.cache.audit(), "audit failed");
    }

    /// Frees every sequence; the pool must be full again.
    pub fn free_all(&mut self) {
        for id in self.ids() {
            self.model.free(id).unwrap();
            self.cache.free(id).unwrap();
        }
        self.check();
        if let Some((free, n)) = self.cache.pool() {
            assert_eq!(free, n, "leaked pages");
        }
    }

    /// Runs a schedule, checking after every op, then frees everything.
    pub fn run(&mut self, ops: &[Op]) {
        for op in ops {
            self.apply(op);
            self.check();
        }
        self.free_all();
    }

    /// Committed rows of every live sequence: (id, per layer, per pos, K ++ V bits).
    pub fn committed(&self) -> Vec<(SeqId, Vec<Vec<u32>>)> {
        self.model
            .seqs
            .iter()
            .map(|s| {
                let mut rows = Vec::new();
                for layer in 0..self.model.cfg.n_layers {
                    let v = self.cache.view(s.id, layer).unwrap();
                    for pos in 0..s.len {
                        let mut r = bits(v.k(pos));
                        r.extend(bits(v.v(pos)));
                        rows.push(r);
                    }
                }
                (s.id, rows)
            })
            .collect()
    }
}
