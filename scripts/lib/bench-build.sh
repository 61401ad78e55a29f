# bench-build.sh — sourced by bench-vs-mxnet.sh and bench-vs-peers.sh: the
# builds both need. Expects ROOT and WORK; each function echoes the path of
# what it built.

# forksafe-bench, --release.
build_forksafe_bench() {
    echo "== building forksafe-bench" >&2
    cargo build --release -q -p forksafe-bench --manifest-path "$ROOT/Cargo.toml" \
        --target-dir "${CARGO_TARGET_DIR:-$ROOT/target}" >&2
    echo "${CARGO_TARGET_DIR:-$ROOT/target}/release/forksafe-bench"
}

# MXNet 1.9.1 from PyPI into a throwaway venv (MXNET_VENV, default
# /tmp/forksafe-mxnet-venv; reused if present), and bench/mxnet/harness.c
# built against that wheel's libmxnet.so (the C API headers are not in the
# wheel; the harness declares its prototypes).
build_mxnet_harness() {
    local venv="${MXNET_VENV:-/tmp/forksafe-mxnet-venv}"
    if ! ls "$venv"/lib/python3*/site-packages/mxnet/libmxnet.so >/dev/null 2>&1; then
        echo "== installing mxnet 1.9.1 into $venv" >&2
        python3 -m venv "$venv"
        "$venv/bin/pip" install -q mxnet==1.9.1 numpy==1.23.5 >&2
    fi
    local mxdir
    mxdir="$(dirname "$(ls "$venv"/lib/python3*/site-packages/mxnet/libmxnet.so | head -1)")"
    echo "== building the MXNet harness" >&2
    gcc -O2 -Wall -Wextra -o "$WORK/mxnet-harness" "$ROOT/bench/mxnet/harness.c" \
        -L"$mxdir" -l:libmxnet.so -Wl,-rpath,"$mxdir" -lpthread >&2
    echo "$WORK/mxnet-harness"
}

# The Python package, built --release by pip (maturin), into a throwaway
# venv (PYTHON_BENCH_VENV, default $WORK/python-venv; rebuilt each run so
# it is this checkout's build); echoes its python.
build_python_bench_venv() {
    local venv="${PYTHON_BENCH_VENV:-$WORK/python-venv}"
    echo "== building the Python package into $venv" >&2
    rm -rf "$venv"
    python3 -m venv "$venv" >&2
    PIP_DISABLE_PIP_VERSION_CHECK=1 "$venv/bin/pip" install -q "$ROOT/python" >&2
    echo "$venv/bin/python"
}
