#!/usr/bin/env python3
"""Speculative vs plain decoding, alternating pair by pair, on a prompt set.

For every prompt of scripts/spec-prompts/ (or --prompts DIR) it runs
`detllm generate --chat --temperature 0` once plainly and once with the
speculation flags, in alternating order (plain first on even pairs, speculative
first on odd ones), checks that both printed the same digest (speculation
changes no bit), and reports each pair's decode-speed ratio (speculative /
plain, the in-process decode tok/s both runs print), the geometric mean of
the ratios, and the acceptance rate (accepted / drafted tokens).

Example (the figures in docs/SPECULATIVE.md):
  python3 scripts/spec-bench.py --model ~/.cache/detllm/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf \
      --spec '--speculate ngram'
  python3 scripts/spec-bench.py --model ~/.cache/detllm/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf \
      --spec '--speculate draft --draft-model ~/.cache/detllm/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf'
"""
import argparse
import math
import os
import re
import shlex
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def run(binary, model, prompt, max_tokens, threads, extra):
    cmd = [binary, "generate", "--model", model, "--chat", "--temperature", "0",
           "--max-tokens", str(max_tokens), "--threads", str(threads),
           "--prompt-file", prompt] + extra
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed:\n{p.stderr}")
    err = p.stderr
    tok_s = float(re.search(r"decode ([0-9.]+) tok/s", err).group(1))
    digest = re.search(r"digest ([0-9a-f]{64})", err).group(1)
    gen = int(re.search(r"(\d+) generated\]", err).group(1))
    spec = re.search(r"(\d+) decode steps, (\d+) drafted, (\d+) accepted", err)
    drafted, accepted = (int(spec.group(2)), int(spec.group(3))) if spec else (0, 0)
    return {"tok_s": tok_s, "digest": digest, "out": p.stdout, "gen": gen,
            "drafted": drafted, "accepted": accepted}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--spec", default="--speculate ngram", help="speculation flags")
    ap.add_argument("--prompts", default=os.path.join(HERE, "spec-prompts"))
    ap.add_argument("--binary", default=os.path.join(HERE, "..", "target", "release", "detllm"))
    ap.add_argument("--max-tokens", type=int, default=128)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=1)
    a = ap.parse_args()
    model = os.path.expanduser(a.model)
    extra = [os.path.expanduser(w) for w in shlex.split(a.spec)]
    prompts = sorted(os.path.join(a.prompts, f) for f in os.listdir(a.prompts) if f.endswith(".txt"))
    ratios, drafted, accepted, pair = [], 0, 0, 0
    for _ in range(a.rounds):
        for prompt in prompts:
            order = [("plain", []), ("spec", extra)]
            if pair % 2:
                order.reverse()
            res = {name: run(a.binary, model, prompt, a.max_tokens, a.threads, flags)
                   for name, flags in order}
            plain, spec = res["plain"], res["spec"]
            same = plain["digest"] == spec["digest"] and plain["out"] == spec["out"]
            if not same:
                sys.exit(f"{prompt}: speculation changed the output")
            ratio = spec["tok_s"] / plain["tok_s"]
            ratios.append(ratio)
            drafted += spec["drafted"]
            accepted += spec["accepted"]
            rate = spec["accepted"] / max(spec["drafted"], 1)
            print(f"{os.path.basename(prompt)}: {plain['gen']} tokens, plain {plain['tok_s']:.1f} tok/s, "
                  f"speculative {spec['tok_s']:.1f} tok/s, ratio {ratio:.2f}, accepted {100 * rate:.0f} %, "
                  f"same digest {plain['digest'][:12]}", flush=True)
            pair += 1
    gmean = math.exp(sum(math.log(r) for r in ratios) / len(ratios))
    print(f"geometric mean ratio {gmean:.2f} over {len(ratios)} pairs; "
          f"acceptance {100 * accepted / max(drafted, 1):.1f} % ({accepted}/{drafted}); "
          f"every output identical")


if __name__ == "__main__":
    main()
