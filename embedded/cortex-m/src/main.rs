//! detllm's determinism suite on a Cortex-M4F, bare metal.
//!
//! Runs every case of `detllm::selftest` (the same functions the host test
//! calls) with a static scratch arena and prints one `DIGEST <name> <hex>`
//! line per case over semihosting, then `DONE <n>`; exits with failure (QEMU
//! status 1) on an error or a panic. `scripts/cross-test.sh` compares the
//! lines with `tests/golden/*.txt`.
//!
//! Run: `cargo run --release` in this directory (runner in `.cargo/config.toml`).
//! New selftest cases (kernels, synthetic model, sampling) are picked up
//! without changes here; the arena grows with `selftest::SCRATCH_BYTES`.
#![no_std]
#![no_main]

use cortex_m as _; // the critical-section implementation
use cortex_m_rt::entry;
use cortex_m_semihosting::{debug, hprintln};
use detllm::selftest;

/// Scratch memory for the cases (`.bss`, zeroed by the runtime).
static mut SCRATCH: [u8; selftest::SCRATCH_BYTES] = [0; selftest::SCRATCH_BYTES];

#[entry]
fn main() -> ! {
    // SAFETY: the only reference to SCRATCH, taken once on the only core.
    let scratch: &'static mut [u8] = unsafe { &mut *core::ptr::addr_of_mut!(SCRATCH) };
    hprintln!("TARGET thumbv7em-none-eabihf profile {}", detllm::PROFILE);
    let mut n = 0usize;
    let mut failed = false;
    for (case, result) in selftest::all(scratch) {
        match result {
            Ok(d) => hprintln!("DIGEST {} {}", case.name, selftest::Hex(&d)),
            Err(e) => {
                hprintln!("ERROR {} {:?}", case.name, e);
                failed = true;
            }
        }
        n += 1;
    }
    hprintln!("DONE {}", n);
    debug::exit(if failed { debug::EXIT_FAILURE } else { debug::EXIT_SUCCESS });
    loop {}
}

#[panic_handler]
fn panic(info: &core::panic::PanicInfo) -> ! {
    hprintln!("PANIC {}", info);
    debug::exit(debug::EXIT_FAILURE);
    loop {}
}
