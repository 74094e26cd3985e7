//! Grammars compile off the engine thread.
//!
//! The contract: a request's constraint (`response_format`, `grammar`,
//! `tools`) is compiled here, on the HTTP side, before the request is
//! submitted; the worker thread is handed the [`Compiled`] grammar and only
//! attaches it (`crate::constrain::Grammars::attach`). It holds no
//! compiler, so a heavy schema never delays an engine step.
//!
//! Each compile runs on tokio's blocking pool, at most
//! [`MAX_CONCURRENT_COMPILES`] at a time: a flood of schemas waits for a
//! permit rather than taking every blocking thread. A permit is held until
//! its compile has ended, even when the client has gone away meanwhile.
//!
//! Compiling is a pure function of the grammar text (the engine's limits
//! are counts, `crate::constrain`), so where and when it runs changes no
//! mask. A grammar that does not compile is the 400 it always was: the
//! field that gave it, and `super::tools::compile_error`'s message.
//!
//! Verified by `serve::http`'s router tests (a constrained request waiting
//! for its compile holds no other request back) and, on SmolLM2, by
//! `cli/tests/serve.rs` (constrained answers under load equal solo runs; a
//! bad schema or grammar is a 400 naming its field and the server keeps
//! serving).

#![forbid(unsafe_code)]

use super::error::ApiError;
use crate::constrain::{Compiled, Compiler, Spec};
use std::sync::Arc;
use tokio::sync::Semaphore;

/// Compiles running at once at most.
pub const MAX_CONCURRENT_COMPILES: usize = 2;

/// The model's compiler and the permits that bound its use.
pub struct Compiles {
    compiler: Compiler,
    permits: Arc<Semaphore>,
}

impl Compiles {
    /// Compiles with `compiler`, [`MAX_CONCURRENT_COMPILES`] at a time.
    pub fn new(compiler: Compiler) -> Compiles {
        Compiles {
            compiler,
            permits: Arc::new(Semaphore::new(MAX_CONCURRENT_COMPILES)),
        }
    }

    /// The permits (for tests that hold them to stall every compile).
    #[cfg(test)]
    pub fn permits(&self) -> &Arc<Semaphore> {
        &self.permits
    }

    /// A request's constraint (`(field, spec)`, as `GenRequest` holds it)
    /// compiled, or a 400 naming `field`.
    pub async fn compile(
        &self,
        constraint: Option<&(&'static str, Spec)>,
    ) -> Result<Option<Compiled>, ApiError> {
        let Some((field, spec)) = constraint else {
            return Ok(None);
        };
        let permit = self
            .permits
            .clone()
            .acquire_owned()
            .await
            .map_err(|_| ApiError::internal("the grammar compiler is closed"))?;
        let compiler = self.compiler.clone();
        let job = spec.clone();
        let compiled = tokio::task::spawn_blocking(move || {
            let _permit = permit;
            compiler.compile(&job)
        })
        .await
        .map_err(|e| ApiError::internal(format!("the grammar compiler failed: {e}")))?;
        compiled.map(Some).map_err(|e| {
            let why = super::tools::compile_error(field, spec, &e.to_string());
            ApiError::invalid(field, why)
        })
    }
}
