//! The audit trail: a durable store of every served choice's transcript
//! ([`store`]: SQLite, WAL, schema-versioned), signed receipts
//! ([`receipt`]: Ed25519 over the profile, the model's SHA-256, the
//! request's canonical digest and the final audit digest), the server's
//! writer thread ([`writer`], feature `serve`) and the offline commands
//! ([`cmd`]: `detllm audit list|show|export`, `detllm keygen`).
//! docs/AUDIT.md describes the whole.

#![forbid(unsafe_code)]
// Writing and signing are the server's: a build with `audit` but not
// `serve` (the offline commands) leaves them unused.
#![cfg_attr(not(feature = "serve"), allow(dead_code))]

pub mod cmd;
pub mod receipt;
pub mod store;
#[cfg(feature = "serve")]
pub mod writer;
