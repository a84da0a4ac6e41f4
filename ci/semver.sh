#!/usr/bin/env bash
# The public API of each published crate against its last release, the `.crate`
# files in ci/semver-baseline/ (cargo-semver-checks): a change that would need a
# bigger version bump than the manifests declare fails.
#
# `ci/semver.sh bless` replaces the baseline with the packages `ci/package.sh`
# just built: RELEASING.md says when (right after a release is published).
set -euo pipefail
cd "$(dirname "$0")/.."
source ci/published.sh

baseline=ci/semver-baseline
if [ "${1:-}" = bless ]; then
  rm -f "$baseline"/*.crate
  cp target/package-check/package/*.crate "$baseline"/
  ls "$baseline"
  exit 0
fi

# The packages' manifests name their siblings by version only (as crates.io
# does); the scratch workspace adds each sibling's path, so the baseline builds
# from the baseline alone.
dir=$(mktemp -d "${TMPDIR:-/tmp}/admit-semver.XXXXXX")
trap 'rm -rf "$dir"' EXIT
members=""
for crate in "${PUBLISHED[@]}"; do
  tar -xzf "$baseline/$crate"-[0-9]*.crate -C "$dir"
  mv "$dir/$crate"-[0-9]* "$dir/$crate"
  members+="\"$crate\", "
done
for crate in "${PUBLISHED[@]}"; do
  for sibling in "${PUBLISHED[@]}"; do
    sed -i "/^\[dependencies\.$sibling\]\$/a path = \"../$sibling\"" "$dir/$crate/Cargo.toml"
  done
done
printf '[workspace]\nresolver = "2"\nmembers = [%s]\n' "${members%, }" > "$dir/Cargo.toml"

export CARGO_TARGET_DIR="$PWD/target/semver"
# shellcheck disable=SC2046
cargo semver-checks $(published_flags) --baseline-root "$dir"
echo "semver: ${#PUBLISHED[@]} crates checked against ci/semver-baseline/"
