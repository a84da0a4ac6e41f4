#!/usr/bin/env bash
# `cargo package` for every published crate (each verified: it builds from its own
# package, against the packages before it), then a dependent outside the workspace
# (ci/downstream) runs every README example against the unpacked `.crate` files.
# Each package must hold both license texts.
set -euo pipefail
cd "$(dirname "$0")/.."
source ci/published.sh

export CARGO_TARGET_DIR="$PWD/target/package-check"
rm -rf "$CARGO_TARGET_DIR/package"
# Cargo unpacks each package it verifies into CARGO_HOME, under a directory named
# for the temporary registry, and reuses one that exists without reading it
# again: a copy left by an earlier run of the same version would stand in for
# today's sources. Those registries have no name, so their directories start
# with "-"; crates.io's copies are not touched.
for crate in "${PUBLISHED[@]}"; do
  rm -rf "${CARGO_HOME:-$HOME/.cargo}"/registry/src/-*/"$crate"-[0-9]*
done
# shellcheck disable=SC2046
# --allow-dirty: a developer may run this before committing; CI runs on a clean checkout.
cargo package --quiet --allow-dirty $(published_flags)

dir=$(mktemp -d "${TMPDIR:-/tmp}/admit-downstream.XXXXXX")
trap 'rm -rf "$dir"' EXIT
cp -r ci/downstream/. "$dir"
cp README.md "$dir/README.md"
mkdir "$dir/crates"
for crate in "${PUBLISHED[@]}"; do
  tar -xzf "$CARGO_TARGET_DIR"/package/"$crate"-[0-9]*.crate -C "$dir/crates"
  mv "$dir/crates/$crate"-[0-9]* "$dir/crates/$crate"
  # The licenses must travel with the code (each crate's are links to the root's).
  for license in LICENSE-MIT LICENSE-APACHE; do
    if ! cmp -s "$license" "$dir/crates/$crate/$license"; then
      echo "package: $crate does not ship $license" >&2
      exit 1
    fi
  done
done
(cd "$dir" && CARGO_TARGET_DIR="$CARGO_TARGET_DIR/downstream" cargo test --doc)
# The core's model checkers are dev-dependencies or test-only features: no
# package of ours brings them into a dependent's Cargo.lock. (Another crate may:
# metrics-exporter-prometheus, which the README examples use, locks loom through
# left-right's `cfg(loom)` dependency; so the check reads our packages' entries.)
ours=$(awk '/^\[\[package\]\]/ { keep = 0 } /^name = "admit/ { keep = 1 } keep' "$dir/Cargo.lock")
for checker in loom shuttle; do
  if grep -q "^ \"$checker[ \"]" <<<"$ours"; then
    echo "package: a package of ours locks $checker in a dependent's Cargo.lock" >&2
    exit 1
  fi
done
echo "package: ${#PUBLISHED[@]} crates packaged and verified; the README examples pass against the packages"
