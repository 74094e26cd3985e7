#!/usr/bin/env python3
"""The structural rules of the library that no compiler checks (issue #41).

    python3 scripts/shape-check.py [ROOT]

1. No function in the library (src/) is longer than 120 lines (from its
   `fn` line to its closing brace; the code is rustfmt-formatted, so the
   closing brace is the first line at the `fn` line's indentation).
2. In src/quant/fast/, the CPU builds are leaves: a file under an arch folder
   (x86/, and any later aarch64/, wasm32/) names no other arch folder and none
   of the portable drivers reach into an arch folder: among the portable
   files only dispatch.rs (which picks the build) and mod.rs (which declares
   the module) name one.

Prints each violation as `path:line: what` and exits 1 if there is any.
"""
import os
import re
import sys

MAX_FN_LINES = 120
ARCH_DIRS = ("x86", "aarch64", "wasm32")
FN = re.compile(r'^(\s*)(pub(\([a-z:]+\))? )?(const )?(unsafe )?(extern "C" )?fn (\w+)')


def long_functions(path):
    lines = open(path, encoding="utf-8").read().split("\n")
    for i, line in enumerate(lines):
        m = FN.match(line)
        if not m or line.rstrip().endswith(";"):
            continue
        indent = m.group(1)
        j = i + 1
        while j < len(lines) and not (
            lines[j].startswith(indent + "}") and len(lines[j]) - len(lines[j].lstrip()) == len(indent)
        ):
            j += 1
        n = j - i + 1
        if n > MAX_FN_LINES:
            yield i + 1, f"fn {m.group(7)} is {n} lines (at most {MAX_FN_LINES})"


def code_lines(path):
    """(number, text) of the lines outside comments (line comments only: the crate uses no block comments)."""
    for n, line in enumerate(open(path, encoding="utf-8"), 1):
        text = line.split("//", 1)[0]
        if text.strip():
            yield n, text


def arch_names(text):
    return [a for a in ARCH_DIRS if re.search(r"\b" + a + r"::", text) or re.search(r"\bmod " + a + r"\b", text)]


def arch_leaf_violations(fast):
    for name in sorted(os.listdir(fast)):
        path = os.path.join(fast, name)
        if name.endswith(".rs") and name not in ("dispatch.rs", "mod.rs"):
            for n, text in code_lines(path):
                for a in arch_names(text):
                    yield path, n, f"portable file names the {a} build (only dispatch.rs picks a build)"
        elif os.path.isdir(path) and name in ARCH_DIRS:
            for leaf in sorted(os.listdir(path)):
                if not leaf.endswith(".rs"):
                    continue
                for n, text in code_lines(os.path.join(path, leaf)):
                    others = [a for a in arch_names(text) if a != name]
                    if others or re.search(r"\bdispatch::", text):
                        yield os.path.join(path, leaf), n, "an arch leaf imports another arch folder or the dispatch"


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..")
    src = os.path.join(root, "src")
    problems = []
    for dirpath, _, files in os.walk(src):
        for f in sorted(files):
            if f.endswith(".rs"):
                p = os.path.join(dirpath, f)
                problems += [(p, n, what) for n, what in long_functions(p)]
    problems += list(arch_leaf_violations(os.path.join(src, "quant", "fast")))
    for p, n, what in problems:
        print(f"{os.path.relpath(p, root)}:{n}: {what}")
    if problems:
        print(f"shape-check: {len(problems)} problem(s)")
        return 1
    print("shape-check: no function over 120 lines; the arch builds of quant::fast are leaves")
    return 0


if __name__ == "__main__":
    sys.exit(main())
