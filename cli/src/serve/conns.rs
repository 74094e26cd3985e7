//! Idle connections cannot starve the server (slowloris): the accept loop
//! admits each connection through a [`Registry`], which knows which open
//! connections have not yet sent a complete request head ("fresh").
//!
//! * When every connection slot (`--max-connections`) is taken, the oldest
//!   fresh connection is closed to make room; only when every open
//!   connection is serving a request does a new one wait.
//! * One client address holds at most `--max-connections-per-addr`; past
//!   that its own oldest fresh connection is closed, or the new one is
//!   refused if it has none.
//! * A connection that has not sent a request head within
//!   `--first-request-timeout` seconds is closed.
//!
//! So a real request is answered as on an idle server however many idle
//! connections are open; memory per idle connection is hyper's read
//! buffer and one task. Verified by `cli/tests/slowloris.rs` (1,000 idle
//! connections, then a real request; an idle connection closed at its
//! deadline) and the unit tests below.

#![forbid(unsafe_code)]

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use tokio::sync::oneshot;

/// One open connection.
struct Entry {
    addr: IpAddr,
    /// Set once the connection sent its first request head.
    started: Arc<AtomicBool>,
    /// Closes the connection when sent (or dropped).
    evict: Option<oneshot::Sender<()>>,
}

/// The open connections, oldest first.
pub struct Registry {
    conns: Mutex<BTreeMap<u64, Entry>>,
    next: std::sync::atomic::AtomicU64,
    per_addr: usize,
}

/// A connection's place in the registry; dropping it removes the entry.
pub struct Ticket {
    registry: Arc<Registry>,
    id: u64,
    /// Set by the service when a request head arrives.
    pub started: Arc<AtomicBool>,
    /// Fires when the registry closes this connection.
    pub evicted: oneshot::Receiver<()>,
}

impl Drop for Ticket {
    fn drop(&mut self) {
        self.registry.lock().remove(&self.id);
    }
}

impl Registry {
    /// A registry allowing `per_addr` connections per client address.
    pub fn new(per_addr: usize) -> Arc<Registry> {
        Arc::new(Registry {
            conns: Mutex::new(BTreeMap::new()),
            next: std::sync::atomic::AtomicU64::new(0),
            per_addr: per_addr.max(1),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<u64, Entry>> {
        self.conns.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Admits a connection from `addr`, first closing that address's oldest
    /// fresh connection if it is at its limit; `None` (refuse it) if it is
    /// at its limit with none fresh.
    pub fn admit(self: &Arc<Self>, addr: IpAddr) -> Option<Ticket> {
        let mut conns = self.lock();
        let from_addr = conns.values().filter(|e| e.addr == addr).count();
        if from_addr >= self.per_addr && !evict_oldest_fresh(&mut conns, Some(addr)) {
            return None;
        }
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let started = Arc::new(AtomicBool::new(false));
        let (tx, rx) = oneshot::channel();
        conns.insert(
            id,
            Entry {
                addr,
                started: started.clone(),
                evict: Some(tx),
            },
        );
        Some(Ticket {
            registry: self.clone(),
            id,
            started,
            evicted: rx,
        })
    }

    /// Closes the oldest fresh connection; false if there is none.
    pub fn evict_oldest_fresh(&self) -> bool {
        evict_oldest_fresh(&mut self.lock(), None)
    }
}

/// Closes the oldest fresh connection (of `addr`, if given).
fn evict_oldest_fresh(conns: &mut BTreeMap<u64, Entry>, addr: Option<IpAddr>) -> bool {
    let victim = conns.values_mut().find(|e| {
        addr.is_none_or(|a| e.addr == a) && !e.started.load(Ordering::Acquire) && e.evict.is_some()
    });
    match victim.and_then(|e| e.evict.take()) {
        Some(tx) => {
            let _ = tx.send(());
            true
        }
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_oldest_fresh_connection_is_evicted_and_started_ones_never() {
        let r = Registry::new(3);
        let a: IpAddr = "127.0.0.1".parse().unwrap();
        let b: IpAddr = "127.0.0.2".parse().unwrap();
        let mut t0 = r.admit(a).expect("first");
        let mut t1 = r.admit(a).expect("second");
        let mut t2 = r.admit(a).expect("third");
        t0.started.store(true, Ordering::Release);
        // a is at its limit: its oldest fresh one (t1, not the started t0) goes.
        let mut t3 = r.admit(a).expect("fourth, after an eviction");
        assert!(t0.evicted.try_recv().is_err());
        assert!(t1.evicted.try_recv().is_ok());
        assert!(t2.evicted.try_recv().is_err());
        drop(t1);
        let tb = r.admit(b).expect("another address is not limited by a");
        // Globally the oldest fresh is t2.
        assert!(r.evict_oldest_fresh());
        assert!(t2.evicted.try_recv().is_ok());
        drop(t2);
        t3.started.store(true, Ordering::Release);
        let t4 = r.admit(a).expect("a has room again");
        t4.started.store(true, Ordering::Release);
        // a: t0, t3, t4 all started: refused.
        assert!(r.admit(a).is_none());
        assert!(t3.evicted.try_recv().is_err());
        drop(tb);
    }
}
