//! Soft binary32 and the correctly rounded elementary functions, each against its oracle (Berkeley SoftFloat, CORE-MATH, libm; behind the `oracle` feature) and as properties.
//!
//! One test crate per subsystem (each links the library once); each module
//! below was a test crate of its own and keeps its header.

#[path = "../support/mod.rs"]
mod support;

mod exp;
mod fmt;
mod gelu;
mod ln;
mod oracle;
mod pow;
mod props;
mod regressions;
mod silu;
mod sincos;
mod smoke;
mod tanh;
