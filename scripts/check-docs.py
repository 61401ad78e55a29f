#!/usr/bin/env python3
"""check-docs.py — every reference the docs and doc comments cite resolves,
and they carry no project history.

Usage:
    python3 scripts/check-docs.py            # every tracked *.md and every doc comment
    python3 scripts/check-docs.py FILE...    # these files only
    python3 scripts/check-docs.py --self-test

What it reads: every *.md file git tracks (the fuzz corpora aside) and the
doc comments (`//!`, `///`) of every tracked *.rs file. What it checks:

- **Paths.** A backticked span or a Markdown link target that names a file
  of the repository (it starts with a top-level folder such as `core/` or
  `scripts/`, or is a top-level `*.md`) must exist. In a doc comment a path
  may also be relative to its crate's `src/` or to the comment's folder
  (`ready/README.md` in core's docs). A relative Markdown link resolves
  from the document's folder, and a `#fragment` must name one of the target
  document's headings.
- **`path::item`.** The item must be defined in that file; each qualifier
  before it must be a type defined or implemented there. In a test file
  (`*/tests/*.rs`) the last name must be a test: a `#[test]` fn, a row of a
  `control_pairs!` table, or a scenario of a `harness = false` binary (a fn
  named at least twice in a file with its own `fn main`).
- **Crate paths.** `forksafe::X`, `forksafe_core::x::Y` and the like: each
  name after the crate must be a module, type, fn, const, macro or variant
  defined in that crate's sources.
- **`Type::member`.** When `Type` is a type of the workspace, `member` must
  be defined in a file that defines or implements it; a CamelCase type the
  workspace does not define must be a known external one
  (`scripts/docs-external-names.txt`).
- **History.** No project issue numbers ("issue" and a number), and none of the
  phrases that tell how the code came to be (`HISTORY_PHRASES`); dates only
  in BENCHMARKS.md and FORK-SAFETY.md, whose tables carry them.

Exits 1 listing every finding, and also if it found no reference at all.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

TOP_DIRS = (
    "core", "engine", "models", "proptests", "fuzz", "scripts", "testkit", "bench",
    "forksafe-rayon", "python", "examples", "docs", ".ci", ".cargo", ".config",
)

# Crate name (as written in Rust paths) -> its source folders.
CRATES = {
    "forksafe": ["engine/src"],
    "forksafe_core": ["core/src"],
    "forksafe_rayon": ["forksafe-rayon/src"],
    "forksafe_tokio": ["forksafe-tokio/src"],
    "forksafe_testkit": ["testkit/src"],
    "forksafe_pyo3": ["python/forksafe-pyo3/src"],
    "forksafe_models": ["models/src"],
    "forksafe_proptests": ["proptests/src"],
    "forksafe_bench": ["bench/src"],
}

HISTORY_PHRASES = [
    "was tried", "were tried", "tried earlier", "tried first", " used to ",
    "first version", "previously", "earlier run", "earlier build", "has moved into",
    "the seed's protocol", "supersedes", "now points",
    "found by this audit", "added by the fork-safety audit", "before the fix",
    "began as", "(then; today", "since the full run", "this session",
]

ISSUE_RE = re.compile(r"\bissues?\s+#?\d+\b", re.I)
DATE_RE = re.compile(r"\b20\d\d-\d\d-\d\d\b")
DATES_ALLOWED = {"BENCHMARKS.md", "FORK-SAFETY.md", "LOOM.md", "SHUTTLE.md"}

TICK_RE = re.compile(r"`([^`\n]+)`")
LINK_RE = re.compile(r"\]\(([^)\s]+)\)")
PATH_RE = re.compile(
    r"^((?:" + "|".join(re.escape(d) for d in TOP_DIRS) + r")/[A-Za-z0-9_./*{},-]*"
    r"|[A-Za-z0-9_-]+\.md)"
    r"((?:::[A-Za-z0-9_]+)+(?:\(\))?|:[0-9].*)?$"
)
REL_PATH_RE = re.compile(r"^([a-z_][a-z0-9_]*/)*[a-z_][a-z0-9_]*\.(rs|md)((?:::[A-Za-z0-9_]+)+(?:\(\))?)?$")
CRATE_RE = re.compile(r"^(" + "|".join(CRATES) + r")((?:::[A-Za-z_][A-Za-z0-9_]*)+)(?:\(\)|!)?$")
# A bare code identifier: snake_case with an underscore, or CamelCase with
# two humps (plain words like `push` or `Engine` are not checked this way).
IDENT_RE = re.compile(r"^([a-z][a-z0-9]*_[a-z0-9_]+|[A-Z][a-z0-9]+[A-Z][A-Za-z0-9]*)(?:\(\)|<[^`]*>)?$")
TYPE_MEMBER_RE = re.compile(r"^([A-Z][A-Za-z0-9]*)::([A-Za-z_][A-Za-z0-9_]*)(?:\(\))?$")


def defined_in(name: str, text: str) -> bool:
    """Is NAME defined (fn, type, const, static, module, macro, variant, field) in TEXT?"""
    n = re.escape(name)
    pats = [
        r"^\s*(pub(\([a-z:]+\))?\s+)?((const|unsafe|async|extern \"C\")\s+)*"
        r"(fn|struct|enum|trait|type|const|static|mod|union)\s+" + n + r"\b",
        r"^\s*macro_rules!\s+" + n + r"\b",
        r"^\s*(#\[[^\]]*\]\s*)*" + n + r"\s*(,|\{|\(|=|$)",
        r"^\s*(pub(\([a-z:]+\))?\s+)?" + n + r"\s*:",
    ]
    return any(re.search(p, text, re.M) for p in pats)


def type_in(name: str, text: str) -> bool:
    return defined_in(name, text) or bool(
        re.search(r"^\s*(unsafe\s+)?impl\b.*\b" + re.escape(name) + r"\b", text, re.M)
    )


def test_in(name: str, text: str) -> bool:
    n = re.escape(name)
    if re.search(r"#\[test\][^\n]*\n(\s*#\[[^\n]*\n)*\s*(pub\s+)?fn\s+" + n + r"\s*\(", text):
        return True
    m = re.search(r"^control_pairs! \{\n(.*?)^\}", text, re.M | re.S)
    if m and re.search(r"^\s*(" + n + r",|[a-z_0-9]+, " + n + r":)", m.group(1), re.M):
        return True
    return (
        bool(re.search(r"^fn main\(", text, re.M))
        and defined_in(name, text)
        and len(re.findall(r"\b" + n + r"\b", text)) >= 2
    )


def slug(heading: str) -> str:
    """GitHub's anchor for a Markdown heading."""
    h = heading.strip().lower()
    h = re.sub(r"[^\w\- ]", "", h)
    return h.replace(" ", "-")


@dataclass
class Tree:
    """The files the check resolves against."""

    root: Path
    _texts: dict = field(default_factory=dict)
    _crate_index: dict = field(default_factory=dict)
    _types: dict | None = None
    _words: set | None = None

    def code_words(self) -> set:
        """Every identifier in the workspace's code (comments aside)."""
        if self._words is None:
            out = subprocess.run(
                ["git", "ls-files", "*.rs", "*.py", "*.pyi", "*.c", "*.h", "*.sh", "*.toml"],
                cwd=self.root, capture_output=True, text=True, check=True).stdout.split()
            words: set = set()
            # Not this checker, whose self-test names identifiers that exist
            # nowhere else on purpose.
            out = [f for f in out if f != "scripts/check-docs.py"]
            for f in out:
                t = self.text(self.root / f)
                if f.endswith(".rs"):
                    t = "\n".join(l for l in t.splitlines() if not l.lstrip().startswith("//"))
                words |= set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", t))
            self._words = words
        return self._words

    def text(self, p: Path) -> str:
        if p not in self._texts:
            try:
                self._texts[p] = p.read_text(errors="replace")
            except (IsADirectoryError, FileNotFoundError):
                self._texts[p] = ""
        return self._texts[p]

    def rust_files(self, folder: str) -> list[Path]:
        base = self.root / folder
        return sorted(base.rglob("*.rs")) if base.is_dir() else []

    def crate_defines(self, crate: str, name: str) -> bool:
        key = (crate, name)
        if key not in self._crate_index:
            found = False
            for folder in CRATES[crate]:
                for f in self.rust_files(folder):
                    if f.stem == name or (f.name == "mod.rs" and f.parent.name == name):
                        found = True
                        break
                    t = self.text(f)
                    if name in t and (defined_in(name, t) or re.search(
                            r"pub use [^;]*\b" + re.escape(name) + r"\b", t)):
                        found = True
                        break
                if found:
                    break
            self._crate_index[key] = found
        return self._crate_index[key]

    def types(self) -> dict:
        """Type name -> files that define or implement it (workspace sources)."""
        if self._types is None:
            self._types = {}
            tracked = subprocess.run(["git", "ls-files", "*.rs"], cwd=self.root,
                                     capture_output=True, text=True, check=True).stdout.split()
            files = [self.root / f for f in tracked]
            aliases = []
            for f in files:
                t = self.text(f)
                for m in re.finditer(
                        r"^\s*(?:pub(?:\([a-z:]+\))?\s+)?(?:struct|enum|trait|type|union)\s+([A-Z][A-Za-z0-9]*)",
                        t, re.M):
                    self._types.setdefault(m.group(1), set()).add(f)
                for m in re.finditer(r"^\s*pub use [^;]*?\b([A-Z][A-Za-z0-9]*) as ([A-Z][A-Za-z0-9]*)\s*;", t, re.M):
                    aliases.append((m.group(2), m.group(1)))
                for m in re.finditer(r"^\s*(?:unsafe\s+)?impl\b[^{\n]*?\b(?:for\s+)?([A-Z][A-Za-z0-9]*)(?:<[^{\n]*)?\s*(?:where[^{]*)?\{",
                                     t, re.M):
                    self._types.setdefault(m.group(1), set()).add(f)
            for alias, orig in aliases:
                self._types.setdefault(alias, set()).update(self._types.get(orig, set()))
        return self._types


def external_names(root: Path) -> set[str]:
    p = root / "scripts" / "docs-external-names.txt"
    if not p.exists():
        return set()
    return {l.strip() for l in p.read_text().splitlines() if l.strip() and not l.startswith("#")}


def headings(text: str) -> set[str]:
    out, fence = set(), False
    for line in text.splitlines():
        if line.startswith("```"):
            fence = not fence
        elif not fence and line.startswith("#"):
            out.add(slug(line.lstrip("#")))
    return out


def doc_text(path: Path, tree: Tree) -> tuple[str, list[int]]:
    """The checked text of a file and, per line of it, the file's line number."""
    text = tree.text(path)
    if path.suffix != ".rs":
        return text, list(range(1, text.count("\n") + 2))
    lines, nums = [], []
    for i, line in enumerate(text.splitlines(), 1):
        s = line.strip()
        if s.startswith("//!") or s.startswith("///"):
            lines.append(s[3:])
            nums.append(i)
    return "\n".join(lines), nums


def crate_src_of(path: Path, root: Path) -> Path | None:
    for p in [path.parent, *path.parents]:
        if p.name == "src" and (p.parent / "Cargo.toml").exists():
            return p
        if p == root:
            break
    return None


def resolve_path(ref_path: str, doc: Path, tree: Tree) -> Path | None:
    cands = [tree.root / ref_path]
    if doc.suffix == ".rs":
        src = crate_src_of(doc, tree.root)
        if src:
            cands.append(src / ref_path)
            cands.append(src.parent / ref_path)
        cands.append(doc.parent / ref_path)
    for c in cands:
        if "*" in ref_path or "{" in ref_path:
            if list(tree.root.glob(ref_path.replace("{", "").replace("}", "").split(",")[0])):
                return c
            continue
        if c.exists():
            return c
    return None


def check_item(ref: str, file: Path, items: str, tree: Tree) -> str | None:
    items = items.removesuffix("()")
    names = [n for n in items.split("::") if n]
    last = names[-1]
    text = tree.text(file)
    rel = file.relative_to(tree.root).as_posix() if file.is_relative_to(tree.root) else str(file)
    parts = rel.split("/")
    if "tests" in parts[:-1] and parts.index("tests") == len(parts) - 3:
        if not defined_in(last, text):
            return f"MISSING ITEM: {ref} ('{last}' is not defined in {rel})"
    elif "tests" in parts[:-1] and parts.index("tests") == len(parts) - 2:
        if not test_in(last, text):
            return f"MISSING TEST: {ref} (no test '{last}' in {rel})"
    elif not defined_in(last, text):
        return f"MISSING ITEM: {ref} ('{last}' is not defined in {rel})"
    for q in names[:-1]:
        if not type_in(q, text):
            return f"MISSING TYPE: {ref} ('{q}' is neither defined nor implemented in {rel})"
    return None


def check_file(doc: Path, tree: Tree, externals: set[str]) -> tuple[int, list[str]]:
    text, nums = doc_text(doc, tree)
    rel = doc.relative_to(tree.root).as_posix() if doc.is_relative_to(tree.root) else doc.name
    findings: list[str] = []
    n = 0
    fence = False
    for idx, line in enumerate(text.splitlines()):
        where = f"{rel}:{nums[idx] if idx < len(nums) else '?'}"
        if line.lstrip().startswith("```"):
            fence = not fence
            continue
        low = line.lower()
        for ph in HISTORY_PHRASES:
            if ph in low:
                findings.append(f"{where}: HISTORY: '{ph}'")
        if ISSUE_RE.search(line):
            findings.append(f"{where}: ISSUE NUMBER: '{ISSUE_RE.search(line).group(0)}'")
        if DATE_RE.search(line) and doc.name not in DATES_ALLOWED:
            findings.append(f"{where}: DATE: '{DATE_RE.search(line).group(0)}' (dates belong in BENCHMARKS.md's tables)")
        if fence:
            continue
        spans = TICK_RE.findall(line)
        if doc.suffix == ".md":
            spans += [t for t in LINK_RE.findall(line) if not re.match(r"^[a-z]+:", t)]
        else:
            spans += [t for t in LINK_RE.findall(line)
                      if re.search(r"\.(md|rs)(#|$)", t) and not re.match(r"^[a-z]+:", t)]
        links = LINK_RE.findall(line)
        for span in spans:
            if check_span(span, doc, tree, externals, findings, where, from_link=span in links):
                n += 1
    return n, findings


def check_span(span: str, doc: Path, tree: Tree, externals: set[str], findings: list[str],
               where: str, from_link: bool) -> bool:
    span = span.strip()
    if from_link:
        target, _, frag = span.partition("#")
        if not target:
            if frag and frag not in headings(tree.text(doc)):
                findings.append(f"{where}: MISSING ANCHOR: #{frag}")
            return True
        base = doc.parent / target
        if not base.exists():
            findings.append(f"{where}: MISSING LINK TARGET: {span}")
            return True
        if frag and base.suffix == ".md" and frag not in headings(tree.text(base)):
            findings.append(f"{where}: MISSING ANCHOR: {span}")
        return True
    m = PATH_RE.match(span)
    rm = REL_PATH_RE.match(span) if doc.suffix == ".rs" and not m else None
    if m or rm:
        path_part = (m or rm).group(1) if m else span.split("::")[0]
        items = ""
        if m and m.group(2) and m.group(2).startswith("::"):
            items = m.group(2)[2:]
        elif rm and "::" in span:
            items = span.split("::", 1)[1]
        path_part = path_part.rstrip("/")
        found = resolve_path(path_part, doc, tree)
        if found is None:
            if rm:
                return False  # a bare file name that is not ours (lib.rs of a dependency, say)
            findings.append(f"{where}: MISSING PATH: {span}")
            return True
        if items:
            if found.is_dir():
                findings.append(f"{where}: ITEM ON A FOLDER: {span}")
            else:
                err = check_item(span, found, items, tree)
                if err:
                    findings.append(f"{where}: {err}")
        return True
    cm = CRATE_RE.match(span)
    if cm:
        crate, rest = cm.group(1), cm.group(2)
        for name in [x for x in rest.split("::") if x]:
            if not tree.crate_defines(crate, name):
                findings.append(f"{where}: MISSING IN CRATE: {span} ('{name}' is not in {crate})")
                break
        return True
    tm = TYPE_MEMBER_RE.match(span)
    if tm:
        ty, member = tm.group(1), tm.group(2)
        files = tree.types().get(ty)
        if files is None:
            if ty not in externals:
                findings.append(f"{where}: UNKNOWN TYPE: {span} ('{ty}' is neither a type of the "
                                f"workspace nor listed in scripts/docs-external-names.txt)")
            return True
        if not any(defined_in(member, tree.text(f)) for f in files):
            # A trait's method, or a variant of an enum defined elsewhere: look wider.
            if not any(defined_in(member, tree.text(f)) for fs in tree.types().values() for f in fs
                       if ty in tree.text(f) and member in tree.text(f)):
                findings.append(f"{where}: MISSING MEMBER: {span} ('{member}' is not defined where {ty} is)")
        return True
    im = IDENT_RE.match(span)
    if im:
        name = im.group(1)
        if name not in tree.code_words() and name not in externals:
            findings.append(f"{where}: UNKNOWN IDENTIFIER: {span} (not in the workspace's code, "
                            f"nor listed in scripts/docs-external-names.txt)")
        return True
    return False


def tracked_files(root: Path) -> list[Path]:
    out = subprocess.run(["git", "ls-files", "*.md", "*.rs"], cwd=root, capture_output=True,
                         text=True, check=True).stdout.split()
    keep = []
    for f in out:
        if f.startswith(("fuzz/corpus/", "fuzz/artifacts/")):
            continue
        keep.append(root / f)
    return keep


def run(files: list[Path], tree: Tree) -> int:
    externals = external_names(tree.root)
    total, findings = 0, []
    for f in files:
        n, fs = check_file(f, tree, externals)
        total += n
        findings += fs
    for line in findings:
        print(line, file=sys.stderr)
    if total == 0:
        print("check-docs: no references found", file=sys.stderr)
        return 1
    if findings:
        print(f"check-docs: {len(findings)} finding(s) in {len(files)} file(s) ({total} references)",
              file=sys.stderr)
        return 1
    print(f"check-docs: all {total} references in {len(files)} files resolve; no history")
    return 0


def self_test() -> int:
    cases = [
        ("pass", "good.md", 'Gate: `core/src/fork_gate.rs::ForkGate::close`, child `core/src/domain.rs::ForkDomain::child()`,\n'
         'variant `core/src/controls.rs::Mutant::LostNotify`, model `models/tests/loom_fork.rs::i5_i6_fork`,\n'
         'real fork `engine/tests/fork.rs::host_pending_gil_held`, file `README.md`, mutant `core/src/fork_gate.rs:95:13: replace`,\n'
         'crate `forksafe_testkit::gil::GilBridge`, `forksafe::Engine`, type `ForkGate::close`, external `Ordering::SeqCst`,\n'
         'link [design](docs/DESIGN.md#the-worker-pool), [readme](README.md).'),
        ("fail", "missing-path.md", "See `core/src/no_such_file.rs`."),
        ("fail", "missing-item.md", "See `core/src/fork_gate.rs::ForkGate::no_such_method`."),
        ("fail", "wrong-type.md", "See `core/src/fork_gate.rs::NoSuchType::close`."),
        ("fail", "item-in-wrong-file.md", "See `core/src/lifecycle.rs::ForkGate::close`."),
        ("fail", "missing-test.md", "Model `models/tests/loom_fork.rs::no_such_model`."),
        ("fail", "helper-is-not-a-test.md", "Model `models/tests/loom_fork.rs::parent_world`."),
        ("pass", "harness-item.md", "Harness `models/tests/common/with_loom.rs::check_child_inherited`."),
        ("fail", "missing-harness-item.md", "Harness `models/tests/common/mod.rs::no_such_helper`."),
        ("fail", "missing-scenario.md", "Real fork `engine/tests/fork.rs::no_such_scenario`."),
        ("pass", "control-pair.md", "Pair `models/tests/shuttle_controls.rs::caught_lost_notify`, `models/tests/shuttle_controls.rs::sound_lost_notify`."),
        ("fail", "missing-control-pair.md", "Pair `models/tests/shuttle_controls.rs::caught_no_such_mutant`."),
        ("fail", "missing-md.md", "See `NO-SUCH-DOC.md`."),
        ("fail", "crate-module-elsewhere.md", "The test GIL is `forksafe_core::gil`."),
        ("fail", "stale-member.md", "The shard's `LiveShard::compact`."),
        ("fail", "unknown-type.md", "See `NoSuchThing::call`."),
        ("fail", "gone-function.md", "Completion calls `forget_live` after `spawn_workers()`."),
        ("fail", "gone-type.md", "The queue is a `LaneQueueSlot`."),
        ("fail", "missing-link.md", "See [the guide](docs/no-such-guide.md)."),
        ("fail", "missing-anchor.md", "See [the pool](docs/DESIGN.md#no-such-section)."),
        # Built at run time, so that this file cites no issue number itself.
        ("fail", "issue-number.md", "The targets of issue %d are met." % 7),
        ("fail", "history.md", "A first version took the lock outside a section."),
        ("fail", "date-outside-tables.md", "Fixed on 2026-12-04."),
        ("fail", "no-refs.md", "No references here at all."),
    ]
    rs_cases = [
        ("pass", "good.rs", "//! The protocol: `ready/README.md`; the part `engine/dispatch.rs`.\n//! See `crate::x`.\nfn f() {}\n"),
        ("fail", "stale.rs", "//! Calls `Pool::no_such_method` and reads `engine/no_such.rs`.\nfn f() {}\n"),
        ("fail", "history.rs", "/// This no longer waits; it was tried both ways.\nfn f() {}\n"),
    ]
    fails = 0
    tree = Tree(ROOT)
    externals = external_names(ROOT)
    # Each case is a file where its kind lives (Markdown at the repository
    # root, where its links resolve from; Rust in core/src, for paths
    # relative to a crate), removed at once.
    for want, name, body in cases + rs_cases:
        folder = ROOT / "core" / "src" if name.endswith(".rs") else ROOT
        p = folder / f".check-docs-self-test-{os.getpid()}-{name}"
        p.write_text(body if name.endswith(".rs") else body + "\n")
        try:
            n, fs = check_file(p, tree, externals)
        finally:
            p.unlink()
        got = "fail" if (fs or n == 0) else "pass"
        fails += report(want, got, name, fs)
    if fails:
        print(f"check-docs self-test: {fails} case(s) wrong", file=sys.stderr)
        return 1
    print("check-docs self-test: passed")
    return 0


def report(want: str, got: str, name: str, findings: list[str]) -> int:
    if want == got:
        print(f"self-test ok: {name} ({want})")
        return 0
    print(f"self-test FAILED: '{name}' should have {'been rejected' if want == 'fail' else 'passed'}",
          file=sys.stderr)
    for f in findings:
        print("  " + f, file=sys.stderr)
    return 1


def main(argv: list[str]) -> int:
    if argv[1:] == ["--self-test"]:
        return self_test()
    tree = Tree(ROOT)
    files = [Path(a).resolve() for a in argv[1:]] or tracked_files(ROOT)
    return run(files, tree)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
