#!/usr/bin/env python3
"""Fails if forksafe-core's parts stop owning their state.

Usage: check-core-shape.py [SRC_DIR]      (default: core/src)
       check-core-shape.py --self-test

Three rules (docs/DESIGN.md, "One op's path"; the crate docs' "Layers"):

1. At most MAX_FIELDS crate-visible fields (`pub(crate) name:` or
   `pub(super) name:`) outside the plain-data files: every other field is
   private to its part's module, which offers methods.
2. `impl ... Shared` appears in exactly one file (`engine/shared.rs`): the
   wiring's one impl; the steps of an op's path are free functions that
   reach the parts through it.
3. Every file but the plain-data and model-only ones has a `# State`
   section: the states, who moves them, which invariant each move serves.

Prints the counts it checked. Python's standard library only: the check
runs before anything is installed.
"""
import os
import re
import sys
import tempfile

MAX_FIELDS = 25

# Records with no invariant of their own: what a caller names, reports,
# errors, names. Their fields are plain data.
PLAIN_DATA = {
    "spec.rs",
    "op_info.rs",
    "op_name.rs",
    "error.rs",
    "current.rs",
    "report.rs",
}

# Files with no state to document: the crate root, model-only code and
# unit tests, and the facade's re-export hub.
NO_STATE_SECTION = PLAIN_DATA | {
    "lib.rs",
    "controls.rs",
    "engine/snapshot.rs",
    "engine/worker_tests.rs",
    "sync/mod.rs",
    "sync/padded.rs",
}

FIELD = re.compile(r"^\s*pub\((?:crate|super)\)\s+[a-z_][a-z0-9_]*\s*:", re.M)
SHARED_IMPL = re.compile(r"^\s*impl\b[^{;]*\bShared\b[^{;]*\{", re.M)


def rust_files(root):
    for dirpath, _, files in os.walk(root):
        for f in sorted(files):
            if f.endswith(".rs"):
                path = os.path.join(dirpath, f)
                yield os.path.relpath(path, root).replace(os.sep, "/"), path


def check(root):
    problems = []
    fields = []
    impls = []
    missing_state = []
    for rel, path in rust_files(root):
        with open(path, encoding="utf-8") as fh:
            src = fh.read()
        if rel not in PLAIN_DATA:
            for m in FIELD.finditer(src):
                line = src.count("\n", 0, m.start()) + 1
                fields.append(f"{rel}:{line}")
        if SHARED_IMPL.search(src):
            impls.append(rel)
        if rel not in NO_STATE_SECTION and not re.search(r"^//! # State\b", src, re.M):
            missing_state.append(rel)
    print(f"check-core-shape: {len(fields)} crate-visible fields outside plain data "
          f"(at most {MAX_FIELDS}); impl Shared in {len(impls)} file(s): "
          f"{', '.join(impls) or 'none'}; {len(missing_state)} part file(s) "
          f"without '# State'")
    if len(fields) > MAX_FIELDS:
        problems.append(f"{len(fields)} crate-visible fields (at most {MAX_FIELDS}): "
                        + ", ".join(fields))
    if len(impls) != 1:
        problems.append(f"impl Shared must be in exactly one file, found in: {impls}")
    for rel in missing_state:
        problems.append(f"{rel}: no '# State' section in its module docs")
    return problems


def self_test():
    good = {
        "engine/shared.rs": "//! # State\n//! x\npub(crate) struct Shared { a: u8 }\nimpl Shared {}\n",
        "part.rs": "//! # State\n//! y\npub(crate) struct Part {\n    pub(crate) n: u8,\n}\n",
        "spec.rs": "pub struct Spec { pub(crate) plain: u8 }\n",
    }
    cases = {
        "too many fields": dict(good, **{
            "big.rs": "//! # State\nstruct B {\n" + "".join(
                f"    pub(crate) f{i}: u8,\n" for i in range(MAX_FIELDS + 1)) + "}\n"}),
        "impl Shared twice": dict(good, **{
            "engine/push.rs": "//! # State\nimpl<P: Payload> Shared<P> {\n}\n"}),
        "no impl Shared": {k: v for k, v in good.items() if k != "engine/shared.rs"},
        "no State section": dict(good, **{"quiet.rs": "//! A part.\nstruct Q;\n"}),
    }
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        def write(tree, name):
            root = os.path.join(tmp, name)
            for rel, text in tree.items():
                path = os.path.join(root, rel)
                os.makedirs(os.path.dirname(path), exist_ok=True)
                with open(path, "w", encoding="utf-8") as fh:
                    fh.write(text)
            return root
        if check(write(good, "good")):
            failures.append("a good tree fails")
        for name, tree in cases.items():
            if not check(write(tree, name.replace(" ", "_"))):
                failures.append(f"'{name}' passes")
    if failures:
        print("check-core-shape self-test FAILED: " + "; ".join(failures))
        return 1
    print("check-core-shape self-test: ok (a good tree passes, each of "
          f"{len(cases)} broken trees fails)")
    return 0


def main(argv):
    if argv[1:] == ["--self-test"]:
        return self_test()
    root = argv[1] if len(argv) > 1 else "core/src"
    problems = check(root)
    for p in problems:
        print("check-core-shape: " + p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
