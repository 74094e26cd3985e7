"""JSON-schema coverage of `detllm serve` beside llama-server's, on the same schemas.

Usage:
  python3 scripts/schema-bench.py SCHEMA_DIR NAME=BASE_URL... [--max-tokens 256] [--parallel 4]

Every `*.json` file of SCHEMA_DIR is a JSON schema (the intended input is a
sample of JSONSchemaBench's: its files hold the schema under "schema", which
is read when present). Each is sent to each server as
`response_format: {"type": "json_schema", ...}` on /v1/chat/completions
(temperature 0), and each answer is counted as:
  refused    a 4xx (its reason is printed),
  valid      the content parses and Python's `jsonschema` validates it,
  INVALID    accepted, finished by itself, and not valid (a bug of the server),
  cut        stopped at max_tokens (finish_reason "length"),
  error      anything else (5xx, a dropped connection),
and schemas that `jsonschema` itself cannot read are left out. Prints one
line per schema and server, then a table (Markdown).

The servers, on the same model (Qwen2.5-Coder-0.5B-Instruct Q4_K_M here):
  target/release/detllm serve --model M --port 18191 --audit-db none --max-seqs 8
  "$(source scripts/lib.sh; llamacpp_tool llama-server)" -m M --port 18192 -np 4 -c 8192
  python3 scripts/schema-bench.py DIR detllm=http://127.0.0.1:18191 \\
      llama-server=http://127.0.0.1:18192
Needs `jsonschema` (pip install jsonschema).
"""
import argparse
import concurrent.futures
import json
import pathlib
import sys
import urllib.error
import urllib.request

import jsonschema

PROMPT = "Write one JSON value that fits the schema of a {name} document."


def ask(url, name, schema, max_tokens):
    """A server's verdict on one schema: (kind, detail)."""
    body = {"messages": [{"role": "user", "content": PROMPT.format(name=name)}],
            "temperature": 0, "max_tokens": max_tokens, "seed": 1,
            "response_format": {"type": "json_schema",
                                "json_schema": {"name": "answer", "schema": schema}}}
    req = urllib.request.Request(url + "/v1/chat/completions", json.dumps(body).encode(),
                                 {"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=600) as r:
            answer = json.load(r)
    except urllib.error.HTTPError as e:
        text = e.read().decode(errors="replace")
        try:
            text = json.loads(text)["error"]["message"]
        except (ValueError, KeyError, TypeError):
            pass
        return ("refused" if 400 <= e.code < 500 else "error", f"{e.code}: {text[:160]}")
    except (urllib.error.URLError, OSError) as e:
        return "error", str(e)
    choice = answer["choices"][0]
    if choice.get("finish_reason") == "length":
        return "cut", ""
    content = choice["message"].get("content") or ""
    try:
        value = json.loads(content)
    except ValueError as e:
        return "INVALID", f"not JSON ({e}): {content[:160]!r}"
    try:
        jsonschema.validators.validator_for(schema)(schema).validate(value)
    except jsonschema.ValidationError as e:
        return "INVALID", f"{e.message[:160]}: {content[:160]!r}"
    return "valid", ""


def main():
    p = argparse.ArgumentParser()
    p.add_argument("dir", type=pathlib.Path)
    p.add_argument("servers", nargs="+", help="NAME=BASE_URL")
    p.add_argument("--max-tokens", type=int, default=256)
    p.add_argument("--parallel", type=int, default=4, help="requests in flight per server")
    a = p.parse_args()
    servers = dict(s.split("=", 1) for s in a.servers)
    schemas = {}
    for f in sorted(a.dir.glob("*.json")):
        v = json.loads(f.read_text())
        schema = v["schema"] if isinstance(v, dict) and "schema" in v else v
        try:
            jsonschema.validators.validator_for(schema).check_schema(schema)
        except (jsonschema.SchemaError, TypeError) as e:
            print(f"{f.name}: left out, not a schema jsonschema reads: {e}", file=sys.stderr)
            continue
        schemas[f.name] = schema
    kinds = ["refused", "valid", "INVALID", "cut", "error"]
    counts = {s: dict.fromkeys(kinds, 0) for s in servers}
    with concurrent.futures.ThreadPoolExecutor(a.parallel * len(servers)) as pool:
        jobs = {(s, f): pool.submit(ask, url.rstrip("/"), f.split("---")[0], schema,
                                    a.max_tokens)
                for f, schema in schemas.items() for s, url in servers.items()}
        for (s, f), job in jobs.items():
            kind, detail = job.result()
            counts[s][kind] += 1
            print(f"{s:12} {f:48} {kind:8} {detail}", flush=True)
    print(f"\n{len(schemas)} schemas, max_tokens {a.max_tokens}, temperature 0\n")
    print("| server | " + " | ".join(kinds) + " |")
    print("|---|" + "---:|" * len(kinds))
    for s in servers:
        print(f"| {s} | " + " | ".join(str(counts[s][k]) for k in kinds) + " |")
    return 1 if any(counts[s]["INVALID"] for s in servers if s == "detllm") else 0


if __name__ == "__main__":
    sys.exit(main())
