#!/usr/bin/env bash
# check-facade.sh — enforce docs/DESIGN.md's one rule about synchronisation:
# the `sync` facade (core/src/sync/) is the only module that names
# `std::sync`, `std::thread`, `UnsafeCell`, `thread_local!`, `parking_lot`,
# `crossbeam`, `loom` or `shuttle`. Everything else in core/src, engine/src
# and python/src (the binding)
# must go through `crate::sync::` / `forksafe_core::sync::`, so what the loom
# and shuttle models check is what ships.
#
# Usage:
#   bash scripts/check-facade.sh              check the repository (exit 1 and
#                                             print file:line on violations)
#   bash scripts/check-facade.sh --root DIR   check DIR/core/src and DIR/engine/src
#   bash scripts/check-facade.sh --self-test  run the checker on known-good and
#                                             known-bad snippets; exit 1 if any
#                                             verdict is wrong
#
# What counts, after `//` and `/* */` comments (doc comments included), string
# and char literals, `#[cfg(..)]`/`#![cfg(..)]`/`#[cfg_attr(..)]` attributes
# and `cfg!(..)` contents are blanked out (line numbers are kept):
#   - paths `std|core|alloc :: sync|thread` (`::std::sync`, `std :: thread`,
#     `core::sync::atomic` — the same atomics, unmodelled),
#     `std|core :: cell :: UnsafeCell`, `std::thread_local`;
#   - the crate names `parking_lot`, `crossbeam*`, `loom`, `shuttle`
#     (`extern crate loom`, `use shuttle::..`, `loom::model`);
#   - grouped imports rooted at std/core/alloc that bring in `sync`, `thread`,
#     `thread_local` or `UnsafeCell` (`use std::{sync, io}`, `use std::{thread}`,
#     `use std::cell::{Cell, UnsafeCell}`), or `self as ..` inside them;
#   - aliasing or globbing the std crates: `use std as s`, `extern crate std as s`,
#     `use std::*`;
#   - `UnsafeCell` and `thread_local!` anywhere, unless reached through a path
#     with a `sync` segment that is not rooted at std/core/alloc
#     (`crate::sync::thread_local!`, `forksafe_core::sync::UnsafeCell`), or used
#     bare in a file that imports that name from the facade
#     (`use crate::sync::{thread_local, Arc};`).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

# The checker proper. Arguments: the files to check. Prints one line per
# violation, `file:line: reason: source line`, and exits 1 if there was any.
run_checker() {
    perl -e '
use strict;
use warnings;

# Blank (keep newlines) comments, string literals and char literals.
sub strip_lexical {
    my ($s) = @_;
    my $out = "";
    my $n = length $s;
    my $i = 0;
    my $blank = sub { my ($t) = @_; $t =~ s/[^\n]/ /g; return $t; };
    while ($i < $n) {
        my $c = substr($s, $i, 1);
        my $two = substr($s, $i, 2);
        if ($two eq "//") {
            my $j = index($s, "\n", $i);
            $j = $n if $j < 0;
            $out .= $blank->(substr($s, $i, $j - $i));
            $i = $j;
        } elsif ($two eq "/*") {
            my $depth = 0;
            my $j = $i;
            while ($j < $n) {
                my $t = substr($s, $j, 2);
                if ($t eq "/*") { $depth++; $j += 2; next; }
                if ($t eq "*/") { $depth--; $j += 2; last if $depth == 0; next; }
                $j++;
            }
            $out .= $blank->(substr($s, $i, $j - $i));
            $i = $j;
        } elsif (substr($s, $i) =~ /\A(b?r(#*)")/ && ($i == 0 || substr($s, $i - 1, 1) !~ /\w/)) {
            # raw string r"..", r#".."#, br".."
            my $hashes = $2;
            my $start_len = length $1;
            my $close = "\"" . $hashes;
            my $j = index($s, $close, $i + $start_len);
            $j = ($j < 0) ? $n : $j + length $close;
            $out .= $blank->(substr($s, $i, $j - $i));
            $i = $j;
        } elsif ($c eq "\"") {
            my $j = $i + 1;
            while ($j < $n) {
                my $d = substr($s, $j, 1);
                if ($d eq "\\") { $j += 2; next; }
                $j++;
                last if $d eq "\"";
            }
            $out .= $blank->(substr($s, $i, $j - $i));
            $i = $j;
        } elsif ($c eq "\x27" && substr($s, $i) =~ /\A(\x27(?:\\(?:x[0-9a-fA-F]{2}|u\{[0-9a-fA-F]+\}|.)|[^\\\x27\n])\x27)/) {
            # char literal (a lifetime has no closing quote right after one char)
            $out .= $blank->($1);
            $i += length $1;
        } else {
            $out .= $c;
            $i++;
        }
    }
    return $out;
}

# From position $open (an opening bracket), the index just past its match.
sub match_close {
    my ($s, $open) = @_;
    my %pair = ("(" => ")", "[" => "]", "{" => "}");
    my @stack;
    for (my $j = $open; $j < length $s; $j++) {
        my $c = substr($s, $j, 1);
        if (exists $pair{$c}) { push @stack, $pair{$c}; }
        elsif (@stack && $c eq $stack[-1]) { pop @stack; return $j + 1 unless @stack; }
    }
    return length $s;
}

# Blank cfg attributes and cfg!() contents.
sub strip_cfg {
    my ($s) = @_;
    while ($s =~ /#\s*!?\s*\[\s*cfg(?:_attr)?\s*\(/g) {
        my $start = $-[0];
        my $br = index($s, "[", $start);
        my $end = match_close($s, $br);
        my $chunk = substr($s, $start, $end - $start);
        $chunk =~ s/[^\n]/ /g;
        substr($s, $start, $end - $start) = $chunk;
        pos($s) = $end;
    }
    while ($s =~ /\bcfg\s*!\s*\(/g) {
        my $open = $+[0] - 1;
        my $end = match_close($s, $open);
        my $chunk = substr($s, $open + 1, $end - $open - 2);
        $chunk =~ s/[^\n]/ /g;
        substr($s, $open + 1, $end - $open - 2) = $chunk;
        pos($s) = $end;
    }
    return $s;
}

my $bad = 0;
for my $file (@ARGV) {
    open(my $fh, "<", $file) or die "check-facade: cannot read $file: $!\n";
    local $/;
    my $src = <$fh>;
    close $fh;
    my @orig = split /\n/, $src, -1;
    my $s = strip_cfg(strip_lexical($src));

    my %hits;    # line -> [reasons]
    my $hit = sub {
        my ($pos, $why) = @_;
        my $line = 1 + (substr($s, 0, $pos) =~ tr/\n//);
        push @{ $hits{$line} }, $why;
    };

    # Names this file imports from the facade: use (crate|forksafe_core|super|self)::...sync::...;
    my %facade;
    while ($s =~ /\buse\s+(?:::\s*)?(?:crate|forksafe_core|self|super(?:\s*::\s*super)*)\s*::\s*(?:\w+\s*::\s*)*?sync\s*::([^;]*);/g) {
        my $body = $1;
        $facade{$_} = 1 for ($body =~ /\b(\w+)\b/g);
        $facade{"*"} = 1 if $body =~ /\*/;
    }

    # 1. std/core/alloc paths.
    while ($s =~ /\b(?:std|core|alloc)\s*::\s*(?:sync|thread)\b/g) { $hit->($-[0], "names std sync/thread"); }
    while ($s =~ /\b(?:std|core)\s*::\s*cell\s*::\s*UnsafeCell\b/g) { $hit->($-[0], "names UnsafeCell"); }
    while ($s =~ /\bstd\s*::\s*thread_local\b/g) { $hit->($-[0], "names std::thread_local"); }

    # 2. crate names.
    while ($s =~ /\b(parking_lot|crossbeam\w*|loom|shuttle)\b/g) { $hit->($-[0], "names crate $1"); }

    # 3. grouped imports rooted at std/core/alloc.
    while ($s =~ /\b(std|core|alloc)\s*::\s*((?:\w+\s*::\s*)*)\{/g) {
        my $open = $+[0] - 1;
        my $end = match_close($s, $open);
        my $group = substr($s, $open, $end - $open);
        my $direct = ($2 eq "");
        if ($direct && $group =~ /[{,]\s*(sync|thread)\b/) {
            $hit->($open + $-[1], "imports std $1 through a group");
        }
        if ($group =~ /\b(UnsafeCell|thread_local)\b/) {
            $hit->($open + $-[1], "imports $1 through a group");
        }
        if ($group =~ /\bself\s+as\b/) {
            $hit->($open + $-[0], "aliases a std module");
        }
        pos($s) = $open + 1;
    }

    # 4. aliasing or globbing std itself.
    while ($s =~ /\buse\s+(?:::\s*)?(std|core|alloc)\s+as\b/g) { $hit->($-[0], "aliases crate $1"); }
    while ($s =~ /\bextern\s+crate\s+(std|core|alloc)\s+as\b/g) { $hit->($-[0], "aliases crate $1"); }
    while ($s =~ /\b(std|core|alloc)\s*::\s*\*/g) { $hit->($-[0], "glob-imports crate $1"); }

    # 5. UnsafeCell / thread_local! outside facade paths.
    while ($s =~ /\b(UnsafeCell\b|thread_local\s*!)/g) {
        my ($start, $name) = ($-[0], $1);
        $name =~ s/\s*!$//;
        my $before = substr($s, 0, $start);
        if ($before =~ /((?:\w+\s*::\s*)+)\z/) {
            my $path = $1;
            next if $path =~ /\A\s*(?:std|core|alloc)\b/;    # reported by rule 1
            next if $path =~ /\bsync\s*::/;                    # a facade path
            $hit->($start, "names $name through a non-facade path");
        } elsif ($before =~ /::\s*\z/) {
            next;    # ::UnsafeCell after a group or absolute path: rule 1/3
        } else {
            next if $facade{$name} || $facade{"*"};
            $hit->($start, "names $name without importing it from the facade");
        }
    }

    for my $line (sort { $a <=> $b } keys %hits) {
        my %seen;
        my @why = grep { !$seen{$_}++ } @{ $hits{$line} };
        my $text = $orig[$line - 1] // "";
        $text =~ s/^\s+//;
        printf "%s:%d: %s: %s\n", $file, $line, join("; ", @why), $text;
        $bad = 1;
    }
}
exit $bad;
' -- "$@"
}

# The files to check under $1: every .rs in core/src, engine/src, forksafe-rayon/src, forksafe-tokio/src,
# testkit/src and python/src and python/forksafe-pyo3/src (the binding, where present), minus
# core/src/sync/.
# Paths are printed relative to the root.
files_under() {
    local root="$1" dir
    (
        cd "$root"
        for dir in core/src engine/src forksafe-rayon/src forksafe-tokio/src python/src python/forksafe-pyo3/src testkit/src; do
            [ -d "$dir" ] || continue
            find "$dir" -type f -name '*.rs' -not -path 'core/src/sync/*' -print
        done | LC_ALL=C sort
    )
}

check_root() {
    local root="$1"
    local -a files=()
    local f
    while IFS= read -r f; do files+=("$f"); done < <(files_under "$root")
    if [ "${#files[@]}" -eq 0 ]; then
        echo "check-facade: no .rs files under $root/core/src or $root/engine/src" >&2
        return 1
    fi
    (cd "$root" && run_checker "${files[@]}")
}

self_test() {
    local tmp
    tmp="$(mktemp -d)"
    # shellcheck disable=SC2064
    trap "rm -rf '$tmp'" EXIT
    local failures=0 cases=0

    # expect VERDICT NAME RELPATH CONTENT [WHERE]: VERDICT is bad (must be
    # flagged) or ok (must pass); WHERE, if given, must appear in the report
    # (a file:line). Each case runs on its own tree.
    expect() {
        local verdict="$1" name="$2" rel="$3" content="$4" where="${5:-}" out rc
        cases=$((cases + 1))
        local root="$tmp/case$cases"
        mkdir -p "$root/core/src" "$root/engine/src" "$(dirname "$root/$rel")"
        printf '%s\n' "$content" >"$root/$rel"
        # Every tree gets one clean file so the checker always has input.
        printf '//! clean\npub fn f() {}\n' >"$root/core/src/clean.rs"
        set +e
        out="$(check_root "$root" 2>&1)"
        rc=$?
        set -e
        if [ -n "$where" ] && [[ "$out" != *"$where"* ]]; then
            printf '  FAIL  %-4s %s (report lacks %s)\n' "$verdict" "$name" "$where"
            printf '        %s\n' "$out"
            failures=$((failures + 1))
        elif { [ "$verdict" = bad ] && [ "$rc" -eq 1 ]; } || { [ "$verdict" = ok ] && [ "$rc" -eq 0 ]; }; then
            printf '  pass  %-4s %s\n' "$verdict" "$name"
        else
            printf '  FAIL  %-4s %s (exit %d)\n' "$verdict" "$name" "$rc"
            [ -n "$out" ] && printf '        %s\n' "$out"
            failures=$((failures + 1))
        fi
    }

    echo "check-facade self-test:"
    # --- violations -------------------------------------------------------
    expect bad "use std::sync::Mutex"            core/src/a.rs 'use std::sync::Mutex;'
    expect bad "use std::sync::atomic (engine)"  engine/src/a.rs 'use std::sync::atomic::AtomicUsize;' engine/src/a.rs:1:
    expect bad "inline std::sync path"           core/src/a.rs 'fn f() { let _m = std::sync::Mutex::new(0); }'
    expect bad "use ::std::sync"                 core/src/a.rs 'use ::std::sync::Arc;'
    expect bad "spaced std :: sync"              core/src/a.rs 'use std :: sync :: Arc;'
    expect bad "use std::{sync, ...}"            core/src/a.rs 'use std::{io, sync, fmt};'
    expect bad "use std::{sync::Arc}"            core/src/a.rs 'use std::{collections::HashMap, sync::Arc};'
    expect bad "use std::{thread}"               core/src/a.rs 'use std::{thread};'
    expect bad "multi-line std group"            core/src/a.rs $'use std::{\n    fmt,\n    thread,\n};' core/src/a.rs:3:
    expect bad "std::thread::spawn"              engine/src/a.rs 'fn f() { std::thread::spawn(|| {}); }'
    expect bad "use std::sync as s"              core/src/a.rs 'use std::sync as s;'
    expect bad "use std as s"                    core/src/a.rs 'use std as s;'
    expect bad "use ::std as s"                  core/src/a.rs 'use ::std as s;'
    expect bad "extern crate std as s"           core/src/a.rs 'extern crate std as s;'
    expect bad "use std::*"                      core/src/a.rs 'use std::*;'
    expect bad "use std::{self as s}"            core/src/a.rs 'use std::{self as s};'
    expect bad "core::sync::atomic"              core/src/a.rs 'use core::sync::atomic::AtomicBool;'
    expect bad "alloc::sync::Arc"                core/src/a.rs 'use alloc::sync::Arc;'
    expect bad "std::cell::UnsafeCell"           core/src/a.rs 'use std::cell::UnsafeCell;'
    expect bad "core::cell::UnsafeCell"          core/src/a.rs 'struct S(core::cell::UnsafeCell<u8>);'
    expect bad "use std::cell::{Cell, UnsafeCell}" core/src/a.rs 'use std::cell::{Cell, UnsafeCell};'
    expect bad "use std::cell as c; c::UnsafeCell" core/src/a.rs $'use std::cell as c;\nstruct S(c::UnsafeCell<u8>);'
    expect bad "bare UnsafeCell"                 core/src/a.rs 'struct S(UnsafeCell<u8>);'
    expect bad "bare thread_local!"              core/src/a.rs 'thread_local! { static X: u8 = 0; }'
    expect bad "std::thread_local!"              core/src/a.rs 'std::thread_local! { static X: u8 = 0; }'
    expect bad "use std::{thread_local}"         core/src/a.rs 'use std::{thread_local};'
    expect bad "parking_lot"                     core/src/a.rs 'use parking_lot::Mutex;'
    expect bad "crossbeam"                       engine/src/a.rs 'use crossbeam::channel;'
    expect bad "crossbeam_queue"                 core/src/a.rs 'use crossbeam_queue::SegQueue;'
    expect bad "extern crate loom"               core/src/a.rs 'extern crate loom;'
    expect bad "loom::model path"                core/src/a.rs 'fn f() { loom::model(|| {}); }'
    expect bad "use shuttle"                     core/src/a.rs 'use shuttle::sync::Mutex;'
    expect bad "::loom absolute path"            core/src/a.rs 'fn f() { ::loom::thread::yield_now(); }'
    expect bad "violation after a cfg attribute" core/src/a.rs $'#[cfg(loom)]\nuse loom::sync::Arc;' core/src/a.rs:2:
    expect bad "violation on a line with a comment" core/src/a.rs 'use std::sync::Arc; // fine, says who'
    expect bad "violation after a string"        core/src/a.rs 'const S: &str = "x"; use std::thread;'
    expect bad "violation after a lifetime"      core/src/a.rs "fn f<'a>(x: &'a u8) -> &'a u8 { std::thread::yield_now(); x }"
    expect bad "violation after a char literal"  core/src/a.rs $'const Q: char = \'"\';\nuse std::sync::Arc;' core/src/a.rs:2:
    expect bad "nested module file"              core/src/engine/deep.rs 'use std::sync::Arc;' core/src/engine/deep.rs:1:
    # --- non-violations ----------------------------------------------------
    expect ok  "cfg(loom) attribute"             core/src/a.rs $'#[cfg(loom)]\nfn f() {}'
    expect ok  "inner cfg attribute"             core/src/a.rs $'#![cfg(shuttle)]\nfn f() {}'
    expect ok  "cfg(any(loom, shuttle))"         core/src/a.rs $'#[cfg(not(any(loom, shuttle)))]\nfn f() {}'
    expect ok  "multi-line cfg attribute"        core/src/a.rs $'#[cfg(all(\n    test,\n    not(loom)\n))]\nmod t {}'
    expect ok  "cfg_attr"                        core/src/a.rs $'#[cfg_attr(loom, allow(dead_code))]\nfn f() {}'
    expect ok  "cfg!(...)"                       core/src/a.rs 'pub const M: bool = cfg!(any(loom, shuttle));'
    expect ok  "line comment"                    core/src/a.rs $'// uses std::sync::Mutex and loom and parking_lot\nfn f() {}'
    expect ok  "doc comments"                    core/src/a.rs $'//! Not `std::thread`, not `thread_local!`.\n/// UnsafeCell, shuttle, crossbeam\nfn f() {}'
    expect ok  "block comment"                   core/src/a.rs $'/* std::sync::Arc\n   loom::model */\nfn f() {}'
    expect ok  "string literal"                  core/src/a.rs 'const S: &str = "a loom model, std::sync::Mutex";'
    expect ok  "raw string literal"              core/src/a.rs 'const S: &str = r#"shuttle "replay" std::thread"#;'
    expect ok  "crate::sync path"                core/src/a.rs 'use crate::sync::{Arc, Mutex};'
    expect ok  "crate::sync::thread_local!"      core/src/a.rs 'crate::sync::thread_local! { static X: u8 = 0; }'
    expect ok  "crate::sync::UnsafeCell"         core/src/a.rs 'struct S(crate::sync::UnsafeCell<u8>);'
    expect ok  "facade-imported thread_local!"   core/src/a.rs $'use crate::sync::{thread_local, Arc};\nthread_local! { static X: u8 = 0; }'
    expect ok  "facade-imported UnsafeCell"      core/src/a.rs $'use crate::sync::cell::UnsafeCell;\nstruct S(UnsafeCell<u8>);'
    expect ok  "forksafe_core::sync path"        engine/src/a.rs 'use forksafe_core::sync::Arc;'
    expect ok  "std::cell::Cell"                 core/src/a.rs 'use std::cell::{Cell, RefCell};'
    expect ok  "other std imports"               core/src/a.rs 'use std::{collections::HashMap, fmt, io};'
    expect ok  "identifiers containing words"    core/src/a.rs 'fn bloom_filter(loom_like: u8, thread_count: usize, sync_point: u8) {}'
    expect ok  "lifetimes"                       core/src/a.rs "fn f<'a>(x: &'a str) -> &'a str { x }"
    expect ok  "facade itself is exempt"         core/src/sync/mod.rs $'use std::sync::Arc;\nuse loom as imp;\nstd::thread_local! {}'
    expect ok  "facade submodule is exempt"      core/src/sync/clock.rs 'use std::thread;'
    expect ok  "tests dir is out of scope"       core/tests/t.rs 'use std::thread;'

    echo "check-facade self-test: $((cases - failures))/$cases verdicts right"
    [ "$failures" -eq 0 ]
}

case "${1:-}" in
    --self-test)
        self_test
        ;;
    --root)
        [ -n "${2:-}" ] || { echo "usage: $0 [--self-test | --root DIR]" >&2; exit 2; }
        check_root "$2" && echo "check-facade: ok ($2)"
        ;;
    "")
        if check_root "$ROOT"; then
            echo "check-facade: ok — only core/src/sync/ names the sync primitives"
        else
            echo "check-facade: FAILED — the lines above bypass the sync facade (core/src/sync/)" >&2
            exit 1
        fi
        ;;
    -h | --help)
        sed -n '2,35p' "$0"
        ;;
    *)
        echo "usage: $0 [--self-test | --root DIR]" >&2
        exit 2
        ;;
esac
