//! Every synchronization primitive the pool uses, in one place, so that the
//! loom model tests (`tests/pool_loom.rs`, built with `--cfg loom`) can swap
//! them all for loom's checked versions.
//!
//! The normal build re-exports `std` unchanged: nothing here adds code to it.
//! Under loom, which has no real time, the two timed waits become steps that
//! loom schedules: a busy-wait round is a yield, and an idle worker's 2 ms
//! spin budget is spent after one look, so the model explores both the
//! "seen while spinning" and the "seen after falling asleep" paths.

#![forbid(unsafe_code)]

#[cfg(loom)]
pub(super) use loom::{
    sync::atomic::{AtomicBool, AtomicPtr, AtomicUsize, Ordering},
    sync::{Arc, Condvar, Mutex},
    thread::{Builder, JoinHandle, yield_now},
};
pub(super) use std::sync::TryLockError;
#[cfg(not(loom))]
pub(super) use std::{
    sync::atomic::{AtomicBool, AtomicPtr, AtomicUsize, Ordering},
    sync::{Arc, Condvar, Mutex},
    thread::{Builder, JoinHandle, yield_now},
};

/// A pause instruction for one busy-wait round (a yield under loom).
#[inline]
pub(super) fn spin_loop() {
    #[cfg(loom)]
    loom::hint::spin_loop();
    #[cfg(not(loom))]
    core::hint::spin_loop();
}

/// How long an idle worker waits actively before it sleeps.
#[cfg(not(loom))]
const SPIN: std::time::Duration = std::time::Duration::from_millis(2);

/// An idle worker's spin budget, started when it begins waiting.
pub(super) struct SpinBudget {
    #[cfg(not(loom))]
    t0: std::time::Instant,
}

impl SpinBudget {
    /// Starts the budget now.
    #[inline]
    pub(super) fn start() -> Self {
        SpinBudget {
            #[cfg(not(loom))]
            t0: std::time::Instant::now(),
        }
    }

    /// Whether the worker should stop spinning and sleep, after `spins`
    /// rounds (the clock is read only every 64th round).
    #[inline]
    pub(super) fn spent(&self, spins: u32) -> bool {
        #[cfg(not(loom))]
        return spins.is_multiple_of(64) && self.t0.elapsed() >= SPIN;
        #[cfg(loom)]
        return {
            let _ = spins;
            true
        };
    }
}
