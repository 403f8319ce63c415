#!/usr/bin/env bash
# The Redis ledger across processes, with a real redis-server started here:
#  - duplicate delivery: the same 100 keys sent to 4 processes at once (10 calls at a time
#    in each): every body ran exactly once in all (a side file counts executions), every
#    other call got the original receipt (same seq, same runner) marked duplicate;
#  - the same key with other arguments is refused (idempotency_mismatch), body not run;
#  - kill -9 of the process holding a claim: another process waiting on the key takes it
#    over once the lease (500 ms) is over and runs the body (the at-least-once case);
#  - Redis restarted mid-run: no body runs without a claim (a call that could not claim
#    failed with kind ledger and did not run), a receipt whose body ran before the
#    outage waited for the server and was recorded (none lost), every run ends cleanly;
#    a process that runs while Redis is down fails every call closed, no body run.
# Under a launcher (./run valgrind) 40 keys instead of 100: the same checks, less time.
set -u
bin=$1
K=100
[ "$(basename "$bin")" = agenthost ] || K=40
root=$(cd "$(dirname "$0")/../.." && pwd)
. "$root/tests/cli/wait_lib.sh"
worker=$root/tests/lua/ledger_fleet_worker.lua
tmp=$(mktemp -d)
sock=$tmp/redis.sock
url=unix:$sock
redis_start() {
    redis-server --port 0 --unixsocket "$sock" --save '' --appendonly no --dir "$tmp" \
        --daemonize yes --pidfile "$tmp/redis.pid" >/dev/null 2>&1
    for _ in $(seq 200); do
        redis-cli -s "$sock" ping 2>/dev/null | grep -q PONG && return 0
        sleep 0.02
    done
    echo "FAIL: redis-server did not start"; exit 1
}
redis_kill() {
    [ -f "$tmp/redis.pid" ] && kill -9 "$(cat "$tmp/redis.pid")" 2>/dev/null
    for _ in $(seq 200); do
        redis-cli -s "$sock" ping >/dev/null 2>&1 || break
        sleep 0.02
    done
    rm -f "$tmp/redis.pid" "$sock"
}
trap 'redis_kill; rm -rf "$tmp"' EXIT
fail=0
check() { # description, got, want
    if [ "$2" != "$3" ]; then echo "FAIL: $1: got '$2', want '$3'"; fail=$((fail + 1))
    else echo "ok: $1"; fi
}
redis_start

# ---- duplicate delivery ----------------------------------------------------------------
for i in 1 2 3 4; do
    "$bin" "$worker" dup "$url" "$tmp/side" $K >"$tmp/dup$i" 2>"$tmp/dup$i.err" &
done
wait
check "each body ran exactly once across 4 processes" "$(wc -l <"$tmp/side")" $K
check "no key ran twice" "$(cut -d' ' -f1 "$tmp/side" | sort | uniq -d | wc -l)" 0
check "every call answered ok" "$(cat "$tmp"/dup? | grep -c ' true ')" $((4 * K))
check "one original per key, three duplicates" \
    "$(cat "$tmp"/dup? | awk '$3 == "false"' | wc -l)/$(cat "$tmp"/dup? | awk '$3 == "true"' | wc -l)" \
    "$K/$((3 * K))"
# every call for a key saw the same seq and the same runner (the original receipt)
check "duplicates carry the original receipt and seq" \
    "$(cat "$tmp"/dup? | awk '{print $1, $4, $5}' | sort -u | wc -l)" $K
check "the runner recorded is the one that ran the body" \
    "$(cat "$tmp"/dup? | awk '$3 == "false" {print $1, $5}' | sort | diff - <(sort "$tmp/side") | wc -l)" 0

# ---- mismatch --------------------------------------------------------------------------
: >"$tmp/side2"
"$bin" "$worker" mismatch "$url" "$tmp/side2" >"$tmp/mm" 2>&1
check "other arguments refused" "$(tail -n1 "$tmp/mm")" "false	idempotency_mismatch"
check "... and the body did not run" "$(wc -l <"$tmp/side2")" 0

# ---- kill -9 of a claim holder ---------------------------------------------------------
: >"$tmp/side3"
coproc H { exec "$bin" "$worker" hold "$url" "$tmp/side3" 0 500 2>"$tmp/hold.err"; }
hpid=$H_PID
read -r -t 20 line <&"${H[0]}" || line=none
check "holder runs its body" "$line" holding
kill -9 "$hpid"
wait "$hpid" 2>/dev/null
"$bin" "$worker" takeover "$url" "$tmp/side3" 0 500 >"$tmp/take" 2>"$tmp/take.err"
check "another process took over after the lease and ran it" "$(tail -n1 "$tmp/take")" \
    "true	false	me	ok"
check "the take-over is logged" "$(grep -c 'took over the claim' "$tmp/take.err")" 1
check "the body ran twice in all (the documented at-least-once case)" \
    "$(wc -l <"$tmp/side3")" 2

# ---- Redis restarted mid-run -----------------------------------------------------------
: >"$tmp/side4"
"$bin" "$worker" restart "$url" "$tmp/side4" 40 >"$tmp/rs" 2>"$tmp/rs.err" &
wpid=$!
wait_until "$wpid" has_lines "$tmp/rs" 10
redis_kill
# a process that runs while Redis is down: every call fails closed, no body runs
"$bin" "$worker" restart "$url" "$tmp/side5" 3 >"$tmp/down" 2>"$tmp/down.err"
check "with Redis down, every call failed closed (kind ledger)" \
    "$(awk '$3 == "ledger"' "$tmp/down" | wc -l)" 3
check "... and no body ran" "$(cat "$tmp/side5" 2>/dev/null | wc -l)" 0
redis_start
wait "$wpid"
check "the run ended cleanly" "$?" 0
check "every key answered" "$(wc -l <"$tmp/rs")" 40
# a call that failed before its claim did not run its body
check "no body without a claim" \
    "$(awk '$2 == "false" && $5 != "unrecorded" && $4 == 1' "$tmp/rs" | wc -l)" 0
check "bodies run = ok calls + effects whose receipt was lost with the server" \
    "$(wc -l <"$tmp/side4")" \
    "$(awk '$2 == "true" || $5 == "unrecorded"' "$tmp/rs" | wc -l)"
check "no receipt lost: a body that ran waited for the server to record it" \
    "$(awk '$5 == "unrecorded"' "$tmp/rs" | wc -l)" 0
nl=$(awk '$3 == "ledger"' "$tmp/rs" | wc -l)
echo "restart: $(awk '$2 == "true"' "$tmp/rs" | wc -l) ok, $nl failed closed (kind ledger)"
check "calls after the restart succeed" "$(tail -n1 "$tmp/rs" | awk '{print $2}')" true
check "no crash, no memcheck error in any process" \
    "$(cat "$tmp"/*.err | grep -c -i -E 'sanitizer|segmentation|abort|^==[0-9]+==')" 0

[ "$fail" -eq 0 ] && echo "all ledger fleet checks passed"
exit "$fail"
