#!/usr/bin/env bash
# The HTTP layer's cost on the fast path (a gate never full), side by side with
# tower's LoadShed + GlobalConcurrencyLimit, measured with wrk (not ours).
#
#   benches/edge.sh [STACK...]
#
# Builds adapters/tower/examples/edge_bench.rs in release and runs ROUNDS rounds
# (6 by default); each round runs every STACK once, in the order given (A B C D,
# A B C D, ...): a fresh server pinned to core SERVER_CPU (0) with `taskset`, one
# Tokio worker; wrk pinned to core LOAD_CPU (1), one thread, CONNS (64)
# keep-alive connections, each request a POST of 1 KiB that the handler reads;
# a WARMUP-second (3) run discarded, then a DURATION-second (10) run measured.
# STACKs are the example's (its docs say what each is): a base (shed, admit,
# admit-noprog, admit-unwatched) and modifiers (+metrics, +upkeep, +upkeep1,
# +thread, +buckets). Default: the seven of docs/benchmarks.md's run (shed admit
# admit-noprog admit+metrics admit+metrics+buckets+upkeep1 admit-unwatched
# admit+metrics+upkeep). The first is the reference of the throughput ratios, the
# second of the p99 ratios. wrk's latencies are corrected for coordinated omission
# (wrk 4 adds the samples a stalled connection did not send), so a stall of the
# server shows in its percentiles as an open-loop client would see it.
#
# The machine is shared: before each run the script waits (up to QUIET_MAX s, 120)
# for a second in which both cores were 95 % idle, and it reads how long others
# kept our two threads off their cores (the run-queue wait in
# /proc/PID/task/*/schedstat). A round in which any run lost more than MAX_WAIT ms
# (500) that way is kept in the raw lines as `xN`, left out of the summary, and
# run again, up to RETRIES (3) times.
#
# Prints one line per run (requests/s; wrk's p50, p99, p99.9 and max; the
# server's CPU time per request from /proc/PID/stat; the two run-queue waits;
# wrk's error lines; the server's RSS at the end), then per stack the median and
# min-max over the rounds, with each run's requests/s over the first stack's and
# its p99 over the second stack's *in the same round* (median, min-max). Raw lines
# go to $OUT/runs.tsv (default target/edge/), the summary to $OUT/summary.md, the
# servers' stderr (the exporter's upkeep and render times) to $OUT/server.log.
# Needs wrk (apt-get install -y wrk), taskset and curl.
#
# CALLGRIND=1: instead, each STACK once under valgrind's callgrind (the same load,
# counted after the warm-up for DURATION s): user-space instructions and calls to
# malloc per request, which other tenants of the machine do not move (the kernel's
# share is not in them). Needs valgrind.
set -euo pipefail

root=$(git -C "$(dirname "$0")" rev-parse --show-toplevel)
rounds=${ROUNDS:-6}
duration=${DURATION:-10}
warmup=${WARMUP:-3}
conns=${CONNS:-64}
addr=${ADDR:-127.0.0.1:3917}
server_cpu=${SERVER_CPU:-0}
load_cpu=${LOAD_CPU:-1}
out=${OUT:-$root/target/edge}
max_wait=${MAX_WAIT:-500}
retries=${RETRIES:-3}
stacks=("$@")
[[ ${#stacks[@]} -gt 0 ]] ||
    stacks=(shed admit admit-noprog admit+metrics admit+metrics+buckets+upkeep1 admit-unwatched admit+metrics+upkeep)

for tool in wrk taskset curl; do
    command -v "$tool" >/dev/null || {
        echo "edge.sh: $tool not found (wrk: apt-get install -y wrk)" >&2
        exit 1
    }
done

(cd "$root" && cargo build --release -p admit-tower --example edge_bench >&2)
target=${CARGO_TARGET_DIR:-$root/target}
[[ $target == /* ]] || target=$root/$target
bin=$target/release/examples/edge_bench

mkdir -p "$out"
: >"$out/server.log"
lua=$(mktemp --suffix=.lua)
server=
cleanup() {
    [[ -n $server ]] && kill "$server" 2>/dev/null && wait "$server" 2>/dev/null
    rm -f "$lua" "$lua.out"
}
trap cleanup EXIT
cat >"$lua" <<'EOF'
wrk.method = "POST"
wrk.body = string.rep("x", 1024)
wrk.headers["Content-Type"] = "application/octet-stream"
done = function(summary, latency, requests)
    io.write(string.format("edge: p99.9 %d us, max %d us\n", latency:percentile(99.9), latency.max))
end
EOF
url=http://$addr/upload
ticks=$(getconf CLK_TCK)

# ms VALUE: wrk's latency (e.g. 712.00us, 1.25ms, 1.02s) in milliseconds.
ms() {
    awk -v v="$1" 'BEGIN {
        n = v + 0; u = v; sub(/^[0-9.]+/, "", u)
        if (u == "us") n /= 1000; else if (u == "s") n *= 1000; else if (u == "m") n *= 60000
        printf "%.3f", n }'
}

# cpu PID: the process's user + system time, in clock ticks.
cpu() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }

# quiet: waits (up to QUIET_MAX s, 120 by default; 0: not at all) for a second in
# which both cores were at least 95 % idle, so that a run starts while no build
# or test of someone else's is running. A run that meets one anyway shows it in
# its run-queue wait.
idle() { awk -v a="cpu$server_cpu" -v b="cpu$load_cpu" '$1 == a || $1 == b { print $5 + $6, $2 + $3 + $4 + $5 + $6 + $7 + $8 + $9 }' /proc/stat; }
quiet() {
    local deadline=$((SECONDS + ${QUIET_MAX:-120})) first second
    while ((SECONDS < deadline)); do
        first=$(idle)
        sleep 1
        second=$(idle)
        paste <(echo "$first") <(echo "$second") |
            awk '{ if (($3 - $1) < 0.95 * ($4 - $2)) bad = 1 } END { exit bad }' && return
    done
    return 0
}

# delay PID: the time its threads were runnable but waited for a core, in ns
# (the second field of /proc/PID/task/*/schedstat): how much others took of it.
delay() { cat /proc/"$1"/task/*/schedstat 2>/dev/null | awk '{ n += $2 } END { printf "%d\n", n }'; }

echo "# $(date -u +%FT%TZ) $(git -C "$root" rev-parse --short HEAD) $(nproc) cores," \
    "load average $(cut -d' ' -f1-3 /proc/loadavg); $rounds rounds x ${duration}s" \
    "(+${warmup}s warm-up), $conns connections" | tee "$out/runs.tsv" >&2
printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' round stack req_per_s p50_ms p99_ms p999_ms max_ms cpu_us_per_req \
    server_wait_ms load_wait_ms errors rss_mib >>"$out/runs.tsv"
# run STACK: one run, a fresh server; sets `line` to its figures (without the round) and
# sets `noisy` if others took more than MAX_WAIT ms of our two threads' time.
run() {
    local stack=$1 before after report load rps total p50 p99 p999 max errors cpu_us rss
    local server_delay load_delay
    quiet
    echo "# $stack" >>"$out/server.log"
    taskset -c "$server_cpu" "$bin" "$stack" "$addr" 2>>"$out/server.log" &
    server=$!
    for _ in $(seq 1 100); do
        curl -fs -o /dev/null -X POST --data x "$url" && break
        sleep 0.05
    done
    taskset -c "$load_cpu" wrk -t1 -c"$conns" -d"${warmup}s" -s "$lua" "$url" >/dev/null
    before=$(cpu "$server")
    server_delay=$(delay "$server")
    taskset -c "$load_cpu" wrk -t1 -c"$conns" -d"${duration}s" --latency -s "$lua" "$url" >"$lua.out" &
    load=$!
    load_delay=$(delay "$load")
    sleep "$(awk -v d="$duration" 'BEGIN { print d - 0.3 }')"
    load_delay=$(($(delay "$load") - load_delay))
    wait "$load"
    report=$(cat "$lua.out")
    after=$(cpu "$server")
    server_delay=$(($(delay "$server") - server_delay))
    rss=$(awk '/^VmRSS:/ { printf "%.1f", $2 / 1024 }' "/proc/$server/status")
    kill "$server"
    wait "$server" 2>/dev/null || true
    server=
    rps=$(awk '/^Requests\/sec:/ { print $2 }' <<<"$report")
    total=$(awk '/requests in/ { print $1 }' <<<"$report")
    p50=$(ms "$(awk '$1 == "50%" { print $2 }' <<<"$report")")
    p99=$(ms "$(awk '$1 == "99%" { print $2 }' <<<"$report")")
    p999=$(awk '$1 == "edge:" { printf "%.3f", $3 / 1000 }' <<<"$report")
    max=$(awk '$1 == "edge:" { printf "%.1f", $6 / 1000 }' <<<"$report")
    errors=$(awk '/Non-2xx|Socket errors/ { n += 1 } END { print n + 0 }' <<<"$report")
    cpu_us=$(awk -v t=$((after - before)) -v hz="$ticks" -v n="$total" \
        'BEGIN { printf "%.2f", t / hz * 1e6 / n }')
    server_delay=$((server_delay / 1000000))
    load_delay=$((load_delay / 1000000))
    ((server_delay + load_delay <= max_wait)) || noisy=1
    line=$(printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s' "$stack" "$rps" "$p50" "$p99" "$p999" "$max" \
        "$cpu_us" "$server_delay" "$load_delay" "$errors" "$rss")
}

# counted STACK: callgrind's instructions and malloc calls per request.
counted() {
    local stack=$1 file=$out/callgrind.$1 total
    rm -f "$file"*
    taskset -c "$server_cpu" valgrind --tool=callgrind --callgrind-out-file="$file" \
        "$bin" "$stack" "$addr" 2>>"$out/server.log" &
    server=$!
    for _ in $(seq 1 200); do
        curl -fs -o /dev/null -X POST --data x "$url" && break
        sleep 0.1
    done
    taskset -c "$load_cpu" wrk -t1 -c"$conns" -d"${warmup}s" -s "$lua" "$url" >/dev/null
    callgrind_control -z "$server" >/dev/null 2>&1
    total=$(taskset -c "$load_cpu" wrk -t1 -c"$conns" -d"${duration}s" -s "$lua" "$url" |
        awk '/requests in/ { print $1 }')
    callgrind_control -d "$server" >/dev/null 2>&1
    kill "$server"
    wait "$server" 2>/dev/null || true
    server=
    # The dump after the zeroing: `summary:` (or `totals:`) is every instruction
    # since; each `calls=` line after a `cfn=` naming malloc is a count of calls.
    awk -v n="$total" -v stack="$stack" '
        /^(summary|totals):/ && !ir { ir = $2 }
        /^c?fn=/ {
            id = $1; sub(/^c?fn=/, "", id); name = $0; sub(/^c?fn=\([0-9]+\) ?/, "", name)
            if (name != "") names[id] = name
            if (/^cfn=/) target = names[id]
        }
        /^calls=/ && target == "malloc" { split($1, c, "="); mallocs += c[2] }
        END { printf "%s\t%d\t%.0f\t%.2f\n", stack, n, ir / n, mallocs / n }
    ' "$(ls -t "$file".* | head -1)"
}

if [[ -n ${CALLGRIND:-} ]]; then
    command -v valgrind >/dev/null || { echo "edge.sh: valgrind not found" >&2; exit 1; }
    printf 'stack\trequests\tinstructions_per_req\tmallocs_per_req\n' | tee "$out/callgrind.tsv"
    for stack in "${stacks[@]}"; do
        counted "$stack" | tee -a "$out/callgrind.tsv"
    done
    exit 0
fi

# A round in which any run was noisy is kept in runs.tsv as `xN` (left out of the
# summary) and run again, up to RETRIES (3) times; the last try is kept whatever.
for round in $(seq 1 "$rounds"); do
    for try in $(seq 0 "$retries"); do
        noisy=
        lines=()
        for stack in "${stacks[@]}"; do
            run "$stack"
            lines+=("$line")
            echo "  ${lines[-1]}" >&2
        done
        tag=$round
        [[ -n $noisy && $try -lt $retries ]] && tag=x$round
        printf "$tag\t%s\n" "${lines[@]}" >>"$out/runs.tsv"
        [[ $tag == x* ]] || break
        echo "  (round $round: others took more than ${max_wait} ms of a run; again)" >&2
    done
done
grep -v '^#' "$out/runs.tsv" | column -t -s $'\t' >&2

echo
echo "# per stack over $rounds rounds: median (min-max); ratios to ${stacks[0]}'s req/s and ${stacks[1]:-${stacks[0]}}'s p99 in the same round"
awk -F'\t' -v ref="${stacks[0]}" -v ref99="${stacks[1]:-${stacks[0]}}" -v order="${stacks[*]}" '
    function sort(a, n,   i, j, t) {
        for (i = 2; i <= n; i++) for (j = i; j > 1 && a[j-1] > a[j]; j--) { t = a[j]; a[j] = a[j-1]; a[j-1] = t }
    }
    function med(a, n) { return n % 2 ? a[(n+1)/2] : (a[n/2] + a[n/2+1]) / 2 }
    # summary KEY FORMAT: "median (min-max)" of column KEY of stack s.
    function summary(s, key, fmt,   a, i, n) {
        n = count[s]
        for (i = 1; i <= n; i++) a[i] = val[s, key, i]
        sort(a, n)
        return sprintf(fmt " (" fmt "-" fmt ")", med(a, n), a[1], a[n])
    }
    /^#/ || $1 == "round" || $1 ~ /^x/ { next }
    {
        s = $2; i = ++count[s]
        val[s, "rps", i] = $3; val[s, "p50", i] = $4; val[s, "p99", i] = $5; val[s, "p999", i] = $6
        val[s, "cpu", i] = $8; val[s, "wait", i] = $9 + $10
        rps[$1, s] = $3; p99[$1, s] = $5; errs[s] += $11
    }
    END {
        printf "| stack | req/s | p50 ms | p99 ms | p99.9 ms | server CPU us/req | run-queue wait ms | req/s / %s | p99 / %s |\n", ref, ref99
        print "|---|---:|---:|---:|---:|---:|---:|---:|---:|"
        n = split(order, names, " ")
        for (j = 1; j <= n; j++) {
            s = names[j]; m = 0
            for (i = 1; i <= count[s]; i++) if ((i, ref) in rps) {
                m++; val[s, "ratio", m] = rps[i, s] / rps[i, ref]; val[s, "ratio99", m] = p99[i, s] / p99[i, ref99]
            }
            saved = count[s]; count[s] = m
            ratio = s == ref ? "1" : summary(s, "ratio", "%.3f")
            ratio99 = s == ref99 ? "1" : summary(s, "ratio99", "%.2f")
            count[s] = saved
            printf "| %s | %s | %s | %s | %s | %s | %s | %s | %s |%s\n", s, summary(s, "rps", "%.0f"),
                summary(s, "p50", "%.2f"), summary(s, "p99", "%.2f"), summary(s, "p999", "%.2f"),
                summary(s, "cpu", "%.2f"),
                summary(s, "wait", "%d"), ratio, ratio99,
                errs[s] ? " " errs[s] " runs with errors" : ""
        }
    }' "$out/runs.tsv" | tee "$out/summary.md"
