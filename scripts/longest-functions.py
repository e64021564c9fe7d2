#!/usr/bin/env python3
"""Print the ten longest non-test Rust functions in the workspace; fail when one is too long.

Usage: scripts/longest-functions.py [--max LINES] [--top N]

A function's length is the number of lines from its `fn` line to its closing brace. Tests are
left out: files under a `tests/` or `benches/` folder, files named `*_tests.rs` or `tests.rs`,
and `#[cfg(test)]` modules. Build output (`target/`) is skipped. With `--max`, the script exits 1
when a function is longer, naming it, so CI keeps the bound (ARCHITECTURE.md, "Style").
"""

import argparse
import os
import re
import sys

FN = re.compile(r"^\s*(pub(\([^)]*\))?\s+)?(const\s+)?(async\s+)?(unsafe\s+)?(extern\s+\"[^\"]*\"\s+)?fn\s+(\w+)")
CFG_TEST = re.compile(r"^\s*#\[cfg\(test\)\]")


def strip(line, state):
    """Blank out strings, chars and comments so braces inside them are not counted.

    `state` carries an open block comment or raw/normal string across lines."""
    out = []
    i = 0
    n = len(line)
    while i < n:
        mode = state.get("mode")
        if mode == "block":
            end = line.find("*/", i)
            if end < 0:
                return "".join(out)
            i = end + 2
            state["mode"] = None
            continue
        if mode == "str":
            c = line[i]
            if c == "\\":
                i += 2
                continue
            if c == '"':
                state["mode"] = None
            i += 1
            continue
        if mode == "raw":
            closing = '"' + "#" * state["hashes"]
            end = line.find(closing, i)
            if end < 0:
                return "".join(out)
            i = end + len(closing)
            state["mode"] = None
            continue
        c = line[i]
        if line.startswith("//", i):
            break
        if line.startswith("/*", i):
            state["mode"] = "block"
            i += 2
            continue
        m = re.match(r'b?r(#*)"', line[i:])
        if m and (i == 0 or not (line[i - 1].isalnum() or line[i - 1] == "_")):
            state["mode"] = "raw"
            state["hashes"] = len(m.group(1))
            i += len(m.group(0))
            continue
        if c == '"':
            state["mode"] = "str"
            i += 1
            continue
        if c == "'":
            # A char literal ('x', '\n', '{') but not a lifetime ('a).
            m = re.match(r"'(\\.[^']*|[^\\'])'", line[i:])
            if m:
                i += len(m.group(0))
                continue
        out.append(c)
        i += 1
    return "".join(out)


def functions(text):
    """Yield (name, first line, length) for each function outside test modules."""
    lines = text.split("\n")
    state = {}
    depth = 0
    open_fns = []  # (name, start line, depth before its body)
    test_depth = None  # brace depth at which a #[cfg(test)] item began
    pending_test = False
    for number, raw in enumerate(lines, 1):
        line = strip(raw, state)
        if test_depth is None and CFG_TEST.match(raw):
            pending_test = True
        m = FN.match(line)
        if m and test_depth is None and not pending_test:
            open_fns.append([m.group(7), number, depth, False])
        for c in line:
            if c == "{":
                if pending_test and test_depth is None:
                    test_depth = depth
                    pending_test = False
                for f in open_fns:
                    if f[2] == depth and not f[3]:
                        f[3] = True
                depth += 1
            elif c == "}":
                depth -= 1
                if test_depth is not None and depth == test_depth:
                    test_depth = None
                while open_fns and open_fns[-1][3] and open_fns[-1][2] == depth:
                    name, start, _, _ = open_fns.pop()
                    yield name, start, number - start + 1
            elif c == ";":
                # A declaration without a body (trait method) or a test item that was one line.
                open_fns = [f for f in open_fns if f[3] or f[2] != depth]
                if pending_test and test_depth is None:
                    pending_test = False


def is_test_file(rel):
    parts = rel.split(os.sep)
    name = parts[-1]
    return (
        "tests" in parts[:-1]
        or "benches" in parts[:-1]
        or name.endswith("_tests.rs")
        or name == "tests.rs"
    )


def rust_files(root):
    """Every `.rs` file below `root` (build output left out) with its text, read once."""
    files = {}
    for directory, subdirs, names in os.walk(root):
        subdirs[:] = sorted(d for d in subdirs if d not in ("target", ".git", "node_modules"))
        for name in sorted(names):
            if name.endswith(".rs"):
                path = os.path.join(directory, name)
                with open(path, encoding="utf-8", errors="replace") as f:
                    files[path] = f.read()
    return files


def test_modules(files):
    """Files declared as `#[cfg(test)] mod name;` (whole test modules in a file of their own)."""
    found = set()
    decl = re.compile(r"#\[cfg\(test\)\]\s*(?:#\[path\s*=\s*\"([^\"]+)\"\]\s*)?(?:pub(?:\([^)]*\))?\s+)?mod\s+(\w+)\s*;")
    for path, text in files.items():
        directory, name = os.path.split(path)
        # `mod x;` in a/mod.rs, lib.rs or main.rs names a/x.rs; in a/b.rs it names a/b/x.rs.
        base = directory if name in ("mod.rs", "lib.rs", "main.rs") else os.path.join(directory, name[:-3])
        for m in decl.finditer(text):
            if m.group(1):
                found.add(os.path.normpath(os.path.join(directory, m.group(1))))
            else:
                found.add(os.path.join(base, m.group(2) + ".rs"))
                found.add(os.path.join(base, m.group(2), "mod.rs"))
    return found


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--max", type=int, default=None, help="fail when a function is longer")
    parser.add_argument("--top", type=int, default=10, help="how many to print (default 10)")
    args = parser.parse_args()
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    files = rust_files(root)
    tests = test_modules(files)
    found = []
    for path, text in files.items():
        rel = os.path.relpath(path, root)
        if is_test_file(rel) or path in tests:
            continue
        for fn, start, length in functions(text):
            found.append((length, f"{rel}:{start}", fn))
    found.sort(key=lambda f: (-f[0], f[1]))
    for length, where, fn in found[: args.top]:
        print(f"{length:5}  {fn}  {where}")
    if args.max is not None:
        over = [f for f in found if f[0] > args.max]
        if over:
            print(f"error: {len(over)} function(s) over {args.max} lines; split them", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
