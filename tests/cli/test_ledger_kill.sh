#!/usr/bin/env bash
# A SQLite ledger survives SIGKILL: a worker records effects, is killed after a known
# number of them (while it waits for its next instruction), and runs again with the same
# keys. No recorded effect runs twice: the body executions counted in a side file across
# both runs equal the number of distinct keys, and the second run returns the first run's
# receipts as duplicates with their original seq.
set -u
bin=$1
root=$(cd "$(dirname "$0")/../.." && pwd)
worker=$root/tests/lua/ledger_kill_worker.lua
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
db=$tmp/effects.db
side=$tmp/effects.txt
fail=0
check() { # description, got, want
    if [ "$2" != "$3" ]; then
        echo "FAIL: $1: got '$2', want '$3'"; fail=$((fail + 1))
    else
        echo "ok: $1"
    fi
}

KILL_AFTER=3
TOTAL=6
coproc W { exec "$bin" "$worker" "$db" "$side" "$TOTAL" 2>"$tmp/w1.err"; }
pid=$W_PID
for i in $(seq 1 $KILL_AFTER); do
    echo go >&"${W[1]}"
    if ! read -r -t 60 line <&"${W[0]}"; then
        echo "FAIL: worker gave no line $i"; cat "$tmp/w1.err"; kill -9 "$pid"; exit 1
    fi
    echo "run 1: $line"
    check "run 1 effect $i committed once" "$line" "committed K-$i seq=$i duplicate=false"
done
# The worker now blocks reading its next line: kill it there.
kill -9 "$pid"
wait "$pid" 2>/dev/null
check "killed by SIGKILL" "$?" "137"
check "body executions before the kill" "$(wc -l <"$side")" "$KILL_AFTER"

# Run again with the same keys, to the end.
yes go | head -n "$TOTAL" | "$bin" "$worker" "$db" "$side" "$TOTAL" >"$tmp/run2.txt" \
    2>"$tmp/w2.err" || { echo "FAIL: run 2 exited $?"; cat "$tmp/w2.err"; fail=$((fail + 1)); }
cat "$tmp/run2.txt" | sed 's/^/run 2: /'
for i in $(seq 1 $TOTAL); do
    if [ "$i" -le "$KILL_AFTER" ]; then
        want="committed K-$i seq=$i duplicate=true"
    else
        want="committed K-$i seq=$i duplicate=false"
    fi
    check "run 2 key K-$i" "$(sed -n "${i}p" "$tmp/run2.txt")" "$want"
done
check "body executions across both runs" "$(wc -l <"$side")" "$TOTAL"
check "each key executed once" "$(sort "$side" | uniq -d | wc -l)" "0"

# The ledger on disk holds one row per key, readable by a third process.
cat >"$tmp/count.lua" <<'LUA'
local ah = require "agenthost"
local l = ah.ledger { path = arg[1] }
local keys = {}
for _, e in ipairs(l:entries()) do keys[#keys + 1] = e.key .. "#" .. e.seq end
io.write(#l, " ", table.concat(keys, " "), "\n")
LUA
check "ledger rows" "$("$bin" "$tmp/count.lua" "$db")" \
    "6 K-1#1 K-2#2 K-3#3 K-4#4 K-5#5 K-6#6"
echo "$fail failed"
[ "$fail" -eq 0 ]
