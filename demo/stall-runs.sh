#!/usr/bin/env bash
# Issue 50's three runs of stalled clients against `admit-demo serve` as the README
# starts it (its defaults: 16 units, a 2 s wait budget, the overload target on), each
# against a freshly started server: 16 trickle stallers, 64 trickle stallers, 16
# stalled upload sessions, one normal client beside them (demo/examples/stall.rs).
#
#   demo/stall-runs.sh [--seconds S]     (default 60 s a run; about 3.5 minutes in all)
#
# Builds the demo and the example (debug) into $CARGO_TARGET_DIR (default target/),
# runs the server binary directly (so the SIGINT that ends each run reaches it), and
# prints each run's summary and the server's drain line. Loopback only.
set -euo pipefail
cd "$(dirname "$0")/.."

seconds=60
while [ $# -gt 0 ]; do
  case "$1" in
    --seconds) seconds="$2"; shift 2 ;;
    --seconds=*) seconds="${1#*=}"; shift ;;
    -h|--help) sed -n '2,11p' "$0"; exit 0 ;;
    *) echo "stall-runs.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done

cargo build -q -p admit-demo --bin admit-demo --example stall
target="${CARGO_TARGET_DIR:-target}"
server_bin="$target/debug/admit-demo"
stall_bin="$target/debug/examples/stall"

log=$(mktemp)
server=
cleanup() {
  if [ -n "$server" ] && kill -0 "$server" 2>/dev/null; then
    kill -INT "$server" 2>/dev/null || true
    wait "$server" 2>/dev/null || true
  fi
  rm -f "$log"
}
trap cleanup EXIT

echo "commit $(git rev-parse --short HEAD)$(git diff --quiet HEAD -- . ':!demo/stall-runs.sh' ':!demo/examples/stall.rs' || echo ' (with local changes)'), $(nproc) cores, ${seconds}s a run"
run() { # stallers kind
  : >"$log"
  # As the README starts it (`cargo run -p admit-demo -- serve`); --plot none only
  # keeps the runs from overwriting target/admit-demo.svg.
  "$server_bin" serve --plot none >"$log" 2>&1 &
  server=$!
  local addr= i
  for i in $(seq 100); do # the address line, within 10 s
    addr=$(sed -n 's|^  server    http://\([0-9.:]*\) .*|\1|p' "$log")
    [ -n "$addr" ] && break
    kill -0 "$server" 2>/dev/null || break
    sleep 0.1
  done
  if [ -z "$addr" ]; then
    echo "stall-runs.sh: the server printed no address:" >&2
    cat "$log" >&2
    exit 1
  fi
  echo
  "$stall_bin" --addr "$addr" --stallers "$1" --kind "$2" --seconds "$seconds"
  kill -INT "$server"
  wait "$server" || echo "server exited with status $?"
  server=
  grep '^  drained' "$log" | sed 's/^  drained   /server: drained, /' || true
}

run 16 trickle
run 64 trickle
run 16 session
