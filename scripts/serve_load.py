"""Load driver for OpenAI-compatible servers (used by scripts/bench-serve.sh).

    python3 scripts/serve_load.py BASE_URL [--clients 16] [--tokens 128] [--model NAME]
                                           [--schema FILE]

Runs CLIENTS concurrent streaming chat requests (a fixed prompt set, sampled
with a per-request seed, `max_tokens` TOKENS, `ignore_eos` where the server
knows it), then sends each request again alone, and prints one JSON object:
aggregate output tokens/s under load, p50/p99 time to first token, p50
inter-token latency, and how many responses differ from their solo run
(text, and log-probabilities where the server returns them). With --schema,
every request carries the JSON schema of FILE as `response_format`
(json_schema): structured output under load. Standard library only.
"""
import argparse
import http.client
import json
import statistics
import threading
import time
import urllib.parse

PROMPTS = [
    "Write a short story about a lighthouse keeper.",
    "Explain how a refrigerator works.",
    "List ten animals that live in the ocean and one fact about each.",
    "Describe the city of Paris to someone who has never been there.",
    "What are the rules of chess? Explain them simply.",
    "Write a poem about autumn leaves.",
    "How do airplanes stay in the air?",
    "Give advice to a student starting university.",
]


def request_body(i, tokens, model, stream, schema=None):
    body = {
        "model": model,
        "messages": [{"role": "user", "content": PROMPTS[i % len(PROMPTS)]}],
        "max_tokens": tokens,
        "temperature": 0.8,
        "top_k": 40,
        "seed": 1000 + i,
        "logprobs": True,
        "top_logprobs": 1,
        "stream": stream,
        "ignore_eos": True,
    }
    if schema is not None:
        # The schema decides where the answer may end (a schema that cannot
        # end within `tokens` keeps every answer at full length).
        body["response_format"] = {"type": "json_schema",
                                   "json_schema": {"name": "answer", "schema": schema}}
        body["ignore_eos"] = False
    return body


def post_stream(base, body):
    """Returns (text, logprobs, ttft, token times) of one streamed request."""
    u = urllib.parse.urlparse(base)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=600)
    t0 = time.perf_counter()
    conn.request("POST", u.path + "/chat/completions", json.dumps(body),
                 {"content-type": "application/json"})
    resp = conn.getresponse()
    if resp.status != 200:
        raise RuntimeError(f"HTTP {resp.status}: {resp.read()[:200]!r}")
    text, logprobs, times = [], [], []
    for raw in resp:
        line = raw.decode().strip()
        if not line.startswith("data: ") or line == "data: [DONE]":
            continue
        chunk = json.loads(line[6:])
        for c in chunk.get("choices", []):
            piece = (c.get("delta") or {}).get("content") or ""
            lp = ((c.get("logprobs") or {}).get("content")) or []
            if piece or lp:
                times.append(time.perf_counter() - t0)
            text.append(piece)
            logprobs.extend(x.get("logprob") for x in lp)
    conn.close()
    return "".join(text), logprobs, times


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("base")
    ap.add_argument("--clients", type=int, default=16)
    ap.add_argument("--tokens", type=int, default=128)
    ap.add_argument("--model", default="")
    ap.add_argument("--schema", help="a JSON schema file sent as response_format")
    a = ap.parse_args()
    schema = json.load(open(a.schema)) if a.schema else None
    bodies = [request_body(i, a.tokens, a.model, True, schema) for i in range(a.clients)]
    results = [None] * a.clients

    def run(i):
        results[i] = post_stream(a.base, bodies[i])

    t0 = time.perf_counter()
    threads = [threading.Thread(target=run, args=(i,)) for i in range(a.clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    n_tokens = sum(len(r[2]) for r in results)
    ttft = sorted(r[2][0] for r in results if r[2])
    itl = sorted(b - a_ for r in results for a_, b in zip(r[2], r[2][1:]))
    solo = [post_stream(a.base, b) for b in bodies]
    text_diff = sum(1 for r, s in zip(results, solo) if r[0] != s[0])
    lp_diff = sum(1 for r, s in zip(results, solo) if r[1] != s[1])
    print(json.dumps({
        "clients": a.clients,
        "output_tokens": n_tokens,
        "wall_s": round(wall, 3),
        "tok_s": round(n_tokens / wall, 2),
        "ttft_p50_s": round(statistics.median(ttft), 4) if ttft else None,
        "ttft_p99_s": round(ttft[min(len(ttft) - 1, int(len(ttft) * 0.99))], 4) if ttft else None,
        "itl_p50_s": round(statistics.median(itl), 4) if itl else None,
        "text_differs_from_solo": text_diff,
        "logprobs_differ_from_solo": lp_diff,
    }))


if __name__ == "__main__":
    main()
