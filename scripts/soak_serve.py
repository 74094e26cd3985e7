"""Soak driver for `detllm serve` (used by scripts/soak-serve.sh).

    python3 scripts/soak_serve.py BASE_URL PID SECONDS CLIENTS

CLIENTS threads send requests (chat, sampled, a new seed each, 32 tokens,
every fourth streamed) back to back for SECONDS; every 10 s the server's
resident memory (VmRSS of process PID) is sampled. Prints the RSS curve, the
request and error counts, and exits 1 on any error. Standard library only.
"""
import http.client
import json
import sys
import threading
import time
import urllib.parse


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def main():
    base, pid, seconds, clients = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4])
    u = urllib.parse.urlsplit(base)
    end = time.monotonic() + seconds
    counts = {"ok": 0, "error": 0}
    lock = threading.Lock()
    errors = []

    def client(c):
        n = 0
        while time.monotonic() < end:
            stream = n % 4 == 0
            body = {"messages": [{"role": "user", "content": f"Tell me about the number {c * 1000 + n}."}],
                    "max_tokens": 32, "temperature": 0.8, "seed": c * 100000 + n, "stream": stream}
            try:
                conn = http.client.HTTPConnection(u.hostname, u.port, timeout=120)
                conn.request("POST", "/v1/chat/completions", json.dumps(body), {"content-type": "application/json"})
                r = conn.getresponse()
                data = r.read().decode()
                conn.close()
                ok = r.status == 200 and ("[DONE]" in data if stream else "choices" in data)
            except Exception as e:  # noqa: BLE001 - any failure counts
                ok, data = False, repr(e)
            with lock:
                counts["ok" if ok else "error"] += 1
                if not ok and len(errors) < 5:
                    errors.append(data[:300])
            n += 1

    ts = [threading.Thread(target=client, args=(c,)) for c in range(clients)]
    for t in ts:
        t.start()
    start = time.monotonic()
    curve = []
    while any(t.is_alive() for t in ts):
        curve.append((round(time.monotonic() - start), rss_kib(pid)))
        time.sleep(10)
    for t in ts:
        t.join()
    print("t_s rss_mib")
    for t, kib in curve:
        print(f"{t} {kib / 1024:.1f}")
    print(f"requests ok {counts['ok']}, errors {counts['error']}")
    for e in errors:
        print("error:", e)
    sys.exit(1 if counts["error"] else 0)


if __name__ == "__main__":
    main()
