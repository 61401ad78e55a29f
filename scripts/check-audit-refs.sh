#!/usr/bin/env bash
# shellcheck disable=SC2016  # (backticks in single quotes are literal Markdown)
# scripts/check-audit-refs.sh — every reference in FORK-SAFETY.md resolves.
#
# Usage:
#   bash scripts/check-audit-refs.sh [DOC]     # default DOC: FORK-SAFETY.md
#   bash scripts/check-audit-refs.sh --self-test
#
# What counts as a reference: a backticked span that starts with a repository
# path (`core/...`, `engine/...`, `models/...`, `proptests/...`, `fuzz/...`,
# `scripts/...`, `.ci/...`, `.cargo/...`, or a top-level `*.md`), optionally
# followed by `::` and an item path:
#
#   `core/src/fork_gate.rs`                          the file must exist
#   `core/src/fork_gate.rs::ForkGate::close`         and `fn close` must be defined
#                                               in it, and `ForkGate` must be
#                                               defined or implemented there
#   `core/src/controls.rs::Mutant::LostNotify`  an enum variant counts
#   `models/tests/loom_fork.rs::i5_i6_fork`     a test file directly under a
#                                               `tests/` folder: the last name
#                                               must be a `#[test]` fn, or (a
#                                               harness = false binary, with
#                                               its own `fn main`) a fn also
#                                               named elsewhere in the file;
#                                               harness modules below it
#                                               (`tests/x_common/mod.rs`) hold
#                                               plain items
#
# A trailing `()` on the item is ignored; `path:LINE` (mutant names) checks
# the path only. Exits 1 listing every reference that does not resolve, and
# also if the doc has no references at all (a check of nothing proves
# nothing).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

# Is NAME defined (fn, type, const, module, macro, enum variant) in FILE?
defined_in() {
    local name="$1" file="$2"
    grep -Eq "^[[:space:]]*(pub(\([a-z]+\))?[[:space:]]+)?((const|unsafe|async|extern \"C\")[[:space:]]+)*(fn|struct|enum|trait|type|const|static|mod|union)[[:space:]]+${name}\b" "$file" \
        || grep -Eq "^[[:space:]]*macro_rules![[:space:]]+${name}\b" "$file" \
        || grep -Eq "^[[:space:]]*${name}[[:space:]]*(,|\{|\(|$)" "$file"
}

# Is TYPE defined or implemented in FILE (methods may live in an `impl` in
# another file than the type's definition)?
type_in() {
    local name="$1" file="$2"
    defined_in "$name" "$file" \
        || grep -Eq "^[[:space:]]*impl\b.*\b${name}\b" "$file"
}

# Is NAME a test in FILE: a `#[test]` fn, or, in a harness = false test
# binary (one with its own `fn main`), a fn named at least twice (a scenario
# registered in `main`'s table).
test_in() {
    local name="$1" file="$2"
    if grep -B3 -E "^[[:space:]]*(pub[[:space:]]+)?fn[[:space:]]+${name}[[:space:]]*\(" "$file" | grep -q '#\[test\]'; then
        return 0
    fi
    # A pair of a `control_pairs!` table (models/tests/common/mod.rs): a
    # row names its caught test first and its sound twin second.
    local table
    table=$(awk '/^control_pairs! \{/ { inside = 1 } inside { print } inside && /^\}/ { inside = 0 }' "$file")
    if grep -Eq "^[[:space:]]*(${name},|[a-z_0-9]+, ${name}:)" <<<"$table"; then
        return 0
    fi
    grep -Eq '^fn main\(' "$file" && defined_in "$name" "$file" \
        && [ "$(grep -cw "$name" "$file")" -ge 2 ]
}

check_doc() {
    local doc="$1" root="$2"
    if [ ! -f "$doc" ]; then
        echo "check-audit-refs: $doc does not exist" >&2
        return 1
    fi
    local refs
    refs="$(grep -oE '`[^`]+`' "$doc" | tr -d '`' \
        | grep -E '^((core|engine|models|proptests|fuzz|scripts|\.ci|\.cargo)/[A-Za-z0-9_./-]+|[A-Za-z0-9_-]+\.md)(::[A-Za-z0-9_:]+(\(\))?|:[0-9].*)?$' \
        | sort -u || true)"
    local n=0 bad=0
    while IFS= read -r ref; do
        [ -n "$ref" ] || continue
        n=$((n + 1))
        local path="${ref%%::*}"
        path="${path%%:[0-9]*}"
        local items=""
        case "$ref" in *::*) items="${ref#*::}" ;; esac
        items="${items%()}"
        if [ ! -e "$root/$path" ]; then
            echo "MISSING PATH: $ref" >&2
            bad=$((bad + 1))
            continue
        fi
        [ -n "$items" ] || continue
        if [ -d "$root/$path" ]; then
            echo "ITEM ON A FOLDER: $ref" >&2
            bad=$((bad + 1))
            continue
        fi
        local last="${items##*::}"
        local file="$root/$path"
        case "$path" in
        */tests/*/*)
            # A shared harness module (tests/common/mod.rs, ...): any item.
            if ! defined_in "$last" "$file"; then
                echo "MISSING ITEM: $ref ('$last' is not defined in $path)" >&2
                bad=$((bad + 1))
                continue
            fi
            ;;
        */tests/*)
            if ! test_in "$last" "$file"; then
                echo "MISSING TEST: $ref (no test fn '$last' in $path)" >&2
                bad=$((bad + 1))
                continue
            fi
            ;;
        *)
            if ! defined_in "$last" "$file"; then
                echo "MISSING ITEM: $ref ('$last' is not defined in $path)" >&2
                bad=$((bad + 1))
                continue
            fi
            ;;
        esac
        # Every qualifier before the last name must be a type (or module)
        # defined or implemented in the same file.
        local quals="${items%"$last"}"
        quals="${quals%::}"
        if [ -n "$quals" ]; then
            local q
            for q in ${quals//::/ }; do
                if ! type_in "$q" "$file"; then
                    echo "MISSING TYPE: $ref ('$q' is neither defined nor implemented in $path)" >&2
                    bad=$((bad + 1))
                    continue 2
                fi
            done
        fi
    done <<<"$refs"
    if [ "$n" -eq 0 ]; then
        echo "check-audit-refs: no references found in $doc" >&2
        return 1
    fi
    if [ "$bad" -gt 0 ]; then
        echo "check-audit-refs: $bad of $n references in $doc do not resolve" >&2
        return 1
    fi
    echo "check-audit-refs: all $n references in $doc resolve"
}

self_test() {
    local tmp
    tmp="$(mktemp -d)"
    trap 'rm -rf "$tmp"' RETURN
    local fails=0
    expect() {
        local want="$1" name="$2" body="$3"
        printf '%s\n' "$body" >"$tmp/$name.md"
        local got=0
        check_doc "$tmp/$name.md" "$ROOT" >/dev/null 2>&1 || got=1
        if [ "$want" = fail ] && [ "$got" -eq 0 ]; then
            echo "self-test FAILED: '$name' should have been rejected" >&2
            fails=$((fails + 1))
        elif [ "$want" = pass ] && [ "$got" -ne 0 ]; then
            echo "self-test FAILED: '$name' should have passed" >&2
            check_doc "$tmp/$name.md" "$ROOT" >&2 || true
            fails=$((fails + 1))
        else
            echo "self-test ok: $name ($want)"
        fi
    }
    expect pass good 'Gate: `core/src/fork_gate.rs::ForkGate::close`, child `core/src/domain.rs::ForkDomain::child()`,
variant `core/src/controls.rs::Mutant::LostNotify`, model `models/tests/loom_fork.rs::i5_i6_fork`,
real fork `engine/tests/fork.rs::host_pending_gil_held`, file `README.md`, mutant `core/src/fork_gate.rs:95:13: replace`.'
    expect fail missing-path 'See `core/src/no_such_file.rs`.'
    expect fail missing-item 'See `core/src/fork_gate.rs::ForkGate::no_such_method`.'
    expect fail wrong-type 'See `core/src/fork_gate.rs::NoSuchType::close`.'
    expect fail item-in-wrong-file 'See `core/src/lifecycle.rs::ForkGate::close`.'
    expect fail missing-test 'Model `models/tests/loom_fork.rs::no_such_model`.'
    expect fail helper-is-not-a-test 'Model `models/tests/loom_fork.rs::parent_world`.'
    expect pass harness-item 'Harness `models/tests/common/with_loom.rs::check_child_inherited`.'
    expect fail missing-harness-item 'Harness `models/tests/common/mod.rs::no_such_helper`.'
    expect fail missing-scenario 'Real fork `engine/tests/fork.rs::no_such_scenario`.'
    expect pass control-pair 'Pair `models/tests/shuttle_controls.rs::caught_lost_notify`, `models/tests/shuttle_controls.rs::sound_lost_notify`.'
    expect fail missing-control-pair 'Pair `models/tests/shuttle_controls.rs::caught_no_such_mutant`.'
    expect fail scenario-is-not-a-pair 'Pair `models/tests/shuttle_controls.rs::poison_passes_on`.'
    expect fail missing-md 'See `NO-SUCH-DOC.md`.'
    expect fail no-refs 'No references here at all.'
    if [ "$fails" -gt 0 ]; then
        echo "check-audit-refs self-test: $fails case(s) wrong" >&2
        return 1
    fi
    echo "check-audit-refs self-test: passed"
}

if [ "${1:-}" = "--self-test" ]; then
    self_test
else
    check_doc "${1:-$ROOT/FORK-SAFETY.md}" "$ROOT"
fi
