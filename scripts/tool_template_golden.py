#!/usr/bin/env python3
"""Golden renderings of chat requests with tools for cli/src/serve/tools.rs.

    python3 scripts/tool_template_golden.py QWEN.gguf > tests/data/tool_templates.json

(the model: `bash scripts/fetch-real-model.sh qwen2.5-coder-0.5b`). Needs
`jinja2`.

Each request of REQUESTS (OpenAI-shaped: `tools`, `messages` whose
assistant `tool_calls` carry `arguments` as JSON text) is rendered with the
generation prompt by Jinja (jinja2) from the template string in the GGUF
(`tokenizer.chat_template`), as Hugging Face's tokenizers render chat
templates: `tools` passed as given, each call's `arguments` parsed from its
JSON text, and the `tojson` filter defined as theirs is
(`json.dumps(x, ensure_ascii=False)`: keys in order, `", "` and `": "`).

The output is JSON: `{"about", "jinja2", "cases": [{"request": {...},
"text": str}, ...]}`.
"""
import copy
import json
import os
import sys

import jinja2

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from chat_template_golden import read_template  # noqa: E402

WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "Current weather in a city.",
    "parameters": {"type": "object", "properties": {
        "city": {"type": "string", "description": "City name"},
        "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
        "required": ["city"]}}}
TIME = {"type": "function", "function": {"name": "get_time", "parameters": {
    "type": "object", "properties": {"zone": {"type": "string"}}}}}
UNICODE = {"type": "function", "function": {
    "name": "traduire", "description": "Traduit un texte — « café » 日本語",
    "parameters": {"type": "object", "properties": {
        "texte": {"type": "string", "maxLength": 200}, "n": {"type": "number", "minimum": 0.5}},
        "required": ["texte"], "additionalProperties": False}}}


def call(name, args, i=0):
    return {"id": f"call_{i}", "type": "function",
            "function": {"name": name, "arguments": json.dumps(args)}}


REQUESTS = [
    {"tools": [WEATHER], "messages": [{"role": "user", "content": "Weather in Paris?"}]},
    {"tools": [WEATHER, TIME], "messages": [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "Weather and time in Oslo?"}]},
    {"tools": [UNICODE], "messages": [{"role": "user", "content": "Traduis « bonjour »."}]},
    {"tools": [WEATHER, TIME], "messages": [
        {"role": "user", "content": "Weather and time in Oslo?"},
        {"role": "assistant", "content": None, "tool_calls": [
            call("get_weather", {"city": "Oslo", "unit": "celsius"}, 0),
            call("get_time", {"zone": "Europe/Oslo"}, 1)]},
        {"role": "tool", "tool_call_id": "call_0", "content": "{\"temp\": -3}"},
        {"role": "tool", "tool_call_id": "call_1", "content": "14:05"},
        {"role": "assistant", "content": "It is -3 °C and 14:05 in Oslo."},
        {"role": "user", "content": "And in Rome?"}]},
    {"tools": [WEATHER], "messages": [
        {"role": "user", "content": "Weather in Lima?"},
        {"role": "assistant", "content": "Let me check.", "tool_calls": [
            call("get_weather", {"city": "Lima"})]},
        {"role": "tool", "tool_call_id": "call_0", "content": "sunny"}]},
    # An `auto` answer of prose then two calls sent back: content with lines
    # (and a newline of its own at the end), then the calls.
    {"tools": [WEATHER, TIME], "messages": [
        {"role": "user", "content": "Weather and time in Oslo?"},
        {"role": "assistant", "content": "Two things to look up.\nOne moment.\n", "tool_calls": [
            call("get_weather", {"city": "Oslo"}), call("get_time", {"zone": "Europe/Oslo"}, 1)]},
        {"role": "tool", "tool_call_id": "call_0", "content": "-3"},
        {"role": "tool", "tool_call_id": "call_1", "content": "14:05"}]},
    # tool_choice "none": no tools shown, the history still rendered.
    {"tools": [WEATHER], "tool_choice": "none", "messages": [
        {"role": "user", "content": "Weather in Lima?"},
        {"role": "assistant", "tool_calls": [call("get_weather", {"city": "Lima"})]},
        {"role": "tool", "tool_call_id": "call_0", "content": "sunny"}]},
]


def tojson(x, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=False, indent=indent, separators=separators,
                      sort_keys=sort_keys)


def render(template, request):
    env = jinja2.Environment()
    env.filters["tojson"] = tojson
    tmpl = env.from_string(template)
    messages = copy.deepcopy(request["messages"])
    for m in messages:
        m.setdefault("content", None)
        for c in m.get("tool_calls") or []:
            c["function"]["arguments"] = json.loads(c["function"]["arguments"])
    tools = None if request.get("tool_choice") == "none" else request.get("tools")
    return tmpl.render(messages=messages, tools=tools, add_generation_prompt=True)


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    template = read_template(sys.argv[1])
    cases = [{"request": r, "text": render(template, r)} for r in REQUESTS]
    out = {"about": "Qwen2.5 tool-call renderings by Jinja; scripts/tool_template_golden.py",
           "jinja2": jinja2.__version__, "cases": cases}
    json.dump(out, sys.stdout, ensure_ascii=False, indent=1)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
