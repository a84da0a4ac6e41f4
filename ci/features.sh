#!/usr/bin/env bash
# Every feature combination of the core builds and passes its tests (cargo-hack's
# feature powerset; `default` is `std`, so it is not a combination of its own;
# `__loom` is test-only, for the loom build, and does nothing without its cfg;
# `__model` only re-exports constants for the reference models; `tokio-compat`
# only adds a module over `alloc`'s API, so it is tested once, not in every
# combination, which would double them).
# The adapters' combinations are built in ci/minimal-versions.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo hack test -p admit --feature-powerset --exclude-features default,__loom,__model,tokio-compat --at-least-one-of alloc,std,critical-section
cargo test -p admit --no-default-features --features tokio-compat
