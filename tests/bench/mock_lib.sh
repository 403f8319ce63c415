# tests/bench/mock_lib.sh - sourced by the bench scripts: built-in mocks, each in its own
# process, stopped at exit. Needs AH (the agenthost program), WORK (a scratch folder) and
# LOG (where the mocks' stderr goes).
MOCK_PIDS=()
stop_mocks() {
    for p in "${MOCK_PIDS[@]}"; do
        kill "$p" 2>/dev/null || true
        wait "$p" 2>/dev/null || true
    done
}
trap stop_mocks EXIT
start_server() { # name command... -> SERVER_URL (its first line on stdout), SERVER_PID
    local name=$1
    shift
    "$@" >"$WORK/$name.url" 2>>"$LOG" &
    SERVER_PID=$!
    MOCK_PIDS+=("$SERVER_PID")
    SERVER_URL=
    for _ in $(seq 200); do
        SERVER_URL=$(head -n1 "$WORK/$name.url" 2>/dev/null || true)
        [ -n "$SERVER_URL" ] && return 0
        kill -0 "$SERVER_PID" 2>/dev/null || break
        sleep 0.05
    done
    echo "$(basename "$0"): $name did not start (see $LOG)" >&2
    exit 1
}
start_mock() { # name mock-args... -> MOCK_URL
    local name=$1
    shift
    start_server "mock-$name" "$AH" mock --port 0 "$@"
    MOCK_URL=$SERVER_URL
}
