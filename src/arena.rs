//! [`Arena`]: typed slices carved from one caller-provided buffer.
//!
//! The caller owns all memory. Carving is all-or-nothing: a carve that does
//! not fit returns [`Error::ArenaExhausted`] and leaves the arena as it was.
//! Every carve is zeroed: by the arena ([`Arena::new`]), or already, for an
//! arena over a buffer checked all zero ([`Arena::over_zeroed`]), whose
//! carves are then not written until their user writes them.

#![forbid(unsafe_code)]

use crate::{Error, Result};
use bytemuck::Pod;

/// A bump allocator over a borrowed byte buffer.
///
/// ```
/// use detllm::{Arena, F32};
/// let mut buf = [0u8; 256];
/// let mut arena = Arena::new(&mut buf);
/// let xs: &mut [F32] = arena.alloc(16).unwrap();
/// assert_eq!(xs.len(), 16);
/// assert!(arena.alloc::<u64>(1000).is_err());
/// ```
pub struct Arena<'a> {
    rest: &'a mut [u8],
    used: usize,
    /// Every byte of `rest` is zero: carves need no zeroing.
    zeroed: bool,
}

impl<'a> Arena<'a> {
    /// An arena over `buf`.
    pub fn new(buf: &'a mut [u8]) -> Self {
        Arena {
            rest: buf,
            used: 0,
            zeroed: false,
        }
    }

    /// An arena over `buf` that, when every byte of `buf` is zero (checked
    /// by reading), does not zero its carves again. For a zeroed buffer
    /// fresh from the system (`vec![0u8; n]`), whose pages are mapped on
    /// first write, a carve nothing writes (a KV cache's unused pages, a
    /// sampler a command never calls) then costs no resident memory.
    ///
    /// ```
    /// use detllm::Arena;
    /// let mut buf = vec![0u8; 64];
    /// let mut arena = Arena::over_zeroed(&mut buf);
    /// assert!(arena.alloc::<u32>(4).unwrap().iter().all(|&x| x == 0));
    /// let mut dirty = [7u8; 64];
    /// let mut arena = Arena::over_zeroed(&mut dirty);
    /// assert!(arena.alloc::<u32>(4).unwrap().iter().all(|&x| x == 0));
    /// ```
    pub fn over_zeroed(buf: &'a mut [u8]) -> Self {
        let zeroed = buf.iter().all(|&b| b == 0);
        Arena {
            rest: buf,
            used: 0,
            zeroed,
        }
    }

    /// Bytes not yet carved (alignment padding of future carves not deducted).
    pub fn remaining(&self) -> usize {
        self.rest.len()
    }

    /// Bytes carved so far, padding included.
    pub fn used(&self) -> usize {
        self.used
    }

    /// Worst-case bytes a carve of `n` values of `T` takes, padding included;
    /// summing these over a plan gives a buffer size that always suffices.
    pub const fn bytes_for<T>(n: usize) -> Option<usize> {
        match n.checked_mul(core::mem::size_of::<T>()) {
            Some(b) => b.checked_add(core::mem::align_of::<T>() - 1),
            None => None,
        }
    }

    /// A zeroed slice of `n` values of `T`.
    pub fn alloc<T: Pod>(&mut self, n: usize) -> Result<&'a mut [T]> {
        let size = n
            .checked_mul(core::mem::size_of::<T>())
            .ok_or(Error::SizeOverflow)?;
        let align = core::mem::align_of::<T>();
        let addr = self.rest.as_ptr() as usize;
        let pad = (align - addr % align) % align;
        let need = pad.checked_add(size).ok_or(Error::SizeOverflow)?;
        if need > self.rest.len() {
            return Err(Error::ArenaExhausted {
                requested: need,
                available: self.rest.len(),
            });
        }
        let rest = core::mem::take(&mut self.rest);
        let (head, tail) = rest.split_at_mut(need);
        self.rest = tail;
        self.used += need;
        let bytes = &mut head[pad..];
        if !self.zeroed {
            bytes.fill(0);
        }
        // Alignment and size were arranged above, so the cast cannot fail.
        bytemuck::try_cast_slice_mut(bytes).map_err(|_| Error::SizeOverflow)
    }

    /// A slice of `n` copies of `value`.
    pub fn alloc_filled<T: Pod>(&mut self, n: usize, value: T) -> Result<&'a mut [T]> {
        let s = self.alloc::<T>(n)?;
        s.fill(value);
        Ok(s)
    }

    /// A copy of `src` in the arena.
    pub fn alloc_copy<T: Pod>(&mut self, src: &[T]) -> Result<&'a mut [T]> {
        let s = self.alloc::<T>(src.len())?;
        s.copy_from_slice(src);
        Ok(s)
    }
}
