#!/usr/bin/env bash
# Runs every cargo-fuzz target in fuzz/ for a bounded time (FUZZ_SECS, default 30 s
# each), starting from the committed corpus. New inputs go to a scratch directory,
# so the committed corpus is not changed; a crash is saved under
# fuzz/artifacts/<target>/ and fails the script.
#
# Needs a nightly toolchain and cargo-fuzz:
#   rustup toolchain install nightly && cargo install cargo-fuzz
# Without them it fails: a check that cannot run is not a pass (.ci/run installs
# both).
#
# The targets replay their inputs against the models of model/ (admit-model); the
# corpus is also replayed on stable by `cargo test -p admit-model --test corpus`,
# which needs neither.
set -euo pipefail

cd "$(dirname "$0")/../fuzz"
secs="${FUZZ_SECS:-30}"

if ! cargo +nightly fuzz --version >/dev/null 2>&1; then
    echo "fuzz-smoke: 'cargo +nightly fuzz' is not available" \
        "(rustup toolchain install nightly && cargo install cargo-fuzz)" >&2
    exit 1
fi

for target in $(cargo +nightly fuzz list); do
    scratch="$(mktemp -d)"
    log="$scratch.log"
    trap 'rm -rf "$scratch" "$log"' EXIT
    echo "fuzz-smoke: $target for ${secs}s"
    # The first corpus directory receives new inputs; the committed one is read only.
    status=0
    cargo +nightly fuzz run "$target" "$scratch" "corpus/$target" -- \
        -max_total_time="$secs" -max_len=512 -print_final_stats=1 >"$log" 2>&1 || status=$?
    grep -E '^(#[0-9]+[[:space:]]+DONE|stat::number_of_executed_units|SUMMARY)|panicked|model disagrees' "$log" || true
    if [ "$status" -ne 0 ]; then
        tail -n 40 "$log"
        echo "fuzz-smoke: $target FAILED (exit $status); the input is in fuzz/artifacts/$target/"
        exit "$status"
    fi
    rm -rf "$scratch" "$log"
    trap - EXIT
done
echo "fuzz-smoke: all targets ran ${secs}s without a finding"
