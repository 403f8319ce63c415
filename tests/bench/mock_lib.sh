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
start_mock() { # name mock-args... -> MOCK_URL
    local name=$1
    shift
    "$AH" mock --port 0 "$@" >"$WORK/mock-$name.url" 2>>"$LOG" &
    MOCK_PIDS+=($!)
    local pid=$!
    MOCK_URL=
    for _ in $(seq 200); do
        MOCK_URL=$(head -n1 "$WORK/mock-$name.url" 2>/dev/null || true)
        [ -n "$MOCK_URL" ] && return 0
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.05
    done
    echo "$(basename "$0"): the $name mock did not start (see $LOG)" >&2
    exit 1
}
