#!/usr/bin/env bash
# The published crates, their tests and examples compile (checked, not run) with the
# declared `rust-version` (installed here if missing). The lock file is resolved for that version, as
# cargo's rust-version-aware resolver does for a dependent on it
# (`incompatible-rust-versions = "fallback"`), in a scratch copy: the workspace's
# own lock file is left alone.
set -euo pipefail
cd "$(dirname "$0")/.."
source ci/published.sh

msrv=$(sed -n 's/^rust-version = "\(.*\)"$/\1/p' Cargo.toml)
[ -n "$msrv" ] || { echo "no rust-version in Cargo.toml" >&2; exit 1; }
rustup toolchain install "$msrv" --profile minimal --no-self-update >/dev/null

dir=$(scratch_copy)
trap 'rm -rf "$dir"' EXIT
export CARGO_TARGET_DIR="$PWD/target/msrv"
cd "$dir"
# The workspace of the published crates alone: demo and benches may use newer Rust.
crates=$(for c in "${PUBLISHED[@]}"; do printf '"%s", ' "$(crate_dir "$c")"; done)
sed -i "s|^members = .*|members = [${crates%, }]|" Cargo.toml
CARGO_RESOLVER_INCOMPATIBLE_RUST_VERSIONS=fallback cargo "+$msrv" update --quiet
# shellcheck disable=SC2046
cargo "+$msrv" check --all-features --all-targets $(published_flags)
echo "msrv: the published crates build with Rust $msrv"
