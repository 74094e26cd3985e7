//! Puts the target's memory map where the runtime's linker script finds it
//! (`memory-riscv32.x` or `memory-cortex-m.x`, copied to `OUT_DIR/memory.x`).
use std::path::PathBuf;

fn main() {
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("OUT_DIR"));
    let target = std::env::var("TARGET").expect("TARGET");
    let map = if target.starts_with("riscv32") {
        "memory-riscv32.x"
    } else {
        "memory-cortex-m.x"
    };
    std::fs::copy(map, out.join("memory.x")).expect("copy the memory map");
    println!("cargo:rustc-link-search={}", out.display());
    println!("cargo:rerun-if-changed={map}");
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=SMOLLM2_ARENA_BYTES");
    println!("cargo:rerun-if-env-changed=SMOLLM2_PROMPT");
    println!("cargo:rerun-if-env-changed=SMOLLM2_MAX_TOKENS");
}
