//! SmolLM2-135M-Instruct on bare metal: no OS, no FPU, no allocator.
//!
//! The GGUF file sits in a read-only memory region as flash would hold it
//! (QEMU's generic loader puts it there; the linker script keeps the program
//! out of it), the first word of the region's header page holds its length.
//! The model is borrowed in place; everything else comes from one static
//! arena of `SMOLLM2_ARENA_BYTES` bytes (a build setting, see `run.rs` for
//! how it is sized). The shared code in `run.rs` tokenizes the chat prompt,
//! prefills, generates greedily and prints the report over semihosting; this
//! file holds what differs per core: entry, console, exit, instruction
//! counter and the memory map.
//!
//! After the report (`run.rs`) this file adds `STACK used=<bytes>`: how much
//! of a painted window below `main`'s frame the run wrote (stack use, to
//! within the few hundred bytes of `main`'s own frame).
//!
//! Exit status (QEMU passes it on): 0 when the report is complete (`DONE`),
//! 1 on an error (printed as `ERROR <Debug>`) or a panic (`PANIC …`).
//!
//! Run: `scripts/baremetal-model.sh` (builds, loads the model, compares with
//! the host); the QEMU command lines are in `docs/sections/baremetal.md`.
#![no_std]
#![no_main]

mod run;

/// Bytes of the static arena (build-time `SMOLLM2_ARENA_BYTES`; the default
/// is room enough for the `plan-only` build that measures the exact size).
const ARENA_BYTES: usize = match option_env!("SMOLLM2_ARENA_BYTES") {
    Some(s) => run::parse_usize(s),
    None => 16 << 20,
};

/// Bytes of stack painted below `run`'s frame to measure how much it uses.
const STACK_WINDOW: usize = 256 << 10;
const PAINT: u32 = 0x5AFE_C0DE;

/// Fills the `STACK_WINDOW` bytes below this call's frame with `PAINT`;
/// returns the window's top. `run` starts its frame where this one was.
#[inline(never)]
fn paint_stack() -> usize {
    let here = 0u32;
    let top = (core::ptr::addr_of!(here) as usize - 256) & !3;
    let mut a = top - STACK_WINDOW;
    while a < top {
        // SAFETY: free stack below the live frames (the memory map leaves
        // megabytes between `.bss` and the stack's top); nothing lives there.
        unsafe { core::ptr::write_volatile(a as *mut u32, PAINT) };
        a += 4;
    }
    top
}

/// Bytes of the window below `top` that were written since `paint_stack`
/// (`STACK_WINDOW` if all: the window was too small).
#[inline(never)]
fn stack_used(top: usize) -> usize {
    let mut a = top - STACK_WINDOW;
    // SAFETY: the window `paint_stack` wrote; below the live frames.
    while a < top && unsafe { core::ptr::read_volatile(a as *const u32) } == PAINT {
        a += 4;
    }
    top - a
}

#[repr(C, align(16))]
struct Aligned([u8; ARENA_BYTES]);

/// The arena (`.bss`, zeroed by the runtime).
static mut ARENA: Aligned = Aligned([0; ARENA_BYTES]);

#[cfg(target_arch = "riscv32")]
mod board {
    //! QEMU `virt` (rv32imc), `-m 512M`: see `memory-riscv32.x`.
    use riscv as _; // the critical-section implementation
    pub use riscv_semihosting::hio::HostStream as Console;

    pub const TARGET: &str = "riscv32imc-unknown-none-elf (qemu-system-riscv32 -M virt)";
    /// Header page: the model's length in bytes, u32 little-endian.
    pub const MODEL_HEADER: usize = 0x9000_0000;
    /// The GGUF file.
    pub const MODEL_BASE: usize = 0x9000_1000;
    /// Bytes the model region holds (up to the end of 512 MiB of RAM).
    pub const MODEL_MAX: usize = 0xA000_0000 - MODEL_BASE;

    pub fn console() -> Option<Console> {
        riscv_semihosting::hio::hstdout().ok()
    }

    pub fn exit(ok: bool) -> ! {
        use riscv_semihosting::debug;
        debug::exit(if ok {
            debug::EXIT_SUCCESS
        } else {
            debug::EXIT_FAILURE
        });
        #[allow(clippy::empty_loop)]
        loop {}
    }

    /// `minstret` counts from reset.
    pub fn start_counter() {}

    /// Retired instructions (`minstret`; instructions under `-icount shift=0`).
    pub fn insns() -> u64 {
        riscv::register::minstret::read64()
    }
}

#[cfg(target_arch = "arm")]
mod board {
    //! QEMU `mps3-an524` (Cortex-M33), `-m 2G`: see `memory-cortex-m.x`.
    use core::sync::atomic::{AtomicU32, Ordering};
    use cortex_m::peripheral::SYST;
    use cortex_m::peripheral::syst::SystClkSource;
    pub use cortex_m_semihosting::hio::HostStream as Console;

    pub const TARGET: &str = "thumbv8m.main-none-eabi (qemu-system-arm -M mps3-an524)";
    /// Header page: the model's length in bytes, u32 little-endian.
    pub const MODEL_HEADER: usize = 0x7400_0000;
    /// The GGUF file.
    pub const MODEL_BASE: usize = 0x7400_1000;
    /// Bytes the model region holds (up to the end of the DDR's secure 256 MiB).
    pub const MODEL_MAX: usize = 0x8000_0000 - MODEL_BASE;

    pub fn console() -> Option<Console> {
        cortex_m_semihosting::hio::hstdout().ok()
    }

    pub fn exit(ok: bool) -> ! {
        use cortex_m_semihosting::debug;
        debug::exit(if ok {
            debug::EXIT_SUCCESS
        } else {
            debug::EXIT_FAILURE
        });
        #[allow(clippy::empty_loop)]
        loop {}
    }

    /// SysTick wraps since `start_counter`.
    static WRAPS: AtomicU32 = AtomicU32::new(0);
    /// SysTick counts down from RELOAD to 0, then wraps.
    const RELOAD: u32 = 0x00FF_FFFF;
    /// The core clock QEMU gives SysTick on this board (SSE-200 MAINCLK).
    const CORE_HZ: u64 = 32_000_000;

    #[cortex_m_rt::exception]
    fn SysTick() {
        WRAPS.fetch_add(1, Ordering::Relaxed);
    }

    /// Starts SysTick on the core clock, interrupting at each wrap.
    pub fn start_counter() {
        // SAFETY: the only user of SYST, before anything else runs.
        let mut p = unsafe { cortex_m::Peripherals::steal() };
        p.SYST.set_clock_source(SystClkSource::Core);
        p.SYST.set_reload(RELOAD);
        p.SYST.clear_current();
        p.SYST.enable_interrupt();
        p.SYST.enable_counter();
        // The first tick loads RELOAD; until then the count reads 0.
        while SYST::get_current() == 0 {}
    }

    /// Instructions since `start_counter` under `-icount shift=0` (one
    /// instruction per virtual nanosecond): SysTick ticks of the 32 MHz
    /// core clock times 31.25 ns, so within 32 instructions. QEMU does not
    /// model the DWT cycle counter, so this is the counter there is.
    pub fn insns() -> u64 {
        loop {
            let before = WRAPS.load(Ordering::Acquire);
            let current = SYST::get_current();
            if WRAPS.load(Ordering::Acquire) == before {
                let ticks =
                    u64::from(before) * (u64::from(RELOAD) + 1) + u64::from(RELOAD - current);
                return ticks * 1_000_000_000 / CORE_HZ;
            }
        }
    }
}

#[cfg_attr(target_arch = "riscv32", riscv_rt::entry)]
#[cfg_attr(target_arch = "arm", cortex_m_rt::entry)]
fn main() -> ! {
    let Some(mut out) = board::console() else {
        board::exit(false)
    };
    use core::fmt::Write;
    board::start_counter();
    let _ = writeln!(out, "TARGET {} profile {}", board::TARGET, detllm::PROFILE);
    // SAFETY: the loader wrote the header word before the core started; it is
    // plain RAM, read once.
    let len = unsafe { core::ptr::read_volatile(board::MODEL_HEADER as *const u32) } as usize;
    if len == 0 || len > board::MODEL_MAX {
        let _ = writeln!(
            out,
            "ERROR no model: header at {:#x} says {len} bytes (load one, see docs/sections/baremetal.md)",
            board::MODEL_HEADER
        );
        board::exit(false)
    }
    // SAFETY: the model region is outside every linker section (memory map),
    // holds `len` loaded bytes and is never written while the program runs.
    let model: &'static [u8] =
        unsafe { core::slice::from_raw_parts(board::MODEL_BASE as *const u8, len) };
    // SAFETY: the only reference to ARENA, taken once on the only core.
    let arena: &'static mut [u8] = unsafe { &mut (*core::ptr::addr_of_mut!(ARENA)).0 };
    let stack_top = paint_stack();
    let result = run::run(model, arena, &mut out, board::insns);
    let _ = writeln!(
        out,
        "STACK used={} (of a {STACK_WINDOW}-byte window)",
        stack_used(stack_top)
    );
    match result {
        Ok(()) => {
            let _ = writeln!(out, "DONE");
            board::exit(true)
        }
        Err(e) => {
            let _ = writeln!(out, "ERROR {e:?}");
            board::exit(false)
        }
    }
}

#[panic_handler]
fn panic(info: &core::panic::PanicInfo) -> ! {
    if let Some(mut out) = board::console() {
        use core::fmt::Write;
        let _ = writeln!(out, "PANIC {info}");
    }
    board::exit(false)
}
