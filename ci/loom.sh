#!/usr/bin/env bash
# Runs every loom model (listed in loom-tests/README.md) exhaustively up to the
# preemption bound, in release with debug assertions and overflow checks, in a
# target dir of their own, with --cfg admit_loom:
#   - the core's own models of its private parts (unit tests, with `alloc`);
#   - the `loom-tests` crate's models of the public API, in both builds of the core
#     (with `alloc`, and without: its critical-section queue).
# Each model runs in a process of its own (cargo-nextest, ci/loom-nextest.toml).
# Arguments go to `cargo nextest run`, e.g. a filter: ci/loom.sh drain
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

export RUSTFLAGS="--cfg admit_loom"
export CARGO_TARGET_DIR="$PWD/target-loom"
export CARGO_PROFILE_RELEASE_DEBUG_ASSERTIONS=true
export CARGO_PROFILE_RELEASE_OVERFLOW_CHECKS=true
# A larger bound may be asked for; a smaller one would weaken the models.
export LOOM_MAX_PREEMPTIONS="${LOOM_MAX_PREEMPTIONS:-3}"
if ! [[ "$LOOM_MAX_PREEMPTIONS" =~ ^[0-9]+$ ]] || ((LOOM_MAX_PREEMPTIONS < 3)); then
    echo "ci/loom.sh: LOOM_MAX_PREEMPTIONS must be at least 3 (got $LOOM_MAX_PREEMPTIONS)" >&2
    exit 2
fi

if ! cargo nextest --version >/dev/null 2>&1; then
    echo "ci/loom.sh: needs cargo-nextest (cargo install cargo-nextest --locked)" >&2
    exit 2
fi

run() {
    echo "+ RUSTFLAGS=\"$RUSTFLAGS\" CARGO_TARGET_DIR=$CARGO_TARGET_DIR" \
        "CARGO_PROFILE_RELEASE_DEBUG_ASSERTIONS=$CARGO_PROFILE_RELEASE_DEBUG_ASSERTIONS" \
        "LOOM_MAX_PREEMPTIONS=$LOOM_MAX_PREEMPTIONS $*"
    "$@"
}
# One run for the build with `alloc`, the core's own models (its unit tests: they
# exist only with `alloc`) beside loom-tests', so that both share the cores; then
# loom-tests' without `alloc`.
# A filter may match nothing in one of the two builds.
nextest=(cargo nextest run --release --config-file ci/loom-nextest.toml --no-tests=warn)
run "${nextest[@]}" -p admit -p loom-tests --lib --test models "$@"
run "${nextest[@]}" -p loom-tests --no-default-features "$@"
