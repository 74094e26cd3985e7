//! Helpers of the CLI package's integration tests: [`cli`] runs the `detllm`
//! binary; [`model`] is the library's test helper of the same name (where the
//! real model and the committed references are, and what a test does when one
//! is missing), shared by path.
#![allow(dead_code)] // each test binary uses a different part

pub mod cli;
#[path = "../../../tests/support/model.rs"]
pub mod model;
