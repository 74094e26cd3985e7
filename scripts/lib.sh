# Shared helpers for the scripts. Source it; do not run it.

# ensure_apt PKG...: install Debian packages that are missing.
ensure_apt() {
    local missing=()
    for p in "$@"; do
        dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
    done
    if [ ${#missing[@]} -gt 0 ]; then
        echo "installing: ${missing[*]}" >&2
        if [ "$(id -u)" = 0 ]; then
            apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
        else
            sudo apt-get update -qq && sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
        fi
    fi
}

# Compiler flags for every build of llama.cpp (the peer): its AMX kernels,
# compiled in by -march=native where the CPU has AMX, crash (SIGSEGV in
# ggml_backend_amx_mul_mat, llama-cpp-python 0.3.36) on the virtual
# machines measured here, so they are left out; its AVX-512 kernels remain.
LLAMACPP_CFLAGS="-mno-amx-tile -mno-amx-int8 -mno-amx-bf16"
# The same as CMake arguments, for pip's build of llama-cpp-python (CMAKE_ARGS).
LLAMACPP_CMAKE_ARGS="-DCMAKE_C_FLAGS=\"$LLAMACPP_CFLAGS\" -DCMAKE_CXX_FLAGS=\"$LLAMACPP_CFLAGS\""

# llamacpp_has_amx VENV: whether the llama-cpp-python in VENV was built with
# llama.cpp's AMX kernels (its CPU library holds their entry point).
llamacpp_has_amx() {
    local lib
    for lib in "$1"/lib/python3*/site-packages/llama_cpp/lib/libggml-cpu.so; do
        [ -f "$lib" ] && grep -q ggml_backend_amx_mul_mat "$lib" && return 0
    done
    return 1
}

# llamacpp_tool NAME: the path of llama.cpp's program NAME (a CMake target:
# llama-server, llama-bench, llama-batched-bench, …), built once from the
# llama.cpp tree inside llama-cpp-python 0.3.36's source distribution into
# the user cache (~10 minutes for the first program on 2 cores).
llamacpp_tool() {
    local dir="${XDG_CACHE_HOME:-$HOME/.cache}/detllm/llama.cpp-0.3.36"
    local bin="$dir/build/bin/$1"
    if [ ! -x "$bin" ]; then
        ensure_apt cmake g++
        if [ ! -f "$dir/CMakeLists.txt" ]; then
            echo "fetching the llama.cpp sources (llama-cpp-python 0.3.36) into $dir..." >&2
            local tmp
            tmp="$(mktemp -d)"
            python3 -m pip download --quiet --no-deps --no-binary :all: llama-cpp-python==0.3.36 -d "$tmp" >&2
            tar xzf "$tmp"/llama_cpp_python-0.3.36.tar.gz -C "$tmp"
            rm -rf "$dir"
            mkdir -p "$(dirname "$dir")"
            mv "$tmp/llama_cpp_python-0.3.36/vendor/llama.cpp" "$dir"
            rm -rf "$tmp"
        fi
        echo "building llama.cpp's $1 (once, into $dir/build)..." >&2
        cmake -S "$dir" -B "$dir/build" -DCMAKE_BUILD_TYPE=Release -DLLAMA_CURL=OFF \
            -DCMAKE_C_FLAGS="$LLAMACPP_CFLAGS" -DCMAKE_CXX_FLAGS="$LLAMACPP_CFLAGS" >&2
        cmake --build "$dir/build" --target "$1" -j "$(nproc)" >&2
    fi
    echo "$bin"
}
