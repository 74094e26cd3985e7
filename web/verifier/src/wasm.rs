//! The C-ABI exports the page calls, and the four functions it imports
//! (module `env`) to hear progress and the verdict. No binding generator:
//! the page's JavaScript (`web/verifier.js`) writes the model and the job
//! into memory it got from [`dv_alloc`] and calls [`dv_verify`], which
//! runs to the end on the Web Worker's thread and reports through the
//! imports as it goes.
//!
//! Unsafe code, reviewed: the exports take pointers the page got from
//! [`dv_alloc`] with the lengths it asked for, and read them as byte
//! slices for the duration of the call (`from_raw_parts`, alive and
//! unaliased because the page writes them before the call and the module
//! is single-threaded); the imports are called with pointers to live
//! slices and their lengths, which the page copies out before returning.

#![allow(unsafe_code)]

use crate::job::Job;
use crate::verify::{Observer, Verdict, sha256, verify_hashed};
use std::alloc::{Layout, alloc, dealloc};

#[link(wasm_import_module = "env")]
unsafe extern "C" {
    /// Token `id`'s text (`len` bytes of UTF-8 or a piece of it).
    fn dv_token(id: u32, ptr: *const u8, len: usize);
    /// Progress: `kind` 0 = hashed (`a` = 1 if it matched), 1 = prefilled
    /// (`a` tokens), 2 = step `a` done with recomputed token `b`.
    fn dv_progress(kind: u32, a: u32, b: u32);
    /// The verdict: `kind` 0 verified, 1 wrong model, 2 diverged, 3 ended
    /// early, 4 final digest differs; `digests` points at 64 bytes (the
    /// recorded digest, or the model's SHA-256 / final digest, then the
    /// recomputed one).
    fn dv_verdict(kind: u32, step: u32, recorded: u32, recomputed: u32, digests: *const u8);
    /// Why verification could not run (`len` bytes of UTF-8).
    fn dv_error(ptr: *const u8, len: usize);
}

/// Alignment of every buffer handed to the page (GGUF tensor data is
/// read in place).
const ALIGN: usize = 64;

/// `len` bytes of memory for the page to fill, or null when the browser
/// cannot give them (the page says so).
#[unsafe(no_mangle)]
pub extern "C" fn dv_alloc(len: usize) -> *mut u8 {
    match Layout::from_size_align(len.max(1), ALIGN) {
        // SAFETY: the layout has non-zero size.
        Ok(layout) => unsafe { alloc(layout) },
        Err(_) => core::ptr::null_mut(),
    }
}

/// Returns memory from [`dv_alloc`] (`len` as asked).
///
/// # Safety
/// `ptr` came from `dv_alloc(len)` and is not used afterwards.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dv_free(ptr: *mut u8, len: usize) {
    if let Ok(layout) = Layout::from_size_align(len.max(1), ALIGN) {
        // SAFETY: the caller's contract: allocated with this layout.
        unsafe { dealloc(ptr, layout) }
    }
}

struct Imports;

impl Observer for Imports {
    fn token_text(&mut self, id: u32, text: &[u8]) {
        // SAFETY: a live slice and its length.
        unsafe { dv_token(id, text.as_ptr(), text.len()) }
    }
    fn hashed(&mut self, ok: bool) {
        // SAFETY: plain numbers.
        unsafe { dv_progress(0, ok as u32, 0) }
    }
    fn prefilled(&mut self, n: usize) {
        // SAFETY: plain numbers.
        unsafe { dv_progress(1, n as u32, 0) }
    }
    fn step(&mut self, step: usize, id: u32) {
        // SAFETY: plain numbers.
        unsafe { dv_progress(2, step as u32, id) }
    }
}

fn report_error(msg: &str) {
    // SAFETY: a live string and its length.
    unsafe { dv_error(msg.as_ptr(), msg.len()) }
}

fn report(verdict: &Verdict) {
    let mut d = [0u8; 64];
    let (kind, step, rec, got) = match verdict {
        Verdict::Verified { steps, digest } => {
            d[..32].copy_from_slice(digest);
            (0, *steps, 0, 0)
        }
        Verdict::WrongModel { sha256 } => {
            d[..32].copy_from_slice(sha256);
            (1, 0, 0, 0)
        }
        Verdict::Diverged(v) => {
            d[..32].copy_from_slice(&v.recorded_digest);
            d[32..].copy_from_slice(&v.recomputed_digest);
            (2, v.step, v.recorded, v.recomputed)
        }
        Verdict::EndedEarly { step, id } => (3, *step, *id, *id),
        Verdict::FinalDigest { last } => {
            d[32..].copy_from_slice(last);
            (4, 0, 0, 0)
        }
    };
    // SAFETY: `d` is 64 live bytes.
    unsafe { dv_verdict(kind, step as u32, rec, got, d.as_ptr()) }
}

/// Verifies the job in `job_ptr[..job_len]` against the model in
/// `model_ptr[..model_len]`, whose SHA-256 the page computed into
/// `sha_ptr[..32]` (null: computed here); 0 when a verdict was reported, 1
/// when an error was (through the imports).
///
/// # Safety
/// The ranges came from [`dv_alloc`] with these lengths and are filled.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dv_verify(
    model_ptr: *const u8,
    model_len: usize,
    job_ptr: *const u8,
    job_len: usize,
    sha_ptr: *const u8,
) -> u32 {
    // SAFETY: the caller's contract (module docs).
    let (model, job) = unsafe {
        (
            core::slice::from_raw_parts(model_ptr, model_len),
            core::slice::from_raw_parts(job_ptr, job_len),
        )
    };
    let sha = if sha_ptr.is_null() {
        sha256(model)
    } else {
        let mut sha = [0u8; 32];
        // SAFETY: the caller's contract: 32 bytes from dv_alloc.
        sha.copy_from_slice(unsafe { core::slice::from_raw_parts(sha_ptr, 32) });
        sha
    };
    let job = match Job::decode(job) {
        Ok(job) => job,
        Err(e) => {
            report_error(&e.to_string());
            return 1;
        }
    };
    match verify_hashed(model, sha, &job, &mut Imports) {
        Ok(verdict) => {
            report(&verdict);
            0
        }
        Err(e) => {
            report_error(&e.to_string());
            1
        }
    }
}
