#!/usr/bin/env bash
# Each published crate builds, in every feature combination, with the oldest
# versions its dependency requirements allow (`-Z minimal-versions`), so a
# dependent whose Cargo.lock holds old versions is not broken by us.
#
# Each crate is resolved on its own (a workspace of one member), as a dependent
# would see it: a resolution of the whole workspace takes the newest of everyone's
# minimums and would hide a requirement that is too low. Dev-dependencies are
# removed first (`cargo hack --remove-dev-deps`), as tokio does: a dependent never
# resolves them.
#
# Two third-party crates declare lower bounds that no longer build; their own
# minimal versions are raised in the lock file only, not in our requirements:
#   - async-fs 2.0.0 (via smol) does not build against the blocking its own
#     requirement allows; 2.1.0 does.
#   - serde 1.0.0 (via axum) lacks macros axum 0.8 uses; 1.0.100 has them.
# The lock is resolved on nightly (the flag is unstable) and built with stable.
set -euo pipefail
cd "$(dirname "$0")/.."
source ci/published.sh

dir=$(scratch_copy)
trap 'rm -rf "$dir"' EXIT
export CARGO_TARGET_DIR="$PWD/target/minimal-versions"
cd "$dir"
cp Cargo.toml Cargo.toml.workspace

for crate in "${PUBLISHED[@]}"; do
  echo "--- $crate"
  sed "s|^members = .*|members = [\"$(crate_dir "$crate")\"]|" Cargo.toml.workspace > Cargo.toml
  rm -f Cargo.lock
  cargo hack --remove-dev-deps -p "$crate" >/dev/null
  cargo +nightly update -Z minimal-versions --quiet
  for pin in async-fs@2.1.0 serde@1.0.100; do
    if grep -qx "name = \"${pin%@*}\"" Cargo.lock; then
      cargo update --quiet -p "${pin%@*}" --precise "${pin#*@}"
    fi
  done
  # Without `alloc` the core needs `critical-section`: no build has neither. Its
  # `__loom` and `__model` are test-only (the loom build; the models' constants).
  core_flags=()
  if [[ $crate == admit ]]; then
    core_flags=(--at-least-one-of alloc,std,critical-section --exclude-features __loom,__model)
  fi
  cargo hack check -p "$crate" --feature-powerset "${core_flags[@]}" --quiet
done
echo "minimal versions: ${#PUBLISHED[@]} crates build in every feature combination"
