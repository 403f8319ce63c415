#!/usr/bin/env bash
# A fleet of agenthost processes sharing one redis-server (started and stopped by the Lua
# driver, tests/lua/fleet_driver.lua) against one mock:
#  - outage: 8 processes x 20 runs, every request answered 503, max_attempts 5, budget
#    max_tokens M = 10, token_ratio r = 0.1. A retry needs more than M/2 tokens left after
#    taking one, so with no success a bucket allows ceil(M/2) - 1 = 4 retries. Shared by
#    the fleet: requests = R + 4 (R = 160 runs); one bucket per process: R + 8 x 4 = 192.
#  - outage for the first 100 requests, then recovery: each success refunds r, so the
#    bound is requests <= R + ceil(M/2) - 1 + ceil(r x S) (S successful runs), below the
#    unshared count measured in the same test;
#  - pacing: 8 processes x 4 runs sharing requests_per_minute = 1200 (one slot per 50 ms)
#    against a mock enforcing that rate (burst 4: loopback and scheduling jitter): few 429s
#    (at most a quarter of the requests, and far fewer than unpaced), and the 32 requests take at least
#    31 x 50 ms; the same fleet unpaced collects 429s;
#  - Redis unreachable from the start: budget and pacer fall back to local ones, each
#    process says so once per component, every run ends.
# Under a launcher (./run valgrind passes agenthost-launched) the fleet is smaller (2 x 5)
# and the checks that need real-time speed (the mock's 429s) are skipped: the counts and
# formulas still hold, and memcheck sees every path.
set -u
bin=$1
root=$(cd "$(dirname "$0")/../.." && pwd)
driver=$root/tests/lua/fleet_driver.lua
export LUA_PATH="$root/tests/lua/?.lua;;"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
check() { # description, condition (shell arithmetic)
    if (( $2 )); then echo "ok: $1"; else echo "FAIL: $1 ($2)"; fail=$((fail + 1)); fi
}
val() { sed -n "s/^$2=//p" "$1" | head -n1; }
sum() { # file field: sum of field over the worker lines
    grep '^runs=' "$1" | grep -o "$2=[0-9]*" | cut -d= -f2 | awk '{s += $1} END {print s + 0}'
}
drive() { # out, args...
    local out=$1; shift
    if ! "$bin" "$driver" "$bin" "$@" >"$out" 2>&1; then
        echo "FAIL: driver $*:"; cat "$out"; fail=$((fail + 1))
    fi
}

P=8 RUNS=20 PACE_RUNS=4 fast=1
[ "$(basename "$bin")" = agenthost ] || { P=2 RUNS=5 PACE_RUNS=2 fast=0; }
R=$((P * RUNS)) OUT=$((P * RUNS * 5 / 8)) NP=$((P * PACE_RUNS))
drive "$tmp/shared" shared $P $RUNS
drive "$tmp/local" local $P $RUNS
shared=$(val "$tmp/shared" requests) local=$(val "$tmp/local" requests)
echo "outage: shared budget $shared requests, one budget per process $local (R = $R)"
check "outage, shared budget: requests = R + ceil(M/2) - 1" "$shared == R + 4"
check "outage, a budget per process: requests = R + P x (ceil(M/2) - 1)" "$local == R + P * 4"

drive "$tmp/shared2" shared $P $RUNS $OUT
drive "$tmp/local2" local $P $RUNS $OUT
shared2=$(val "$tmp/shared2" requests) local2=$(val "$tmp/local2" requests)
S=$(sum "$tmp/shared2" completed)
bound=$((R + 4 + (S + 9) / 10))
echo "outage then recovery: shared $shared2 (bound $bound, S = $S), per process $local2"
check "recovery, shared budget within R + ceil(M/2) - 1 + ceil(r S)" "$shared2 <= bound"
if [ $fast = 1 ]; then
    check "recovery, shared below unshared" "$shared2 < local2"
else
    check "recovery, shared not above unshared" "$shared2 <= local2"
fi
check "recovery: the mock saw the outage" "$(val "$tmp/shared2" s503) == OUT"

drive "$tmp/pace" pace $P $PACE_RUNS -1 1200
[ $fast = 1 ] && drive "$tmp/nopace" nopace $P $PACE_RUNS -1 1200
n=$(val "$tmp/pace" requests) el=$(val "$tmp/pace" elapsed_ms)
echo "pacing: $n requests in $el ms, $(val "$tmp/pace" s429) 429s"
check "paced fleet: $NP requests took >= ($NP - 1) x 50 ms" "$el >= (NP - 1) * 50"
if [ $fast = 1 ]; then
    check "paced fleet: llm_paced emitted" "$(sum "$tmp/pace" paced) >= NP / 2"
    echo "unpaced: $(val "$tmp/nopace" s429) 429s of $(val "$tmp/nopace" requests)"
    # The mock enforces the rate by arrival time, and a loaded machine can bunch sends
    # the pacer spaced (a process descheduled, then two requests at once): a few 429s
    # are scheduling, not pacing; pacing is many times fewer than without it.
    check "paced fleet: few 429s from a mock enforcing the limit (at most NP/4)" \
        "$(val "$tmp/pace" s429) <= NP / 4"
    check "paced fleet: far fewer 429s than unpaced" \
        "$(val "$tmp/pace" s429) * 4 < $(val "$tmp/nopace" s429)"
    check "paced fleet: every run completed" "$(sum "$tmp/pace" completed) == NP"
    check "unpaced fleet: the mock enforces (429s)" "$(val "$tmp/nopace" s429) > 0"
fi

bad=unix:$tmp/no-such-dir/redis.sock
drive "$tmp/down" shared $P $RUNS $OUT 0 "$bad"
drive "$tmp/downpace" pace $P 2 -1 6000 "$bad"
check "redis down: the budget falls back once per process" \
    "$(grep -c 'the retry budget falls back to a local one' "$tmp/down") == P"
check "redis down: every run ended" "$(sum "$tmp/down" runs) == R"
check "redis down: local budgets bound it like unshared ones" \
    "$(val "$tmp/down" requests) <= R + P * 4"
check "redis down: the pacer falls back once per process" \
    "$(grep -c 'pacing falls back to this process' "$tmp/downpace") == P"
check "redis down: paced runs end (each process paces only itself)" \
    "$(sum "$tmp/downpace" runs) == P * 2"
check "no crash, no memcheck error in any process" \
    "$(cat "$tmp"/* | grep -c -i -E 'sanitizer|segmentation|abort|^stderr: ==[0-9]+==') == 0"

[ "$fail" -eq 0 ] && echo "all fleet checks passed"
exit "$fail"
