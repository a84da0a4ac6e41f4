#!/usr/bin/env bash
# The real memory check: `admit-demo serve` in a memory cgroup of LIMIT_MIB (160 MiB),
# with its gate budgeted from BUDGET (160MiB), under `admit-demo load` (40 clients,
# 40 s, uploads of nearly a session buffer each) run from outside the cgroup.
# Passes when the cgroup saw no OOM kill, the server is still alive after the load,
# the cgroup's peak usage stayed at most PEAK_MAX_PERCENT (95) % of the limit, and
# some uploads completed (200). Then it prints the server's capacity / in-use /
# memory metrics, stops the server with SIGTERM and removes the cgroup.
#
# Needs root and a kernel that lets it make a memory cgroup under its own (cgroup
# v1: the memory hierarchy; v2: a child with +memory in the parent's
# subtree_control, the script moving itself into a sibling leaf if its own cgroup
# holds processes). If the kernel refuses, this FAILS (exit 1): it never skips.
#
# Environment (all optional):
#   BUDGET            serve's --memory-budget                     [160MiB]
#   LIMIT_MIB         the cgroup's memory limit, in MiB           [160]
#   PEAK_MAX_PERCENT  the highest peak usage that passes, in % of the limit [95]
#   CLIENTS           load's --clients                            [40]
#   DURATION          load's --duration                           [40s]
#   SERVE_ARGS        more flags for serve (word-split), e.g. --no-memory-watch
#   LOAD_ARGS         more flags for load (word-split), e.g. --payload 4MiB
#   LOG_DIR           where the server's and the load's output go
#                     [<target dir>/memory_cgroup]
#   PROFILE           release or debug: the build of admit-demo run [release]
#   CARGO_TARGET_DIR  honoured by the build and to find the binary
set -euo pipefail
cd "$(dirname "$0")/.."

BUDGET="${BUDGET:-160MiB}"
LIMIT_MIB="${LIMIT_MIB:-160}"
PEAK_MAX_PERCENT="${PEAK_MAX_PERCENT:-95}"
CLIENTS="${CLIENTS:-40}"
DURATION="${DURATION:-40s}"
SERVE_ARGS="${SERVE_ARGS:-}"
LOAD_ARGS="${LOAD_ARGS:-}"
PROFILE="${PROFILE:-release}"

say() { printf '%s\n' "$*"; }
fail() {
  say "memory_cgroup: FAIL: $*"
  exit 1
}
[[ $LIMIT_MIB =~ ^[1-9][0-9]{0,6}$ ]] || fail "LIMIT_MIB must be a whole number of MiB: $LIMIT_MIB"
[[ $PEAK_MAX_PERCENT =~ ^[1-9][0-9]?$|^100$ ]] || fail "PEAK_MAX_PERCENT must be 1..100: $PEAK_MAX_PERCENT"
[[ $CLIENTS =~ ^[1-9][0-9]*$ ]] || fail "CLIENTS must be a whole number: $CLIENTS"
LIMIT_BYTES=$((LIMIT_MIB * 1024 * 1024))
# Writes $1 to the file $2; on refusal, fails with the kernel's reason.
write_or_fail() {
  local err
  if ! err=$({ printf '%s\n' "$1" >"$2"; } 2>&1); then
    fail "the kernel refused writing $1 to $2: ${err##*: }"
  fi
}
# Writes $1 to the file $2 if it can; says so either way.
write_if_possible() {
  local err
  if [[ ! -e $2 ]]; then
    say "  note      $2 does not exist: not set"
  elif err=$({ printf '%s\n' "$1" >"$2"; } 2>&1); then
    say "  set       $(basename "$2") = $1"
  else
    say "  note      could not write $1 to $2: ${err##*: }"
  fi
}

# --- 1. The binary.
say "--- building admit-demo ($PROFILE)"
case $PROFILE in
release) cargo build --release -p admit-demo || fail "cargo build --release -p admit-demo failed" ;;
debug) cargo build -p admit-demo || fail "cargo build -p admit-demo failed" ;;
*) fail "PROFILE must be release or debug: $PROFILE" ;;
esac
TARGET_DIR=$(cargo metadata --no-deps --format-version 1 |
  sed -n 's/.*"target_directory":"\([^"]*\)".*/\1/p')
[[ -n $TARGET_DIR ]] || TARGET_DIR="${CARGO_TARGET_DIR:-target}"
BIN="$TARGET_DIR/$PROFILE/admit-demo"
[[ -x $BIN ]] || fail "no binary at $BIN after the build"
LOG_DIR="${LOG_DIR:-$TARGET_DIR/memory_cgroup}"
mkdir -p "$LOG_DIR"
SERVER_LOG="$LOG_DIR/serve.log"
LOAD_LOG="$LOG_DIR/load.log"

# --- 2. The cgroup, under the script's own.
[[ $(id -u) == 0 ]] || say "  note      not root (uid $(id -u)): the kernel will likely refuse"
# The mount of a hierarchy from /proc/self/mountinfo: "root mountpoint" of the first
# mount whose filesystem type is $1 and, for v1, whose options include $2.
mount_of() {
  awk -v fstype="$1" -v opt="$2" '{
    for (i = 1; i <= NF; i++) if ($i == "-") break
    if ($(i + 1) != fstype) next
    if (opt != "" && ("," $(i + 3) ",") !~ ("," opt ",")) next
    print $4, $5; exit
  }' /proc/self/mountinfo
}
# $2 (a path in the hierarchy) under the mount "root mountpoint" $1.
path_under() {
  local root="${1%% *}" mnt="${1#* }" own="$2"
  if [[ $root != / ]]; then
    if [[ $own != "$root" && $own != "$root"/* ]]; then
      say "own cgroup $own is not under the mount's root $root ($mnt)" >&2
      return 1
    fi
    own="${own#"$root"}"
  fi
  own="${own%/}"
  printf '%s%s\n' "${mnt%/}" "$own"
}

CG=""
SELF_LEAF=""
ENABLED_MEMORY=0
PARENT=""
VERSION=""
v1_own=$(awk -F: '$2 ~ /(^|,)memory(,|$)/ { print $3; exit }' "/proc/$$/cgroup")
v1_mount=$(mount_of cgroup memory)
v2_own=$(awk -F: '$1 == "0" && $2 == "" { print $3; exit }' "/proc/$$/cgroup")
v2_mount=$(mount_of cgroup2 "")
if [[ -n $v1_own && -n $v1_mount ]]; then
  VERSION=1
  PARENT=$(path_under "$v1_mount" "$v1_own") || fail "cannot find the own v1 memory cgroup (see above)"
elif [[ -n $v2_own && -n $v2_mount ]]; then
  VERSION=2
  PARENT=$(path_under "$v2_mount" "$v2_own") || fail "cannot find the own v2 cgroup (see above)"
else
  fail "no memory cgroup hierarchy: no v1 memory mount for this process, nor a cgroup2 mount"
fi
say "--- cgroup v$VERSION: own cgroup $PARENT"

CHECK_SERVER_PID=""
cleanup() {
  local status=$? i
  trap - EXIT
  if [[ -n $CHECK_SERVER_PID ]] && kill -0 "$CHECK_SERVER_PID" 2>/dev/null; then
    kill -TERM "$CHECK_SERVER_PID" 2>/dev/null || true
    for ((i = 0; i < 100; i++)); do
      server_running || break
      sleep 0.1
    done
    kill -KILL "$CHECK_SERVER_PID" 2>/dev/null || true
    wait "$CHECK_SERVER_PID" 2>/dev/null || true
  fi
  if [[ -n $CG && -d $CG ]]; then
    for ((i = 0; i < 25; i++)); do
      rmdir "$CG" 2>/dev/null && break
      sleep 0.2
    done
    [[ -d $CG ]] && say "  warning   could not remove $CG (still holds: $(tr '\n' ' ' <"$CG/cgroup.procs"))"
  fi
  if [[ -n $SELF_LEAF && -d $SELF_LEAF ]]; then
    # v2: back into the own cgroup, which may hold processes again once memory
    # is no longer enabled for its children (if this script enabled it).
    if ((ENABLED_MEMORY)); then
      printf '%s\n' -memory >"$PARENT/cgroup.subtree_control" 2>/dev/null || true
    fi
    if printf '%s\n' $$ >"$PARENT/cgroup.procs" 2>/dev/null; then
      rmdir "$SELF_LEAF" 2>/dev/null || true
    fi
    [[ -d $SELF_LEAF ]] && say "  warning   left $SELF_LEAF (the script could not move back into $PARENT)"
  fi
  exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

if [[ $VERSION == 1 ]]; then
  CG="$PARENT/admit-check-$$"
  err=$(mkdir "$CG" 2>&1) || {
    CG=""
    fail "the kernel refused mkdir of the v1 memory cgroup: ${err##*: }"
  }
  write_or_fail "$LIMIT_BYTES" "$CG/memory.limit_in_bytes"
  got=$(cat "$CG/memory.limit_in_bytes")
  [[ $got == "$LIMIT_BYTES" ]] || fail "memory.limit_in_bytes reads $got, not $LIMIT_BYTES"
  # No swap for it: the limit is the memory it has.
  write_if_possible 0 "$CG/memory.swappiness"
  write_if_possible "$LIMIT_BYTES" "$CG/memory.memsw.limit_in_bytes"
else
  grep -qw memory "$PARENT/cgroup.controllers" ||
    fail "the memory controller is not available in $PARENT (cgroup.controllers: $(cat "$PARENT/cgroup.controllers"))"
  if ! grep -qw memory "$PARENT/cgroup.subtree_control"; then
    # No internal processes: a cgroup (but the root) whose children have a
    # controller holds no process itself. Move the script into a sibling leaf.
    if [[ $v2_own != / && -n $(cat "$PARENT/cgroup.procs") ]]; then
      SELF_LEAF="$PARENT/admit-check-$$-self"
      err=$(mkdir "$SELF_LEAF" 2>&1) || {
        SELF_LEAF=""
        fail "the kernel refused mkdir of $PARENT/admit-check-$$-self: ${err##*: }"
      }
      write_or_fail $$ "$SELF_LEAF/cgroup.procs"
      say "  moved     this script into $SELF_LEAF (no internal processes once +memory is on)"
    fi
    err=$({ printf '%s\n' +memory >"$PARENT/cgroup.subtree_control"; } 2>&1) ||
      fail "the kernel refused +memory in $PARENT/cgroup.subtree_control: ${err##*: } (processes still in $PARENT: $(tr '\n' ' ' <"$PARENT/cgroup.procs"))"
    ENABLED_MEMORY=1
  fi
  CG="$PARENT/admit-check-$$"
  err=$(mkdir "$CG" 2>&1) || {
    CG=""
    fail "the kernel refused mkdir of the v2 cgroup: ${err##*: }"
  }
  [[ -e $CG/memory.max ]] || fail "$CG has no memory.max: the memory controller is not on"
  write_or_fail "$LIMIT_BYTES" "$CG/memory.max"
  got=$(cat "$CG/memory.max")
  [[ $got == "$LIMIT_BYTES" ]] || fail "memory.max reads $got, not $LIMIT_BYTES"
  write_if_possible 0 "$CG/memory.swap.max"
fi
say "  cgroup    $CG, limit $LIMIT_MIB MiB ($LIMIT_BYTES bytes)"

# --- 3. The server, in the cgroup before it allocates anything.
free_port() {
  if command -v python3 >/dev/null; then
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
    return
  fi
  local port i
  for ((i = 0; i < 100; i++)); do
    port=$((20000 + RANDOM % 40000))
    if ! (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
      printf '%s\n' "$port"
      return
    fi
  done
  return 1
}
# Whether the server runs: exists and is not a zombie (an OOM-killed child stays
# a zombie until waited for).
server_running() {
  local stat
  stat=$(cat "/proc/$CHECK_SERVER_PID/stat" 2>/dev/null) || return 1
  stat="${stat##*) }"
  [[ ${stat%% *} != [ZX] ]]
}
PORT=$(free_port) || fail "found no free port"
say "--- serve --memory-budget $BUDGET --port $PORT $SERVE_ARGS (log: $SERVER_LOG)"
# shellcheck disable=SC2016 # $$ and $1.. are the inner shell's
sh -c 'echo $$ > "$1/cgroup.procs" && exec "$2" serve --memory-budget "$3" --port "$4" '"$SERVE_ARGS" \
  admit-check "$CG" "$BIN" "$BUDGET" "$PORT" >"$SERVER_LOG" 2>&1 &
CHECK_SERVER_PID=$!
started=$SECONDS
until (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null; do
  if ! server_running; then
    cat "$SERVER_LOG"
    fail "the server exited before it listened (see above)"
  fi
  ((SECONDS - started < 30)) || fail "the server did not listen on port $PORT within 30 s"
  sleep 0.1
done
grep -qx "$CHECK_SERVER_PID" "$CG/cgroup.procs" ||
  fail "the server (pid $CHECK_SERVER_PID) is not in $CG: $(tr '\n' ' ' <"$CG/cgroup.procs")"
sed 's/^/  | /' "$SERVER_LOG"
say "  server    pid $CHECK_SERVER_PID in $CG, listening on 127.0.0.1:$PORT"

# A series of the server's /metrics, or nothing (never a failure: the page is
# read whole, then searched).
metric() {
  local page
  page=$(curl -fsS --max-time 2 "http://127.0.0.1:$PORT/metrics" 2>/dev/null) || return 0
  awk -v n="upload_sessions_$1" '$1 == n { print $2; exit }' <<<"$page"
}
sleep 0.3 # the memory watch's first readings
capacity_before=$(metric capacity_units)
say "  capacity  $capacity_before units in force before the load (working set $(metric memory_working_set_bytes) B of $(metric memory_limit_bytes) B)"

# --- 4. The load, from the script's own cgroup.
say "--- load: $CLIENTS clients for $DURATION against 127.0.0.1:$PORT $LOAD_ARGS (log: $LOAD_LOG)"
set +e
# shellcheck disable=SC2086 # LOAD_ARGS is word-split on purpose
"$BIN" load --target "127.0.0.1:$PORT" --clients "$CLIENTS" --duration "$DURATION" $LOAD_ARGS 2>&1 |
  tee "$LOAD_LOG"
load_status=${PIPESTATUS[0]}
set -e

# --- 5. What the cgroup saw.
reasons=()
if [[ $VERSION == 1 ]]; then
  oom=$(awk '$1 == "oom_kill" { print $2 }' "$CG/memory.oom_control")
  peak=$(cat "$CG/memory.max_usage_in_bytes")
  limit_hits="memory.failcnt $(cat "$CG/memory.failcnt")"
  if [[ -e $CG/memory.memsw.failcnt ]]; then
    limit_hits+=", memory.memsw.failcnt $(cat "$CG/memory.memsw.failcnt")"
  fi
else
  oom=$(awk '$1 == "oom_kill" { print $2 }' "$CG/memory.events")
  peak=$(cat "$CG/memory.peak" 2>/dev/null || true)
  limit_hits="memory.events max $(awk '$1 == "max" { print $2 }' "$CG/memory.events")"
fi
alive=0
server_running && alive=1
died=""
if ((!alive)); then
  wait "$CHECK_SERVER_PID" 2>/dev/null && code=0 || code=$?
  CHECK_SERVER_PID=""
  if ((code == 137)); then
    died="killed by signal 9 (SIGKILL)"
  elif ((code > 128)); then
    died="killed by signal $((code - 128))"
  else
    died="exited with status $code"
  fi
fi

say ""
say "--- results (cgroup v$VERSION, limit $LIMIT_MIB MiB, serve --memory-budget $BUDGET)"
if [[ -n $oom ]]; then
  say "  OOM kills        $oom"
  ((oom == 0)) || reasons+=("OOM-killed ($oom OOM kill(s) in the cgroup)")
else
  say "  OOM kills        not reported by this kernel (no oom_kill line): judged by the server's death"
  ((alive)) || reasons+=("OOM-killed? (no oom_kill count; the server died: $died)")
fi
if ((alive)); then
  say "  server           alive"
else
  say "  server           dead: $died"
  reasons+=("server dead after the load ($died)")
fi
if [[ -n $peak ]]; then
  peak_mib=$(awk -v b="$peak" 'BEGIN { printf "%.1f", b / 1048576 }')
  peak_pct=$(awk -v b="$peak" -v l="$LIMIT_BYTES" 'BEGIN { printf "%.1f", 100 * b / l }')
  say "  peak usage       $peak_mib MiB = $peak_pct % of the limit (at most $PEAK_MAX_PERCENT % passes); $limit_hits"
  ((peak * 100 <= PEAK_MAX_PERCENT * LIMIT_BYTES)) ||
    reasons+=("peak $peak_mib MiB = $peak_pct % of the limit, over $PEAK_MAX_PERCENT %")
else
  say "  peak usage       not measurable (no memory.peak: kernel before 5.19)"
  reasons+=("peak usage not measurable")
fi
completed=$(sed -n 's/^load: .* completed=\([0-9][0-9]*\) .*/\1/p' "$LOAD_LOG" | tail -n 1)
if [[ -z $completed ]]; then
  say "  completed        no summary from the load generator (exit status $load_status)"
  reasons+=("the load generator printed no summary (exit status $load_status)")
else
  say "  completed        $completed uploads (200)"
  ((completed > 0)) || reasons+=("no upload completed")
  ((load_status == 0)) || reasons+=("the load generator exited with status $load_status")
fi
# Where the memory is now (not a check): the cgroup's usage and its main parts.
mib() { awk -v b="${1:-0}" 'BEGIN { printf "%.1f MiB", b / 1048576 }'; }
stat_of() { awk -v k="$1" '$1 == k { print $2; exit }' "$CG/memory.stat"; }
if [[ $VERSION == 1 ]]; then
  say "  usage now        $(mib "$(cat "$CG/memory.usage_in_bytes")"): rss $(mib "$(stat_of total_rss)"), cache $(mib "$(stat_of total_cache)"), kmem $(mib "$(cat "$CG/memory.kmem.usage_in_bytes" 2>/dev/null)") (kmem peak $(mib "$(cat "$CG/memory.kmem.max_usage_in_bytes" 2>/dev/null)"))"
else
  say "  usage now        $(mib "$(cat "$CG/memory.current")"): anon $(mib "$(stat_of anon)"), file $(mib "$(stat_of file)"), kernel $(mib "$(stat_of kernel)"), sock $(mib "$(stat_of sock)")"
fi

# --- 6. After the load, with no unit held: the capacity in force is back
# within two of the memory watch's readings (100 ms each), and a second,
# smaller load is admitted.
if ((alive)); then
  sleep 0.2
  capacity_after=$(metric capacity_units)
  say ""
  say "--- after the load: capacity $capacity_after units in force (before: $capacity_before), $(metric units_in_use) in use, working set $(metric memory_working_set_bytes) B"
  [[ -n $capacity_after && $capacity_after == "$capacity_before" ]] ||
    reasons+=("the capacity in force did not come back within two readings: $capacity_after, was $capacity_before")
  again_log="$LOG_DIR/again.log"
  "$BIN" load --target "127.0.0.1:$PORT" --clients 8 --duration 3s >"$again_log" 2>&1 || true
  again=$(sed -n 's/^load: .* completed=\([0-9][0-9]*\) .*/\1/p' "$again_log" | tail -n 1)
  say "  again     8 clients for 3 s: ${again:-no summary} uploads completed ($(grep -o 'shed_retry_after=[0-9]*' "$again_log"))"
  ((${again:-0} > 0)) || reasons+=("no upload completed after the load")
  say "  /metrics:"
  curl -fsS --max-time 2 "http://127.0.0.1:$PORT/metrics" 2>&1 |
    awk '!/^#/ { name = $1; sub(/\{.*/, "", name); if (name ~ /capacity|in_use|memory/ || $0 ~ /reason="memory"/ && $2 != 0) print "    " $0 }' |
    sort
fi

# --- 7. Stop the server; the trap removes the cgroup.
if [[ -n $CHECK_SERVER_PID ]]; then
  kill -TERM "$CHECK_SERVER_PID" 2>/dev/null || true
  stopped=0
  for ((i = 0; i < 300; i++)); do
    if ! server_running; then
      stopped=1
      break
    fi
    sleep 0.1
  done
  if ((stopped)); then
    wait "$CHECK_SERVER_PID" 2>/dev/null && code=0 || code=$?
    say ""
    say "--- server stopped on SIGTERM, exit status $code (0: drained)"
    tail -n 3 "$SERVER_LOG" | sed 's/^/  | /'
  else
    reasons+=("the server did not stop within 30 s of SIGTERM")
  fi
  CHECK_SERVER_PID=""
fi

say ""
if ((${#reasons[@]} == 0)); then
  say "memory_cgroup: PASS"
else
  joined=$(printf '%s; ' "${reasons[@]}")
  say "memory_cgroup: FAIL: ${joined%; }"
  exit 1
fi
