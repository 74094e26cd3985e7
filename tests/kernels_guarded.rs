//! The blocked matmul fast paths (`detllm::quant::fast`) read only their
//! inputs: every format there, on every path the CPU runs (portable, AVX2,
//! the widest SIMD build — AVX-512 VNNI where the CPU has it), with the
//! weight matrix and the activations' arena placed flush against a
//! `PROT_NONE` guard page (after the last byte, and before the first), so a
//! read one byte past either end is a segmentation fault, not a silent wrong
//! value. Each result must equal the reference (`dot_row` per cell), and
//! each call must have run the blocked kernel on the path asked for (a path
//! that declined to the reference would prove nothing).
//!
//! Under AddressSanitizer (`scripts/unsafe-check.sh asan`) the same test also
//! runs with exact-size heap allocations, whose redzones catch a read past an
//! allocation of any size without rounding to a page.
//!
//! Under Miri (`scripts/unsafe-check.sh miri`) the guard pages are left out
//! (Miri cannot `mprotect`) and the cases are fewer and smaller; the
//! exact-size allocations are checked byte for byte. Miri finds no SIMD
//! features unless the run enables them at compile time: plain, it runs the
//! portable blocked kernels; with the AVX2 level's features enabled
//! (`-Ctarget-feature=+avx2,+bmi1,+bmi2,+lzcnt`, the script's second Miri
//! run) it also interprets the hand-written AVX2 kernels.
//!
//! Limit: the activations are one arena carve per kind (all rows' quants,
//! then all rows' scales), so a read past one row's quants into the next
//! row's, or past the last row's quants into the scales, stays inside the
//! arena and is caught by neither tool; Miri's AVX2 run catches it there
//! (a pointer taken from a slice may read only that slice under Stacked
//! Borrows), and the equality with the reference covers the rest.
//!
//! A format that gains a fast path gets a row in [`FAST_FORMATS`].
#![cfg(unix)]

mod support;

use detllm::quant::fast::kquant::{DECODE_ROWS, TILE, vnni_decode_takes};
use detllm::quant::fast::{
    AVX2_WIDE_MIN_ROWS, KernelPath, ROW_GROUP, RowsRun, WIDE_GROUPS, WIDE_MIN_ROWS,
    rows_kernel_with,
};
use detllm::quant::{ActKind, GgmlType, QActs, QMatrix};
use detllm::simd::{Level, level};
use detllm::{Arena, F32};
use proptest::prelude::*;
use support::quant::Rng;

/// Every weight format with a blocked fast path in `quant::fast`, and the
/// byte offsets of the f16 scales in one of its blocks. The scales are set
/// to model-like values (random ones would mostly send a chunk to the
/// wide `i128` fallback instead of the SIMD code).
const FAST_FORMATS: &[(GgmlType, &[usize])] = &[
    (GgmlType::Q4_0, &[0]),
    (GgmlType::Q4_1, &[0, 2]),
    (GgmlType::Q5_0, &[0]),
    (GgmlType::Q8_0, &[0]),
    (GgmlType::Q4_K, &[0, 2]),
    (GgmlType::Q5_K, &[0, 2]),
    (GgmlType::Q6_K, &[208]),
];

/// The paths to check: the blocked kernel in portable Rust, the AVX2 build,
/// the widest build. Under Miri, where a SIMD path falls back to the
/// portable one unless the run enables the AVX2 features at compile time,
/// the portable one and, with the features, the AVX2 one.
fn paths() -> &'static [KernelPath] {
    if !cfg!(miri) {
        &[KernelPath::Portable, KernelPath::Avx2, KernelPath::Auto]
    } else if level() >= Level::Avx2 {
        &[KernelPath::Portable, KernelPath::Avx2]
    } else {
        &[KernelPath::Portable]
    }
}

/// A mapping of `[guard page][data pages][guard page]` holding `n` bytes
/// flush against the trailing guard (`at_end`) or the leading one.
struct Guarded {
    map: *mut u8,
    map_len: usize,
    off: usize,
    n: usize,
}

impl Guarded {
    fn new(bytes: &[u8], at_end: bool) -> Guarded {
        // SAFETY: sysconf has no preconditions.
        let page = usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).unwrap();
        let n = bytes.len();
        let data_pages = n.div_ceil(page).max(1) * page;
        let map_len = data_pages + 2 * page;
        // SAFETY: a fresh private anonymous mapping; no existing memory is
        // touched.
        let map = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                map_len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        assert_ne!(map, libc::MAP_FAILED, "mmap of {map_len} bytes");
        let map = map.cast::<u8>();
        // SAFETY: both ranges are whole pages inside the mapping just made.
        unsafe {
            assert_eq!(libc::mprotect(map.cast(), page, libc::PROT_NONE), 0);
            let tail = map.add(page + data_pages);
            assert_eq!(libc::mprotect(tail.cast(), page, libc::PROT_NONE), 0);
        }
        let off = if at_end { page + data_pages - n } else { page };
        let mut g = Guarded {
            map,
            map_len,
            off,
            n,
        };
        g.slice_mut().copy_from_slice(bytes);
        g
    }

    fn slice(&self) -> &[u8] {
        // SAFETY: `off..off + n` lies in the read-write pages of the
        // mapping, which lives until `drop`; `&self` borrows it.
        unsafe { std::slice::from_raw_parts(self.map.add(self.off), self.n) }
    }

    fn slice_mut(&mut self) -> &mut [u8] {
        // SAFETY: as `slice`, and `&mut self` makes the borrow unique.
        unsafe { std::slice::from_raw_parts_mut(self.map.add(self.off), self.n) }
    }
}

impl Drop for Guarded {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `new`; no slice of it outlives `self`.
        unsafe { libc::munmap(self.map.cast(), self.map_len) };
    }
}

fn f16(x: f32) -> u16 {
    F32::from_bits(x.to_bits()).to_f16_bits()
}

/// `n_out` rows of `ty` weights: random bytes with model-like scales.
fn weights(rng: &mut Rng, ty: GgmlType, scales: &[usize], n_in: usize, n_out: usize) -> Vec<u8> {
    let mut w = vec![0u8; ty.row_bytes(n_in).unwrap() * n_out];
    rng.bytes(&mut w);
    for b in w.chunks_mut(ty.type_size()) {
        for (k, &at) in scales.iter().enumerate() {
            let v = if k == 0 {
                f16(rng.f32_in(-9, -5))
            } else {
                f16(-rng.f32_in(-5, -2))
            };
            b[at..at + 2].copy_from_slice(&v.to_le_bytes());
        }
    }
    w
}

/// What `path` must report for `rows` rows, all in whole groups, against `m`
/// input rows on this CPU (Q4_K, Q5_K and Q6_K on a SIMD path with several
/// input rows: whole tiles through the tile kernel, with up to
/// as many as `vnni_decode_takes` (or `DECODE_ROWS` without the VNNI tile): every
/// row through the decode kernel; Q5_K, whose only tile is the VNNI one, every row through its
/// decode kernel with any number elsewhere; Q4_0, Q4_1, Q5_0 and Q8_0 on the VNNI
/// build with at least `WIDE_MIN_ROWS`, Q5_0 on the AVX2 build with at
/// least `AVX2_WIDE_MIN_ROWS`: whole wide groups through the wide kernel).
fn check_ran(ty: GgmlType, path: KernelPath, rows: usize, (m, n_in): (usize, usize), ran: RowsRun) {
    assert_eq!(ran.blocked_rows, rows, "{ty:?} {path:?}: blocked rows");
    let cpu = level();
    let simd_kquant = matches!(ty, GgmlType::Q4_K | GgmlType::Q5_K | GgmlType::Q6_K)
        && path != KernelPath::Portable
        && cpu >= Level::Avx2;
    let vnni = path == KernelPath::Auto && cpu == Level::Avx512Vnni;
    let decode = simd_kquant
        && (m == 1
            || (vnni && vnni_decode_takes(m, n_in))
            || (!vnni && (m <= DECODE_ROWS || ty == GgmlType::Q5_K)));
    let tiled = simd_kquant && m > 1 && !decode;
    // Q4_0 / Q4_1 / Q5_0 / Q8_0 on `Auto` with VNNI and enough input rows: whole wide
    // groups (four row groups) through the wide kernel.
    let avx2 = match path {
        KernelPath::Auto => cpu >= Level::Avx2 && cpu != Level::Avx512Vnni,
        KernelPath::Avx2 => cpu >= Level::Avx2,
        _ => false,
    };
    let wide = matches!(
        ty,
        GgmlType::Q4_0 | GgmlType::Q4_1 | GgmlType::Q5_0 | GgmlType::Q8_0
    ) && ((vnni && m >= WIDE_MIN_ROWS)
        || (ty == GgmlType::Q5_0 && avx2 && m >= AVX2_WIDE_MIN_ROWS));
    let wide_rows = WIDE_GROUPS * ROW_GROUP;
    let want_tiled = if tiled {
        rows / TILE * TILE
    } else if decode {
        rows
    } else if wide {
        rows / wide_rows * wide_rows
    } else {
        0
    };
    assert_eq!(
        ran.tiled_rows, want_tiled,
        "{ty:?} {path:?}: tiled rows (M {m})"
    );
    match path {
        KernelPath::Portable => assert_eq!(ran.build, Level::Portable, "{ty:?} {path:?}"),
        KernelPath::Avx2 if cpu >= Level::Avx2 => {
            assert_eq!(ran.build, Level::Avx2, "{ty:?} {path:?}")
        }
        // The VNNI K-quant tile, the decode kernel's VNNI build and the VNNI
        // wide kernel.
        KernelPath::Auto if cpu == Level::Avx512Vnni && want_tiled > 0 => {
            assert_eq!(ran.build, Level::Avx512Vnni, "{ty:?} {path:?}")
        }
        KernelPath::Auto if cpu >= Level::Avx2 => {
            assert!(ran.build >= Level::Avx2, "{ty:?} {path:?}: ran {ran:?}")
        }
        _ => {}
    }
}

/// Every fast path on `w` (rows `r0..`, whole groups) against `x` quantized
/// in `arena_buf`, cell for cell against `want`.
fn run_paths(w: &QMatrix, r0: usize, x: &[F32], m: usize, arena_buf: &mut [u8], want: &[u32]) {
    let mut arena = Arena::new(arena_buf);
    let kind = ActKind::for_weight(w.ty);
    let mut a = QActs::new(&mut arena, kind, m, w.n_in).unwrap();
    a.quantize(x).unwrap();
    let rows = w.n_out - r0;
    for &path in paths() {
        let mut out = vec![F32::ZERO; rows * m];
        let ran = rows_kernel_with(w, r0, &a, &mut out, path);
        check_ran(w.ty, path, rows, (m, w.n_in), ran);
        let got: Vec<u32> = out.iter().map(|v| v.to_bits()).collect();
        assert_eq!(got, want, "{:?} {path:?} (rows {r0}.., M {m})", w.ty);
    }
}

/// One case: `groups` row groups after `r0` leading rows (skipped), `kb`
/// blocks per row, `m` input rows.
fn check(seed: u64, fi: usize, kb: usize, r0: usize, groups: usize, m: usize) {
    let (ty, scales) = FAST_FORMATS[fi % FAST_FORMATS.len()];
    let n_in = ty.block_size() * kb;
    let n_out = r0 + groups * ROW_GROUP;
    let mut rng = Rng(seed);
    let wb = weights(&mut rng, ty, scales, n_in, n_out);
    let x: Vec<F32> = (0..m * n_in)
        .map(|_| F32::from_bits(rng.f32_in(-5, -3).to_bits()))
        .collect();
    let arena_len = QActs::bytes_for(ActKind::for_weight(ty), m, n_in).unwrap();

    // The reference, in ordinary heap memory.
    let w = QMatrix::new(ty, n_in, n_out, &wb).unwrap();
    let mut buf = vec![0u8; arena_len];
    let mut arena = Arena::new(&mut buf);
    let mut a = QActs::new(&mut arena, ActKind::for_weight(ty), m, n_in).unwrap();
    a.quantize(&x).unwrap();
    let mut out = vec![F32::ZERO; (n_out - r0) * m];
    rows_kernel_with(&w, r0, &a, &mut out, KernelPath::Reference);
    let want: Vec<u32> = out.iter().map(|v| v.to_bits()).collect();

    // Exact-size heap allocations (what AddressSanitizer's redzones and
    // Miri guard), first, so that AddressSanitizer reports a read past
    // them before a guard page faults.
    let exact: Box<[u8]> = wb.clone().into_boxed_slice();
    let w = QMatrix::new(ty, n_in, n_out, &exact).unwrap();
    let mut arena_exact: Box<[u8]> = vec![0u8; arena_len].into_boxed_slice();
    run_paths(&w, r0, &x, m, &mut arena_exact, &want);

    // Weights and arena flush against the guard page after them, then
    // against the one before them.
    let placements: &[bool] = if cfg!(miri) { &[] } else { &[true, false] };
    for &at_end in placements {
        let g = Guarded::new(&wb, at_end);
        let w = QMatrix::new(ty, n_in, n_out, g.slice()).unwrap();
        let mut ga = Guarded::new(&vec![0u8; arena_len], at_end);
        run_paths(&w, r0, &x, m, ga.slice_mut(), &want);
    }
}

/// Cases of the property and the largest row length in blocks (fewer and
/// shorter under Miri, which interprets every byte read).
const CASES: u32 = if cfg!(miri) { 2 } else { 48 };
const MAX_KB: usize = if cfg!(miri) { 34 } else { 80 };
const MAX_M: usize = if cfg!(miri) { 3 } else { 40 };
/// One more than the most row groups a case takes: five (a wide group of
/// four and one more), under Miri, which runs no AVX-512 kernel, two.
const MAX_GROUPS: usize = if cfg!(miri) { 3 } else { 6 };

proptest! {
    // A failure is saved to tests/kernels_guarded.proptest-regressions and
    // replayed first on every later run; not under Miri, whose isolation
    // forbids the file.
    #![proptest_config(ProptestConfig {
        cases: CASES,
        failure_persistence: if cfg!(miri) { None } else { ProptestConfig::default().failure_persistence },
        ..ProptestConfig::default()
    })]

    /// Blocks per row across one and several activation chunks, one and
    /// several row groups (four and five: a wide group), single inputs and
    /// whole tiles.
    #[test]
    fn fast_paths_stay_in_bounds(
        seed in any::<u64>(),
        fi in 0usize..16,
        kb in 1usize..MAX_KB,
        r0 in 0usize..ROW_GROUP,
        groups in 1usize..MAX_GROUPS,
        m in 1usize..MAX_M,
    ) {
        check(seed, fi, kb, r0, groups, m);
    }
}

/// Every format of the table on the edge sizes: one block, a whole chunk
/// and one more, one input and a full tile plus one, the fewest input rows
/// of the wide kernel and its full tile plus one (under Miri: one block,
/// a chunk and one more), one row group and (not under Miri) one wide group.
#[test]
fn fast_paths_edges() {
    for fi in 0..FAST_FORMATS.len() {
        let sizes: &[(usize, usize)] = if cfg!(miri) {
            &[(1, 1), (33, 2)]
        } else {
            &[(1, 1), (32, 8), (33, 9), (64, 1), (3, 12), (33, 33)]
        };
        for &(kb, m) in sizes {
            check(7 + fi as u64, fi, kb, 1, 1, m);
            // A wide group (Miri runs no AVX-512 kernel: only the portable
            // paths, which the single group covers).
            if !cfg!(miri) {
                check(7 + fi as u64, fi, kb, 1, WIDE_GROUPS, m);
            }
        }
    }
}
