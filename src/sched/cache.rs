//! The prefix cache: full KV pages of earlier prompts, kept as forked
//! sequences of the paged cache, bounded and evicted least recently used.
//!
//! An entry is a sequence of the engine holding the first `len` tokens of a
//! prompt (`len` a multiple of the page size, so it holds only full pages,
//! shared copy-on-write with whoever forked it) and those tokens. A request
//! whose history starts with `m` of an entry's tokens forks the entry, cuts
//! the fork to `m` and prefills only the rest: the cached rows are the rows a
//! cold prefill computes (chunking and batch invariance), so the result is
//! the same bits. Each entry takes one of the engine's sequence slots.

#![forbid(unsafe_code)]

use crate::kv::{PagedCache, SeqId};
use crate::model::Engine;
use crate::{Arena, Result};

/// One cached prefix.
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
#[repr(C)]
struct CacheEntry {
    /// Clock value of its last use (insert or hit).
    last_used: u64,
    /// Its sequence (valid when `live == 1`).
    seq: SeqId,
    /// Cached tokens (a multiple of the page size).
    len: u32,
    live: u32,
}

/// A cache entry sharing a prefix with a history.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Hit {
    /// The entry.
    pub entry: usize,
    /// Its sequence.
    pub seq: SeqId,
    /// Tokens it holds.
    pub len: usize,
    /// Leading tokens it shares with the history.
    pub common: usize,
}

/// Bounded LRU set of cached prompt prefixes.
pub(crate) struct PrefixCache<'a> {
    entries: &'a mut [CacheEntry], // (max_cached)
    tokens: &'a mut [u32],         // (max_cached, max_len) each entry's tokens
    max_len: usize,
    clock: u64,
}

type Eng<'a> = Engine<'a, PagedCache<'a>>;

impl<'a> PrefixCache<'a> {
    /// Arena bytes for `max_cached` entries of up to `max_len` tokens.
    pub fn bytes_required(max_cached: usize, max_len: usize) -> Option<usize> {
        Arena::bytes_for::<CacheEntry>(max_cached)?
            .checked_add(Arena::bytes_for::<u32>(max_cached.checked_mul(max_len)?)?)
    }

    /// An empty cache carved from `arena`.
    pub fn new(arena: &mut Arena<'a>, max_cached: usize, max_len: usize) -> Result<Self> {
        let entries = arena.alloc::<CacheEntry>(max_cached)?;
        let tokens = arena.alloc::<u32>(
            max_cached
                .checked_mul(max_len)
                .ok_or(crate::Error::SizeOverflow)?,
        )?;
        Ok(PrefixCache {
            entries,
            tokens,
            max_len,
            clock: 0,
        })
    }

    /// Live entries.
    pub fn len(&self) -> usize {
        self.entries.iter().filter(|e| e.live == 1).count()
    }

    fn tokens_of(&self, i: usize) -> &[u32] {
        let len = self.entries.get(i).map_or(0, |e| e.len as usize);
        let start = i * self.max_len;
        self.tokens.get(start..start + len).unwrap_or(&[])
    }

    /// The live entry sharing the longest prefix with `history` (`None` if
    /// none shares a token). Ties go to the lowest entry.
    pub fn lookup(&self, history: &[u32]) -> Option<Hit> {
        let mut best: Option<Hit> = None;
        for (i, e) in self.entries.iter().enumerate() {
            if e.live != 1 {
                continue;
            }
            let common = self
                .tokens_of(i)
                .iter()
                .zip(history)
                .take_while(|(a, b)| a == b)
                .count();
            if common > 0 && best.is_none_or(|b| common > b.common) {
                best = Some(Hit {
                    entry: i,
                    seq: e.seq,
                    len: e.len as usize,
                    common,
                });
            }
        }
        best
    }

    /// Marks entry `i` used now.
    pub fn touch(&mut self, i: usize) {
        self.clock += 1;
        if let Some(e) = self.entries.get_mut(i) {
            e.last_used = self.clock;
        }
    }

    /// Caches the first `prefix.len()` tokens of `seq` (which holds at least
    /// that many, equal to `prefix`). Nothing is added if an entry already
    /// starts with `prefix`; an entry that `prefix` extends is replaced; the
    /// least recently used entry makes room. Returns whether an entry was added.
    pub fn insert(&mut self, eng: &mut Eng<'a>, seq: SeqId, prefix: &[u32]) -> Result<bool> {
        let n = prefix.len();
        if self.entries.is_empty() || n == 0 || n > self.max_len {
            return Ok(false);
        }
        for i in 0..self.entries.len() {
            if self.entries[i].live != 1 {
                continue;
            }
            let have = self.tokens_of(i);
            if have.len() >= n && have[..n] == *prefix {
                self.touch(i);
                return Ok(false);
            }
            if have.len() < n && prefix[..have.len()] == *have {
                self.evict(eng, i)?;
            }
        }
        let i = match self.entries.iter().position(|e| e.live != 1) {
            Some(i) => i,
            None => {
                self.evict_lru(eng)?;
                match self.entries.iter().position(|e| e.live != 1) {
                    Some(i) => i,
                    None => return Ok(false),
                }
            }
        };
        let child = eng.fork(seq)?;
        if let Err(e) = eng.truncate(child, n) {
            eng.free(child)?;
            return Err(e);
        }
        let start = i * self.max_len;
        if let Some(dst) = self.tokens.get_mut(start..start + n) {
            dst.copy_from_slice(prefix);
        }
        self.clock += 1;
        self.entries[i] = CacheEntry {
            last_used: self.clock,
            seq: child,
            len: n as u32,
            live: 1,
        };
        Ok(true)
    }

    /// Frees entry `i`.
    fn evict(&mut self, eng: &mut Eng<'a>, i: usize) -> Result<()> {
        if let Some(e) = self.entries.get_mut(i).filter(|e| e.live == 1) {
            e.live = 0;
            eng.free(e.seq)?;
        }
        Ok(())
    }

    /// Frees the least recently used entry; false if the cache is empty.
    pub fn evict_lru(&mut self, eng: &mut Eng<'a>) -> Result<bool> {
        let lru = self
            .entries
            .iter()
            .enumerate()
            .filter(|(_, e)| e.live == 1)
            .min_by_key(|(_, e)| e.last_used)
            .map(|(i, _)| i);
        match lru {
            Some(i) => self.evict(eng, i).map(|()| true),
            None => Ok(false),
        }
    }

    /// Frees every entry.
    pub fn clear(&mut self, eng: &mut Eng<'a>) -> Result<()> {
        for i in 0..self.entries.len() {
            self.evict(eng, i)?;
        }
        Ok(())
    }

    /// Pages that evicting every entry would return to the pool: those whose
    /// one owner is an entry. Cost `O(entries · pages_per_seq)`.
    pub fn evictable_pages(&self, kv: &PagedCache<'_>) -> usize {
        self.entries
            .iter()
            .filter(|e| e.live == 1)
            .flat_map(|e| kv.page_table(e.seq).unwrap_or(&[]))
            .filter(|&&p| kv.refcount(p) == Some(1))
            .count()
    }

    /// Distinct pages the entries hold. A page shared by two sequences sits
    /// at the same index of both page tables (a fork copies the table, a
    /// copy-on-write replaces the entry), so only that index of the earlier
    /// entries is compared: cost `O(entries² · pages_per_seq)`.
    pub fn pages(&self, kv: &PagedCache<'_>) -> usize {
        let table = |e: &CacheEntry| {
            if e.live == 1 {
                kv.page_table(e.seq).unwrap_or(&[])
            } else {
                &[]
            }
        };
        let mut n = 0;
        for (i, e) in self.entries.iter().enumerate() {
            for (j, p) in table(e).iter().enumerate() {
                let seen = self.entries[..i].iter().any(|f| table(f).get(j) == Some(p));
                n += usize::from(!seen);
            }
        }
        n
    }
}
