//! Model configuration, weights and the ragged-batch step.
