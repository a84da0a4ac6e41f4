#!/usr/bin/env bash
# The core's tests under miri (nightly): every unsafe block exercised for UB, leaks
# and data races, with miri's weak-memory emulation. Threaded tests shrink their
# loops under cfg(miri); tests that touch the file system are ignored under miri
# (isolation), doctests are skipped.
# Strict provenance: no pointer is made from a bare address.
#
# Miri interprets every test on one core, so the suite runs as two halves side by
# side, each in a target directory of its own (cargo holds a directory's lock for
# the whole run): the unit tests with `alloc` (about 3 of the 7 minutes); and the
# rest.
set -euo pipefail
cd "$(dirname "$0")/.."
target="${CARGO_TARGET_DIR_MIRI:-$PWD/target-miri}"
export MIRIFLAGS="${MIRIFLAGS:--Zmiri-strict-provenance}"
log=$(mktemp "${TMPDIR:-/tmp}/admit-miri.XXXXXX")

# With `alloc`: the cells in segments, their storage and the serving pass.
(
  set -x
  CARGO_TARGET_DIR="$target/lib" cargo +nightly miri test -p admit --lib "$@"
) >"$log" 2>&1 &
unit_tests=$!
# A failure below ends the run: stop the other half too, and show what it said.
trap 'kill "$unit_tests" 2>/dev/null || true; cat "$log"; rm -f "$log"' ERR
trap 'rm -f "$log"' EXIT

export CARGO_TARGET_DIR="$target/rest"
set -x
# The integration tests only (`--tests` would run the unit tests again).
cargo +nightly miri test -p admit --test '*' "$@"
# Without `alloc`: nodes inside the futures, on the critical-section list.
cargo +nightly miri test -p admit --no-default-features --features critical-section --lib --tests "$@"
# The threaded hammer again under eight more schedules.
MIRIFLAGS="$MIRIFLAGS -Zmiri-many-seeds=1..9" cargo +nightly miri test -p admit --test hammer "$@"
# The model replays (model/tests/corpus.rs; under miri the sweeps shrink and the
# corpus files are skipped) drive the core through every operation of both models.
cargo +nightly miri test -p admit-model --tests "$@"
set +x
status=0
wait "$unit_tests" || status=$?
echo "--- miri, the unit tests with alloc (run beside the above):"
cat "$log"
exit "$status"
