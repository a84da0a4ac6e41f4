#!/usr/bin/env bash
# The core builds without std (and without alloc) for a target with no 64-bit atomics.
set -euo pipefail
cd "$(dirname "$0")/.."
target=thumbv7em-none-eabihf
set -x
cargo build -p admit --no-default-features --features critical-section --target "$target"
cargo build -p admit --no-default-features --features alloc --target "$target"
# A build with `alloc` (every std user's) never links `critical-section`.
set +x
for features in "--features std" "--no-default-features --features alloc"; do
  # shellcheck disable=SC2086 # the features are words
  if cargo tree -p admit -e normal --target all $features | grep -q critical-section; then
    echo "no_std: admit $features depends on critical-section" >&2
    exit 1
  fi
done
if ! cargo tree -p admit -e normal --no-default-features --features critical-section | grep -q critical-section; then
  echo "no_std: the check above cannot see critical-section" >&2
  exit 1
fi
echo "no_std: the core builds for $target in both queues; only the build without alloc links critical-section"
