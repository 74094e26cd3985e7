//! The real models and the committed references: llama.cpp's token ids and logits for SmolLM2, Qwen2.5 and Gemma 3 and the synthetic architectures, invariance on the real models, the synthetic audit transcript.
//!
//! One test crate per subsystem (each links the library once); each module
//! below was a test crate of its own and keeps its header.

#[path = "../support/mod.rs"]
mod support;

mod arch;
mod logits;
mod real_models_invariance;
mod smollm2_greedy;
mod transcript_synth;
