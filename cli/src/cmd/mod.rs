//! One module per subcommand: its arguments and its `run`.

#![forbid(unsafe_code)]

pub mod bench;
pub mod bench_spec;
pub mod chat;
pub mod generate;
pub mod inspect;
pub mod perplexity;
pub mod tokenize;
pub mod verify;
