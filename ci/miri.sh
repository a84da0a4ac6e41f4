#!/usr/bin/env bash
# The core's tests under miri (nightly): every unsafe block exercised for UB, leaks
# and data races, with miri's weak-memory emulation. Threaded tests shrink their
# loops under cfg(miri); tests that touch the file system are ignored under miri
# (isolation), doctests are skipped.
#
# Provenance is permissive, not strict: the wait queue's stack links are addresses
# with exposed provenance (core/src/semaphore/waiter.rs, `StackLink`), because a
# push may link to an address whose node was freed and reused since it was read
# (ABA): right for the algorithm, but a plain pointer would carry the freed node's
# provenance. Strict provenance found exactly that (issue 9's notes).
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR_MIRI:-$PWD/target-miri}"
export MIRIFLAGS="${MIRIFLAGS:--Zmiri-permissive-provenance}"
set -x
cargo +nightly miri test -p admit --lib --tests "$@"
# Without `alloc`: nodes inside the futures; every test that build runs.
cargo +nightly miri test -p admit --no-default-features --lib --tests "$@"
# The threaded hammer again under eight more schedules.
MIRIFLAGS="$MIRIFLAGS -Zmiri-many-seeds=1..9" cargo +nightly miri test -p admit --test hammer "$@"
