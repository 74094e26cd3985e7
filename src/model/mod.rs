//! Model configuration, weights and the ragged-batch step.

mod config;
mod engine;
pub mod synth;
mod weights;

pub use config::{Arch, Config};
pub use engine::{Engine, Entry, KvBuild, Limits};
pub use weights::{LayerRefs, Model, TensorRef};
