#!/usr/bin/env python3
"""Time to the first new token of a stream resume (`resume_token_ids`), two servers alternating.

    python3 scripts/resume-ttfb.py URL_A URL_B [--k 64] [--pairs 7] [--max-tokens 80]

URL_A and URL_B are two `detllm serve` processes on the same model (e.g. one built from this
commit and one from an older one; http://127.0.0.1:PORT). A seeded chat request is streamed once
from A to get its first K token ids; then the same request with `resume_token_ids` = those ids is
sent to A and to B in turn, pair by pair (A B A B ...), and the seconds from sending it to the
first chunk that carries a new token are timed. Prints each pair and the median of the A/B ratios
(pairing keeps the ratio meaningful on a machine whose speed drifts). Both servers must resume
with the same first new token (checked). Standard library only.
"""
import argparse
import http.client
import json
import statistics
import time
import urllib.parse

PROMPT = "Write a long story about a lighthouse keeper and the sea, in simple words."


def stream(url, body):
    """Yields (seconds since the request was sent, parsed chunk) of one SSE stream."""
    u = urllib.parse.urlsplit(url)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=600)
    t0 = time.perf_counter()
    conn.request("POST", "/v1/chat/completions", json.dumps(body),
                 {"content-type": "application/json"})
    resp = conn.getresponse()
    if resp.status != 200:
        raise SystemExit(f"{url}: HTTP {resp.status}: {resp.read()[:300]!r}")
    try:
        for line in resp:
            line = line.strip()
            if not line.startswith(b"data: ") or line == b"data: [DONE]":
                continue
            yield time.perf_counter() - t0, json.loads(line[6:])
    finally:
        conn.close()


def model_of(url):
    """The id of the model `url` serves (GET /v1/models)."""
    u = urllib.parse.urlsplit(url)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=60)
    conn.request("GET", "/v1/models")
    body = json.loads(conn.getresponse().read())
    conn.close()
    return body["data"][0]["id"]


def token_id(chunk):
    for c in chunk.get("choices") or []:
        d = c.get("detllm") or (c.get("delta") or {}).get("detllm") or chunk.get("detllm") or {}
        if "token_id" in d:
            return d["token_id"]
    return None


def first_new(url, body):
    """(seconds to the first chunk with a token, its id)."""
    for t, chunk in stream(url, body):
        tid = token_id(chunk)
        if tid is not None:
            return t, tid
    raise SystemExit(f"{url}: no token came back")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("a")
    ap.add_argument("b")
    ap.add_argument("--k", type=int, default=64)
    ap.add_argument("--pairs", type=int, default=7)
    ap.add_argument("--max-tokens", type=int, default=80)
    args = ap.parse_args()
    model = model_of(args.a)
    if model_of(args.b) != model:
        raise SystemExit("the two servers serve different models")
    req = {"model": model, "max_tokens": args.max_tokens, "temperature": 0.8, "seed": 7,
           "ignore_eos": True, "stream": True,
           "messages": [{"role": "user", "content": PROMPT}]}
    ids = [tid for _, c in stream(args.a, req) if (tid := token_id(c)) is not None]
    if len(ids) <= args.k:
        raise SystemExit(f"the run gave {len(ids)} tokens, need more than {args.k}")
    resume = dict(req, resume_token_ids=ids[:args.k])
    ratios = []
    print(f"k = {args.k}; seconds to the first new token (A, B, A/B):")
    for i in range(args.pairs):
        ta, ida = first_new(args.a, resume)
        tb, idb = first_new(args.b, resume)
        if not ida == idb == ids[args.k]:
            raise SystemExit(f"first new token differs: A {ida}, B {idb}, run {ids[args.k]}")
        ratios.append(ta / tb)
        print(f"pair {i + 1}: {ta:7.3f} {tb:7.3f}  {ta / tb:.3f}")
    print(f"median A/B = {statistics.median(ratios):.3f} "
          f"(min {min(ratios):.3f}, max {max(ratios):.3f}) over {len(ratios)} pairs")


if __name__ == "__main__":
    main()
