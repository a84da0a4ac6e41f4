#!/usr/bin/env bash
# Runs the loom models (core/src/loom_tests/, unit tests of the core built only with
# --cfg admit_loom) exhaustively up to the preemption bound, in release with debug
# assertions, in a target dir of their own.
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

run() {
    echo "+ RUSTFLAGS=\"$RUSTFLAGS\" CARGO_TARGET_DIR=$CARGO_TARGET_DIR" \
        "CARGO_PROFILE_RELEASE_DEBUG_ASSERTIONS=$CARGO_PROFILE_RELEASE_DEBUG_ASSERTIONS" \
        "LOOM_MAX_PREEMPTIONS=$LOOM_MAX_PREEMPTIONS $*"
    "$@"
}
# The default build (nodes co-owned through `Arc`), then the build without `alloc`
# (nodes inside the futures).
run cargo test -p admit --lib --release "$@"
run cargo test -p admit --lib --release --no-default-features "$@"
