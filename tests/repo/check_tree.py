#!/usr/bin/env python3
"""Checks of the repository's shape, run by ctest (label "repo") over the tracked files:

  check_tree.py includes    the folders' #include graph has no cycle
  check_tree.py sizes       no source file is longer than 600 lines
  check_tree.py references  every path and document a tracked file names is in the repository

A folder is a module: src/X (subfolders included, so src/backend/cuda is src/backend),
tests/X, or a top-level folder (kernels, data-tools). An include is resolved like the
compiler does here: next to the including file, then under src/, the repository root and
tests/. `--root DIR` checks another tree (the tests of this script use it).
"""
import argparse
import os
import re
import subprocess
import sys

MAX_LINES = 600
SOURCE_SUFFIXES = (".cpp", ".hpp", ".h", ".cu", ".cuh", ".def", ".py", ".sh", ".c")
INCLUDE_ROOTS = ("src", ".", "tests")


def tracked_files(root):
    """The tracked files, or None outside a git work tree."""
    out = subprocess.run(["git", "-C", root, "ls-files", "-z"], capture_output=True)
    if out.returncode != 0:
        return None
    return [f for f in out.stdout.decode().split("\0") if f]


def module_of(path):
    parts = path.split("/")
    if len(parts) == 1:
        return "."
    if parts[0] in ("src", "tests") and len(parts) > 2:
        return parts[0] + "/" + parts[1]
    return parts[0]


def include_graph(root, files):
    """{module: {module it includes: first 'file -> header' seen}}"""
    tracked = set(files)
    graph = {}
    pattern = re.compile(r'^\s*#\s*include\s+"([^"]+)"')
    for f in files:
        if not f.endswith((".cpp", ".hpp", ".h", ".cu", ".cuh", ".c")):
            continue
        with open(os.path.join(root, f), encoding="utf-8", errors="replace") as fh:
            for line in fh:
                m = pattern.match(line)
                if not m:
                    continue
                candidates = [os.path.normpath(os.path.join(os.path.dirname(f), m.group(1)))]
                candidates += [os.path.normpath(os.path.join(r, m.group(1))) for r in INCLUDE_ROOTS]
                target = next((c for c in candidates if c in tracked), None)
                if target is None:
                    continue  # a system or generated header
                a, b = module_of(f), module_of(target)
                if a != b:
                    graph.setdefault(a, {}).setdefault(b, f"{f} -> {target}")
    return graph


def find_cycle(graph):
    """A list of modules forming a cycle, or None."""
    state = {}  # 1: on the current path, 2: done
    path = []

    def visit(node):
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, {})):
            if state.get(nxt) == 1:
                return path[path.index(nxt):] + [nxt]
            if nxt not in state:
                cycle = visit(nxt)
                if cycle:
                    return cycle
        path.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state:
            cycle = visit(node)
            if cycle:
                return cycle
    return None


def check_includes(root, files):
    graph = include_graph(root, files)
    cycle = find_cycle(graph)
    if cycle is None:
        for a in sorted(graph):
            print(f"{a} -> {', '.join(sorted(graph[a]))}")
        print("include graph: no cycle between folders")
        return 0
    print("include cycle between folders: " + " -> ".join(cycle), file=sys.stderr)
    for a, b in zip(cycle, cycle[1:]):
        print(f"  {a} -> {b}: {graph[a][b]}", file=sys.stderr)
    return 1


def check_sizes(root, files):
    bad = []
    for f in files:
        if not f.endswith(SOURCE_SUFFIXES) and os.path.basename(f) != "CMakeLists.txt":
            continue
        with open(os.path.join(root, f), encoding="utf-8", errors="replace") as fh:
            n = sum(1 for _ in fh)
        if n > MAX_LINES:
            bad.append(f"{f}: {n} lines (at most {MAX_LINES}: split it by responsibility)")
    for line in bad:
        print(line, file=sys.stderr)
    if not bad:
        print(f"every source file has at most {MAX_LINES} lines")
    return 1 if bad else 0


# A path that starts with ../ where a path may start (not the middle of "$dir/../x").
RELATIVE = re.compile(r"(?:^|(?<=[\s\"'`(\[=<:,]))((?:\.\./)+[\w.\-/]*)")
# A Markdown document named anywhere (a file name ending in .md, with or without a folder).
DOCUMENT = re.compile(r"(?<![\w.\-/])([\w.][\w.\-/]*[\w\-]\.md)\b")


def check_references(root, files):
    tracked = set(files)
    dirs = {os.path.dirname(f) for f in files}
    while any(d and os.path.dirname(d) not in dirs for d in dirs):
        dirs |= {os.path.dirname(d) for d in dirs}
    basenames = {os.path.basename(f) for f in files}

    def exists(path):
        return path in tracked or path in dirs or path == "."

    bad = []
    checkout = os.path.abspath(root) + "/"  # a record made here names files as ./..., not so
    for f in files:
        try:
            with open(os.path.join(root, f), encoding="utf-8") as fh:
                lines = fh.readlines()
        except (UnicodeDecodeError, IsADirectoryError):
            continue  # binary
        here = os.path.dirname(f)
        for number, line in enumerate(lines, 1):
            if checkout in line:
                bad.append(f"{f}:{number}: names this checkout's absolute path {checkout}")
            for m in RELATIVE.finditer(line):
                token = m.group(1).rstrip(".,:;")
                target = os.path.normpath(os.path.join(here, token))
                if target.startswith("..") or not exists(target):
                    bad.append(f"{f}:{number}: '{token}' is not a path in the repository")
            for m in DOCUMENT.finditer(line):
                doc = m.group(1)
                candidates = {os.path.normpath(os.path.join(here, doc)), os.path.normpath(doc)}
                if not any(exists(c) for c in candidates) and not (
                        "/" not in doc and doc in basenames):
                    bad.append(f"{f}:{number}: '{doc}' is not a document in the repository")
    for line in bad:
        print(line, file=sys.stderr)
    if not bad:
        print(f"{len(files)} tracked files refer only to paths inside the repository")
    return 1 if bad else 0


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("check", choices=["includes", "sizes", "references"])
    parser.add_argument("--root", default=os.path.join(os.path.dirname(__file__), "..", ".."))
    args = parser.parse_args()
    root = os.path.abspath(args.root)
    files = tracked_files(root)
    if files is None:
        print(f"{root} is not a git work tree: nothing to check (skipped)")
        return 77
    checks = {"includes": check_includes, "sizes": check_sizes, "references": check_references}
    return checks[args.check](root, files)


if __name__ == "__main__":
    sys.exit(main())
