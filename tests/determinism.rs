//! The determinism suite: every `detllm::selftest` case's digest must equal
//! its committed golden value in `tests/golden/<group>.txt`.
//!
//! Runs on every target (`scripts/cross-test.sh` runs it under qemu-user,
//! Node WASI, and the bare-metal examples call the same `selftest`
//! functions). With `-- --nocapture` it prints one `DIGEST <name> <hex>`
//! line per case, which the script collects into its table.
//!
//! Regenerating the goldens (after an intended numeric change, i.e. a new
//! profile): `scripts/regen-goldens.sh`, which runs this test with
//! `DETLLM_REGEN_GOLDENS=1` on the host (the test then writes the files
//! instead of comparing) and then runs the oracle module below.
//!
//! Independence: on x86-64 hosts with `--features oracle`, the module
//! `oracle` recomputes each `f32`, `conv` and `math` digest with a different
//! implementation (hardware IEEE binary32, the `half` crate, CORE-MATH) over
//! the same inputs and checks it against the golden file, so the goldens are
//! not merely "whatever the library printed".

use detllm::selftest::{self, CASES, Case, Digest, Hex, SCRATCH_BYTES, SPECIALS, SWEEP_LEN};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::PathBuf;

fn golden_dir() -> PathBuf {
    // Absolute at compile time: the WASI runner's working directory is `/`.
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests")
        .join("golden")
}

/// `name -> hex digest` from every `tests/golden/*.txt` (`#` starts a comment).
fn read_goldens() -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let dir = golden_dir();
    let entries = std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    for entry in entries {
        let path = entry.expect("directory entry").path();
        if path.extension().and_then(|e| e.to_str()) != Some("txt") {
            continue;
        }
        let text = std::fs::read_to_string(&path).expect("golden file");
        for (no, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let mut parts = line.split_whitespace();
            let (Some(name), Some(hex), None) = (parts.next(), parts.next(), parts.next()) else {
                panic!("{}:{}: expected `<name> <hex>`", path.display(), no + 1);
            };
            assert!(
                hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_hexdigit()),
                "{}:{}: bad digest",
                path.display(),
                no + 1
            );
            let group = name.split_once('.').map_or(name, |(g, _)| g);
            assert_eq!(
                path.file_stem().and_then(|s| s.to_str()),
                Some(group),
                "{name} is in the wrong golden file"
            );
            let old = out.insert(name.to_string(), hex.to_string());
            assert!(old.is_none(), "{name} appears twice in the goldens");
        }
    }
    out
}

fn run_all() -> Vec<(&'static Case, String)> {
    let mut scratch = vec![0u8; SCRATCH_BYTES];
    selftest::all(&mut scratch)
        .map(|(case, r)| match r {
            Ok(d) => (case, Hex(&d).to_string()),
            Err(e) => panic!("{}: {e:?}", case.name),
        })
        .collect()
}

fn write_goldens(results: &[(&'static Case, String)]) {
    let mut files: BTreeMap<&str, String> = BTreeMap::new();
    for (case, hex) in results {
        let text = files.entry(case.group()).or_insert_with(|| {
            format!(
                "# detllm determinism goldens: group `{}`, profile {}.\n\
                 # SHA-256 of each detllm::selftest case (see src/selftest.rs for inputs and encoding).\n\
                 # Generated on the host by scripts/regen-goldens.sh; do not edit by hand.\n",
                case.group(),
                detllm::PROFILE
            )
        });
        writeln!(text, "{} {hex}", case.name).expect("write to String");
    }
    let dir = golden_dir();
    std::fs::create_dir_all(&dir).expect("create tests/golden");
    for (group, text) in files {
        let path = dir.join(format!("{group}.txt"));
        std::fs::write(&path, text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        println!("wrote {}", path.display());
    }
}

#[test]
fn digests_match_goldens() {
    let results = run_all();
    for (case, hex) in &results {
        println!("DIGEST {} {hex}", case.name);
    }
    if std::env::var_os("DETLLM_REGEN_GOLDENS").is_some() {
        write_goldens(&results);
        return;
    }
    let goldens = read_goldens();
    let mut bad = Vec::new();
    for (case, hex) in &results {
        match goldens.get(case.name) {
            Some(g) if g == hex => {}
            Some(g) => bad.push(format!("{}: got {hex}, golden {g}", case.name)),
            None => bad.push(format!(
                "{}: no golden value (run scripts/regen-goldens.sh)",
                case.name
            )),
        }
    }
    assert!(bad.is_empty(), "digest mismatches:\n{}", bad.join("\n"));
}

#[test]
fn every_golden_names_a_case() {
    if std::env::var_os("DETLLM_REGEN_GOLDENS").is_some() {
        return;
    }
    for name in read_goldens().keys() {
        assert!(
            selftest::find(name).is_some(),
            "golden {name} has no selftest case (stale: run scripts/regen-goldens.sh)"
        );
    }
}

#[test]
fn case_names_are_unique_and_grouped() {
    for (i, a) in CASES.iter().enumerate() {
        assert!(a.name.contains('.'), "{}: name must be group.case", a.name);
        for b in &CASES[i + 1..] {
            assert_ne!(a.name, b.name);
        }
    }
}

#[test]
fn sweeps_have_the_documented_shape() {
    let unary: Vec<u32> = selftest::UnarySweep::new().map(|x| x.to_bits()).collect();
    assert_eq!(unary.len(), SWEEP_LEN);
    assert_eq!(&unary[..SPECIALS.len()], &SPECIALS[..]);
    let binary: Vec<(u32, u32)> = selftest::BinarySweep::new()
        .map(|(x, y)| (x.to_bits(), y.to_bits()))
        .collect();
    assert_eq!(binary.len(), SWEEP_LEN);
    let n = SPECIALS.len();
    for (i, &(x, y)) in binary[..n * n].iter().enumerate() {
        assert_eq!((x, y), (SPECIALS[i / n], SPECIALS[i % n]));
    }
    // The random part is not degenerate: many distinct values, all kinds.
    let mut distinct = unary.clone();
    distinct.sort_unstable();
    distinct.dedup();
    assert!(distinct.len() > SWEEP_LEN * 7 / 10, "{}", distinct.len());
    let nan = unary
        .iter()
        .filter(|&&b| b & 0x7FFF_FFFF > 0x7F80_0000)
        .count();
    let near_one = unary
        .iter()
        .filter(|&&b| (119..135).contains(&((b >> 23) & 0xFF)))
        .count();
    assert!(
        nan > 16 && near_one > SWEEP_LEN / 5,
        "nan {nan} near_one {near_one}"
    );
    assert_eq!(selftest::I32Sweep::new().count(), SWEEP_LEN);
}

#[test]
fn digests_see_every_result() {
    // The digest of a sweep changes when one result bit changes: hash the
    // sqrt sweep with one flipped bit and compare with the case's digest.
    use sha2::{Digest as _, Sha256};
    let mut scratch = vec![0u8; SCRATCH_BYTES];
    let case = selftest::find("f32.sqrt").expect("case");
    let d: Digest = (case.run)(&mut scratch).expect("runs");
    let mut same = Sha256::new();
    let mut flipped = Sha256::new();
    for (i, x) in selftest::UnarySweep::new().enumerate() {
        let bits = x.sqrt().to_bits();
        same.update(bits.to_le_bytes());
        flipped.update((bits ^ u32::from(i == 5000)).to_le_bytes());
    }
    assert_eq!(<[u8; 32]>::from(same.finalize()), d);
    assert_ne!(<[u8; 32]>::from(flipped.finalize()), d);
}

/// Independent recomputation of the goldens (x86-64 host, `--features oracle`).
#[cfg(all(feature = "oracle", target_arch = "x86_64"))]
mod oracle {
    use super::read_goldens;
    use detllm::selftest::{BinarySweep, Hex, I32Sweep, UnarySweep, ordering_byte};
    use sha2::{Digest as _, Sha256};

    const NAN: u32 = 0x7FC0_0000;

    /// Hardware binary32 bits with every NaN made canonical (the profile's rule).
    fn canon(f: f32) -> u32 {
        if f.is_nan() { NAN } else { f.to_bits() }
    }

    fn hw(x: detllm::F32) -> f32 {
        f32::from_bits(x.to_bits())
    }

    fn unary(op: impl Fn(f32) -> Vec<u8>) -> String {
        let mut h = Sha256::new();
        for x in UnarySweep::new() {
            h.update(op(hw(x)));
        }
        Hex(&h.finalize().into()).to_string()
    }

    fn binary(op: impl Fn(f32, f32) -> Vec<u8>) -> String {
        let mut h = Sha256::new();
        for (x, y) in BinarySweep::new() {
            h.update(op(hw(x), hw(y)));
        }
        Hex(&h.finalize().into()).to_string()
    }

    fn all_u16(op: impl Fn(u16) -> u32) -> String {
        let mut h = Sha256::new();
        for v in 0..=u16::MAX {
            h.update(op(v).to_le_bytes());
        }
        Hex(&h.finalize().into()).to_string()
    }

    fn f(v: f32) -> Vec<u8> {
        canon(v).to_le_bytes().to_vec()
    }

    /// IEEE 754-2019 minimumNumber / maximumNumber, written independently.
    fn min_num(x: f32, y: f32) -> f32 {
        match (x.is_nan(), y.is_nan()) {
            (true, true) => f32::NAN,
            (true, false) => y,
            (false, true) => x,
            _ if x < y => x,
            _ if y < x => y,
            _ if x.is_sign_negative() => x,
            _ => y,
        }
    }

    fn max_num(x: f32, y: f32) -> f32 {
        match (x.is_nan(), y.is_nan()) {
            (true, true) => f32::NAN,
            (true, false) => y,
            (false, true) => x,
            _ if x > y => x,
            _ if y > x => y,
            _ if x.is_sign_positive() => x,
            _ => y,
        }
    }

    fn f16_bits(x: f32) -> u16 {
        if x.is_nan() {
            0x7E00
        } else {
            half::f16::from_f32(x).to_bits()
        }
    }

    fn bf16_bits(x: f32) -> u16 {
        if x.is_nan() {
            0x7FC0
        } else {
            half::bf16::from_f32(x).to_bits()
        }
    }

    /// The oracle digest of a case, or `None` when the case has no oracle.
    fn oracle(name: &str) -> Option<String> {
        Some(match name {
            "f32.add" => binary(|x, y| f(x + y)),
            "f32.sub" => binary(|x, y| f(x - y)),
            "f32.mul" => binary(|x, y| f(x * y)),
            "f32.div" => binary(|x, y| f(x / y)),
            "f32.sqrt" => unary(|x| f(x.sqrt())),
            "f32.min_max" => binary(|x, y| [f(min_num(x, y)), f(max_num(x, y))].concat()),
            "f32.cmp" => binary(|x, y| {
                vec![
                    ordering_byte(x.partial_cmp(&y)),
                    ordering_byte(Some(x.total_cmp(&y))),
                ]
            }),
            "conv.f16_to_f32" => all_u16(|h| canon(half::f16::from_bits(h).to_f32())),
            "conv.f32_to_f16" => unary(|x| f16_bits(x).to_le_bytes().to_vec()),
            "conv.bf16_to_f32" => all_u16(|h| canon(half::bf16::from_bits(h).to_f32())),
            "conv.f32_to_bf16" => unary(|x| bf16_bits(x).to_le_bytes().to_vec()),
            "conv.i32_to_f32" => {
                let mut h = Sha256::new();
                for v in I32Sweep::new() {
                    h.update((v as f32).to_bits().to_le_bytes());
                }
                Hex(&h.finalize().into()).to_string()
            }
            // `as` saturates and maps NaN to 0, the profile's rule.
            "conv.f32_to_i32_trunc" => unary(|x| (x as i32).to_le_bytes().to_vec()),
            "conv.f32_to_i32_ties_away" => unary(|x| (x.round() as i32).to_le_bytes().to_vec()),
            "conv.f32_to_i32_ties_even" => {
                unary(|x| (x.round_ties_even() as i32).to_le_bytes().to_vec())
            }
            "conv.round_ties_away" => unary(|x| f(x.round())),
            "math.exp" => unary(|x| f(core_math::expf(x))),
            "math.exp2" => unary(|x| f(core_math::exp2f(x))),
            "math.ln" => unary(|x| f(core_math::logf(x))),
            "math.sin" => unary(|x| f(core_math::sinf(x))),
            "math.cos" => unary(|x| f(core_math::cosf(x))),
            "math.sin_cos" => unary(|x| [f(core_math::sinf(x)), f(core_math::cosf(x))].concat()),
            // The profile follows C99 Annex F (`x^±0 = 1`, `1^y = 1`) for
            // signalling NaNs too; CORE-MATH returns NaN for those.
            "math.powf" => binary(|x, y| {
                f(if x == 1.0 || y == 0.0 {
                    1.0
                } else {
                    core_math::powf(x, y)
                })
            }),
            // Three hardware operations in the profile's order.
            "math.silu" => unary(|x| f(x / (1.0 + core_math::expf(-x)))),
            "math.tanh" => unary(|x| f(core_math::tanhf(x))),
            // detllm::math::gelu's operations in its order, hardware f32.
            "math.gelu" => unary(|x| {
                let (k, a) = (f32::from_bits(0x3FCC_422A), f32::from_bits(0x3D37_2713));
                f(x / (1.0 + core_math::expf(-(k * (x * (1.0 + a * (x * x)))))))
            }),
            _ => return None,
        })
    }

    #[test]
    fn goldens_equal_independent_implementations() {
        let goldens = read_goldens();
        let mut bad = Vec::new();
        let mut checked = 0;
        for (name, golden) in &goldens {
            if let Some(o) = oracle(name) {
                checked += 1;
                if &o != golden {
                    bad.push(format!("{name}: oracle {o}, golden {golden}"));
                }
            }
        }
        // Every f32/conv/math golden has an oracle.
        let expected = goldens
            .keys()
            .filter(|n| ["f32.", "conv.", "math."].iter().any(|p| n.starts_with(p)))
            .count();
        assert_eq!(
            checked, expected,
            "a golden of f32/conv/math lacks an oracle"
        );
        assert!(bad.is_empty(), "oracle mismatches:\n{}", bad.join("\n"));
    }
}
