//! Where the tests find the real model and the generated fixtures, and what
//! they do when one is missing.
//!
//! The model path follows `scripts/fetch-model.sh` exactly: `$DETLLM_MODEL`
//! if set (and non-empty), else `$XDG_CACHE_HOME/detllm/<MODEL_NAME>` with
//! an unset or empty `XDG_CACHE_HOME` meaning `$HOME/.cache`. The generated
//! fixtures (the tiny gguf-py llama of `scripts/make-fixtures.sh`) live in
//! the same `detllm` cache directory.
//!
//! A missing file is a failure (a panic saying how to get it) when the run
//! requires the real data: `DETLLM_REQUIRE_MODEL` set to anything but `0`
//! or empty (`scripts/test.sh`, the README's test command, exports it), or
//! `CI` set (to anything but empty or `false`). Otherwise the test prints a
//! NOTICE and returns, so a bare `cargo test` on a fresh clone still works
//! offline.

use std::path::{Path, PathBuf};

/// The file name `scripts/fetch-model.sh` gives SmolLM2-135M-Instruct.
pub const MODEL_NAME: &str = "SmolLM2-135M-Instruct.Q4_1.gguf";

/// A non-empty environment variable.
fn var(name: &str) -> Option<std::ffi::OsString> {
    std::env::var_os(name).filter(|v| !v.is_empty())
}

/// `${XDG_CACHE_HOME:-$HOME/.cache}/detllm` (empty `XDG_CACHE_HOME` = unset).
pub fn cache_dir() -> PathBuf {
    let base = match var("XDG_CACHE_HOME") {
        Some(x) => PathBuf::from(x),
        None => PathBuf::from(var("HOME").expect("HOME is not set")).join(".cache"),
    };
    base.join("detllm")
}

/// Where the model is (or would be): the rule of `scripts/fetch-model.sh`.
pub fn model_location() -> PathBuf {
    match var("DETLLM_MODEL") {
        Some(p) => PathBuf::from(p),
        None => cache_dir().join(MODEL_NAME),
    }
}

/// Whether a missing model or fixture fails the test instead of skipping it.
pub fn required() -> bool {
    let on = |name: &str| var(name).is_some_and(|v| v != "0" && v != "false");
    on("DETLLM_REQUIRE_MODEL") || on("CI")
}

/// `Some(path)` if `path` is a file; else fails the test if [`required`],
/// or prints a NOTICE and gives `None` (the caller returns).
fn present(path: PathBuf, what: &str, how: &str) -> Option<PathBuf> {
    if path.is_file() {
        return Some(path);
    }
    if required() {
        panic!(
            "{what} not found at {} (DETLLM_REQUIRE_MODEL/CI make it required): {how}",
            path.display()
        );
    }
    eprintln!(
        "NOTICE: {what} not found at {}; skipping ({how})",
        path.display()
    );
    None
}

/// The real model (SmolLM2-135M-Instruct Q4_1), see the module docs.
pub fn path() -> Option<PathBuf> {
    present(
        model_location(),
        "SmolLM2 model",
        "fetch it with `bash scripts/fetch-model.sh` or point DETLLM_MODEL at it",
    )
}

/// The real model's bytes.
pub fn bytes() -> Option<Vec<u8>> {
    let p = path()?;
    Some(std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display())))
}

/// The tiny llama written by gguf-py: `$DETLLM_TINY_GGUF`, else
/// `<cache>/tiny-llama.gguf` (made by `scripts/make-fixtures.sh`, which
/// `scripts/test.sh` runs).
pub fn tiny_path() -> Option<PathBuf> {
    let p = match var("DETLLM_TINY_GGUF") {
        Some(p) => PathBuf::from(p),
        None => cache_dir().join("tiny-llama.gguf"),
    };
    present(
        p,
        "tiny gguf-py llama fixture",
        "make it with `bash scripts/make-fixtures.sh`",
    )
}

/// The repository's root, where `tests/data` and `scripts/` are: the manifest
/// directory of the library's tests, the parent of the CLI package's (`cli/`,
/// whose tests include this file too).
pub fn repo_root() -> PathBuf {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    if manifest.join("cli").join("Cargo.toml").is_file() {
        manifest.to_path_buf()
    } else {
        manifest.parent().expect("cli/ has a parent").to_path_buf()
    }
}

/// A committed reference file under `tests/data` (never optional).
pub fn data_path(name: &str) -> PathBuf {
    repo_root().join("tests/data").join(name)
}

/// A real Q4_K_M model of `scripts/fetch-real-model.sh NAME`, cached as
/// `<cache>/<file>`; missing: as [`path`] (fails when required, else skips).
pub fn real_model(file: &str, name: &str) -> Option<PathBuf> {
    present(
        cache_dir().join(file),
        file,
        &format!("fetch it with `bash scripts/fetch-real-model.sh {name}`"),
    )
}
