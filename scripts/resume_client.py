"""Resuming a cut stream with the official `openai` client.

    python scripts/resume_client.py BASE_URL [CUT [API_KEY]]
    (e.g. http://127.0.0.1:8080/v1; BASE_URL may be nginx in front of replicas)

Streams a chat answer and stops reading after CUT tokens (default 5), as if
the connection had dropped; then sends the same request with
`resume_token_ids` (the ids the token chunks carried in `detllm.token_id`),
through `extra_body`, and prints the text before the cut, the resumed text,
and whether the two make exactly the uninterrupted answer. Run it with the
interpreter `scripts/test.sh` sets up (the `openai` venv in the user cache,
`$XDG_CACHE_HOME/detllm/venv-openai`). Exits 1 if the texts differ.
"""
import sys

from openai import OpenAI

client = OpenAI(base_url=sys.argv[1], api_key=sys.argv[3] if len(sys.argv) > 3 else "unused")
cut = int(sys.argv[2]) if len(sys.argv) > 2 else 5
model = client.models.list().data[0].id
# A resume must repeat the request exactly, seed included.
request = {"model": model, "max_tokens": 40, "temperature": 0.8, "seed": 1234,
           "messages": [{"role": "user", "content": "Describe the sea in two sentences."}]}


def token_id(chunk):
    extra = (chunk.choices[0].model_extra or {}).get("detllm") or {}
    return extra.get("token_id")


# The first attempt: read CUT token chunks, then drop the connection.
ids, before = [], ""
stream = client.chat.completions.create(stream=True, **request)
for chunk in stream:
    if not chunk.choices or token_id(chunk) is None:
        continue
    ids.append(token_id(chunk))
    before += chunk.choices[0].delta.content or ""
    if len(ids) == cut:
        break
stream.close()

# The resume: the same request plus the ids received; only what follows comes back.
rest = client.chat.completions.create(stream=True, extra_body={"resume_token_ids": ids}, **request)
after = "".join(c.choices[0].delta.content or "" for c in rest if c.choices)

whole = client.chat.completions.create(**request).choices[0].message.content
print(f"before the cut ({len(ids)} tokens): {before!r}")
print(f"resumed:                  {after!r}")
print(f"equal to the uninterrupted answer: {before + after == whole}")
sys.exit(0 if before + after == whole else 1)
