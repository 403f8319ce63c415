#!/usr/bin/env bash
# tests/bench/fleet_bench.sh BUILD_DIR - retry amplification (attempts / requests) of a
# fleet under 50 % injected 5xx (every other request answered 503), for 1, 8 and 32
# agenthost processes: no budget, one budget per process, one budget shared on Redis
# (max_tokens 10, token_ratio 0.1, max_attempts 5). Prints a markdown table: the
# amplification, and in brackets the share of runs that completed (a throttled retry is
# a run that fails: the budget trades completions for load on a failing provider).
# Environment: FLEET_NS ("1 8 32"), RUNS_PER (50 runs per process).
set -euo pipefail
BUILD_DIR=$(cd "${1:?usage: tests/bench/fleet_bench.sh BUILD_DIR}" && pwd)
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
export LUA_PATH="$ROOT/tests/lua/?.lua;;"
AH=$BUILD_DIR/agenthost
RUNS_PER=${RUNS_PER:-50}
echo "| processes | runs | no budget | budget per process | shared budget (Redis) |"
echo "|---|---|---|---|---|"
for p in ${FLEET_NS:-1 8 32}; do
    row="| $p | $((p * RUNS_PER))"
    for mode in none local shared; do
        out=$("$AH" "$ROOT/tests/lua/fleet_driver.lua" "$AH" "$mode" "$p" "$RUNS_PER" -2)
        reqs=$(sed -n 's/^requests=//p' <<<"$out")
        done_=$(grep '^runs=' <<<"$out" | grep -o 'completed=[0-9]*' | cut -d= -f2 |
                awk '{s += $1} END {print s + 0}')
        row="$row | $(awk -v a="$reqs" -v c="$done_" -v r=$((p * RUNS_PER)) \
                      'BEGIN {printf "%.2fx (%.0f %%)", a / r, 100 * c / r}')"
    done
    echo "$row |"
done
