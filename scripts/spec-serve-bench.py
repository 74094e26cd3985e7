#!/usr/bin/env python3
"""`detllm serve --speculate ngram` beside the plain server, on a prompt set.

Starts two servers on the same model (plain, and with the speculation flags),
sends each prompt of the set to one then the other (alternating, one request
at a time, temperature 0), and prints per prompt each server's tokens per
second, the whole-request time ratio plain / speculative, and whether the two
answers are the same text; then the median ratio and the speculative server's
draft counters from /metrics.

  python3 scripts/spec-serve-bench.py --model ~/.cache/detllm/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf

The binary is `$CARGO_TARGET_DIR/release/detllm` (default `target/`), built
with `cargo build --release -p detllm-cli --features serve`.
"""
import argparse
import glob
import json
import os
import subprocess
import time
import urllib.request


def start(binary, model, port, threads, extra):
    proc = subprocess.Popen(
        [binary, "serve", "--model", model, "--port", str(port), "--threads", str(threads)] + extra,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    for _ in range(600):
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1)
            return proc
        except OSError:
            time.sleep(0.2)
    proc.kill()
    raise SystemExit(f"the server on port {port} did not come up")


def ask(port, prompt, max_tokens):
    body = json.dumps(
        {
            "messages": [{"role": "user", "content": prompt}],
            "temperature": 0,
            "max_tokens": max_tokens,
        }
    ).encode()
    req = urllib.request.Request(
        f"http://127.0.0.1:{port}/v1/chat/completions", body, {"Content-Type": "application/json"}
    )
    t0 = time.monotonic()
    answer = json.load(urllib.request.urlopen(req, timeout=900))
    seconds = time.monotonic() - t0
    return seconds, answer["choices"][0]["message"]["content"], answer["usage"]["completion_tokens"]


def main():
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    target = os.environ.get("CARGO_TARGET_DIR", os.path.join(repo, "target"))
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--spec", default="--speculate ngram", help="the speculative server's flags")
    ap.add_argument("--prompts", default=os.path.join(repo, "scripts", "spec-prompts"))
    ap.add_argument("--binary", default=os.path.join(target, "release", "detllm"))
    ap.add_argument("--max-tokens", type=int, default=256)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=1)
    args = ap.parse_args()
    model = os.path.expanduser(args.model)
    prompts = [open(f).read() for f in sorted(glob.glob(os.path.join(args.prompts, "*.txt")))]
    plain = start(args.binary, model, 18511, args.threads, [])
    spec = start(args.binary, model, 18512, args.threads, args.spec.split())
    try:
        ratios, same = [], 0
        for r in range(args.rounds):
            for i, prompt in enumerate(prompts):
                tp, cp, kp = ask(18511, prompt, args.max_tokens)
                ts, cs, ks = ask(18512, prompt, args.max_tokens)
                ratios.append(tp / ts)
                same += cp == cs
                print(
                    f"round {r + 1} prompt {i + 1}: plain {kp / tp:.1f} tok/s, "
                    f"speculative {ks / ts:.1f} tok/s, plain/speculative time {tp / ts:.2f}, "
                    f"same answer: {cp == cs}",
                    flush=True,
                )
        ratios.sort()
        print(f"median speedup {ratios[len(ratios) // 2]:.2f}; identical answers {same}/{len(ratios)}")
        metrics = urllib.request.urlopen("http://127.0.0.1:18512/metrics").read().decode()
        for line in metrics.splitlines():
            if "draft" in line and not line.startswith("#"):
                print(line)
    finally:
        plain.kill()
        spec.kill()


if __name__ == "__main__":
    main()
