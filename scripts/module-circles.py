#!/usr/bin/env python3
"""Print a crate's top-level modules with the ones each imports, and fail on an import circle.

Usage: scripts/module-circles.py CRATE_SRC_DIR [...]

A module is a top-level file or folder of the crate's `src/` (`lib.rs` and `main.rs` left out:
they declare the modules). Module A imports B when A's code names `crate::B` outside a comment.
Test code is left out: `#[cfg(test)]` files (`*_tests.rs`, `tests.rs`) and everything after a
line `#[cfg(test)]` in a file, which is where this workspace keeps its test modules. A circle
is any strongly connected group of two or more modules (A → B → … → A); the script names its
members and exits 1 (issue 40: the engine has none).
"""

import os
import re
import sys

IMPORT = re.compile(r"\bcrate::([a-z_][a-z0-9_]*)")


def code_of(path):
    """The file's non-test code, comments removed (line comments only: doc and plain)."""
    out = []
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            if line.strip().startswith("#[cfg(test)]"):
                break
            out.append(line.split("//", 1)[0])
    return "".join(out)


def modules(src):
    found = {}
    for name in sorted(os.listdir(src)):
        path = os.path.join(src, name)
        if name in ("lib.rs", "main.rs"):
            continue
        if os.path.isdir(path):
            files = [
                os.path.join(d, f)
                for d, _, fs in os.walk(path)
                for f in fs
                if f.endswith(".rs")
            ]
            found[name] = files
        elif name.endswith(".rs"):
            found[name[:-3]] = [path]
    return found


def is_test_file(path):
    name = os.path.basename(path)
    return name.endswith("_tests.rs") or name == "tests.rs"


def graph(src):
    mods = modules(src)
    edges = {}
    for m, files in mods.items():
        names = set()
        for path in files:
            if is_test_file(path):
                continue
            names.update(IMPORT.findall(code_of(path)))
        edges[m] = sorted(n for n in names if n in mods and n != m)
    return edges


def circles(edges):
    """Tarjan's strongly connected components with more than one member."""
    index, low, on, stack, out = {}, {}, set(), [], []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                out.append(sorted(group))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


def main(argv):
    if len(argv) < 2:
        print(__doc__.strip().split("\n")[2], file=sys.stderr)
        return 2
    failed = False
    for src in argv[1:]:
        edges = graph(src)
        print(f"{src}:")
        for m, deps in edges.items():
            print(f"  {m} -> {', '.join(deps) if deps else '(none)'}")
        for group in circles(edges):
            print(f"error: {src}: an import circle: {' <-> '.join(group)}", file=sys.stderr)
            failed = True
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
