#!/usr/bin/env bash
# tests/bench/latency.sh BUILD_DIR - agenthost's added latency and cost per short request
# beside plain libcurl on the same server (docs/performance.md), as a markdown report on
# stdout. Run by `./run bench` (section 10); alone: build latency_bench and agenthost in
# BUILD_DIR (a Release build; with -DCMAKE_C_FLAGS=-g the per-area split of section 2 can
# tell the decoder's files from the rest), then `tests/bench/latency.sh BUILD_DIR`.
#
#   1. Time to the first text delta and to the end of a short streamed request (the mock's
#      default 13-delta reply to "hi"), through agenthost (one agent run per request:
#      first text_delta reaching on_event) and through plain libcurl (one reused easy
#      handle: first bytes holding a text delta), N requests of each after 20 of warm-up,
#      in turn in one process (latency_bench both), RUNS times; p50 / p90 / p99 per run,
#      the table gives the median over runs, and "added" is the median of the per-run
#      differences.
#   2. Instructions per request by callgrind: the whole process at CG_N1 and CG_N2
#      requests, the difference divided by CG_N2 - CG_N1 (start-up cancels out); and
#      where agenthost's go, per function (self cost), the same difference.
# The mock (`agenthost mock`) runs in its own process: its work is never counted.
# Environment: N (500), RUNS (5), CG_N1 (10), CG_N2 (60), WIRES ("anthropic openai
# responses"), CALLGRIND=0 to skip section 2.
set -euo pipefail
BUILD_DIR=$(cd "${1:?usage: tests/bench/latency.sh BUILD_DIR}" && pwd)
BENCH=$(cd "$(dirname "$0")" && pwd)
N=${N:-500}
RUNS=${RUNS:-5}
CG_N1=${CG_N1:-10}
CG_N2=${CG_N2:-60}
read -r -a WIRES <<<"${WIRES:-anthropic openai responses}"
AH=$BUILD_DIR/agenthost
LB=$BUILD_DIR/tests/bench/latency_bench
for b in "$AH" "$LB"; do
    [ -x "$b" ] || { echo "latency.sh: $b not built" >&2; exit 1; }
done
WORK=$BUILD_DIR/bench-work/latency
rm -rf "$WORK"
mkdir -p "$WORK"

"$AH" mock --port 0 >"$WORK/mock.url" 2>"$WORK/mock.log" &
MOCK=$!
trap 'kill $MOCK 2>/dev/null || true; wait $MOCK 2>/dev/null || true' EXIT
URL=
for _ in $(seq 200); do
    URL=$(head -n1 "$WORK/mock.url" 2>/dev/null || true)
    [ -n "$URL" ] && break
    sleep 0.05
done
[ -n "$URL" ] || { echo "latency.sh: the mock did not start" >&2; exit 1; }

val() { # file key -> value of key=value
    tr ' ' '\n' <"$1" | sed -n "s/^$2=//p"
}
median() { sort -g | awk '{v[NR]=$1} END {if (NR) print (NR % 2 ? v[(NR+1)/2] : (v[NR/2] + v[NR/2+1]) / 2)}'; }

# ---- 1: latency
for r in $(seq "$RUNS"); do
    for w in "${WIRES[@]}"; do
        "$LB" both "$URL" "$w" "$N" >"$WORK/both-$w-$r.txt"
        for m in agenthost curl; do
            grep "mode=$m " "$WORK/both-$w-$r.txt" >"$WORK/$m-$w-$r.txt"
        done
    done
done

echo "Added time to the first text delta and to the end of a short streamed request, agenthost (an agent run per request, first text_delta at on_event) beside plain libcurl (one reused easy handle) on the same mock over loopback, one request of each in turn; $N of each after 20 of warm-up, median of $RUNS runs, µs (tests/bench/latency_bench.c). Load average at the start: $(cut -d' ' -f1-3 /proc/loadavg), $(nproc) CPUs."
echo ""
echo "| format | first delta p50: agenthost / curl / added | p90 added | p99 added | whole request p50: agenthost / curl / added | p99 added |"
echo "|---|---|---|---|---|---|"
for w in "${WIRES[@]}"; do
    cells=()
    for k in first total; do
        for p in p50 p90 p99; do
            a=$(for r in $(seq "$RUNS"); do val "$WORK/agenthost-$w-$r.txt" "${k}_${p}_us"; done | median)
            c=$(for r in $(seq "$RUNS"); do val "$WORK/curl-$w-$r.txt" "${k}_${p}_us"; done | median)
            d=$(for r in $(seq "$RUNS"); do
                echo "$(val "$WORK/agenthost-$w-$r.txt" "${k}_${p}_us") $(val "$WORK/curl-$w-$r.txt" "${k}_${p}_us")" |
                    awk '{print $1 - $2}'
            done | median)
            eval "${k}_${p}_a=$a ${k}_${p}_c=$c ${k}_${p}_d=$d"
        done
    done
    printf '| %s | %.0f / %.0f / %+.0f | %+.0f | %+.0f | %.0f / %.0f / %+.0f | %+.0f |\n' "$w" \
        "$first_p50_a" "$first_p50_c" "$first_p50_d" "$first_p90_d" "$first_p99_d" \
        "$total_p50_a" "$total_p50_c" "$total_p50_d" "$total_p99_d"
done
echo ""

# ---- 2: instructions per request
[ "${CALLGRIND:-1}" = 0 ] && exit 0
total_ir() { # callgrind file -> total instructions
    sed -n 's/^summary: *//p; s/^totals: *//p' "$1" | head -n1 | awk '{print $1}'
}
cg() { # mode wire n -> callgrind file
    local f=$WORK/cg-$1-$2-$3.out
    valgrind --tool=callgrind --callgrind-out-file="$f" "$LB" "$1" "$URL" "$2" "$3" 0 \
        >/dev/null 2>>"$WORK/valgrind.log"
    echo "$f"
}
echo "Instructions per short request (callgrind, whole client process at $CG_N2 and $CG_N1 requests, the difference per request):"
echo ""
echo "| format | agenthost | plain libcurl | ratio |"
echo "|---|---|---|---|"
for w in "${WIRES[@]}"; do
    for m in agenthost curl; do
        f1=$(cg "$m" "$w" "$CG_N1")
        f2=$(cg "$m" "$w" "$CG_N2")
        eval "ir_$m=$(( ($(total_ir "$f2") - $(total_ir "$f1")) / (CG_N2 - CG_N1) ))"
    done
    # shellcheck disable=SC2154
    printf '| %s | %d k | %d k | %.2f× |\n' "$w" $((ir_agenthost / 1000)) $((ir_curl / 1000)) \
        "$(awk -v a="$ir_agenthost" -v c="$ir_curl" 'BEGIN {print a / c}')"
done
echo ""
echo "Where agenthost's instructions per request go (self cost, the same difference): by library or area, then the top 25 functions (their source file, or their library when it has no symbols):"
echo ""
for w in "${WIRES[@]}"; do
    echo "$w:"
    echo '```'
    python3 "$BENCH/cg_selfcost.py" "$WORK/cg-agenthost-$w-$CG_N1.out" "$WORK/cg-agenthost-$w-$CG_N2.out" \
        $((CG_N2 - CG_N1)) --main latency_bench
    echo '```'
done
