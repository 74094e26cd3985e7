//! Model configuration, weights and the ragged-batch step.

mod config;
mod engine;
pub mod eval;
mod generate;
pub mod selftest;
pub mod synth;
mod weights;

pub use config::{Arch, Config};
pub use engine::{Engine, Entry, KvBuild, Limits};
pub use generate::{Generated, generate};
pub use weights::{LayerRefs, Model, TensorRef};
