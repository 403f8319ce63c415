#!/usr/bin/env bash
# Claim-then-execute across processes sharing one SQLite ledger file:
#  1. four processes charge the same 200 keys at once (5 ms bodies, 4 calls in flight
#     each): every key's body runs exactly once in total, the others get the receipt as
#     a duplicate (before claims, 400 of 400 keys ran twice with such bodies);
#  2. a holder killed with SIGKILL in the middle of its body: the next process takes the
#     key over at once (its pid is gone), well before the 60 s lease and within its own
#     2 s deadline, and runs the body;
#  3. a holder that is alive but stopped (SIGSTOP) past its 300 ms lease: another process
#     takes the key over; the old holder, resumed, finds the key recorded and reports
#     the new receipt as a duplicate (the documented at-least-once case).
set -u
bin=$1
root=$(cd "$(dirname "$0")/../.." && pwd)
. "$root/tests/cli/wait_lib.sh"
worker=$root/tests/lua/claims_worker.lua
tmp=$(mktemp -d)
pids=()
trap 'for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done; [ -n "${KEEP:-}" ] && echo "kept $tmp" || rm -rf "$tmp"' EXIT
fail=0
check() { # description, got, want
    if [ "$2" != "$3" ]; then
        echo "FAIL: $1: got '$2', want '$3'"; fail=$((fail + 1))
    else
        echo "ok: $1"
    fi
}

# 1. four processes, 200 keys
N=200
for i in 1 2 3 4; do
    "$bin" "$worker" "$tmp/a.db" "$tmp/a.side" $N 5 4 >"$tmp/a$i.out" 2>"$tmp/a$i.err" &
    pids+=($!)
done
wait
for i in 1 2 3 4; do
    read -r word ok dup inprog failed <"$tmp/a$i.out" || true
    check "process $i finished" "$word" "done"
    check "process $i: every key ok (fresh or duplicate)" "$((ok + dup))" "$N"
    check "process $i: no failures" "${inprog:-x} ${failed:-x}" "0 0"
    [ -s "$tmp/a$i.err" ] && sed "s/^/process $i: /" "$tmp/a$i.err"
done
check "body executions in total" "$(wc -l <"$tmp/a.side")" "$N"
check "keys whose body ran twice" "$(awk '{print $1}' "$tmp/a.side" | sort | uniq -d | wc -l)" "0"
check "distinct keys run" "$(awk '{print $1}' "$tmp/a.side" | sort -u | wc -l)" "$N"
cat >"$tmp/count.lua" <<'LUA'
local ah = require "agenthost"
local l = ah.ledger { path = arg[1] }
print(#l, l.claims)
LUA
check "the file: one entry per key, no claim left" "$("$bin" "$tmp/count.lua" "$tmp/a.db")" \
    "$(printf '%s\t0' "$N")"

# 2. kill -9 of a holder mid-body
"$bin" "$worker" "$tmp/b.db" "$tmp/b.side" 1 600000 1 60000 >"$tmp/b1.out" 2>"$tmp/b1.err" &
holder=$!
pids+=($holder)
wait_until "$holder" has_lines "$tmp/b.side" 1 || echo "FAIL: the holder never started its body"
kill -9 "$holder"
wait "$holder" 2>/dev/null
check "holder killed" "$?" "137"
"$bin" "$worker" "$tmp/b.db" "$tmp/b.side" 1 5 1 60000 2000 >"$tmp/b2.out" 2>"$tmp/b2.err"
check "after the kill: the key is taken over and run" "$(cat "$tmp/b2.out")" "done 1 0 0 0"
check "the dead holder's takeover is logged" \
    "$(grep -c 'took over the claim' "$tmp/b2.err")" "1"
check "body started twice (the first never finished)" "$(wc -l <"$tmp/b.side")" "2"

# 3. a stopped holder past its lease
"$bin" "$worker" "$tmp/c.db" "$tmp/c.side" 1 1500 1 300 >"$tmp/c1.out" 2>"$tmp/c1.err" &
holder=$!
pids+=($holder)
wait_until "$holder" has_lines "$tmp/c.side" 1 || echo "FAIL: the holder never started its body"
kill -STOP "$holder"
"$bin" "$worker" "$tmp/c.db" "$tmp/c.side" 1 5 1 300 20000 >"$tmp/c2.out" 2>"$tmp/c2.err"
check "past the lease: the key is taken over and run" "$(cat "$tmp/c2.out")" "done 1 0 0 0"
kill -CONT "$holder"
wait "$holder"
check "the resumed holder gets the recorded receipt as a duplicate" \
    "$(cat "$tmp/c1.out")" "done 0 1 0 0"

[ "$fail" -eq 0 ] || { echo "$fail check(s) failed"; exit 1; }
echo "all ok"
