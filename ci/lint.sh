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
# The test-only builds: the loom build of the core (both builds; `__loom` is its
# test-only feature, which `loom-tests` enables) with the core's own models, the
# `loom-tests` models (both builds), and the shuttle schedules, each with its
# cfg. (The tests without `alloc` are among the `--all-targets
# --no-default-features` targets above.)
# (The core's integration tests are not built with the cfg: they use the API as
# a dependent does, e.g. `const` constructors, which loom's atomics are not.)
RUSTFLAGS="--cfg admit_loom" CARGO_TARGET_DIR=target-loom \
    cargo clippy -p admit --lib --features __loom -- -D warnings
RUSTFLAGS="--cfg admit_loom" CARGO_TARGET_DIR=target-loom \
    cargo clippy -p admit --lib --profile test -- -D warnings
RUSTFLAGS="--cfg admit_loom" CARGO_TARGET_DIR=target-loom \
    cargo clippy -p admit --lib --no-default-features --features critical-section,__loom -- -D warnings
RUSTFLAGS="--cfg admit_loom" CARGO_TARGET_DIR=target-loom \
    cargo clippy -p loom-tests --all-targets -- -D warnings
RUSTFLAGS="--cfg admit_loom" CARGO_TARGET_DIR=target-loom \
    cargo clippy -p loom-tests --all-targets --no-default-features -- -D warnings
RUSTFLAGS="--cfg admit_shuttle" CARGO_TARGET_DIR=target-shuttle \
    cargo clippy -p admit --lib --tests -- -D warnings
