"""Is a real request answered as fast with 1,000 idle connections open as on
an idle server? (issue: slowloris; `cli/tests/slowloris.rs` checks that it
is answered at all, this measures how fast.)

    python3 scripts/slowloris_latency.py DETLLM MODEL [ROUNDS] [IDLE]

Starts `DETLLM serve --model MODEL --port 0 --max-connections 256` with
header and first-request timeouts of an hour (so no idle connection is ever
freed by a deadline: only eviction makes room). Then, ROUNDS times
(default 5), alternating: the latency of a real request (a 4-token greedy
completion, new connection, request to last byte) on the quiet server, and
the same with IDLE (default 1,000) connections open that each sent half a
request head. The idle connections come from IDLE distinct loopback
addresses (127.1.x.y), so the per-address limit does not make room for
them: the oldest-fresh eviction must. Prints both latencies per round, the
medians and their ratio; exits 1 if a request fails. Standard library only.
"""
import http.client
import json
import resource
import socket
import statistics
import subprocess
import sys
import threading
import time


def start_server(detllm, model):
    proc = subprocess.Popen(
        [detllm, "serve", "--model", model, "--port", "0", "--ctx", "256",
         "--max-connections", "256", "--timeout", "3600",
         "--first-request-timeout", "3600", "--audit-db", "none"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    for line in proc.stderr:
        if "on http://" in line:
            port = int(line.split("on http://")[1].split()[0].rsplit(":", 1)[1])
            threading.Thread(target=lambda: [None for _ in proc.stderr], daemon=True).start()
            return proc, port
    raise SystemExit("detllm serve exited before listening")


def real_request(port):
    """Seconds from connect to the last byte of a 4-token completion."""
    body = json.dumps({"prompt": "The quick brown fox", "max_tokens": 4, "temperature": 0})
    t0 = time.perf_counter()
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    c.request("POST", "/v1/completions", body, {"Content-Type": "application/json"})
    r = c.getresponse()
    data = r.read()
    elapsed = time.perf_counter() - t0
    c.close()
    if r.status != 200:
        raise SystemExit(f"real request failed: {r.status} {data[:200]!r}")
    return elapsed


def open_idle(port, count):
    """`count` connections from distinct loopback addresses, each half a head."""
    socks = []
    for i in range(count):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.bind((f"127.1.{i // 250}.{1 + i % 250}", 0))
        s.connect(("127.0.0.1", port))
        s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\n")
        socks.append(s)
    time.sleep(0.5)  # let the server accept (and evict) them all
    return socks


def main():
    detllm, model = sys.argv[1], sys.argv[2]
    rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 5
    idle = int(sys.argv[4]) if len(sys.argv) > 4 else 1000
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, idle + 256)), hard))
    proc, port = start_server(detllm, model)
    try:
        real_request(port)  # warm up: model pages, first-request paths
        quiet, crowded = [], []
        for k in range(rounds):
            quiet.append(real_request(port))
            socks = open_idle(port, idle)
            crowded.append(real_request(port))
            for s in socks:
                s.close()
            time.sleep(0.5)
            print(f"round {k + 1}: quiet {quiet[-1] * 1000:.1f} ms, "
                  f"{idle} idle connections {crowded[-1] * 1000:.1f} ms", flush=True)
        q, c = statistics.median(quiet), statistics.median(crowded)
        print(f"median: quiet {q * 1000:.1f} ms, with {idle} idle {c * 1000:.1f} ms, "
              f"ratio {c / q:.2f}")
    finally:
        proc.kill()
        proc.wait()


if __name__ == "__main__":
    main()
