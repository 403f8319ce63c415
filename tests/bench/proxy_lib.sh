# shellcheck shell=bash
# tests/bench/proxy_lib.sh - sourced by proxy_latency.sh and proxy_rate.sh (after
# mock_lib.sh): an `agenthost proxy` in front of the mock at URL, and the helpers that read
# latency_bench's key=value lines. Needs AH, WORK, LOG and URL.
start_proxy() { # name [wrapper...] -> PROXY_URL, PROXY_PID (the proxy's own pid)
    local name=$1
    shift
    "$@" "$AH" proxy --listen 127.0.0.1:0 --anthropic-url "$URL" --openai-url "$URL" \
        ${PROXY_MAX_IN_FLIGHT:+--max-in-flight "$PROXY_MAX_IN_FLIGHT"} \
        >"$WORK/proxy-$name.url" 2>>"$LOG" &
    PROXY_PID=$!
    MOCK_PIDS+=("$PROXY_PID")
    PROXY_URL=
    for _ in $(seq 600); do
        PROXY_URL=$(head -n1 "$WORK/proxy-$name.url" 2>/dev/null || true)
        [ -n "$PROXY_URL" ] && return 0
        sleep 0.05
    done
    echo "$(basename "$0"): the proxy did not start (see $LOG)" >&2
    exit 1
}
stop_proxy() {
    kill -TERM "$PROXY_PID" 2>/dev/null || true
    wait "$PROXY_PID" 2>/dev/null || true
}
val() { # file key -> value of key=value
    tr ' ' '\n' <"$1" | sed -n "s/^$2=//p"
}
median() { sort -g | awk '{v[NR]=$1} END {if (NR) print (NR % 2 ? v[(NR+1)/2] : (v[NR/2] + v[NR/2+1]) / 2)}'; }
