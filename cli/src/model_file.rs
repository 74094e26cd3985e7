//! Where the model file is and how its bytes get into memory.
//!
//! [`locate_model`] is the one place the lookup rule lives (`--model`, else
//! `$DETLLM_MODEL`, else the per-user cache); [`ModelFile`] holds the bytes
//! for as long as a [`crate::session::Session`] borrows them.

use crate::error::{CliError, CliResult};
use crate::output::hex;
use sha2::{Digest, Sha256};
use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// File name of the default model (SmolLM2-135M-Instruct, Q4_1).
pub const DEFAULT_MODEL: &str = "SmolLM2-135M-Instruct.Q4_1.gguf";

/// The value of environment variable `name`, with an empty value counted as
/// unset (as the shell's `${name:-default}` does).
fn env_nonempty(name: &str) -> Option<OsString> {
    std::env::var_os(name).filter(|v| !v.is_empty())
}

/// The per-user model cache, `${XDG_CACHE_HOME:-$HOME/.cache}/detllm` (an
/// empty `XDG_CACHE_HOME` counts as unset; without `HOME`, `./.cache`).
pub fn model_cache_dir() -> PathBuf {
    let cache = match env_nonempty("XDG_CACHE_HOME") {
        Some(dir) => PathBuf::from(dir),
        None => PathBuf::from(env_nonempty("HOME").unwrap_or_else(|| ".".into())).join(".cache"),
    };
    cache.join("detllm")
}

/// The model path: `--model` if given, else `$DETLLM_MODEL`, else
/// `${XDG_CACHE_HOME:-$HOME/.cache}/detllm/SmolLM2-135M-Instruct.Q4_1.gguf`.
/// Empty environment variables count as unset. `scripts/fetch-model.sh`
/// stores the model by the same rule (`${DETLLM_MODEL:-…}` and
/// `${XDG_CACHE_HOME:-$HOME/.cache}`), so a fetched model is found here.
pub fn locate_model(model_arg: Option<&Path>) -> PathBuf {
    match model_arg {
        Some(path) => path.to_path_buf(),
        None => match env_nonempty("DETLLM_MODEL") {
            Some(path) => PathBuf::from(path),
            None => model_cache_dir().join(DEFAULT_MODEL),
        },
    }
}

/// [`locate_model`], failing with how to fetch the model if the file is missing.
pub fn existing_model(model_arg: Option<&Path>) -> CliResult<PathBuf> {
    let path = locate_model(model_arg);
    if path.exists() {
        Ok(path)
    } else {
        Err(CliError::ModelNotFound(path))
    }
}

/// A model file's bytes: mapped read-only, or (for the commands that run
/// the model) read into anonymous memory that the kernel is asked to back
/// with 2 MiB pages.
pub struct ModelFile {
    map: memmap2::Mmap,
    path: PathBuf,
}

impl ModelFile {
    /// The file mapped read-only (commands that read only part of it).
    pub fn open_mapped(path: &Path) -> CliResult<ModelFile> {
        Self::open_with(path, false)
    }

    /// The file for running the model: every weight is read for every
    /// token, so it is read into anonymous memory advised for transparent
    /// huge pages (where the kernel has them), which spares the ~24 000
    /// page-table walks per token of a 4 KiB-page mapping (decode +5–7 % on
    /// the test VM; the resident size is the same, the file's bytes once).
    /// `DETLLM_MMAP=1`, or a failure, falls back to the plain mapping.
    pub fn open_for_run(path: &Path) -> CliResult<ModelFile> {
        Self::open_with(path, std::env::var_os("DETLLM_MMAP").is_none())
    }

    fn open_with(path: &Path, huge_pages: bool) -> CliResult<ModelFile> {
        let file = std::fs::File::open(path).map_err(CliError::at(path))?;
        let read = if huge_pages {
            read_anon(&file).ok()
        } else {
            None
        };
        let map = match read {
            Some(map) => map,
            None => map_file(&file).map_err(CliError::at(path))?,
        };
        Ok(ModelFile {
            map,
            path: path.to_path_buf(),
        })
    }

    /// The whole file.
    pub fn bytes(&self) -> &[u8] {
        &self.map
    }

    /// The path it was opened from.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// SHA-256 of the file, lowercase hex.
    pub fn sha256(&self) -> String {
        hex(&Sha256::digest(self.bytes()))
    }
}

#[allow(unsafe_code)]
fn map_file(file: &std::fs::File) -> std::io::Result<memmap2::Mmap> {
    // The file is opened read-only and detllm never writes it; another
    // process truncating it while it is mapped is outside what we guard.
    unsafe { memmap2::Mmap::map(file) }
}

/// The whole file read into a fresh anonymous mapping (advised for huge
/// pages on Linux), then made read-only.
fn read_anon(file: &std::fs::File) -> std::io::Result<memmap2::Mmap> {
    use std::io::Read;
    let len = usize::try_from(file.metadata()?.len()).map_err(std::io::Error::other)?;
    let mut map = memmap2::MmapOptions::new().len(len).map_anon()?;
    #[cfg(target_os = "linux")]
    let _ = map.advise(memmap2::Advice::HugePage); // only a hint
    (&*file).read_exact(&mut map)?;
    map.make_read_only()
}
