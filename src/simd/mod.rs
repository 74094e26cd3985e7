//! The CPU's SIMD level, detected once, and `multiversion!`: the one macro
//! that compiles a portable kernel body once per level. A leaf: it imports
//! nothing of the crate, and every kernel that has SIMD builds invokes the
//! macro in its own file, beside its body.
//!
//! ## Contract
//!
//! * [`level`] is the widest [`Level`] whose every target feature the CPU
//!   has, detected on the first call (`is_x86_feature_detected!`) and cached
//!   in a `static AtomicU8` (0 = not yet detected; a race only detects
//!   twice and stores the same value). On other targets, or without `std`,
//!   it is always [`Level::Portable`].
//! * A build made by `multiversion!` is the same Rust body compiled with
//!   more target features (the compiler auto-vectorizes it): the same
//!   integer and soft-float operations, so the same bits. Each kernel's
//!   tests check that every build the CPU runs equals its portable body
//!   (`builds()` below hands them out).
//! * A build is called only where [`level`] found its features; that is
//!   the macro's one `unsafe` (`multiversion!`'s SAFETY text). The
//!   hand-written Q4_1/Q5_0/Q8_0 intrinsics (`quant::fast::x86`) select their
//!   builds by the same levels.
//!
//! ## Unsafe review
//!
//! The only `unsafe` here is in `multiversion!`'s expansion: calls of the
//! `#[target_feature]` builds, each inside a function of the generated
//! module that is private to it and is called, or handed out as a pointer,
//! only after [`level`] returned a level that includes every feature of
//! that build (the `match` right above each call).

#[cfg(all(feature = "std", target_arch = "x86_64"))]
use core::sync::atomic::{AtomicU8, Ordering};

/// SIMD levels of x86-64 CPUs, each including the ones before it. The
/// levels name what `multiversion!`'s builds and the fused Q4_1/Q5_0/Q8_0
/// kernels are compiled for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
#[repr(u8)]
pub enum Level {
    /// No SIMD build: the portable code (every other target; `no_std`).
    Portable = 1,
    /// AVX2 with BMI1, BMI2 and LZCNT (every AVX2 CPU has the three).
    Avx2 = 2,
    /// [`Level::Avx2`] and AVX-512 F, CD, VL, DQ and BW.
    Avx512 = 3,
    /// [`Level::Avx512`] and AVX-512 VNNI (`vpdpbusd`).
    Avx512Vnni = 4,
}

/// The detected [`Level`] (0: not yet detected).
#[cfg(all(feature = "std", target_arch = "x86_64"))]
static LEVEL: AtomicU8 = AtomicU8::new(0);

/// The widest [`Level`] this CPU runs: detected on the first call, then one
/// relaxed load. [`Level::Portable`] on every target but x86-64 with `std`.
#[inline]
pub fn level() -> Level {
    #[cfg(all(feature = "std", target_arch = "x86_64"))]
    {
        match LEVEL.load(Ordering::Relaxed) {
            2 => Level::Avx2,
            3 => Level::Avx512,
            4 => Level::Avx512Vnni,
            1 => Level::Portable,
            _ => detect_and_store(),
        }
    }
    #[cfg(not(all(feature = "std", target_arch = "x86_64")))]
    {
        Level::Portable
    }
}

/// Detects the level and caches it for [`level`].
#[cfg(all(feature = "std", target_arch = "x86_64"))]
#[cold]
#[inline(never)]
fn detect_and_store() -> Level {
    use std::is_x86_feature_detected as has;
    let avx2 = has!("avx2") && has!("bmi1") && has!("bmi2") && has!("lzcnt");
    let avx512 = avx2
        && has!("avx512f")
        && has!("avx512cd")
        && has!("avx512vl")
        && has!("avx512dq")
        && has!("avx512bw");
    let level = match (avx2, avx512, avx512 && has!("avx512vnni")) {
        (_, _, true) => Level::Avx512Vnni,
        (_, true, _) => Level::Avx512,
        (true, ..) => Level::Avx2,
        _ => Level::Portable,
    };
    LEVEL.store(level as u8, Ordering::Relaxed);
    level
}

/// Compiles a portable kernel body once per [`Level`] and dispatches to the
/// widest build the CPU runs.
///
/// ```ignore
/// crate::simd::multiversion! {
///     /// Builds of [`rmsnorm_body`].
///     mod rmsnorm_builds = rmsnorm_body(x: &[F32], w: &[F32], eps: F32, out: &mut [F32]) -> Result<()>;
/// }
/// // rmsnorm_builds::best(x, w, eps, out)   the widest build (or the body)
/// // rmsnorm_builds::best_fn()              its function pointer
/// // rmsnorm_builds::builds()               [AVX-512, AVX2] builds, `None` where the CPU lacks them (tests)
/// ```
///
/// The body (usually `#[inline(always)]`) is inlined into a
/// `#[target_feature]` function per level: AVX2 (with BMI1, BMI2, LZCNT)
/// and AVX-512 (F, CD, VL, DQ, BW, with the AVX2 set). Arguments must be
/// references or `Copy`. The generated module sees its parent's items
/// (`use super::*`). Without x86-64 and `std`, `best` is the body and
/// `builds()` is `[None, None]`.
macro_rules! multiversion {
    ($(#[$doc:meta])* mod $m:ident = $body:ident($($arg:ident: $ty:ty),* $(,)?) $(-> $ret:ty)?;) => {
        $(#[$doc])*
        #[allow(dead_code, unsafe_code)]
        mod $m {
            use super::*;

            /// Signature of the body and of its builds.
            pub(super) type Build = fn($($ty),*) $(-> $ret)?;

            #[cfg(all(feature = "std", target_arch = "x86_64"))]
            #[target_feature(enable = "avx2,bmi1,bmi2,lzcnt")]
            fn avx2_build($($arg: $ty),*) $(-> $ret)? {
                $body($($arg),*)
            }

            #[cfg(all(feature = "std", target_arch = "x86_64"))]
            #[target_feature(enable = "avx2,bmi1,bmi2,lzcnt,avx512f,avx512cd,avx512vl,avx512dq,avx512bw")]
            fn avx512_build($($arg: $ty),*) $(-> $ret)? {
                $body($($arg),*)
            }

            /// [`avx2_build`]; private, reached only through [`best`],
            /// [`best_fn`] and [`builds`], which check the level first.
            #[cfg(all(feature = "std", target_arch = "x86_64"))]
            #[inline(always)]
            fn avx2_entry($($arg: $ty),*) $(-> $ret)? {
                // SAFETY: only called or handed out after `simd::level()`
                // returned `Avx2` or wider, which includes every feature
                // `avx2_build` is compiled for.
                unsafe { avx2_build($($arg),*) }
            }

            /// [`avx512_build`]; private, as [`avx2_entry`].
            #[cfg(all(feature = "std", target_arch = "x86_64"))]
            #[inline(always)]
            fn avx512_entry($($arg: $ty),*) $(-> $ret)? {
                // SAFETY: only called or handed out after `simd::level()`
                // returned `Avx512` or wider, which includes every feature
                // `avx512_build` is compiled for.
                unsafe { avx512_build($($arg),*) }
            }

            /// The body run by the widest build the CPU has (one cached
            /// load and a match).
            #[inline(always)]
            pub(super) fn best($($arg: $ty),*) $(-> $ret)? {
                #[cfg(all(feature = "std", target_arch = "x86_64"))]
                match $crate::simd::level() {
                    $crate::simd::Level::Avx512 | $crate::simd::Level::Avx512Vnni => {
                        return avx512_entry($($arg),*);
                    }
                    $crate::simd::Level::Avx2 => return avx2_entry($($arg),*),
                    $crate::simd::Level::Portable => {}
                }
                $body($($arg),*)
            }

            /// The function [`best`] runs, for loops that call it per row.
            #[inline]
            pub(super) fn best_fn() -> Build {
                #[cfg(all(feature = "std", target_arch = "x86_64"))]
                match $crate::simd::level() {
                    $crate::simd::Level::Avx512 | $crate::simd::Level::Avx512Vnni => {
                        return avx512_entry;
                    }
                    $crate::simd::Level::Avx2 => return avx2_entry,
                    $crate::simd::Level::Portable => {}
                }
                $body
            }

            /// Every SIMD build this CPU runs, widest first (`None` for the
            /// others): the tests compare each with the portable body.
            pub(super) fn builds() -> [Option<Build>; 2] {
                #[cfg(all(feature = "std", target_arch = "x86_64"))]
                {
                    let level = $crate::simd::level();
                    [
                        (level >= $crate::simd::Level::Avx512).then_some(avx512_entry as Build),
                        (level >= $crate::simd::Level::Avx2).then_some(avx2_entry as Build),
                    ]
                }
                #[cfg(not(all(feature = "std", target_arch = "x86_64")))]
                {
                    [None, None]
                }
            }
        }
    };
}
pub(crate) use multiversion;
