#!/usr/bin/env bash
# scripts/check-hang-kill.sh — a deadlocked test fails, naming itself.
#
# The plain stage runs the suite under cargo-nextest with the limits of
# .config/nextest.toml. This check builds a throwaway crate with one test
# that never returns, runs it under the same file with its periods cut to
# one second, and passes only if nextest kills that test and names it as
# timed out. It also checks that the project's profile and every override
# set a `terminate-after` (a slow-timeout without one only warns).
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
CONFIG=.config/nextest.toml

slow=$(grep -c 'slow-timeout *=' "$CONFIG" || true)
killing=$(grep -c 'terminate-after' "$CONFIG" || true)
if [ "$slow" -eq 0 ] || [ "$slow" -ne "$killing" ]; then
    echo "check-hang-kill: every slow-timeout in $CONFIG needs a terminate-after ($slow slow-timeouts, $killing with terminate-after)" >&2
    exit 1
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/src" "$tmp/.config"
cat > "$tmp/Cargo.toml" <<'TOML'
[package]
name = "hang-check"
version = "0.0.0"
edition = "2021"
publish = false
[workspace]
TOML
cat > "$tmp/src/lib.rs" <<'RS'
#[test]
fn returns() {
    assert_eq!(1 + 1, 2);
}

#[test]
fn never_returns() {
    let (_tx, rx) = std::sync::mpsc::channel::<()>();
    let _ = rx.recv();
}
RS
# The project's default profile (its overrides name the project's binaries),
# its period cut to one second.
sed -n '/^\[\[profile.default.overrides\]\]/q; p' "$CONFIG" \
    | sed -E 's/period = "[0-9]+s"/period = "1s"/; s/terminate-after = [0-9]+/terminate-after = 2/' \
    > "$tmp/.config/nextest.toml"
set +e
out=$(cd "$tmp" && CARGO_TARGET_DIR="$tmp/target" cargo nextest run 2>&1)
rc=$?
set -e
if [ "$rc" -eq 0 ]; then
    echo "check-hang-kill: a test that never returns passed:" >&2
    echo "$out" >&2
    exit 1
fi
if ! echo "$out" | grep -Eq 'TIMEOUT.*never_returns'; then
    echo "check-hang-kill: nextest did not report never_returns as timed out:" >&2
    echo "$out" >&2
    exit 1
fi
if ! echo "$out" | grep -Eq 'PASS.*returns'; then
    echo "check-hang-kill: the test beside it did not pass:" >&2
    echo "$out" >&2
    exit 1
fi
echo "check-hang-kill: ok (a test that never returns is killed and named: $(echo "$out" | grep -E 'TIMEOUT.*never_returns' | head -1 | sed 's/^ *//'))"
