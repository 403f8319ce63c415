#!/usr/bin/env bash
# tests/bench/scale.sh BUILD_DIR - cost per run from 1 to 10 000 concurrent runs, and
# system calls per request (docs/performance.md, "Cost per run at scale").
#
#   CPU per run    (user + system CPU of the agenthost process) / N, from wait4()
#   memory per run (peak RSS at N - peak RSS at N = 0) / N
#   syscalls/req   strace -c -f of K and 2K sequential runs over one client:
#                  (calls at 2K - calls at K) / K
# N runs of tests/bench/scale.lua (one agent, one LLM call each, the mock's default
# reply, anthropic format) under one ah.parallel; the mock (another process, not
# measured) holds every response head HOLD_MS so all N are in flight at once.
# Medians of RUNS runs. 10 000 runs need 10 000 sockets in each process: the soft
# open-files limit is raised to the hard one (needs >= 10 100 for N = 10 000).
# Environment: RUNS (5), NS ("1 100 1000 10000"), HOLD_MS (200), K (500), WIRE.
set -euo pipefail
BUILD_DIR=$(cd "${1:?usage: tests/bench/scale.sh BUILD_DIR}" && pwd)
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BENCH=$ROOT/tests/bench
RUNS=${RUNS:-5}
NS=${NS:-1 100 1000 10000}
HOLD_MS=${HOLD_MS:-200}
K=${K:-500}
WIRE=${WIRE:-anthropic}
AH=$BUILD_DIR/agenthost
SB=$BUILD_DIR/tests/bench/stream_bench
for b in "$AH" "$SB"; do
    [ -x "$b" ] || { echo "scale.sh: $b not built" >&2; exit 1; }
done
ulimit -n "$(ulimit -Hn)"
max=0
for n in $NS; do [ "$n" -gt "$max" ] && max=$n; done
if [ "$(ulimit -n)" != unlimited ] && [ "$(ulimit -n)" -lt $((max + 100)) ]; then
    echo "scale.sh: open-files limit $(ulimit -n) is too low for $max runs" >&2
    exit 1
fi

WORK=$BUILD_DIR/scale-work
rm -rf "$WORK"
mkdir -p "$WORK"
LOG="$WORK/log.txt"
. "$(dirname "${BASH_SOURCE[0]}")/mock_lib.sh"
med() {
    sort -g | awk '{ v[NR] = $1 } END { if (NR) print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}
field() { sed -n "s/.*\b$1=\([0-9.]*\).*/\1/p" | tail -n1; }

echo "{\"steps\": [], \"then\": {\"delay_headers_ms\": $HOLD_MS}}" >"$WORK/hold.json"
start_mock hold --plan "$WORK/hold.json"
HOLD_URL=$MOCK_URL
for ((i = 1; i <= RUNS; i++)); do
    for n in 0 $NS; do
        "$SB" exec "$AH" "$BENCH/scale.lua" "$HOLD_URL" "$n" "$WIRE" >"$WORK/scale-$n.$i" \
            2>>"$WORK/log.txt" || echo "scale.sh: N = $n run $i failed" >&2
    done
done
base=$(for ((i = 1; i <= RUNS; i++)); do field rss_kb <"$WORK/scale-0.$i"; done | med)
echo "## Cost per run, $RUNS runs, medians ($(date -u '+%F %H:%M UTC'), load $(cut -d' ' -f1-3 /proc/loadavg))"
echo
echo "| N | wall s | CPU s | CPU ms per run | peak RSS MiB | memory per run KiB |"
echo "|---:|---:|---:|---:|---:|---:|"
echo "| 0 | | | | $(awk -v r="$base" 'BEGIN { printf "%.1f", r / 1024 }') | |"
for n in $NS; do
    w=$(for ((i = 1; i <= RUNS; i++)); do field wall_s <"$WORK/scale-$n.$i"; done | med)
    c=$(for ((i = 1; i <= RUNS; i++)); do field cpu_s <"$WORK/scale-$n.$i"; done | med)
    r=$(for ((i = 1; i <= RUNS; i++)); do field rss_kb <"$WORK/scale-$n.$i"; done | med)
    awk -v n="$n" -v w="$w" -v c="$c" -v r="$r" -v b="$base" 'BEGIN {
        printf "| %d | %.3f | %.3f | %.3f | %.1f | %.1f |\n", n, w, c, c / n * 1000, r / 1024, (r - b) / n }'
done

if command -v strace >/dev/null; then
    start_mock seq
    SEQ_URL=$MOCK_URL
    calls() { # k run -> total system calls of a sequential run of k requests
        strace -f -c -o "$WORK/strace-$1.$2.txt" "$AH" "$BENCH/seq.lua" "$SEQ_URL" "$1" "$WIRE" \
            >/dev/null 2>>"$WORK/log.txt"
        awk '$NF == "total" { print $4 }' "$WORK/strace-$1.$2.txt"
    }
    # Whether curl reads the response in the same step that sent the request, or waits
    # for it on the socket (more epoll_ctl, getsockname, setsockopt), depends on how fast
    # the mock answers: runs differ by a few calls. The table is the median run's.
    for ((i = 1; i <= 3; i++)); do
        a=$(calls "$K" "$i") b=$(calls $((2 * K)) "$i")
        awk -v a="$a" -v b="$b" -v k="$K" -v i="$i" 'BEGIN { printf "%.2f %d\n", (b - a) / k, i }'
    done | sort -g >"$WORK/per-request.txt"
    read -r per mid < <(sed -n 2p "$WORK/per-request.txt")
    echo
    echo "System calls per request (sequential, one client, strace -c -f, (calls at $((2 * K)) − at $K) / $K): median $per of $(cut -d' ' -f1 "$WORK/per-request.txt" | tr '\n' ' ')"
    echo
    echo "| system call | per request (median run) |"
    echo "|---|---:|"
    join <(awk '$1 ~ /^[0-9.]+$/ && $NF != "total" { print $NF, $4 }' "$WORK/strace-$((2 * K)).$mid.txt" | sort) \
         <(awk '$1 ~ /^[0-9.]+$/ && $NF != "total" { print $NF, $4 }' "$WORK/strace-$K.$mid.txt" | sort) |
        awk -v k="$K" '{ d = ($2 - $3) / k; if (d >= 0.05) printf "| %s | %.2f |\n", $1, d }' | sort -t'|' -k3 -gr
fi
