#!/usr/bin/env bash
# Formatting, clippy on every target with warnings denied, and docs with warnings denied.
set -euo pipefail
cd "$(dirname "$0")/.."
set -x
cargo fmt --all -- --check
cargo clippy --workspace --all-targets -- -D warnings
cargo clippy -p admit --all-targets --no-default-features --features critical-section -- -D warnings
cargo clippy -p admit --all-targets --no-default-features --features alloc -- -D warnings
# admit-smol without its `spawn` feature (what admit-async-std builds): the timer alone.
cargo clippy -p admit-smol --no-default-features -- -D warnings
RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps
# The core's docs as a no_std user builds them: links to alloc-only items must
# still resolve (they point to docs.rs there).
RUSTDOCFLAGS="-D warnings" cargo doc -p admit --no-default-features --features critical-section --no-deps
RUSTDOCFLAGS="-D warnings" cargo doc -p admit --no-default-features --features alloc --no-deps
# The test-only builds: the loom models (both builds) and the shuttle schedules,
# each with its cfg. (The tests without `alloc` are among the
# `--all-targets --no-default-features` targets above.)
RUSTFLAGS="--cfg admit_loom" CARGO_TARGET_DIR=target-loom \
    cargo clippy -p admit --lib --tests -- -D warnings
RUSTFLAGS="--cfg admit_loom" CARGO_TARGET_DIR=target-loom \
    cargo clippy -p admit --lib --tests --no-default-features --features critical-section -- -D warnings
RUSTFLAGS="--cfg admit_shuttle" CARGO_TARGET_DIR=target-shuttle \
    cargo clippy -p admit --lib --tests -- -D warnings
