//! Model configuration, weights and the ragged-batch step.
//!
//! `config` (hyper-parameters), `weights` (tensors bound zero-copy, one
//! [`LayerWeights`] per block), `engine` (limits, the step's transaction),
//! `run_state` (the buffers and their one layout), `phases` (the step's
//! phases, top to bottom), `generate` (prefill + sampling loop).

#![forbid(unsafe_code)]

mod config;
mod engine;
pub mod eval;
mod generate;
mod phases;
mod run_state;
pub mod synth;
mod weights;

pub use config::{Arch, Config};
pub use engine::{Engine, Entry, KvBuild, Limits};
pub(crate) use generate::start_history;
pub use generate::{Generated, generate};
pub use weights::{LayerRefs, LayerWeights, Model, TensorRef};
