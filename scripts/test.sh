#!/usr/bin/env bash
# The test command: installs what the tests need, fetches the model, makes
# the generated fixtures, runs every test.
#   bash scripts/test.sh [cargo test args...]
#   bash scripts/test.sh --debug     # the library's tests in cargo's test profile
#
# The default run is the release build of the whole workspace (the library,
# the CLI and, in a build of its own, the server). `--debug` runs every test
# of the library in the `test` profile (Cargo.toml: opt-level 3 with
# debug assertions and overflow checks on), so an integer overflow anywhere
# the tests reach is a failure rather than a silent wrap; .ci/run runs both.
#
# Every test runs: DETLLM_REQUIRE_MODEL=1 makes a test that cannot find the
# model or a fixture fail (tests/support/model.rs) instead of skipping it.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib.sh
source scripts/lib.sh
ensure_apt cmake
# The real-model tests need SmolLM2-135M-Instruct.
model="$(bash scripts/fetch-model.sh)"
export DETLLM_MODEL="$model"
# The real Q4_K_M models (Qwen2.5-Coder-0.5B and 1.5B, Gemma 3 270M): the
# tests find them in the cache by the names scripts/fetch-real-model.sh gives them.
bash scripts/fetch-real-model.sh qwen2.5-coder-0.5b >/dev/null
bash scripts/fetch-real-model.sh qwen2.5-coder-1.5b >/dev/null
bash scripts/fetch-real-model.sh gemma3-270m >/dev/null
# The tiny gguf-py llama of tests/gguf/reader.rs (into the user cache).
bash scripts/make-fixtures.sh cache
# llama.cpp's tokenizer test vocabularies (tests/tokenizer/llamacpp_suite.rs).
# And its example GBNF grammars (cli/tests/constrain.rs), from the same download.
DETLLM_LLAMACPP_VOCABS="$(bash scripts/fetch-llamacpp-vocabs.sh)"
export DETLLM_LLAMACPP_VOCABS
export DETLLM_GBNF_DIR="$DETLLM_LLAMACPP_VOCABS/grammars"
export DETLLM_REQUIRE_MODEL=1
# The official openai Python client, for cli/tests/serve.rs (a venv in the user cache).
venv="${XDG_CACHE_HOME:-$HOME/.cache}/detllm/venv-openai"
if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c "import openai" 2>/dev/null; then
    python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet "openai==3.60.0" >&2
fi
export DETLLM_OPENAI_PYTHON="$venv/bin/python"
# Python's jsonschema, the independent validator of cli/tests/constrain.rs.
if ! "$venv/bin/python" -c "import jsonschema" 2>/dev/null; then
    "$venv/bin/pip" install --quiet "jsonschema==4.26.0" >&2
fi
export DETLLM_JSONSCHEMA_PYTHON="$venv/bin/python"
features="detllm/std"
# The SoftFloat oracle builds on x86_64 hosts only.
if [ "$(uname -m)" = x86_64 ]; then features="$features,detllm/oracle"; fi
if [ "${1:-}" = --debug ]; then
    shift
    exec cargo test -p detllm --features "$features" "$@"
fi
cargo test --release --workspace --features "$features" "$@"
# The server's tests in a build of their own: the `serve` feature links tokio,
# axum and hyper into the `detllm` binary (+10 MB of code, ~1 MB more resident),
# and cli/tests/cli.rs holds the plain CLI to its peak-memory target.
if [ $# -eq 0 ]; then
    cargo test --release -p detllm-cli --features serve --test serve
    # The binary's own tests with the server in: the in-process router tests (serve::http),
    # the audit store and receipts, the structured-output checks.
    cargo test --release -p detllm-cli --features serve --bin detllm
    # Structured output (llguidance, feature `constrain`, which `serve` includes).
    cargo test --release -p detllm-cli --features serve --test constrain
    # The audit store under SIGKILL (synthetic model, ~35 s; docs/AUDIT.md).
    cargo test --release -p detllm-cli --features serve --test audit_crash
    # 1,000 idle connections do not keep a real request out (~2 s).
    cargo test --release -p detllm-cli --features serve --test slowloris
    # Stream resume (resume_token_ids) across two server processes (~20 s).
    cargo test --release -p detllm-cli --features serve --test resume
fi
