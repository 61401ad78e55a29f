#!/usr/bin/env python3
"""Fails if the modules of a crate import each other in a cycle.

Usage: check-import-cycles.py [SRC_DIR]      (default: core/src)
       check-import-cycles.py --self-test

A module is one file (`engine/push.rs` is `engine::push`). An edge A -> B
is any path `crate::B...` (or `super::...` resolved to B) in A's code,
comments stripped. A submodule using its parent (`super::Shared`) is
containment, not an edge. Calls inside a `control!(...)` hook are not
edges: the hook names the model-only negative controls (`controls.rs`),
compiles to nothing outside model builds, and `controls.rs` is the one
module allowed to reach into the parts it breaks.

Python's standard library only: the check runs before anything is
installed.
"""
import os
import re
import sys


def modules(root):
    mods = {}
    for dirpath, _, files in os.walk(root):
        for f in files:
            if not f.endswith(".rs"):
                continue
            path = os.path.join(dirpath, f)
            name = os.path.relpath(path, root)[:-3].replace(os.sep, "::")
            if name.endswith("::mod"):
                name = name[: -len("::mod")]
            if name in ("lib", "main"):
                name = "crate"
            with open(path, encoding="utf-8") as fh:
                mods[name] = fh.read()
    return mods


def strip(src):
    src = re.sub(r"//[^\n]*", "", src)
    # A control! hook: up to the matching parenthesis of its invocation.
    out, i = [], 0
    for m in re.finditer(r"control!\(", src):
        if m.start() < i:
            continue
        out.append(src[i : m.start()])
        depth, j = 1, m.end()
        while j < len(src) and depth:
            depth += {"(": 1, ")": -1}.get(src[j], 0)
            j += 1
        i = j
    out.append(src[i:])
    return "".join(out)


def edges(mods):
    names = set(mods)

    def resolve(path):
        parts, best = path.split("::"), None
        for k in range(1, len(parts) + 1):
            cand = "::".join(parts[:k])
            if cand in names:
                best = cand
        return best

    graph = {m: set() for m in mods}
    for m, src in mods.items():
        src = strip(src)
        parent = m.rsplit("::", 1)[0] if "::" in m else "crate"
        refs = [g for g in re.findall(r"\bcrate::((?:\w+::)*\w+)", src)]
        refs += [
            (parent + "::" if parent != "crate" else "") + g
            for g in re.findall(r"\bsuper::((?:\w+::)*\w+)", src)
        ]
        for r in refs:
            t = resolve(r)
            if t and t != m and not m.startswith(t + "::"):
                graph[m].add(t)
    return graph


def cycles(graph):
    index, low, stack, on, found = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    sys.setrecursionlimit(10_000)
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def check(root):
    graph = edges(modules(root))
    found = cycles(graph)
    for comp in found:
        print(f"import cycle in {root}: {{{', '.join(comp)}}}")
        for m in comp:
            print(f"  {m} -> {', '.join(sorted(graph[m] & set(comp)))}")
    return not found


def self_test():
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        os.makedirs(os.path.join(d, "engine"))
        files = {
            "lib.rs": "mod a; mod b; mod engine;",
            "a.rs": "use crate::b::B; // crate::engine in a comment is no edge\n",
            "b.rs": "pub struct B; fn f() { control!(X => crate::a::broken()); }",
            "engine/mod.rs": "use crate::a::A; mod push;",
            "engine/push.rs": "use super::Shared; use crate::b::B;",
        }
        for name, text in files.items():
            with open(os.path.join(d, name), "w") as fh:
                fh.write(text)
        assert check(d), "no cycle expected: comments, control! hooks, parents"
        with open(os.path.join(d, "b.rs"), "a") as fh:
            fh.write("\nuse crate::a::A;\n")
        assert not check(d), "a <-> b must be reported"
    print("check-import-cycles self-test: ok")


if __name__ == "__main__":
    if sys.argv[1:] == ["--self-test"]:
        self_test()
        sys.exit(0)
    root = sys.argv[1] if len(sys.argv) > 1 else "core/src"
    ok = check(root)
    if ok:
        print(f"no import cycle among the modules of {root}")
    sys.exit(0 if ok else 1)
