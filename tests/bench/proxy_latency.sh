#!/usr/bin/env bash
# tests/bench/proxy_latency.sh BUILD_DIR - what `agenthost proxy` adds per request, with a
# plain libcurl client (no Node, no SDK), as a markdown report on stdout
# (docs/performance.md, "agenthost proxy"). Build latency_bench and agenthost in BUILD_DIR
# (a Release build; -DCMAKE_C_FLAGS=-g for callgrind's function names), then
# `tests/bench/proxy_latency.sh BUILD_DIR`.
#
#   1. Time to the first text delta and to the end of a short stream (the mock's default
#      reply), straight to `agenthost mock` and through `agenthost proxy` in front of the
#      same mock, one request of each in turn in one process (latency_bench proxy), N of
#      each after 20 of warm-up, RUNS times, per format; p50 / p90 / p99 per run, the table
#      gives the median over runs and "added" the median of the per-run differences. Then
#      the same at CONC at once (rounds of CONC on a curl multi handle, a direct round then
#      a proxied one), Anthropic only.
#   2. The proxy process's cost per proxied request: CPU (utime + stime from /proc, over
#      CPU_N requests), system calls (perf stat for the total, strace -c -f for the
#      breakdown, each attached over SC_N requests), and
#      instructions (callgrind: the proxy run for CG_N1 and for CG_N2 requests, the
#      difference per request; start-up cancels out), with where they go (self cost).
# The mock runs in its own process: its work is never counted.
# Environment: N (500), RUNS (5), CONC (64), CONC_N (1280), WIRES ("anthropic openai
# responses"), CPU_N (3000), SC_N (1000), CG_N1 (20), CG_N2 (220), CALLGRIND=0 and
# STRACE=0 to skip those.
set -euo pipefail
BUILD_DIR=$(cd "${1:?usage: tests/bench/proxy_latency.sh BUILD_DIR}" && pwd)
BENCH=$(cd "$(dirname "$0")" && pwd)
N=${N:-500}
RUNS=${RUNS:-5}
CONC=${CONC:-64}
CONC_N=${CONC_N:-1280}
CPU_N=${CPU_N:-3000}
SC_N=${SC_N:-1000}
CG_N1=${CG_N1:-20}
CG_N2=${CG_N2:-220}
read -r -a WIRES <<<"${WIRES:-anthropic openai responses}"
AH=$BUILD_DIR/agenthost
LB=$BUILD_DIR/tests/bench/latency_bench
for b in "$AH" "$LB"; do
    [ -x "$b" ] || { echo "proxy_latency.sh: $b not built" >&2; exit 1; }
done
WORK=$BUILD_DIR/bench-work/proxy-latency
LOG=$WORK/log
rm -rf "$WORK"
mkdir -p "$WORK"
# shellcheck source=tests/bench/mock_lib.sh
. "$(dirname "$0")/mock_lib.sh"
start_mock main
URL=$MOCK_URL

# shellcheck source=tests/bench/proxy_lib.sh
. "$(dirname "$0")/proxy_lib.sh"
cpu_ticks() { # pid -> utime + stime, clock ticks
    sed 's/.*) //' "/proc/$1/stat" | awk '{print $12 + $13}'
}

start_proxy main
PURL=$PROXY_URL

# ---- 1: latency
table() { # label conc wires... ; reads $WORK/lat-$conc-$w-$r.txt
    local conc=$1
    shift
    for w in "$@"; do
        for k in first total; do
            for p in p50 p90 p99; do
                a=$(for r in $(seq "$RUNS"); do val "$WORK/proxy-$conc-$w-$r.txt" "${k}_${p}_us"; done | median)
                c=$(for r in $(seq "$RUNS"); do val "$WORK/direct-$conc-$w-$r.txt" "${k}_${p}_us"; done | median)
                d=$(for r in $(seq "$RUNS"); do
                    echo "$(val "$WORK/proxy-$conc-$w-$r.txt" "${k}_${p}_us") $(val "$WORK/direct-$conc-$w-$r.txt" "${k}_${p}_us")" |
                        awk '{print $1 - $2}'
                done | median)
                eval "${k}_${p}_a=$a ${k}_${p}_c=$c ${k}_${p}_d=$d"
            done
        done
        # shellcheck disable=SC2154
        printf '| %s | %s | %.0f / %.0f / **%+.0f** | %+.0f | %+.0f | %.0f / %.0f / %+.0f | %+.0f |\n' \
            "$w" "$conc" "$first_p50_c" "$first_p50_a" "$first_p50_d" "$first_p90_d" \
            "$first_p99_d" "$total_p50_c" "$total_p50_a" "$total_p50_d" "$total_p99_d"
    done
}
for r in $(seq "$RUNS"); do
    for w in "${WIRES[@]}"; do
        "$LB" proxy "$URL" "$w" "$N" 20 "$PURL" >"$WORK/both.txt"
        grep "mode=direct " "$WORK/both.txt" >"$WORK/direct-1-$w-$r.txt"
        grep "mode=proxy " "$WORK/both.txt" >"$WORK/proxy-1-$w-$r.txt"
    done
    if [ "$CONC" -gt 1 ]; then
        "$LB" proxy "$URL" anthropic "$CONC_N" "$CONC" "$PURL" "$CONC" >"$WORK/both.txt"
        grep "mode=direct " "$WORK/both.txt" >"$WORK/direct-$CONC-anthropic-$r.txt"
        grep "mode=proxy " "$WORK/both.txt" >"$WORK/proxy-$CONC-anthropic-$r.txt"
    fi
done
echo "Time to the first text delta and to the end of a short stream, plain libcurl straight to the mock and through \`agenthost proxy\` in front of it, one request (or one round of $CONC at once) of each in turn; $N requests of each at concurrency 1 ($CONC_N at $CONC) after warm-up, median of $RUNS runs, µs (tests/bench/proxy_latency.sh). Load average at the start: $(cut -d' ' -f1-3 /proc/loadavg), $(nproc) CPUs."
echo ""
echo "| format | concurrency | first delta p50: direct / proxy / added | p90 added | p99 added | whole request p50: direct / proxy / added | p99 added |"
echo "|---|---|---|---|---|---|---|"
table 1 "${WIRES[@]}"
[ "$CONC" -gt 1 ] && table "$CONC" anthropic
echo ""

# ---- 2: the proxy's cost per request
echo "The proxy process per proxied request (Anthropic stream, one at a time):"
echo ""
c0=$(cpu_ticks "$PROXY_PID")
"$LB" curl "$PURL" anthropic "$CPU_N" 0 >/dev/null
c1=$(cpu_ticks "$PROXY_PID")
tick=$(getconf CLK_TCK)
echo "- CPU (utime + stime over $CPU_N requests): $(awk -v d=$((c1 - c0)) -v t="$tick" -v n="$CPU_N" 'BEGIN {printf "%.0f", d / t * 1e6 / n}') µs"
# perf counts without slowing the proxy; strace's slow-down changes whether the
# upstream's answer is already there when curl first looks, and so the calls it counts
# (docs/performance.md 11.1): perf's total is the one to quote, strace's the breakdown.
if [ "${STRACE:-1}" != 0 ] && command -v perf >/dev/null &&
    perf stat -e raw_syscalls:sys_enter -- true >/dev/null 2>&1; then
    perf stat -x, -e raw_syscalls:sys_enter -p "$PROXY_PID" -o "$WORK/perf.txt" 2>>"$LOG" &
    PPID_=$!
    sleep 0.5
    "$LB" curl "$PURL" anthropic "$SC_N" 0 >/dev/null
    kill -INT "$PPID_"
    wait "$PPID_" 2>/dev/null || true
    echo "- system calls (perf stat, raw_syscalls:sys_enter, over $SC_N requests): $(awk -F, -v n="$SC_N" '$3 ~ /raw_syscalls/ { printf "%.2f", $1 / n }' "$WORK/perf.txt") per request"
fi
if [ "${STRACE:-1}" != 0 ] && command -v strace >/dev/null; then
    strace -c -f -p "$PROXY_PID" -o "$WORK/strace.txt" 2>>"$LOG" &
    SPID=$!
    sleep 0.5
    "$LB" curl "$PURL" anthropic "$SC_N" 0 >/dev/null
    kill -INT "$SPID"
    wait "$SPID" 2>/dev/null || true
    echo "- system calls (strace -c -f over $SC_N requests; the breakdown: strace slows the proxy, which changes how often curl finds the answer already there, so its total is lower than perf's), per request:"
    echo ""
    echo '```'
    awk -v n="$SC_N" '/^ *[0-9.]+ +[0-9.]+ +[0-9]+ +[0-9]+/ {
            calls = $4; name = $NF; if (name == "total") next; tot += calls; printf "%8.2f  %s\n", calls / n, name }
        END { printf "%8.2f  total\n", tot / n }' "$WORK/strace.txt" | sort -rn | head -20
    echo '```'
fi
stop_proxy

[ "${CALLGRIND:-1}" = 0 ] && exit 0
total_ir() { # callgrind file -> total instructions
    sed -n 's/^summary: *//p; s/^totals: *//p' "$1" | head -n1 | awk '{print $1}'
}
for n in "$CG_N1" "$CG_N2"; do
    start_proxy "cg$n" valgrind --tool=callgrind --callgrind-out-file="$WORK/cg-$n.out"
    "$LB" curl "$PROXY_URL" anthropic "$n" 0 >/dev/null
    stop_proxy
done
ir=$(( ($(total_ir "$WORK/cg-$CG_N2.out") - $(total_ir "$WORK/cg-$CG_N1.out")) / (CG_N2 - CG_N1) ))
echo ""
echo "- instructions (callgrind, the proxy at $CG_N2 and $CG_N1 requests, the difference per request): $((ir / 1000)) k; where they go (self cost, the same difference):"
echo ""
echo '```'
python3 "$BENCH/cg_selfcost.py" "$WORK/cg-$CG_N1.out" "$WORK/cg-$CG_N2.out" $((CG_N2 - CG_N1)) \
    --top 30 --rest "agenthost: call, loop, transport, events, writers"
echo '```'
