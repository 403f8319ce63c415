#!/usr/bin/env bash
# Ctrl-C in the agenthost program: the first SIGINT cancels every run in flight (each
# ends `cancelled` with one run_end, nothing more is sent) and the script goes on; a
# second SIGINT within 3 s, or one while no run is in flight, exits 130 - also when the
# script is blocked reading stdin. Waits are bounded polls, never timed assertions.
set -u
bin=$1
here=$(cd "$(dirname "$0")/../lua" && pwd)
tmp=$(mktemp -d)
pid=
trap '[ -n "$pid" ] && kill -9 "$pid" 2>/dev/null; rm -rf "$tmp"' EXIT
fail=0 passed=0
ok() { echo "ok: $1"; passed=$((passed + 1)); }
bad() { echo "FAIL: $1"; shift; for f in "$@"; do sed 's/^/   | /' "$f"; done; fail=$((fail + 1)); }

wait_file() { # file: up to 10 s
    for _ in $(seq 1000); do [ -e "$1" ] && return 0; sleep 0.01; done
    return 1
}
wait_exit() { # pid: up to 10 s, then rc in $rc
    for _ in $(seq 1000); do kill -0 "$1" 2>/dev/null || break; sleep 0.01; done
    if kill -0 "$1" 2>/dev/null; then rc=timeout; kill -9 "$1"; wait "$1" 2>/dev/null; return; fi
    wait "$1"; rc=$?
}
start() { # name mode rounds [stdin]
    local name=$1 mode=$2 rounds=$3
    rm -f "$tmp/$name.ready".*
    "$bin" --events "$tmp/$name.jsonl" "$here/cli_interrupt.lua" "$mode" "$tmp/$name.ready" \
        "$rounds" >"$tmp/$name.out" 2>"$tmp/$name.err" <"${4:-/dev/null}" &
    pid=$!
}

# ---- one SIGINT per waiting place: the run is cancelled, the script goes on -------------
for mode in stream backoff tool; do
    start "$mode" "$mode" 1
    if ! wait_file "$tmp/$mode.ready.1"; then bad "$mode: never got ready" "$tmp/$mode.err"; continue; fi
    kill -INT "$pid"
    wait_exit "$pid"; pid=
    ends=$(grep -c '"type":"run_end"' "$tmp/$mode.jsonl")
    if [ "$rc" = 0 ] && grep -q '^1	cancelled	cancelled: interrupted (Ctrl-C)$' "$tmp/$mode.out" &&
        grep -q '^the script goes on	1$' "$tmp/$mode.out" && [ "$ends" -eq 1 ] &&
        grep -q '"type":"run_end".*"outcome":"cancelled"' "$tmp/$mode.jsonl"; then
        ok "$mode: Ctrl-C cancels the run (one run_end, no further request), the script goes on"
    else
        bad "$mode: rc=$rc run_ends=$ends" "$tmp/$mode.out" "$tmp/$mode.err"
    fi
done

# ---- a second SIGINT within 3 s exits 130 ----------------------------------------------
start twice stream 2
if wait_file "$tmp/twice.ready.1"; then
    kill -INT "$pid"
    if wait_file "$tmp/twice.ready.2"; then
        kill -INT "$pid"
        wait_exit "$pid"; pid=
        if [ "$rc" = 130 ] && grep -q '^1	cancelled' "$tmp/twice.out" &&
            ! grep -q 'the script goes on' "$tmp/twice.out"; then
            ok "a second Ctrl-C within 3 s ends the program with status 130"
        else
            bad "second Ctrl-C: rc=$rc" "$tmp/twice.out" "$tmp/twice.err"
        fi
    else
        bad "second Ctrl-C: the second run never got ready" "$tmp/twice.out" "$tmp/twice.err"
    fi
else
    bad "second Ctrl-C: never got ready" "$tmp/twice.err"
fi

# ---- nothing in flight: exits 130 at once, also when blocked reading stdin --------------
start idle idle 1
wait_file "$tmp/idle.ready.1" && sleep 0.05
kill -INT "$pid"; wait_exit "$pid"; pid=
if [ "$rc" = 130 ] && ! grep -q slept "$tmp/idle.out"; then
    ok "Ctrl-C with no run in flight exits 130"
else
    bad "idle: rc=$rc" "$tmp/idle.out" "$tmp/idle.err"
fi
mkfifo "$tmp/fifo"
exec 7<>"$tmp/fifo" # keep a writer open so the script's read blocks
start read read 1 "$tmp/fifo"
wait_file "$tmp/read.ready.1" && sleep 0.05
kill -INT "$pid"; wait_exit "$pid"; pid=
exec 7>&-
if [ "$rc" = 130 ]; then
    ok "Ctrl-C while the script is blocked reading stdin exits 130"
else
    bad "read: rc=$rc" "$tmp/read.out" "$tmp/read.err"
fi

echo "$passed passed, $fail failed"
[ "$fail" -eq 0 ]
