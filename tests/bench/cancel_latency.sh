#!/usr/bin/env bash
# tests/bench/cancel_latency.sh BUILD_DIR - Ctrl-C latency: SIGINT -> run_end.
#
# For each place a run can wait (a stalled stream, a 30 s backoff wait, a tool sleeping
# 30 s) the agenthost program runs tests/lua/cli_interrupt.lua; once the wait has begun
# we take the wall time (bash's EPOCHREALTIME, microseconds), send SIGINT with the kill
# builtin, and read run_end's ts_ms from the --events file: latency <= ts_ms + 1 - t0
# (an upper bound: ts_ms is truncated to the millisecond). The goal is < 50 ms. Numbers, never assertions. RUNS (default 10) per place.
set -euo pipefail
BUILD_DIR=$(cd "${1:?usage: tests/bench/cancel_latency.sh BUILD_DIR}" && pwd)
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
RUNS=${RUNS:-10}
bin=$BUILD_DIR/agenthost
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "| where the run waits | runs | min ms | median ms | max ms |"
echo "|---|---|---|---|---|"
for mode in stream backoff tool; do
    lat=()
    for i in $(seq "$RUNS"); do
        rm -f "$tmp"/ready.* "$tmp/ev.jsonl"
        "$bin" --events "$tmp/ev.jsonl" "$ROOT/tests/lua/cli_interrupt.lua" "$mode" \
            "$tmp/ready" 1 >/dev/null 2>&1 </dev/null &
        pid=$!
        for _ in $(seq 2000); do [ -e "$tmp/ready.1" ] && break; sleep 0.005; done
        sleep 0.05 # let the wait settle (the stream stalls, the timer is armed)
        t0=${EPOCHREALTIME/./}
        kill -INT "$pid"
        wait "$pid" || true
        ts=$(grep '"type":"run_end"' "$tmp/ev.jsonl" | sed 's/.*"ts_ms":\([0-9]*\).*/\1/')
        # ts_ms is whole milliseconds (truncated): the end lies in [ts, ts + 1) ms, so
        # report the upper bound
        lat+=("$(( ((ts + 1) * 1000 - t0) ))")
    done
    sorted=$(printf '%s\n' "${lat[@]}" | sort -n)
    min=$(echo "$sorted" | head -1) max=$(echo "$sorted" | tail -1)
    med=$(echo "$sorted" | sed -n "$(( (RUNS + 1) / 2 ))p")
    fmt() { awk -v us="$1" 'BEGIN { printf "%.1f", us / 1000 }'; }
    echo "| $mode | $RUNS | $(fmt "$min") | $(fmt "$med") | $(fmt "$max") |"
done
