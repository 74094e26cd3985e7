"""Checks two `detllm serve` replicas behind nginx (used by scripts/deploy-test.sh).

    python3 scripts/deploy_check.py NGINX_URL SOLO_URL KILL_URL KILL_PID

1. 24 concurrent requests (chat and completions, whole and streamed, greedy
   and sampled with a seed) through nginx; each must equal the same request
   sent alone to one replica (SOLO_URL), apart from `id` and `created`;
   both replicas must have answered some (round robin).
2. 24 concurrent whole requests through nginx; 0.3 s in, the replica with
   process id KILL_PID is killed with SIGKILL; every request must still
   answer 200 with the bytes of its solo run (nginx retries it on the other
   replica); the killed replica must have had requests in flight. Prints
   one line per phase; exits 1 on the first difference.
Standard library only.
"""
import http.client
import json
import os
import signal
import sys
import threading
import time
import urllib.parse

PROMPTS = ["Name three colours.", "What is 2+2?", "Say hello in French.", "Count to five."]


def body(i, stream):
    chat = i % 2 == 0
    b = {"max_tokens": 8 + i % 9, "seed": 100 + i, "stream": stream}
    b["temperature"] = 0.0 if i % 3 == 0 else 0.9
    if chat:
        b["messages"] = [{"role": "user", "content": PROMPTS[i % len(PROMPTS)]}]
    else:
        b["prompt"] = PROMPTS[i % len(PROMPTS)]
    return ("/v1/chat/completions" if chat else "/v1/completions"), b


def post(base, path, b):
    u = urllib.parse.urlsplit(base)
    c = http.client.HTTPConnection(u.hostname, u.port, timeout=120)
    c.request("POST", path, json.dumps(b), {"content-type": "application/json"})
    r = c.getresponse()
    data = r.read().decode()
    c.close()
    return r.status, data


def canonical(status, data, stream):
    """The response without id/created (a stream: its chunks' payloads)."""
    if status != 200:
        return (status, data)
    if stream:
        chunks = []
        for line in data.splitlines():
            if line.startswith("data: ") and line != "data: [DONE]":
                v = json.loads(line[6:])
                v.pop("id", None)
                v.pop("created", None)
                chunks.append(v)
        return (status, chunks)
    v = json.loads(data)
    v.pop("id", None)
    v.pop("created", None)
    return (status, v)


def concurrent(base, cases, during=None):
    out = [None] * len(cases)

    def one(k):
        path, b = cases[k]
        try:
            s, d = post(base, path, b)
            out[k] = canonical(s, d, b["stream"])
        except Exception as e:  # a transport error is a failure too
            out[k] = ("error", repr(e))

    ts = [threading.Thread(target=one, args=(k,)) for k in range(len(cases))]
    for t in ts:
        t.start()
    if during:
        during()
    for t in ts:
        t.join()
    return out


def compare(name, got, cases, solo_url):
    for k, (path, b) in enumerate(cases):
        s, d = post(solo_url, path, b)
        want = canonical(s, d, b["stream"])
        if want[0] != 200:
            sys.exit(f"{name}: request {k} alone got {want}")
        if got[k] != want:
            sys.exit(f"{name}: request {k} through nginx differs from its solo run:\n{got[k]}\n!=\n{want}")
    print(f"{name}: {len(cases)} requests through nginx equal their solo runs")


def metric(base, name):
    u = urllib.parse.urlsplit(base)
    c = http.client.HTTPConnection(u.hostname, u.port, timeout=10)
    c.request("GET", "/metrics")
    text = c.getresponse().read().decode()
    c.close()
    for line in text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[-1])
    sys.exit(f"no metric {name} at {base}")


def main():
    nginx, solo, other, kill_pid = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    ok = 'detllm_requests_total{outcome="ok"}'
    cases = [body(i, stream=(i % 4 == 1)) for i in range(24)]
    got = concurrent(nginx, cases)
    served = (metric(solo, ok), metric(other, ok))
    if min(served) == 0:
        sys.exit(f"round robin: one replica answered nothing ({served})")
    compare("round robin", got, cases, solo)
    print(f"round robin: the replicas answered {served[0]:.0f} and {served[1]:.0f}")

    cases = [body(100 + i, stream=False) for i in range(24)]
    in_flight = []

    def kill():
        time.sleep(0.3)
        in_flight.append(metric(other, "detllm_running_sequences") + metric(other, "detllm_queue_depth"))
        os.kill(kill_pid, signal.SIGKILL)

    got = concurrent(nginx, cases, during=kill)
    if not in_flight or in_flight[0] == 0:
        sys.exit(f"failover: the killed replica had nothing in flight ({in_flight}): no failover tested")
    compare("failover (one replica SIGKILLed mid-load)", got, cases, solo)
    print(f"failover: the killed replica had {in_flight[0]:.0f} requests in flight")


if __name__ == "__main__":
    main()
