#!/usr/bin/env bash
# Runs the shuttle schedules (src/semaphore/tests/shuttle.rs): randomized and PCT
# schedules of 4-8 threads and hundreds of operations, in release with debug
# assertions, in a target dir of their own. SHUTTLE_ITERATIONS sets the schedules
# per test (default 2000, the CI bound; docs/testing.md records longer runs).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export RUSTFLAGS="--cfg admit_shuttle"
export CARGO_TARGET_DIR="$PWD/target-shuttle"
export CARGO_PROFILE_RELEASE_DEBUG_ASSERTIONS=true
export CARGO_PROFILE_RELEASE_OVERFLOW_CHECKS=true
export SHUTTLE_ITERATIONS="${SHUTTLE_ITERATIONS:-2000}"
set -x
cargo test -p admit --lib --release "$@"
