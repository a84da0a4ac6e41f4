#!/usr/bin/env bash
# Each published crate's docs build as docs.rs builds them: nightly, every feature,
# `--cfg docsrs` (which turns on the "Available on crate feature ..." labels), and
# here with warnings denied.
set -euo pipefail
cd "$(dirname "$0")/.."
source ci/published.sh

export CARGO_TARGET_DIR="$PWD/target/docsrs"
for crate in "${PUBLISHED[@]}"; do
  echo "--- $crate"
  RUSTDOCFLAGS="--cfg docsrs -D warnings" \
    cargo +nightly doc --quiet --no-deps --all-features -p "$crate"
done
# The labels are there: a feature-gated item in the core and in an adapter.
grep -q 'Available on <strong>crate feature <code>alloc</code></strong> only' \
  "$CARGO_TARGET_DIR/doc/admit/struct.OwnedPermit.html"
grep -q 'Available on <strong>crate feature <code>spawn</code></strong> only' \
  "$CARGO_TARGET_DIR/doc/admit_smol/fn.spawn_memory_follower.html"
echo "docs.rs: ${#PUBLISHED[@]} crates document without warnings, features labelled"
