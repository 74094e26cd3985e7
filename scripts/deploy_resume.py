"""Stream resume through nginx (used by scripts/deploy-test.sh).

    python3 scripts/deploy_resume.py NGINX_URL SOLO_URL KILL_PID

Opens 8 streams through nginx (chat and completions, greedy and sampled
with a seed, log-probabilities on); once each has sent a few token chunks,
the replica with process id KILL_PID is killed with SIGKILL. Every stream
it cut is resumed through nginx (so on the other replica) with the token ids
it received (`resume_token_ids`, each token chunk's `detllm.token_id`); the
chunks received before the cut followed by the resumed stream must equal the
same request streamed alone from SOLO_URL, chunk for chunk (apart from
`id`/`created`). At least one stream must have been cut. Standard library only.
"""
import http.client
import json
import os
import signal
import sys
import threading
import time
import urllib.parse

PROMPTS = ["Tell a short story about a lighthouse.", "Explain rain to a child.",
           "Describe a walk in a forest.", "Write a poem about the sea."]


def body(i):
    b = {"max_tokens": 96, "seed": 500 + i, "stream": True,
         "temperature": 0.0 if i % 3 == 0 else 0.9,
         "stream_options": {"include_usage": True}}
    if i % 2 == 0:
        b["messages"] = [{"role": "user", "content": PROMPTS[i % len(PROMPTS)]}]
        b["logprobs"], b["top_logprobs"] = True, 2
        return "/v1/chat/completions", b
    b["prompt"] = PROMPTS[i % len(PROMPTS)]
    b["logprobs"] = 2
    return "/v1/completions", b


def stream(base, path, b, on_chunk=None):
    """(status, chunks without id/created, finished with [DONE]); a cut stream
    keeps the chunks whose line arrived whole."""
    u = urllib.parse.urlsplit(base)
    c = http.client.HTTPConnection(u.hostname, u.port, timeout=120)
    c.request("POST", path, json.dumps(b), {"content-type": "application/json"})
    r = c.getresponse()
    if r.status != 200:
        return r.status, r.read().decode(), False
    chunks, done = [], False
    try:
        while True:
            line = r.readline()
            if not line.endswith(b"\n"):
                break  # end of stream, or a line cut in the middle
            line = line.decode().rstrip("\n")
            if line == "data: [DONE]":
                done = True
                break
            if line.startswith("data: "):
                v = json.loads(line[6:])
                v.pop("id", None)
                v.pop("created", None)
                chunks.append(v)
                if on_chunk:
                    on_chunk()
    except (http.client.HTTPException, OSError):
        pass  # the replica died: keep what arrived
    c.close()
    return 200, chunks, done


def token_ids(chunks):
    return [c["choices"][0]["detllm"]["token_id"] for c in chunks
            if c["choices"] and "token_id" in (c["choices"][0].get("detllm") or {})]


def main():
    nginx, solo, kill_pid = sys.argv[1], sys.argv[2], int(sys.argv[3])
    cases = [body(i) for i in range(8)]
    counts = [0] * len(cases)
    out = [None] * len(cases)

    def one(k):
        path, b = cases[k]

        def seen():
            counts[k] += 1
        try:
            out[k] = stream(nginx, path, b, seen)
        except Exception as e:  # a transport error is a failure too
            out[k] = ("error", repr(e), False)

    ts = [threading.Thread(target=one, args=(k,)) for k in range(len(cases))]
    for t in ts:
        t.start()
    deadline = time.time() + 60
    while min(counts) < 3 and time.time() < deadline and any(t.is_alive() for t in ts):
        time.sleep(0.02)
    print(f"resume: chunks received per stream when the replica is killed: {counts}")
    os.kill(kill_pid, signal.SIGKILL)
    for t in ts:
        t.join()

    cut = 0
    for k, (path, b) in enumerate(cases):
        status, chunks, done = out[k]
        if status != 200:
            sys.exit(f"resume: stream {k} through nginx got {status}: {chunks}")
        s, want, wdone = stream(solo, path, b)
        if s != 200 or not wdone:
            sys.exit(f"resume: stream {k} alone failed: {s} {want}")
        if done:
            if chunks != want:
                sys.exit(f"resume: uncut stream {k} differs from its solo run")
            continue
        cut += 1
        ids = token_ids(chunks)
        resumed = dict(b, resume_token_ids=ids)
        s, rest, rdone = stream(nginx, path, resumed)
        if s != 200 or not rdone:
            sys.exit(f"resume: stream {k} resumed after {len(ids)} tokens got {s}: {rest}")
        joined = chunks[:len(ids)] + rest
        if joined != want:
            sys.exit(f"resume: stream {k} cut after {len(ids)} tokens and resumed differs "
                     f"from its uninterrupted run:\n{joined}\n!=\n{want}")
        print(f"resume: stream {k} cut after {len(ids)} of {len(token_ids(want))} tokens, "
              "resumed on the other replica: equal to its uninterrupted run")
    if cut == 0:
        sys.exit("resume: the killed replica cut no stream: no resume tested")
    print(f"resume: {cut} cut streams resumed, {len(cases) - cut} uncut, all equal their solo runs")


if __name__ == "__main__":
    main()
