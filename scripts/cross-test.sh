#!/usr/bin/env bash
# Same bits on every target: runs detllm's determinism suite (detllm::selftest,
# tests/determinism.rs) on the host, s390x (big-endian) and aarch64 under
# qemu-user, i686-musl under qemu-i386, wasm32-wasip1 under Node's WASI, and the
# bare-metal examples on a Cortex-M4F (qemu-system-arm, mps2-an386) and RISC-V
# rv32imc (qemu-system-riscv32, virt); builds the library for thumbv6m-none-eabi
# (Cortex-M0, no FPU). Every target's digests must equal tests/golden/*.txt.
# smollm2 runs the real model on bare metal (scripts/baremetal-model.sh).
# Exits non-zero if any target differs or cannot run.
#
# Usage: scripts/cross-test.sh [--no-install] [TARGET...]
#   TARGET: host s390x aarch64 i686 wasm32 cortex-m4 riscv32 thumbv6m smollm2 (default: all)
# Honours CARGO_TARGET_DIR. Installs what it needs (idempotent): rustup targets,
# Debian cross gccs and QEMU.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
# shellcheck source=scripts/lib.sh
source scripts/lib.sh

install=1
if [ "${1:-}" = --no-install ]; then install=0; shift; fi
all_targets=(host s390x aarch64 i686 wasm32 cortex-m4 riscv32 thumbv6m smollm2)
if [ $# -gt 0 ]; then targets=("$@"); else targets=("${all_targets[@]}"); fi

RUST_TARGETS=(s390x-unknown-linux-gnu aarch64-unknown-linux-gnu i686-unknown-linux-musl
    wasm32-wasip1 thumbv7em-none-eabihf thumbv6m-none-eabi riscv32imc-unknown-none-elf)
EMU_TIMEOUT=${EMU_TIMEOUT:-600} # seconds per emulated run (the build is not counted)

as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

# QEMU from Debian. If the plain install would remove a package (some images
# carry qemu-utils from bookworm-backports, which breaks bookworm's
# qemu-system-common 7.2), install the matching backports build instead, through
# a private sources list so the system's apt configuration is left as it is.
ensure_qemu() {
    local pkgs=(qemu-user qemu-system-arm qemu-system-misc) bins=(qemu-s390x qemu-aarch64 qemu-i386
        qemu-system-arm qemu-system-riscv32) missing=0 b
    for b in "${bins[@]}"; do command -v "$b" >/dev/null || missing=1; done
    [ $missing = 0 ] && return 0
    if apt-get install -s --no-install-recommends "${pkgs[@]}" 2>/dev/null | grep -q '^Inst' &&
        ! apt-get install -s --no-install-recommends "${pkgs[@]}" 2>/dev/null | grep -q '^Remv'; then
        ensure_apt "${pkgs[@]}"
        return 0
    fi
    local codename d
    codename=$(. /etc/os-release && echo "$VERSION_CODENAME")
    d=$(mktemp -d)
    mkdir -p "$d/lists/partial" "$d/archives/partial"
    # The machine's own Debian mirrors, from its apt sources (read once). grep
    # exits 2 for a missing path even when another matched (some images have
    # no sources.list, only sources.list.d/*.sources), so that is not fatal;
    # an empty result is handled below.
    local lines main_uri sec_uri
    lines=$(grep -rhE '^(URIs:|deb )' /etc/apt/sources.list /etc/apt/sources.list.d/ 2>/dev/null) || true
    main_uri=$(grep -oE 'https?://[^ ]+/debian/?$|https?://[^ ]+/debian ' <<<"$lines" | head -1 | tr -d ' ') || true
    sec_uri=$(grep -oE 'https?://[^ ]+/debian-security/?' <<<"$lines" | head -1) || true
    if [ -z "$main_uri" ]; then
        echo "cannot find the machine's Debian mirror in its apt sources" >&2
        return 1
    fi
    {
        echo "deb $main_uri $codename main"
        echo "deb $main_uri $codename-updates main"
        [ -n "$sec_uri" ] && echo "deb $sec_uri $codename-security main"
        echo "deb $main_uri $codename-backports main"
    } >"$d/sources.list"
    local o=(-o "Dir::Etc::sourcelist=$d/sources.list" -o Dir::Etc::sourceparts=- -o "Dir::State::lists=$d/lists"
        -o "Dir::Cache::archives=$d/archives" -o APT::Sandbox::User=root)
    echo "installing ${pkgs[*]} from $codename-backports" >&2
    as_root apt-get "${o[@]}" update -qq
    as_root env DEBIAN_FRONTEND=noninteractive apt-get "${o[@]}" install -y -qq -t "$codename-backports" \
        --no-install-recommends --no-remove "${pkgs[@]}" >/dev/null
    rm -rf "$d"
}

if [ $install = 1 ]; then
    installed=$(rustup target list --installed)
    for t in "${RUST_TARGETS[@]}"; do
        grep -qx "$t" <<<"$installed" || rustup target add "$t"
    done
    ensure_apt gcc-s390x-linux-gnu gcc-aarch64-linux-gnu
    ensure_qemu
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# The expected lines "name hex", sorted (the run order does not matter).
grep -hv '^#' tests/golden/*.txt | awk 'NF' | sort >"$work/golden"
golden_fp=$(sha256sum <"$work/golden" | cut -c1-16)

declare -A status what secs
# check NAME LOG: compares the DIGEST lines of LOG with the goldens.
check() {
    local name=$1 log=$2
    # (libtest may print its "test … ..." prefix on the same line as the first digest)
    grep -ao 'DIGEST [^ ]* [0-9a-f]\{64\}' "$log" | cut -d' ' -f2- | sort >"$work/$name.got" || true
    if [ ! -s "$work/$name.got" ]; then
        status[$name]="FAIL (no digests)"
        return
    fi
    if diff -u "$work/golden" "$work/$name.got" >"$work/$name.diff"; then
        status[$name]=OK
    else
        status[$name]="FAIL (digests differ)"
        sed 's/^/    /' "$work/$name.diff" >&2
    fi
}

# cargo_target NAME TRIPLE DESCRIPTION: the determinism test on a Linux/WASI target.
cargo_target() {
    local name=$1 triple=$2 t0=$SECONDS args=(--release --test determinism)
    what[$name]=$3
    [ "$triple" != host ] && args+=(--target "$triple")
    echo "== $name: $3" >&2
    if ! cargo test "${args[@]}" --no-run >"$work/$name.build" 2>&1; then
        tail -20 "$work/$name.build" >&2
        status[$name]="FAIL (build)"
    elif ! RUST_TEST_NOCAPTURE=1 timeout "$EMU_TIMEOUT" cargo test "${args[@]}" -- --nocapture \
        --test-threads=1 >"$work/$name.log" 2>&1; then
        tail -20 "$work/$name.log" >&2
        status[$name]="FAIL (run)"
        check "$name" "$work/$name.log"
        status[$name]="FAIL (run)"
    else
        check "$name" "$work/$name.log"
    fi
    secs[$name]=$((SECONDS - t0))
}

# bare_metal NAME DIR DESCRIPTION: build and run an embedded/ example under qemu-system.
bare_metal() {
    local name=$1 dir=$2 t0=$SECONDS
    what[$name]=$3
    echo "== $name: $3" >&2
    if ! (cd "$dir" && cargo build --release) >"$work/$name.build" 2>&1; then
        tail -20 "$work/$name.build" >&2
        status[$name]="FAIL (build)"
    elif ! (cd "$dir" && timeout "$EMU_TIMEOUT" cargo run --release) >"$work/$name.log" 2>&1 ||
        ! grep -q '^DONE ' "$work/$name.log"; then
        tail -20 "$work/$name.log" >&2
        status[$name]="FAIL (run)"
    else
        check "$name" "$work/$name.log"
    fi
    secs[$name]=$((SECONDS - t0))
}

t_start=$SECONDS
for t in "${targets[@]}"; do
    case $t in
    host) cargo_target host host "x86_64 host, cargo test" ;;
    s390x) cargo_target s390x s390x-unknown-linux-gnu "s390x Linux (big-endian), qemu-s390x" ;;
    aarch64) cargo_target aarch64 aarch64-unknown-linux-gnu "aarch64 Linux, qemu-aarch64" ;;
    i686) cargo_target i686 i686-unknown-linux-musl "i686 Linux musl, qemu-i386" ;;
    wasm32) cargo_target wasm32 wasm32-wasip1 "wasm32-wasip1, Node $(node --version) WASI" ;;
    cortex-m4) bare_metal cortex-m4 embedded/cortex-m "thumbv7em-none-eabihf bare metal, qemu-system-arm mps2-an386" ;;
    riscv32) bare_metal riscv32 embedded/riscv "riscv32imc-unknown-none-elf bare metal, qemu-system-riscv32 virt" ;;
    thumbv6m)
        what[thumbv6m]="thumbv6m-none-eabi (Cortex-M0, no FPU): library build only"
        echo "== thumbv6m: ${what[thumbv6m]}" >&2
        t0=$SECONDS
        if cargo build --release --lib --target thumbv6m-none-eabi >"$work/thumbv6m.build" 2>&1; then
            status[thumbv6m]="OK (built)"
        else
            tail -20 "$work/thumbv6m.build" >&2
            status[thumbv6m]="FAIL (build)"
        fi
        secs[thumbv6m]=$((SECONDS - t0))
        ;;
    smollm2)
        what[smollm2]="SmolLM2-135M bare metal (rv32imc, Cortex-M33): ids and digest equal the host's"
        echo "== smollm2: ${what[smollm2]}" >&2
        t0=$SECONDS
        if [ $install = 1 ]; then model_args=(); else model_args=(--no-install); fi
        if bash scripts/baremetal-model.sh "${model_args[@]}" >"$work/smollm2.log" 2>&1; then
            status[smollm2]=OK
        else
            status[smollm2]="FAIL (scripts/baremetal-model.sh)"
            tail -40 "$work/smollm2.log" >&2
        fi
        tail -4 "$work/smollm2.log" >&2
        secs[smollm2]=$((SECONDS - t0))
        ;;
    *)
        echo "unknown target $t (known: ${all_targets[*]})" >&2
        exit 2
        ;;
    esac
done

n_cases=$(wc -l <"$work/golden")
echo
echo "Determinism: $n_cases digests per target, golden fingerprint $golden_fp (SHA-256 of the sorted golden lines)"
printf '%-10s %-8s %-18s %-6s %s\n' target time fingerprint cases status
fail=0
for t in "${targets[@]}"; do
    fp=-
    n=-
    if [ -s "$work/$t.got" ]; then
        fp=$(sha256sum <"$work/$t.got" | cut -c1-16)
        n=$(wc -l <"$work/$t.got")
    fi
    printf '%-10s %-8s %-18s %-6s %s\n' "$t" "${secs[$t]}s" "$fp" "$n" "${status[$t]}"
    case ${status[$t]} in OK*) ;; *) fail=1 ;; esac
done
echo
echo "Per case (every OK target produced exactly these):"
while read -r name hex; do printf '  %-28s %s\n' "$name" "$hex"; done <"$work/golden"
echo "total $((SECONDS - t_start))s"
exit $fail
