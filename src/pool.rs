//! [`ThreadPool`]: the `std` implementation of [`Parallel`], built for many
//! short parallel regions (a decode step has about 250 of them, each tens of
//! microseconds long).
//!
//! The calling thread takes part in every region, and idle workers spin for a
//! short while before they sleep, so handing a region to a worker costs an
//! atomic store and a cache-line transfer rather than a futex wake-up (which
//! takes tens of microseconds on a virtual machine). Chunks are claimed with
//! one `fetch_add` each, so a slow thread only delays its own chunks.
//!
//! Results never depend on the pool: [`Parallel`] only ever splits
//! independent outputs.
//!
//! ## Unsafe review
//! One of the three places of the crate allowed `unsafe` (see the crate
//! docs' list). A region is published to the workers as a type-erased pointer to
//! a [`Region`] on the caller's stack, with a lifetime the compiler cannot
//! see. It is sound because:
//! * a worker touches a region only after joining it, and joins only while
//!   the region is open: one compare-and-swap on `entry` that fails once the
//!   caller has closed it. [`ThreadPool::for_each_chunk`] closes the region
//!   after running out of chunks itself, which tells it how many workers
//!   joined, and does not return (or unwind) before that many have reported,
//!   through `done`, that they stopped touching it. A worker that joined
//!   read `ctx` and `run` after its join, so it sees this region's; one that
//!   comes late finds the region closed and leaves it alone. So the caller
//!   never waits for a worker that is not running (on a busy machine, a
//!   worker the OS has not scheduled yet);
//! * chunk `i` is built from the raw parts of `data` only by the thread whose
//!   `fetch_add` returned `i`, so the `&mut` chunks are disjoint and in bounds
//!   (`i < n_chunks`, the last chunk clipped to the slice's end);
//! * `T: Send` lets chunks move to other threads, and `f: Sync` lets them
//!   share the closure;
//! * one region at a time: the caller holds `busy` for the whole region, and
//!   a thread that finds it held (another caller, or `f` itself calling the
//!   pool) runs its region serially instead of waiting, so nothing deadlocks;
//! * a panic in `f` is caught on whichever thread ran it, the region is still
//!   waited for, and the panic is re-raised on the caller (after `busy` is
//!   released, so it is never poisoned).
//!
//! ## How it is verified
//! All synchronization goes through [`sync`] (atomics, mutexes, the condition
//! variable, thread spawn and yield, the spin budget), which `--cfg loom`
//! swaps for loom's checked primitives: `tests/pool_loom.rs` explores every
//! interleaving (to a preemption bound) of the caller and one or two workers
//! over one or two regions, checking each chunk runs once, no access to the
//! region after it returns, no lost wake-up or deadlock, panics re-raised.
//! Miri runs `tests/pool.rs` (undefined behaviour, data races, bounds of the
//! raw chunks) and ThreadSanitizer runs it and the threaded engine tests;
//! `scripts/unsafe-check.sh` runs all three, `docs/UNSAFE.md` lists each
//! `unsafe` with its check.
#![allow(unsafe_code)]

mod sync;

use crate::parallel::{Parallel, Serial};
use std::boxed::Box;
use std::panic::{AssertUnwindSafe, catch_unwind, resume_unwind};
use std::vec::Vec;
use sync::Ordering::*;
use sync::{
    Arc, AtomicBool, AtomicPtr, AtomicUsize, Builder, Condvar, JoinHandle, Mutex, SpinBudget,
    TryLockError,
};

/// Busy-wait rounds before a waiting thread starts yielding its core (so an
/// oversubscribed machine still makes progress).
const BUSY_ROUNDS: u32 = 1 << 12;

/// One round of active waiting: a pause instruction at first, then a yield.
fn backoff(round: u32) {
    if round < BUSY_ROUNDS {
        sync::spin_loop();
    } else {
        sync::yield_now();
    }
}

/// One parallel region, on the caller's stack.
struct Region<'a, T> {
    base: *mut T,
    len: usize,
    chunk_len: usize,
    n_chunks: usize,
    f: &'a (dyn Fn(usize, &mut [T]) + Sync),
}

/// The region's chunk runner with `T` erased.
type RunFn = unsafe fn(*const (), &AtomicUsize);

/// Claims and runs chunks of the region at `ctx` until none is left.
///
/// # Safety
/// `ctx` points to a live `Region<T>` whose chunks are claimed only through
/// `next`.
unsafe fn run_chunks<T>(ctx: *const (), next: &AtomicUsize) {
    // SAFETY: the caller keeps the region alive until every thread reported.
    let r = unsafe { &*ctx.cast::<Region<'_, T>>() };
    loop {
        let i = next.fetch_add(1, Relaxed);
        if i >= r.n_chunks {
            return;
        }
        let start = i * r.chunk_len;
        let len = r.chunk_len.min(r.len - start);
        // SAFETY: `i` was claimed by this thread alone, `start + len ≤ r.len`,
        // and `base..base + len` is the caller's `&mut [T]`.
        let chunk = unsafe { core::slice::from_raw_parts_mut(r.base.add(start), len) };
        (r.f)(i, chunk);
    }
}

struct Shared {
    /// Generation of the current region; bumped to publish one.
    generation: AtomicUsize,
    /// The current region (a `Region<T>`) and its runner.
    ctx: AtomicPtr<()>,
    run: Mutex<Option<RunFn>>,
    /// Next chunk index to claim.
    next: AtomicUsize,
    /// Workers that joined the current region (low bits), and [`CLOSED`]
    /// once the caller has closed it to latecomers.
    entry: AtomicUsize,
    /// Workers finished with the current region (each one that joined).
    done: AtomicUsize,
    /// A worker's closure panicked in the current region.
    panicked: AtomicBool,
    quit: AtomicBool,
    /// Held by the thread running a region; a second caller (another thread,
    /// or a region's closure calling the pool again) runs serially instead.
    busy: Mutex<()>,
    /// Workers asleep (or about to be), and where they sleep.
    sleeping: AtomicUsize,
    lock: Mutex<()>,
    wake: Condvar,
}

/// The bit of `Shared::entry` that closes a region to joining workers.
const CLOSED: usize = 1 << (usize::BITS - 1);

/// A pool of `n - 1` worker threads plus the calling thread (feature `std`).
pub struct ThreadPool {
    shared: Arc<Shared>,
    workers: Vec<JoinHandle<()>>,
    n: usize,
}

impl ThreadPool {
    /// A pool running regions on `n` threads (at least 1): the caller and
    /// `n - 1` workers.
    pub fn new(n: usize) -> std::io::Result<Self> {
        let n = n.max(1);
        let shared = Arc::new(Shared {
            generation: AtomicUsize::new(0),
            ctx: AtomicPtr::new(core::ptr::null_mut()),
            run: Mutex::new(None),
            next: AtomicUsize::new(0),
            entry: AtomicUsize::new(CLOSED),
            done: AtomicUsize::new(0),
            panicked: AtomicBool::new(false),
            quit: AtomicBool::new(false),
            busy: Mutex::new(()),
            sleeping: AtomicUsize::new(0),
            lock: Mutex::new(()),
            wake: Condvar::new(),
        });
        let mut pool = ThreadPool {
            shared,
            workers: Vec::new(),
            n,
        };
        for k in 1..n {
            let s = Arc::clone(&pool.shared);
            let h = Builder::new()
                .name(std::format!("detllm-{k}"))
                .spawn(move || worker(&s))?;
            pool.workers.push(h);
        }
        Ok(pool)
    }

    fn wake_all(&self) {
        let s = &*self.shared;
        if s.sleeping.load(SeqCst) > 0 {
            let _g = s.lock.lock().unwrap_or_else(|e| e.into_inner());
            s.wake.notify_all();
        }
    }
}

/// Waits for a generation other than `seen`; `None` when told to quit.
fn wait_for_work(s: &Shared, seen: usize) -> Option<usize> {
    let budget = SpinBudget::start();
    let mut spins = 0u32;
    loop {
        let g = s.generation.load(Acquire);
        if g != seen {
            return Some(g);
        }
        if s.quit.load(Acquire) {
            return None;
        }
        spins = spins.saturating_add(1);
        if !budget.spent(spins) {
            backoff(spins);
            continue;
        }
        let mut g = s.lock.lock().unwrap_or_else(|e| e.into_inner());
        s.sleeping.fetch_add(1, SeqCst);
        // Against the caller's `generation.fetch_add` then `sleeping.load`:
        // either it sees us counted in `sleeping` (and notifies under `lock`,
        // which we hold until `wait`), or we see its new generation. An RMW
        // reads the latest generation whatever the ordering, so this holds
        // even where `SeqCst` is only acquire-release (as loom models it).
        while s.generation.fetch_add(0, SeqCst) == seen && !s.quit.load(SeqCst) {
            g = s.wake.wait(g).unwrap_or_else(|e| e.into_inner());
        }
        s.sleeping.fetch_sub(1, SeqCst);
    }
}

/// Joins the open region, if one is open: whether this worker may run it
/// (and must then report through `done`).
fn join(s: &Shared) -> bool {
    let mut e = s.entry.load(Relaxed);
    loop {
        if e & CLOSED != 0 {
            return false;
        }
        match s.entry.compare_exchange(e, e + 1, Acquire, Relaxed) {
            Ok(_) => return true,
            Err(now) => e = now,
        }
    }
}

fn worker(s: &Shared) {
    // Generation 0 is the pool's start: a region published before this
    // thread got here is still seen as new.
    let mut seen = 0;
    while let Some(g) = wait_for_work(s, seen) {
        seen = g;
        if !join(s) {
            continue;
        }
        let run = *s.run.lock().unwrap_or_else(|e| e.into_inner());
        let ctx = s.ctx.load(Acquire);
        if let Some(run) = run {
            // SAFETY: `ctx` and `run` were published before the region
            // opened, and this worker joined it while open; the caller waits
            // for every joined worker's `done` before the region dies.
            let r = catch_unwind(AssertUnwindSafe(|| unsafe { run(ctx, &s.next) }));
            if r.is_err() {
                s.panicked.store(true, Release);
            }
        }
        s.done.fetch_add(1, Release);
    }
}

impl Parallel for ThreadPool {
    fn threads(&self) -> usize {
        self.n
    }

    fn for_each_chunk<T: Send>(
        &self,
        data: &mut [T],
        chunk_len: usize,
        f: &(dyn Fn(usize, &mut [T]) + Sync),
    ) {
        let chunk_len = chunk_len.max(1);
        let n_chunks = data.len().div_ceil(chunk_len);
        if self.workers.is_empty() || n_chunks <= 1 {
            return Serial.for_each_chunk(data, chunk_len, f);
        }
        let s = &*self.shared;
        let busy = match s.busy.try_lock() {
            Ok(g) => g,
            Err(TryLockError::Poisoned(e)) => e.into_inner(),
            Err(TryLockError::WouldBlock) => return Serial.for_each_chunk(data, chunk_len, f),
        };
        let region = Region {
            base: data.as_mut_ptr(),
            len: data.len(),
            chunk_len,
            n_chunks,
            f,
        };
        let ctx = (&raw const region).cast::<()>().cast_mut();
        *s.run.lock().unwrap_or_else(|e| e.into_inner()) = Some(run_chunks::<T> as RunFn);
        s.ctx.store(ctx, Release);
        s.next.store(0, Relaxed);
        s.done.store(0, Relaxed);
        s.panicked.store(false, Relaxed);
        // Open to joining workers (it was closed since the last region).
        s.entry.store(0, Release);
        s.generation.fetch_add(1, SeqCst);
        self.wake_all();
        // SAFETY: `region` lives on this frame until every worker is done.
        let mine = catch_unwind(AssertUnwindSafe(|| unsafe {
            run_chunks::<T>(ctx, &s.next)
        }));
        // No chunk is left to claim: close the region, then wait for the
        // workers that joined it.
        let joined = s.entry.fetch_or(CLOSED, AcqRel) & !CLOSED;
        let mut round = 0u32;
        while s.done.load(Acquire) < joined {
            backoff(round);
            round = round.saturating_add(1);
        }
        let worker_panicked = s.panicked.load(Acquire);
        // Released before re-raising, so that `busy` is never poisoned.
        drop(busy);
        if let Err(p) = mine {
            resume_unwind(p);
        }
        if worker_panicked {
            resume_unwind(Box::new("a detllm pool worker panicked"));
        }
    }
}

impl Drop for ThreadPool {
    fn drop(&mut self) {
        self.shared.quit.store(true, SeqCst);
        self.wake_all();
        {
            // A worker between its check and its wait holds the lock.
            let _g = self.shared.lock.lock().unwrap_or_else(|e| e.into_inner());
            self.shared.wake.notify_all();
        }
        for h in self.workers.drain(..) {
            let _ = h.join();
        }
    }
}
