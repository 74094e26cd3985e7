//! The engine, KV cache, sampler and scheduler: batch, chunking and schedule invariance as properties, the arena layout, the KV cache against its reference model, the sampler against its reference, the self-test.
//!
//! One test crate per subsystem (each links the library once); each module
//! below was a test crate of its own and keeps its header.

#[path = "../support/mod.rs"]
mod support;

mod constrain_props;
mod kv_attention;
mod kv_model;
mod layout;
mod props;
mod sample;
mod sched_props;
mod selftest;
mod spec_props;
