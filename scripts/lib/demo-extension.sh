# demo-extension.sh — sourced by test-rayon-extension.sh and
# test-tokio-extension.sh: the stage of one demo extension. A fresh venv;
# maturin builds the demo's two builds (`plain/`, `forksafe/`) as wheels,
# which pip installs; then the demo's pytest suite.
#
#   demo_extension_stage NAME EXTRA_PACKAGES [PYTEST_ARGS...]
#
# NAME is the folder under examples/ (rayon-extension); EXTRA_PACKAGES a
# space-separated list of what the suite needs beyond pytest ("" for
# none). The venv goes to $FORKSAFE_EXT_VENV (default target/NAME-venv,
# recreated on every run), the Rust build to $CARGO_TARGET_DIR (default
# target/NAME). The caller is at the repository root.

# shellcheck source=venv.sh
source scripts/lib/venv.sh

demo_extension_stage() {
    local name="$1" extra="$2"
    shift 2
    local root="$PWD" short="${name%-extension}-ext"
    local venv="${FORKSAFE_EXT_VENV:-$root/target/$short-venv}"
    export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$root/target/$short}"
    local dist="$CARGO_TARGET_DIR/wheels-demo"

    echo "test-$name: $("$PY" --version) -> venv $venv, cargo target $CARGO_TARGET_DIR"
    rm -rf "$dist"
    # shellcheck disable=SC2086  # EXTRA_PACKAGES is a word list on purpose
    fresh_venv "$venv" "maturin>=1.5,<2" "pytest>=7" "pytest-timeout>=2" $extra

    local start=$SECONDS build
    for build in plain forksafe; do
        "$venv/bin/maturin" build --release -q -i "$venv/bin/python" \
            --manifest-path "examples/$name/$build/Cargo.toml" -o "$dist"
    done
    "$venv/bin/python" -m pip install -q "$dist"/*.whl
    echo "test-$name: both builds took $((SECONDS - start))s"

    cd "examples/$name"
    "$venv/bin/pytest" -p no:cacheprovider -v -rxX --durations=0 tests "$@"
}
