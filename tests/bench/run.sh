#!/usr/bin/env bash
# tests/bench/run.sh BUILD_DIR - the streaming benchmark (called by `./run bench`).
#
# Starts the mock provider in its own process serving one long Anthropic reply of
# DELTAS text deltas (default 200000), then streams it RUNS times (default 5) through
# agenthost's transport + SSE parser (stream_bench client) and RUNS times through
# `curl -sN` (CPU and peak RSS of the curl process from wait4), and prints a markdown
# table of the medians and the agenthost/curl ratios. Numbers, not assertions.
set -euo pipefail
BUILD_DIR=${1:?usage: tests/bench/run.sh BUILD_DIR}
DELTAS=${DELTAS:-200000}
RUNS=${RUNS:-5}
BIN=$BUILD_DIR/tests/bench/stream_bench
[ -x "$BIN" ] || { echo "run.sh: $BIN not built (configure with tests on)" >&2; exit 1; }
command -v curl >/dev/null || { echo "run.sh: curl not found" >&2; exit 1; }

# The server reads its stdin until EOF: a FIFO we hold open; closing it stops the mock.
tmp=$(mktemp -d)
mkfifo "$tmp/in"
"$BIN" serve "$DELTAS" <"$tmp/in" >"$tmp/url" &
server_pid=$!
exec {server_in}>"$tmp/in"
stop_server() {
    exec {server_in}>&-
    wait "$server_pid" 2>/dev/null || true
    rm -rf "$tmp"
}
trap stop_server EXIT
for _ in $(seq 100); do
    [ -s "$tmp/url" ] && break
    kill -0 "$server_pid" 2>/dev/null || break
    sleep 0.05
done
URL=$(head -n1 "$tmp/url")
[ -n "$URL" ] || { echo "run.sh: the mock did not start" >&2; exit 1; }

BODY='{"model":"mock-bench","max_tokens":64000,"stream":true,"messages":[{"role":"user","content":"stream a long answer"}]}'
CURL=(curl -sN -o /dev/null -H 'content-type: application/json'
      -H 'anthropic-version: 2023-06-01' -H 'x-api-key: bench' -d "$BODY" "$URL/v1/messages")

# Same stream for both: check the size curl receives once (unmeasured).
curl_bytes=$(curl -sN -o /dev/null -w '%{size_download}' -H 'content-type: application/json' \
    -H 'anthropic-version: 2023-06-01' -H 'x-api-key: bench' -d "$BODY" "$URL/v1/messages")

field() { sed -n "s/.*\b$1=\([0-9.]*\).*/\1/p"; }
median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

ah_lines=() curl_lines=() ahbase_lines=() curlbase_lines=()
for ((i = 0; i < RUNS; i++)); do
    # Process start-up alone (libraries, TLS init), subtracted for the per-event cost.
    ahbase_lines+=("$("$BIN" exec "$BIN" startup)")
    curlbase_lines+=("$("$BIN" exec curl -s -o /dev/null file:///dev/null)")
    # Both measured the same way: the whole client process, from wait4().
    ah_lines+=("$("$BIN" exec "$BIN" client "$URL" | tr '\n' ' ')")
    curl_lines+=("$("$BIN" exec "${CURL[@]}")")
done

stat() { # which(ah|curl) field
    local -n lines=${1}_lines
    printf '%s\n' "${lines[@]}" | field "$2" | median
}

bytes=$(stat ah bytes)
events=$(stat ah events)
[ "$bytes" = "$curl_bytes" ] ||
    echo "run.sh: warning: agenthost got $bytes bytes, curl $curl_bytes" >&2

row() { # label which
    local wall cpu rss base
    wall=$(stat "$2" wall_s) cpu=$(stat "$2" cpu_s) rss=$(stat "$2" rss_kb)
    base=$(stat "${2}base" cpu_s)
    awk -v l="$1" -v w="$wall" -v c="$cpu" -v s="$base" -v r="$rss" -v b="$bytes" \
        -v e="$events" 'BEGIN {
        printf "| %s | %.1f | %.0f | %.3f | %.3f | %.3f | %.3f | %.3f | %.1f |\n",
            l, b / w / 1e6, e / w, w, c, s, c - s, (c - s) / e * 1e6, r / 1024 }'
}

ratio() { # field [which-suffix]
    awk -v a="$(stat "ah${2:-}" "$1")" -v c="$(stat "curl${2:-}" "$1")" 'BEGIN { printf "%.2f", a / c }'
}

net_ratio() {
    awk -v a="$(stat ah cpu_s)" -v sa="$(stat ahbase cpu_s)" \
        -v c="$(stat curl cpu_s)" -v sc="$(stat curlbase cpu_s)" \
        'BEGIN { printf "%.2f", (a - sa) / (c - sc) }'
}

echo "### Streaming: ${DELTAS} text deltas over loopback (median of ${RUNS} runs)"
echo
echo "Stream: $bytes bytes, $events SSE events (Anthropic Messages format, from the mock)."
echo
echo "| client | MB/s | events/s | wall s | CPU s | start-up CPU s | stream CPU s | CPU µs/event | peak RSS MiB |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|"
row "agenthost: transport + SSE parser" ah
row "curl -sN > /dev/null" curl
nr=$(net_ratio)
echo "| ratio agenthost / curl | | | $(ratio wall_s) | $(ratio cpu_s) | $(ratio cpu_s base) | $nr | $nr | $(ratio rss_kb) |"
echo
echo "Whole client processes measured alike (wait4 rusage; the mock runs in its own process)."
echo "CPU = user + system. Stream CPU = CPU minus the median start-up CPU of the same program"
echo "doing nothing (\`stream_bench startup\`, \`curl file:///dev/null\`); µs/event uses it."
