#!/usr/bin/env bash
# tests/bench/proxy_rate.sh BUILD_DIR - what `agenthost proxy` adds at a fixed request rate,
# open loop, as the published gateway figures are measured (vegeta's way), as a markdown
# report on stdout (docs/performance.md 11.2). Build latency_bench and agenthost in
# BUILD_DIR (a Release build), then `tests/bench/proxy_rate.sh BUILD_DIR`.
#
# For each case (Anthropic streamed, Chat not streamed: TensorZero's body) and each rate
# of RATES, RUNS runs of `latency_bench rate`: PHASES pairs of SECONDS straight to
# `agenthost mock` then through `agenthost proxy` in front of the same mock, after a
# warm-up. Each request's time counts from when it was due, to the first bytes holding the
# reply's text and to the end of the transfer. The table gives the median over the runs of
# each mode's pooled statistics and of "added" (per run, the median over its pairs of
# proxy - direct), the proxied phases' errors / dropped / late summed over the runs, and
# the CPU of the client, the mock and the proxy (utime + stime from /proc over a proxied
# phase, % of one core, median over the runs). Then, with MAXRATE=1, the highest rate at
# which the proxied phase keeps up (errors + dropped + late under 1 % of the requests due;
# late: sent more than 1 ms after its slot, dropped: 4096 already in flight), by doubling
# from the last of RATES then halving the gap, one pair of MAX_SECONDS per probe.
# Environment: RATES ("1000 2500 5000"), RUNS (3), PHASES (3), SECS (3 per phase), CASES
# ("anthropic:stream openai:nostream"), MAXRATE (1), MAX_SECONDS (2), MAX_STEPS (4),
# MAX_CAP (40000), UPSTREAM ("mock": `agenthost mock`; "serve": `latency_bench serve`, one
# thread on epoll answering with the mock's canned replies, for rates where the mock's thread
# per connection is the limit, about 10k/s here: docs/performance.md 11.2),
# PROXY_MAX_IN_FLIGHT (unset: the proxy's --max-in-flight is not given).
set -euo pipefail
BUILD_DIR=$(cd "${1:?usage: tests/bench/proxy_rate.sh BUILD_DIR}" && pwd)
RUNS=${RUNS:-3}
PHASES=${PHASES:-3}
SECS=${SECS:-3} # not SECONDS: bash's own
MAX_SECONDS=${MAX_SECONDS:-2}
MAX_STEPS=${MAX_STEPS:-4}
MAX_CAP=${MAX_CAP:-40000}
read -r -a RATES <<<"${RATES:-1000 2500 5000}"
read -r -a CASES <<<"${CASES:-anthropic:stream openai:nostream}"
AH=$BUILD_DIR/agenthost
LB=$BUILD_DIR/tests/bench/latency_bench
for b in "$AH" "$LB"; do
    [ -x "$b" ] || { echo "proxy_rate.sh: $b not built" >&2; exit 1; }
done
WORK=$BUILD_DIR/bench-work/proxy-rate
LOG=$WORK/log
rm -rf "$WORK"
mkdir -p "$WORK"
# shellcheck source=tests/bench/mock_lib.sh
. "$(dirname "$0")/mock_lib.sh"
# shellcheck source=tests/bench/proxy_lib.sh
. "$(dirname "$0")/proxy_lib.sh"
start_mock main
URL=$MOCK_URL
MOCK_PID=${MOCK_PIDS[0]}
UPSTREAM=${UPSTREAM:-mock}
case $UPSTREAM in
mock) ;;
serve)
    start_server serve "$LB" serve "$MOCK_URL"
    URL=$SERVER_URL
    MOCK_PID=$SERVER_PID
    ;;
*) echo "proxy_rate.sh: UPSTREAM is mock or serve, not $UPSTREAM" >&2; exit 2 ;;
esac
start_proxy main
PURL=$PROXY_URL

bench() { # out wire stream rate seconds phases
    "$LB" rate "$URL" "$2" "$4" "$5" "$6" "$PURL" "$3" mock="$MOCK_PID" proxy="$PROXY_PID" >"$1" 2>>"$LOG" ||
        echo "proxy_rate.sh: latency_bench rate $2 $3 $4 exited $?" | tee -a "$LOG" >&2
}
med() { # key mode-line-pattern files... -> the median over the files of key on that line
    local key=$1 pat=$2
    shift 2
    for f in "$@"; do grep -- "$pat" "$f" | head -n1 >"$f.line"; val "$f.line" "$key"; done | median
}
sum() { # key pattern files... -> the sum over every matching line of the files
    local key=$1 pat=$2
    shift 2
    for f in "$@"; do grep -- "$pat" "$f" | while read -r l; do echo "$l" >"$f.one"; val "$f.one" "$key"; done; done |
        awk '{s += $1} END {print s + 0}'
}
fmt() { printf '%.0f' "$1"; }
cpu() { # name files... -> median over the files of the proxied phases' mean CPU of name
    local name=$1
    shift
    for f in "$@"; do
        grep -- "mode=proxy " "$f" | grep -v "phase=all" | tr ' ' '\n' | sed -n "s/^cpu_${name}_pct=//p" |
            awk '{s += $1} END {if (NR) print s / NR}'
    done | median | awk '{printf "%.0f", $1}'
}

echo "At a fixed rate, open loop (latency_bench rate: a request due every 1/rate s, each time from when it was due), plain libcurl straight to the upstream (\`$([ "$UPSTREAM" = serve ] && echo "latency_bench serve" || echo "agenthost mock")\`) and through \`agenthost proxy\` in front of it, $PHASES pairs of ${SECS} s (direct, then proxied) per run after 0.5 s of warm-up each, median of $RUNS runs, µs (tests/bench/proxy_rate.sh). Load average at the start: $(cut -d' ' -f1-3 /proc/loadavg), $(nproc) CPUs."
echo ""
echo "| format | rate /s | achieved through the proxy /s | proxied errors / dropped / late | whole request through the proxy: mean / p50 / p90 / p95 / p99 | straight to the upstream: mean / p50 / p99 | **added**: mean / p50 / p90 / p95 / p99 | first text, added: p50 / p99 | CPU % of a core: client / upstream / proxy |"
echo "|---|---|---|---|---|---|---|---|---|"
for c in "${CASES[@]}"; do
    w=${c%%:*} s=${c#*:}
    for rate in "${RATES[@]}"; do
        files=()
        for r in $(seq "$RUNS"); do
            f=$WORK/rate-$w-$s-$rate-$r.txt
            bench "$f" "$w" "$s" "$rate" "$SECS" "$PHASES"
            files+=("$f")
        done
        P="phase=all mode=proxy "
        D="phase=all mode=direct "
        A="phase=median mode=added "
        row="| $w $s | $rate | $(fmt "$(med achieved_rps "$P" "${files[@]}")")"
        row+=" | $(sum errors "$P" "${files[@]}") / $(sum dropped "$P" "${files[@]}") / $(sum late "$P" "${files[@]}")"
        t=""
        for k in mean p50 p90 p95 p99; do t+="$(fmt "$(med "total_${k}_us" "$P" "${files[@]}")") / "; done
        row+=" | ${t% / }"
        row+=" | $(fmt "$(med total_mean_us "$D" "${files[@]}")") / $(fmt "$(med total_p50_us "$D" "${files[@]}")") / $(fmt "$(med total_p99_us "$D" "${files[@]}")")"
        t=""
        for k in mean p50 p90 p95 p99; do t+="$(printf '%+.0f' "$(med "total_${k}_us" "$A" "${files[@]}")") / "; done
        row+=" | **${t% / }**"
        row+=" | $(printf '%+.0f' "$(med first_p50_us "$A" "${files[@]}")") / $(printf '%+.0f' "$(med first_p99_us "$A" "${files[@]}")")"
        row+=" | $(cpu client "${files[@]}") / $(cpu mock "${files[@]}") / $(cpu proxy "${files[@]}") |"
        echo "$row"
    done
done
echo ""

[ "${MAXRATE:-1}" = 0 ] && exit 0
keeps_up() { # wire stream rate -> 0 when the proxied phase kept up; prints its p99 and CPU
    local f=$WORK/max-$1-$2-$3.txt
    bench "$f" "$1" "$2" "$3" "$MAX_SECONDS" 1
    local due bad
    due=$(awk -v r="$3" -v s="$MAX_SECONDS" 'BEGIN {printf "%d", r * s + 0.5}')
    bad=$(($(sum errors "phase=all mode=proxy " "$f") + $(sum dropped "phase=all mode=proxy " "$f") + $(sum late "phase=all mode=proxy " "$f")))
    PROBE="$3/s: $bad of $due errors, dropped or late, p99 $(fmt "$(med total_p99_us "phase=all mode=proxy " "$f")") µs through the proxy, CPU client / upstream / proxy $(cpu client "$f") / $(cpu mock "$f") / $(cpu proxy "$f") %"
    [ "$((bad * 100))" -lt "$due" ]
}
echo "The highest rate the proxied phase keeps up with (errors + dropped + late under 1 % of the requests due; one pair of ${MAX_SECONDS} s per probe; doubling from ${RATES[-1]}/s, then $MAX_STEPS halvings of the gap):"
echo ""
for c in "${CASES[@]}"; do
    w=${c%%:*} s=${c#*:}
    lo=0 hi=${RATES[-1]} probes=""
    while [ "$hi" -le "$MAX_CAP" ] && keeps_up "$w" "$s" "$hi"; do
        probes+="; $PROBE"
        lo=$hi hi=$((hi * 2))
    done
    probes+="; $PROBE"
    for _ in $(seq "$MAX_STEPS"); do
        mid=$(((lo + hi) / 2))
        if keeps_up "$w" "$s" "$mid"; then lo=$mid; else hi=$mid; fi
        probes+="; $PROBE"
    done
    echo "- $w $s: **$lo/s** keeps up, $hi/s does not (probes: ${probes#; })"
done
stop_proxy
