//! The GGUF reader and writer: gguf-py fixtures, round trips, and every malformed file answered with a typed error.
//!
//! One test crate per subsystem (each links the library once); each module
//! below was a test crate of its own and keeps its header.

#[path = "../support/mod.rs"]
mod support;

mod malformed;
mod malformed_model;
mod reader;
mod writer;
