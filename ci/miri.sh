#!/usr/bin/env bash
# The core's tests under miri (nightly): every unsafe block exercised for UB, leaks
# and data races, with miri's weak-memory emulation. Threaded tests shrink their
# loops under cfg(miri); tests that touch the file system are ignored under miri
# (isolation), doctests are skipped.
# Strict provenance: no pointer is made from a bare address.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR_MIRI:-$PWD/target-miri}"
export MIRIFLAGS="${MIRIFLAGS:--Zmiri-strict-provenance}"
set -x
cargo +nightly miri test -p admit --lib --tests "$@"
# Without `alloc`: nodes inside the futures, on the critical-section list.
cargo +nightly miri test -p admit --no-default-features --features critical-section --lib --tests "$@"
# The threaded hammer again under eight more schedules.
MIRIFLAGS="$MIRIFLAGS -Zmiri-many-seeds=1..9" cargo +nightly miri test -p admit --test hammer "$@"
# The model replays (model/tests/corpus.rs; under miri the sweeps shrink and the
# corpus files are skipped) drive the core through every operation of both models.
cargo +nightly miri test -p admit-model --tests "$@"
