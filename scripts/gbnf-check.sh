#!/usr/bin/env bash
# llama.cpp's own grammar validator on detllm's GBNF outputs.
#   bash scripts/gbnf-check.sh [SEEDS]     (default 3 seeds per grammar)
#
# For each of llama.cpp's example grammars (`grammars/*.gbnf` of its source,
# which scripts/fetch-llamacpp-vocabs.sh unpacks; DETLLM_GBNF_DIR overrides)
# and each seed, `detllm generate --grammar` writes an answer (SmolLM2-135M,
# sampled, --max-tokens 96) and llama.cpp's `test-gbnf-validator` (built from
# the same llama.cpp tree by `llamacpp_tool`, once) reads the grammar and
# the answer:
#   - an answer that ended by itself (fewer tokens than --max-tokens) must
#     be valid: the whole text is in the grammar's language;
#   - an answer cut at --max-tokens is a prefix: valid, or rejected only
#     with "Unexpected end of input" (every character was accepted); a
#     character cut in its UTF-8 bytes at the end (U+FFFD) is dropped;
#   - "Unexpected character" anywhere is a failure.
# Prints one line per answer and a count; exits 1 on any failure. Not in
# .ci/run: the validator needs llama.cpp's libraries built (~10 minutes on
# 2 cores the first time); with them built this script takes about a minute.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib.sh
source scripts/lib.sh
seeds="${1:-3}"
max=96
validator="$(llamacpp_tool test-gbnf-validator)"
model="$(bash scripts/fetch-model.sh)"
dir="${DETLLM_GBNF_DIR:-$(bash scripts/fetch-llamacpp-vocabs.sh)/grammars}"
cargo build --release -q -p detllm-cli --features serve
bin=target/release/detllm
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
complete=0 prefix=0 failed=0
for g in "$dir"/*.gbnf; do
    name="$(basename "$g" .gbnf)"
    for seed in $(seq 1 "$seeds"); do
        out="$tmp/$name-$seed.json"
        "$bin" generate --chat --json --max-tokens "$max" --seed "$seed" --temperature 0.7 \
            --prompt "Write an example of: $name." --grammar "$g" --model "$model" \
            >"$out" 2>"$tmp/err"
        python3 - "$out" "$tmp/input" "$max" <<'EOF' >"$tmp/n"
import json, sys
v = json.loads(open(sys.argv[1]).read())
text = v["text"]
if len(v["ids"]) >= int(sys.argv[3]):
    # Cut at --max-tokens inside a character's UTF-8 bytes: the text ends
    # in U+FFFD for the partial character, which is no part of the answer.
    text = text.rstrip("\ufffd")
open(sys.argv[2], "w", encoding="utf-8").write(text)
print(len(v["ids"]))
EOF
        n="$(cat "$tmp/n")"
        verdict="$("$validator" "$g" "$tmp/input" | head -2 | tr '\n' ' ')"
        if [[ "$verdict" == *"is valid"* ]]; then
            kind=complete-valid
        elif [ "$n" -ge "$max" ] && [[ "$verdict" == *"Unexpected end of input"* ]]; then
            kind=prefix-valid
        else
            kind=INVALID
        fi
        case "$kind" in
        complete-valid) complete=$((complete + 1)) ;;
        prefix-valid) prefix=$((prefix + 1)) ;;
        *) failed=$((failed + 1)) ;;
        esac
        printf '%-12s seed %s: %3s tokens, %s\n' "$name" "$seed" "$n" "$kind"
        if [ "$kind" = INVALID ]; then
            echo "    $verdict" && cat "$tmp/input" && echo
        fi
    done
done
echo "valid: $complete complete, $prefix cut at --max-tokens (valid prefixes); invalid: $failed"
[ "$failed" = 0 ]
