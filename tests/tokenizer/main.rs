//! The tokenizers and chat templates: llama.cpp's token ids (goldens, its test suite's vocabularies, the real models), synthetic vocabularies as properties, the fuzz seeds.
//!
//! One test crate per subsystem (each links the library once); each module
//! below was a test crate of its own and keeps its header.

#[path = "../support/mod.rs"]
mod support;

mod chat_templates;
mod fuzz_check;
mod golden;
mod llamacpp_suite;
mod real;
mod real_models;
mod synth;
