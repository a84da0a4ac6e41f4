#!/usr/bin/env bash
# The core builds without std (and without alloc) for a target with no 64-bit atomics.
set -euo pipefail
cd "$(dirname "$0")/.."
target=thumbv7em-none-eabihf
set -x
cargo build -p admit --no-default-features --features critical-section --target "$target"
cargo build -p admit --no-default-features --features alloc --target "$target"
