#!/usr/bin/env bash
# deploy/nginx.conf, tested: two `detllm serve` replicas on loopback behind
# Debian's nginx (run unprivileged from a temporary prefix), round robin.
# Requests through nginx must equal the same requests sent to one replica
# alone (apart from id/created); then one replica is SIGKILLed mid-load and
# every whole (non-streamed) request must still succeed with identical bytes
# (scripts/deploy_check.py). Then the replica is started again and killed
# mid-stream: every stream it cut is resumed through nginx on the other
# replica (`resume_token_ids`) and must continue its uninterrupted run
# exactly (scripts/deploy_resume.py). Model: SmolLM2-135M
# (scripts/fetch-model.sh).
#
#   bash scripts/deploy-test.sh
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib.sh
source scripts/lib.sh
ensure_apt nginx
model="$(bash scripts/fetch-model.sh)"
cargo build --release -p detllm-cli --features serve >&2
detllm="$PWD/target/release/detllm"
nginx_bin="$(command -v nginx || echo /usr/sbin/nginx)"

work="$(mktemp -d)"
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    if [ -f "$work/nginx.pid" ]; then kill "$(cat "$work/nginx.pid")" 2>/dev/null || true; fi
    rm -rf "$work"
}
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_ready() { # PORT
    for _ in $(seq 1 300); do
        if python3 -c "import urllib.request,sys; urllib.request.urlopen('http://127.0.0.1:$1/health', timeout=1)" 2>/dev/null; then return 0; fi
        sleep 0.2
    done
    echo "nothing answers on port $1" >&2
    return 1
}

a="$(free_port)"; b="$(free_port)"; listen="$(free_port)"
start_replica() { # a|b
    local port="${!1}"
    "$detllm" serve --model "$model" --port "$port" --max-seqs 4 --ctx 512 \
        --audit-db "$work/audit-$1.sqlite" >>"$work/replica-$1.log" 2>&1 &
    pids+=($!)
    eval "pid_$1=$!"
}
start_replica a; start_replica b
wait_ready "$a"; wait_ready "$b"

mkdir -p "$work/nginx"
sed -e "s|@PREFIX@|$work/nginx|g" -e "s|@LISTEN@|$listen|g" \
    -e "s|@REPLICA_A@|$a|g" -e "s|@REPLICA_B@|$b|g" deploy/nginx.conf >"$work/nginx/nginx.conf"
# As root, nginx's workers would switch to an unprivileged user that cannot
# write the prefix: keep them as the user who runs the test.
user=()
if [ "$(id -u)" = 0 ]; then user=(-g "user root;"); fi
"$nginx_bin" -p "$work/nginx" -e "$work/nginx/error.log" -c "$work/nginx/nginx.conf" "${user[@]}"
cp "$work/nginx/nginx.pid" "$work/nginx.pid"
wait_ready "$listen"

# The solo runs go to replica A alone; replica B is the one killed.
python3 scripts/deploy_check.py "http://127.0.0.1:$listen" "http://127.0.0.1:$a" \
    "http://127.0.0.1:$b" "$pid_b"
{ wait "$pid_b"; } 2>/dev/null || true

# Replica B again (same store); a reload puts it back in nginx's rotation
# (new workers forget the failure); then it is killed mid-stream.
start_replica b
wait_ready "$b"
"$nginx_bin" -p "$work/nginx" -e "$work/nginx/error.log" -c "$work/nginx/nginx.conf" "${user[@]}" -s reload
sleep 1
python3 scripts/deploy_resume.py "http://127.0.0.1:$listen" "http://127.0.0.1:$a" "$pid_b"
{ wait "$pid_b"; } 2>/dev/null || true
retried="$(grep -c "upstream" "$work/nginx/error.log" || true)"
echo "deploy test passed (nginx logged $retried upstream failures it retried)"
