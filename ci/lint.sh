#!/usr/bin/env bash
# Formatting, clippy on every target with warnings denied, and docs with warnings denied.
set -euo pipefail
cd "$(dirname "$0")/.."
set -x
cargo fmt --all -- --check
cargo clippy --workspace --all-targets -- -D warnings
cargo clippy -p admit --no-default-features -- -D warnings
cargo clippy -p admit --no-default-features --features alloc -- -D warnings
RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps
