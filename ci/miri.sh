#!/usr/bin/env bash
# The core's tests under miri (nightly): every unsafe block exercised for UB, leaks
# and data races. Threaded tests shrink their loops under cfg(miri); tests that
# touch the file system are ignored under miri (isolation), doctests are skipped.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR_MIRI:-$PWD/target-miri}"
export MIRIFLAGS="${MIRIFLAGS:--Zmiri-strict-provenance}"
set -x
cargo +nightly miri test -p admit --lib --tests "$@"
# Without `alloc`: nodes inside the futures.
cargo +nightly miri test -p admit --no-default-features --test inline_nodes "$@"
