#!/usr/bin/env bash
# tests/bench/run.sh BUILD_DIR - every benchmark (docs/testing.md), called by `./run bench`.
#
# Writes one markdown report to stdout and to BUILD_DIR/bench.md; raw measurements,
# logs and callgrind files go to BUILD_DIR/bench-work/. Numbers, never assertions.
#   1. Streaming decode through the whole stack (Lua agent -> worker -> decoder -> SSE
#      -> libcurl) on one long reply from a mock in its own process, per wire format,
#      beside `curl -sN` (the floor), agenthost's transport + SSE layer alone, and the
#      official Node SDKs (installed from npm into BUILD_DIR/node; skipped, and said so,
#      when they cannot be installed).
#   2. The Lua on_event hook: per-event cost of a hook that does nothing vs none.
#   3. The retry machinery's success-path cost: callgrind instructions of one successful
#      call, default policy vs max_attempts = 1 (and vs no continuations either).
#   4. Scale: 1, 10, 100, 1000 concurrent agent runs (ah.parallel) in one process.
#   5. Where the instructions go (callgrind of the whole-stack client, per format).
#   6. The goal: a Lua agent counting text_delta in an on_event hook, in events per
#      CPU-second beside the fastest official SDK, per format; peak RSS on that stream and
#      on a 10 MB answer.
#   7. Redis: fleet retry amplification (1, 8, 32 processes) and the cost of a shared
#      budget, pacing or ledger decision against the local one (needs redis-server).
#   8. A cut inside a single-block answer: bytes regenerated and shown twice, default vs
#      continue_partial_text (partial_text_bench).
#   9. Every Lua runtime: instructions per delta with and without an on_event hook on
#      5.1, 5.2, 5.3, LuaJIT beside 5.4 (tests/bench/runtimes.sh).
#  10. A short request beside plain libcurl: added time to the first text delta and to
#      the end (p50/p90/p99), instructions per request and where they go
#      (tests/bench/latency.sh).
#  11. Prompt caching: billed-equivalent input tokens of a cut turn's continuation on a
#      ~20k-token conversation against an uncached resend, per provider and conversation
#      shape (tests/bench/cache_bench.lua, in-process mock; token counts, not timings).
#  12. agenthost proxy, plain libcurl client: added time at concurrency 1 and 64, the
#      proxy's CPU, system calls and instructions per request (tests/bench/proxy_latency.sh).
#  13. agenthost proxy at fixed rates, open loop: added latency, the CPU of client, mock
#      and proxy, the highest rate it keeps up with (tests/bench/proxy_rate.sh).
#  14. agenthost proxy by an independent gateway benchmark's method (Node fetch, a canned
#      upstream in Node, interleaved rounds, median of round medians) beside the figures it
#      published for Bifrost, Portkey and LiteLLM (tests/bench/gateway_overhead.mjs).
# Every client is a separate process measured from wait4() (CPU user + system, peak RSS,
# wall), RUNS times; tables give medians, and ratios are the median of per-run ratios
# (run i of one client against run i of the other, measured back to back).
# Environment: RUNS (5), DELTAS (200000), SCALE_NS ("1 10 100 1000 10000"), CG_REPS (3),
# NODE=0 to skip the Node SDKs.
set -euo pipefail
BUILD_DIR=$(cd "${1:?usage: tests/bench/run.sh BUILD_DIR}" && pwd)
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BENCH=$ROOT/tests/bench
RUNS=${RUNS:-5}
DELTAS=${DELTAS:-200000}
SCALE_NS=${SCALE_NS:-1 10 100 1000 10000}
CG_REPS=${CG_REPS:-3}
WIRES=(anthropic openai responses)

AH=$BUILD_DIR/agenthost
SB=$BUILD_DIR/tests/bench/stream_bench
RB=$BUILD_DIR/tests/bench/retry_bench
for b in "$AH" "$SB" "$RB"; do
    [ -x "$b" ] || { echo "run.sh: $b not built" >&2; exit 1; }
done
for tool in curl valgrind callgrind_annotate; do
    command -v "$tool" >/dev/null || { echo "run.sh: $tool not found" >&2; exit 1; }
done

WORK=$BUILD_DIR/bench-work
RAW=$WORK/raw
CG=$WORK/callgrind
LOG=$WORK/log.txt
rm -rf "$WORK"
mkdir -p "$RAW" "$CG"
: >"$LOG"
REPORT=$BUILD_DIR/bench.md
: >"$REPORT"
started=$(date +%s)

note() { echo "bench: $*" >&2; }
out() { printf '%s\n' "$*" | tee -a "$REPORT"; }

# ---- mocks: each in its own process, stopped at exit ----------------------------------
. "$(dirname "${BASH_SOURCE[0]}")/mock_lib.sh"

# ---- measurement store: one file per measured process, "key=value" words -------------
measure() { # key cmd... : run cmd as a child of stream_bench exec, keep its output
    local key=$1
    shift
    if ! "$SB" exec "$@" >"$RAW/$key" 2>>"$LOG"; then
        echo "failed" >>"$RAW/$key"
        note "$key failed (see $LOG)"
        return 1
    fi
}
val() { # key field -> the last value of field= in key's output (empty if none)
    [ -f "$RAW/$1" ] || return 0
    sed -n "s/.*\b$2=\([0-9.]*\).*/\1/p" "$RAW/$1" | tail -n1
}
vals() { # prefix field -> one value per run
    local i
    for ((i = 1; i <= RUNS; i++)); do val "$1.$i" "$2"; done
}
med() { # numbers on stdin -> median (empty for none)
    sort -g | awk '{ v[NR] = $1 } END { if (NR) print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}
spread() { # numbers on stdin -> (max - min) / median in percent
    sort -g | awk '{ v[NR] = $1 } END { if (!NR) exit; m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2;
        if (m > 0) printf "%.0f", (v[NR] - v[1]) / m * 100 }'
}
pair_ratio() { # prefixA prefixB field -> median over runs of A_i / B_i
    local i a b
    for ((i = 1; i <= RUNS; i++)); do
        a=$(val "$1.$i" "$3") b=$(val "$2.$i" "$3")
        if [ -n "$a" ] && [ -n "$b" ]; then awk -v a="$a" -v b="$b" 'BEGIN { if (b > 0) printf "%.6f\n", a / b }'; fi
    done | med
}
pair_diff() { # prefixA prefixB field -> A_i - B_i, one per run (none for failed runs)
    local i a b
    for ((i = 1; i <= RUNS; i++)); do
        a=$(val "$1.$i" "$3") b=$(val "$2.$i" "$3")
        if [ -n "$a" ] && [ -n "$b" ]; then awk -v a="$a" -v b="$b" 'BEGIN { printf "%.6f\n", a - b }'; fi
    done
}
fmt() { # printf-format value -> formatted, or "n/a" when empty
    if [ -n "$2" ]; then awk -v v="$2" -v f="$1" 'BEGIN { printf f, v }'; else printf 'n/a'; fi
}
calc() { awk "BEGIN { v = $1; printf \"%.6f\", v }"; }
num() { # value -> a whole number with thousands separators, or "n/a"
    if [ -n "$1" ]; then printf '%.0f' "$1" | sed ':a;s/\B[0-9]\{3\}\>/,&/;ta'; else printf 'n/a'; fi
}

# ---- the machine ---------------------------------------------------------------------
cmake_var() { sed -n "s/^$1:[A-Z]*=//p" "$BUILD_DIR/CMakeCache.txt" | head -n1; }
cc=$(cmake_var CMAKE_C_COMPILER)
build_type=$(cmake_var CMAKE_BUILD_TYPE)
cpu=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n1)
load_start=$(cut -d' ' -f1-3 /proc/loadavg)

# ---- the Node SDK peers ----------------------------------------------------------------
NODE_DIR=$BUILD_DIR/node
node_ok=0 node_why=
if [ "${NODE:-1}" = 0 ]; then
    node_why="skipped (NODE=0)"
elif ! command -v node >/dev/null || ! command -v npm >/dev/null; then
    node_why="not run: node/npm not installed"
else
    mkdir -p "$NODE_DIR"
    if [ ! -d "$NODE_DIR/node_modules/openai" ] || [ ! -d "$NODE_DIR/node_modules/@anthropic-ai/sdk" ]; then
        note "installing the Node SDKs from npm into $NODE_DIR"
        [ -f "$NODE_DIR/package.json" ] || echo '{"private": true}' >"$NODE_DIR/package.json"
        (cd "$NODE_DIR" && timeout 300 npm install --no-audit --no-fund openai @anthropic-ai/sdk) \
            >>"$LOG" 2>&1 || true
    fi
    if [ -d "$NODE_DIR/node_modules/openai" ] && [ -d "$NODE_DIR/node_modules/@anthropic-ai/sdk" ]; then
        cp "$BENCH/node_sdk.mjs" "$NODE_DIR/"
        node_ok=1
    else
        node_why="not run: npm install of openai and @anthropic-ai/sdk failed (registry unreachable?)"
    fi
fi
pkg_version() { sed -n 's/^[[:space:]]*"version":[[:space:]]*"\([^"]*\)".*/\1/p' "$NODE_DIR/node_modules/$1/package.json" | head -n1; }

# ---- 1 + 2: streaming --------------------------------------------------------------------
# One long reply of DELTAS text deltas of ~4 bytes each (a token's size: " the"). The text
# stays under the SSE parser's 1 MiB line limit: Responses repeats the whole text inside
# single events at the end (output_text.done ... response.completed).
awk -v n="$DELTAS" 'BEGIN {
    split("the and for are but not you all any can her was one our out day get has him his how man new now old see two way who did its let put say she too use", w, " ");
    printf "{\"steps\": [], \"then\": {\"ok\": true, \"text\": \"";
    for (i = 0; i < n; i++) printf "%s%s", (i ? " " : ""), w[i % 40 + 1];
    printf "\"}}\n" }' >"$WORK/stream-plan.json"
start_mock stream --text-deltas "$DELTAS" --plan "$WORK/stream-plan.json"
STREAM_URL=$MOCK_URL
# A 10 MB answer (the same words, ~50 bytes a delta), for what a long answer costs in RSS.
BIG_BYTES=10000000
awk -v n="$BIG_BYTES" 'BEGIN {
    split("the and for are but not you all any can her was one our out day get has him his how man new now old see two way who did its let put say she too use", w, " ");
    printf "{\"steps\": [], \"then\": {\"ok\": true, \"text\": \"";
    for (i = 0; len < n; i++) { s = (i ? " " : "") w[i % 40 + 1]; if (len + length(s) > n) s = substr(s, 1, n - len); printf "%s", s; len += length(s) }
    printf "\"}}\n" }' >"$WORK/big-plan.json"
start_mock big --text-deltas "$DELTAS" --plan "$WORK/big-plan.json"
BIG_URL=$MOCK_URL
BODY='{"model":"mock-bench","max_tokens":64000,"stream":true,"messages":[{"role":"user","content":"stream a long answer"}],"input":"stream a long answer"}'
declare -A PATH_OF=([anthropic]=/v1/messages [openai]=/v1/chat/completions [responses]=/v1/responses)
curl_args() { # wire output-file -> CURL_ARGS: curl streaming WIRE's reply into the file
    CURL_ARGS=(curl -sN -o "$2" -H 'content-type: application/json')
    if [ "$1" = anthropic ]; then
        CURL_ARGS+=(-H 'anthropic-version: 2023-06-01' -H 'x-api-key: bench')
    else
        CURL_ARGS+=(-H 'authorization: Bearer bench')
    fi
    CURL_ARGS+=(-d "$BODY" "$STREAM_URL${PATH_OF[$1]}")
}
declare -A EVENTS BYTES
for wire in "${WIRES[@]}"; do
    # The stream once, unmeasured: its size and SSE event count (one data line each).
    curl_args "$wire" "$WORK/stream-$wire.sse"
    "${CURL_ARGS[@]}"
    EVENTS[$wire]=$(grep -c '^data:' "$WORK/stream-$wire.sse")
    BYTES[$wire]=$(wc -c <"$WORK/stream-$wire.sse")
done

note "streaming: ${#WIRES[@]} formats x $RUNS runs (curl, transport+SSE, whole stack: no hook, counting hook, reused tables; empty hooks, 10 MB answer$([ "$node_ok" = 1 ] && echo ", Node SDK"))"
for ((i = 1; i <= RUNS; i++)); do
    measure "start.curl.$i" curl -s -o /dev/null file:///dev/null || true
    measure "start.sse.$i" "$SB" startup || true
    measure "start.stack.$i" "$AH" "$BENCH/stack.lua" anthropic "$STREAM_URL" startup || true
    for wire in "${WIRES[@]}"; do
        curl_args "$wire" /dev/null
        measure "$wire.curl.$i" "${CURL_ARGS[@]}" || true
        measure "$wire.sse.$i" "$SB" client "$STREAM_URL" "$wire" || true
        measure "$wire.stack.$i" "$AH" "$BENCH/stack.lua" "$wire" "$STREAM_URL" none || true
        measure "$wire.count.$i" "$AH" "$BENCH/stack.lua" "$wire" "$STREAM_URL" count || true
        measure "$wire.reuse.$i" "$AH" "$BENCH/stack.lua" "$wire" "$STREAM_URL" reuse || true
        if [ "$wire" = anthropic ]; then
            measure "$wire.hook.$i" "$AH" "$BENCH/stack.lua" "$wire" "$STREAM_URL" hook || true
            measure "$wire.hookreuse.$i" "$AH" "$BENCH/stack.lua" "$wire" "$STREAM_URL" hookreuse || true
            measure "$wire.coalesce.$i" "$AH" "$BENCH/stack.lua" "$wire" "$STREAM_URL" coalesce || true
            measure "big-$wire.count.$i" "$AH" "$BENCH/stack.lua" "$wire" "$BIG_URL" count || true
        fi
        measure "big-$wire.stack.$i" "$AH" "$BENCH/stack.lua" "$wire" "$BIG_URL" none || true
        if [ "$node_ok" = 1 ]; then
            measure "start.node-$wire.$i" node "$NODE_DIR/node_sdk.mjs" "$wire" "$STREAM_URL" startup || true
            measure "$wire.node.$i" node "$NODE_DIR/node_sdk.mjs" "$wire" "$STREAM_URL" || true
        fi
    done
done

# ---- 3: the retry machinery under callgrind ---------------------------------------------
cg_ir() { # callgrind stderr file -> instructions collected
    sed -n 's/.*Collected : \([0-9]*\).*/\1/p' "$1" | tail -n1
}
start_mock short
SHORT_URL=$MOCK_URL
start_mock long --text-deltas 2000
LONG_URL=$MOCK_URL
note "retry machinery: callgrind, ${#WIRES[@]} formats x 2 replies x 3 policies x $CG_REPS"
for wire in "${WIRES[@]}"; do
    for reply in short long; do
        url=$SHORT_URL
        [ "$reply" = long ] && url=$LONG_URL
        for ((r = 1; r <= CG_REPS; r++)); do
            for pol in default single bare; do
                f=$CG/retry-$wire-$reply-$pol-$r
                if valgrind --tool=callgrind --toggle-collect=measured_call \
                    --callgrind-out-file="$f.out" "$RB" "$url" "$wire" "$pol" >"$f.stdout" 2>"$f.err"; then
                    echo "ir=$(cg_ir "$f.err") $(cat "$f.stdout")" >"$RAW/retry.$wire.$reply.$pol.$r"
                else
                    note "retry_bench $wire $reply $pol failed (see $f.err)"
                fi
            done
        done
    done
done

# ---- 5 (and 2): where the instructions go ------------------------------------------------
incl() { # annotate-file function -> inclusive Ir of that exact function (0 if absent)
    awk -v fn="$2" '{ for (i = 1; i <= NF; i++) if ($i ~ ":" fn "$" && $(i + 1) ~ /^\[/) {
        gsub(",", "", $1); print $1; found = 1; exit } } END { if (!found) print 0 }' "$1"
}
note "profile: callgrind of the whole-stack client and of curl on the ${DELTAS}-delta stream"
declare -A PROF
for wire in "${WIRES[@]}"; do
    modes=(none count)
    [ "$wire" = anthropic ] && modes+=(hook hookreuse reuse)
    for mode in "${modes[@]}"; do
        f=$CG/stack-$wire-$mode
        if valgrind --tool=callgrind --callgrind-out-file="$f.out" \
            "$AH" "$BENCH/stack.lua" "$wire" "$STREAM_URL" "$mode" >"$f.stdout" 2>"$f.err"; then
            PROF[$wire.$mode.total]=$(cg_ir "$f.err")
            callgrind_annotate --inclusive=yes --threshold=100 "$f.out" >"$f.txt" 2>/dev/null || true
            for fn in cJSON_ParseWithLength cJSON_Delete ah_sse_feed ah_sse_next ah_decoder_feed \
                ah__fast_event ah__anthropic_delta ah__openai_content ah__responses_text_delta \
                run_on_event; do
                PROF[$wire.$mode.$fn]=$(incl "$f.txt" "$fn")
            done
        else
            note "callgrind of stack.lua $wire $mode failed (see $f.err)"
        fi
    done
    f=$CG/curl-$wire
    curl_args "$wire" /dev/null
    if valgrind --tool=callgrind --callgrind-out-file="$f.out" "${CURL_ARGS[@]}" 2>"$f.err"; then
        PROF[$wire.curl.total]=$(cg_ir "$f.err")
    fi
done

# ---- 4: scale ----------------------------------------------------------------------------
HOLD_MS=200
echo "{\"steps\": [], \"then\": {\"delay_headers_ms\": $HOLD_MS}}" >"$WORK/scale-plan.json"
start_mock scale --plan "$WORK/scale-plan.json"
SCALE_URL=$MOCK_URL
note "scale: N = 0 $SCALE_NS concurrent runs x $RUNS"
for ((i = 1; i <= RUNS; i++)); do
    for n in 0 $SCALE_NS; do
        measure "scale-$n.$i" "$AH" "$BENCH/scale.lua" "$SCALE_URL" "$n" || true
    done
done
load_end=$(cut -d' ' -f1-3 /proc/loadavg)

# ==== the report ===========================================================================
out "# agenthost benchmarks"
out ""
out "- When: $(date -u '+%Y-%m-%d %H:%M UTC'), commit $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo '?')$(git -C "$ROOT" diff --quiet HEAD 2>/dev/null || echo ' (with local changes)')"
out "- Machine: $(nproc) CPUs ($cpu), Linux $(uname -r); load average $load_start at the start, $load_end at the end (other work shares the machine)"
out "- Build: $("$cc" --version | head -n1), CMAKE_BUILD_TYPE=$build_type; $(curl --version | head -n1 | cut -d' ' -f1-2), $(pkg-config --modversion libcjson 2>/dev/null | sed 's/^/cJSON /'), $(lua5.4 -v 2>/dev/null | cut -d' ' -f1-2 || echo Lua 5.4)"
out "- Peers: $([ "$node_ok" = 1 ] && echo "Node $(node --version), openai $(pkg_version openai), @anthropic-ai/sdk $(pkg_version @anthropic-ai/sdk)" || echo "Node SDKs $node_why")"
out "- $RUNS runs of each process measurement, medians; ratios are medians of per-run ratios"
out ""

# -- 1
out "## 1. Streaming decode, ${DELTAS} text deltas over loopback"
out ""
out "The mock (\`agenthost mock\`, its own process) serves one reply of ${DELTAS} deltas of ~4 bytes. Every client is a whole process measured from wait4(): CPU = user + system; *net* = CPU minus the median CPU of the same program starting up and exiting without a request (curl: \`file:///dev/null\`; transport + SSE: \`stream_bench startup\`; agenthost: \`stack.lua ... startup\`; Node: the SDK loaded and its client built). ×curl = median of run-i / curl-run-i. Spread = (max − min) / median of the CPU of the $RUNS runs."
out ""
out "| format | client | events/s | wall s | CPU s | CPU s / M events | net CPU s / M events | peak RSS MiB | CPU ×curl | wall ×curl | RSS ×curl | CPU spread |"
out "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
stream_row() { # wire client label start-key
    local wire=$1 client=$2 label=$3 start=$4 e=${EVENTS[$1]}
    local wall cpu rss st cr wr rr sp
    wall=$(vals "$wire.$client" wall_s | med)
    cpu=$(vals "$wire.$client" cpu_s | med)
    rss=$(vals "$wire.$client" rss_kb | med)
    st=$(vals "start.$start" cpu_s | med)
    if [ -z "$cpu" ]; then
        out "| $wire | $label | failed (see bench-work/log.txt) | | | | | | | | | |"
        return
    fi
    cr=$(pair_ratio "$wire.$client" "$wire.curl" cpu_s)
    wr=$(pair_ratio "$wire.$client" "$wire.curl" wall_s)
    rr=$(pair_ratio "$wire.$client" "$wire.curl" rss_kb)
    sp=$(vals "$wire.$client" cpu_s | spread)
    out "| $wire | $label | $(fmt %.0f "$(calc "$e / $wall")") | $(fmt %.3f "$wall") | $(fmt %.3f "$cpu") | $(fmt %.2f "$(calc "$cpu / $e * 1e6")") | $(fmt %.2f "$([ -n "$st" ] && calc "($cpu - $st) / $e * 1e6")") | $(fmt %.1f "$(calc "$rss / 1024")") | $(fmt %.2f "$cr") | $(fmt %.2f "$wr") | $(fmt %.2f "$rr") | $(fmt %s "$sp")% |"
}
for wire in "${WIRES[@]}"; do
    stream_row "$wire" curl "curl -sN (floor)" curl
    stream_row "$wire" sse "agenthost transport + SSE only (C)" sse
    stream_row "$wire" stack "**agenthost, whole stack (Lua agent, no hook)**" stack
    stream_row "$wire" count "**agenthost, Lua agent counting text_delta in on_event**" stack
    stream_row "$wire" reuse "agenthost, the same with on_event_reuse = true" stack
    if [ "$node_ok" = 1 ]; then
        stream_row "$wire" node "Node SDK ($([ "$wire" = anthropic ] && echo @anthropic-ai/sdk || echo openai))" "node-$wire"
    fi
done
out ""
[ "$node_ok" = 1 ] || out "Node SDKs: $node_why."
for wire in "${WIRES[@]}"; do
    out "- $wire: $(num "${BYTES[$wire]}") bytes, ${EVENTS[$wire]} SSE events; answer $(val "$wire.stack.1" text_bytes) bytes (agenthost)$([ "$node_ok" = 1 ] && echo ", $(val "$wire.node.1" text_bytes) bytes (Node)")$([ "$node_ok" = 1 ] && echo "; Node SDK / agenthost: CPU ×$(fmt %.1f "$(pair_ratio "$wire.node" "$wire.stack" cpu_s)"), peak RSS ×$(fmt %.1f "$(pair_ratio "$wire.node" "$wire.stack" rss_kb)"), wall ×$(fmt %.1f "$(pair_ratio "$wire.node" "$wire.stack" wall_s)")")."
done
out ""

# -- 2
out "## 2. Lua on_event hook (anthropic, ${DELTAS} deltas)"
out ""
hook_ns=$(pair_diff anthropic.hook anthropic.stack cpu_s | awk -v n="$DELTAS" '{ printf "%.3f\n", $1 / n * 1e9 }')
cg_hook=
if [ -n "${PROF[anthropic.hook.total]:-}" ] && [ -n "${PROF[anthropic.none.total]:-}" ]; then
    cg_hook=$(calc "(${PROF[anthropic.hook.total]} - ${PROF[anthropic.none.total]}) / $DELTAS")
fi
out "| measure | no hook | \`on_event = function(ev) end\` | cost per event |"
out "|---|---:|---:|---:|"
out "| CPU s (median of $RUNS) | $(fmt %.3f "$(vals anthropic.stack cpu_s | med)") | $(fmt %.3f "$(vals anthropic.hook cpu_s | med)") | $(fmt %.0f "$(printf '%s\n' "$hook_ns" | med)") ns (per-run pairs: $(printf '%s\n' "$hook_ns" | sort -g | awk '{ printf "%s%.0f", (NR > 1 ? ", " : ""), $1 }') ns) |"
out "| instructions (callgrind) | $(num "${PROF[anthropic.none.total]:-}") | $(num "${PROF[anthropic.hook.total]:-}") | $(fmt %.0f "$cg_hook") instructions |"
hookr_ns=$(pair_diff anthropic.hookreuse anthropic.stack cpu_s | awk -v n="$DELTAS" '{ printf "%.3f\n", $1 / n * 1e9 }')
cg_hookr=
if [ -n "${PROF[anthropic.hookreuse.total]:-}" ] && [ -n "${PROF[anthropic.none.total]:-}" ]; then
    cg_hookr=$(calc "(${PROF[anthropic.hookreuse.total]} - ${PROF[anthropic.none.total]}) / $DELTAS")
fi
out "| CPU s, \`on_event_reuse = true\` | $(fmt %.3f "$(vals anthropic.stack cpu_s | med)") | $(fmt %.3f "$(vals anthropic.hookreuse cpu_s | med)") | $(fmt %.0f "$(printf '%s\n' "$hookr_ns" | med)") ns (per-run pairs: $(printf '%s\n' "$hookr_ns" | sort -g | awk '{ printf "%s%.0f", (NR > 1 ? ", " : ""), $1 }') ns) |"
out "| instructions, \`on_event_reuse = true\` | $(num "${PROF[anthropic.none.total]:-}") | $(num "${PROF[anthropic.hookreuse.total]:-}") | $(fmt %.0f "$cg_hookr") instructions |"
hookc_ns=$(pair_diff anthropic.coalesce anthropic.stack cpu_s | awk -v n="$DELTAS" '{ printf "%.3f\n", $1 / n * 1e9 }')
out "| CPU s, counting hook with \`on_event_coalesce = 50\` (not the goal's path: deltas merged for a display) | $(fmt %.3f "$(vals anthropic.stack cpu_s | med)") | $(fmt %.3f "$(vals anthropic.coalesce cpu_s | med)") | $(fmt %.0f "$(printf '%s\n' "$hookc_ns" | med)") ns per streamed delta |"
out ""

# -- 3
out "## 3. Success-path cost of the retry machinery (callgrind)"
out ""
out "Instructions of one successful LLM call (\`retry_bench\`: ah_worker_new + ah_worker_run + ah_worker_free, collected with \`--toggle-collect=measured_call\` after a warm-up call), median of $CG_REPS; the mock in its own process. Policies: default (4 attempts, backoff, 3 continuations), max_attempts = 1, and max_attempts = 1 with max_continuations = 0. Spread = max − min of the default policy's runs (run-to-run noise from how the reply is split across reads)."
out ""
out "| format | reply | default | max_attempts = 1 | difference | + max_continuations = 0 | difference | noise (default runs) |"
out "|---|---|---:|---:|---:|---:|---:|---:|"
rvals() { local r; for ((r = 1; r <= CG_REPS; r++)); do val "retry.$1.$r" ir; done; }
for wire in "${WIRES[@]}"; do
    for reply in short long; do
        d=$(rvals "$wire.$reply.default" | med) s=$(rvals "$wire.$reply.single" | med)
        b=$(rvals "$wire.$reply.bare" | med)
        nz=$(rvals "$wire.$reply.default" | sort -g | awk 'NR == 1 { lo = $1 } { hi = $1 } END { if (NR) print hi - lo }')
        label="$([ "$reply" = short ] && echo "default reply ($(val "retry.$wire.$reply.default.1" text_bytes) bytes)" || echo "2000 deltas ($(val "retry.$wire.$reply.default.1" text_bytes) bytes)")"
        if [ -z "$d" ] || [ -z "$s" ] || [ -z "$b" ]; then
            out "| $wire | $label | failed (see bench-work/callgrind) | | | | | |"
            continue
        fi
        out "| $wire | $label | $(num "$d") | $(num "$s") | $(fmt %+.3f "$(calc "($d - $s) / $s * 100")")% | $(num "$b") | $(fmt %+.3f "$(calc "($d - $b) / $b * 100")")% | $(num "$nz") ($(fmt %.3f "$(calc "$nz / $d * 100")")%) |"
    done
done
out ""
out "Difference = (default − other) / other. Target: under 1 %."
out ""

# -- 4
out "## 4. Concurrent agent runs in one process (ah.parallel)"
out ""
out "\`agenthost tests/bench/scale.lua URL N\`: N runs of one agent (one LLM call each, the mock's default reply of ~120 bytes, anthropic format) under one ah.parallel. The mock holds every response's headers ${HOLD_MS} ms (a model's time to first token), so all N are in flight at once; wall includes that hold. Memory per run = (peak RSS − peak RSS of N = 0) / N. Growth = the value at N over the value at N/10."
out ""
out "| N | wall s | CPU s | CPU ms per run | peak RSS MiB | memory per run KiB | wall growth | CPU growth | memory growth (RSS − base) | CPU spread |"
out "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
base_rss=$(vals scale-0 rss_kb | med)
out "| 0 (baseline) | $(fmt %.3f "$(vals scale-0 wall_s | med)") | $(fmt %.3f "$(vals scale-0 cpu_s | med)") | | $(fmt %.1f "$(calc "${base_rss:-0} / 1024")") | | | | | |"
prev=
for n in $SCALE_NS; do
    w=$(vals "scale-$n" wall_s | med) c=$(vals "scale-$n" cpu_s | med) r=$(vals "scale-$n" rss_kb | med)
    if [ -z "$c" ]; then
        out "| $n | failed (see bench-work/log.txt) | | | | | | | | |"
        prev=
        continue
    fi
    mem=$(calc "($r - $base_rss)")
    g_w='' g_c='' g_m=''
    if [ -n "$prev" ]; then
        read -r pw pc pm <<<"$prev"
        g_w=$(calc "$w / $pw") g_c=$(calc "$c / $pc")
        g_m=$(awk -v a="$mem" -v b="$pm" 'BEGIN { if (b > 0) printf "%.2f", a / b }')
    fi
    out "| $n | $(fmt %.3f "$w") | $(fmt %.3f "$c") | $(fmt %.3f "$(calc "$c / $n * 1000")") | $(fmt %.1f "$(calc "$r / 1024")") | $(fmt %.1f "$(calc "$mem / $n")") | $([ -n "$g_w" ] && fmt ×%.2f "$g_w") | $([ -n "$g_c" ] && fmt ×%.2f "$g_c") | $([ -n "$g_m" ] && fmt ×%s "$g_m") | $(vals "scale-$n" cpu_s | spread)% |"
    prev="$w $c $mem"
done
out ""

# -- 5
out "## 5. Where the instructions go (callgrind, whole stack, ${DELTAS} deltas)"
out ""
out "Inclusive instructions of the stack's stages (libc's malloc/free counted where they are called), per SSE event, for the agent without a hook and for the agent counting text_delta in on_event. Fast path = the decoder's shape matcher (core/decode_fast.c: ah__fast_event minus the per-event bodies it hands the values to); JSON parse/free = cJSON, for the events the fast path does not take. \"Rest\" is everything outside the decoder: libcurl and the socket reads, the event loop, the Lua VM and script, request encoding, process start-up and exit. Kernel time is not counted by callgrind (see the CPU columns above for the whole)."
out ""
out "| format | agent | total per event | SSE framing | fast path | JSON parse (cJSON) | JSON tree free | decoder + timeline + events | on_event hook (table + call) | rest | curl -sN per event |"
out "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
for wire in "${WIRES[@]}"; do
    for mode in none count; do
        t=${PROF[$wire.$mode.total]:-}
        if [ -z "$t" ]; then
            out "| $wire | $mode | failed (see bench-work/callgrind) | | | | | | | | |"
            continue
        fi
        e=${EVENTS[$wire]}
        sse=$((PROF[$wire.$mode.ah_sse_feed] + PROF[$wire.$mode.ah_sse_next]))
        parse=${PROF[$wire.$mode.cJSON_ParseWithLength]}
        del=${PROF[$wire.$mode.cJSON_Delete]}
        dec=${PROF[$wire.$mode.ah_decoder_feed]}
        hook=${PROF[$wire.$mode.run_on_event]}
        fast=$((PROF[$wire.$mode.ah__fast_event] - PROF[$wire.$mode.ah__anthropic_delta] - PROF[$wire.$mode.ah__openai_content] - PROF[$wire.$mode.ah__responses_text_delta]))
        [ "$fast" -lt 0 ] && fast=0
        cell() { printf '%s (%s%%)' "$(fmt %.0f "$(calc "$1 / $e")")" "$(fmt %.0f "$(calc "$1 / $t * 100")")"; }
        label=$([ "$mode" = none ] && echo "no hook" || echo "counting hook")
        out "| $wire | $label | $(fmt %.0f "$(calc "$t / $e")") | $(cell "$sse") | $(cell "$fast") | $(cell "$parse") | $(cell "$del") | $(cell "$((dec - sse - fast - parse - del - hook))") | $(cell "$hook") | $(cell "$((t - dec))") | $(fmt %.0f "$([ -n "${PROF[$wire.curl.total]:-}" ] && calc "${PROF[$wire.curl.total]} / $e")") |"
    done
done
out ""

# -- 6
out "## 6. The goal: a Lua agent counting text_delta, beside the fastest official SDK"
out ""
out "Events per CPU-second, every delta its own event: agenthost = SSE events / CPU of the whole process (\`stack.lua WIRE URL count\`: an agent whose on_event counts text_delta events); SDK = SSE events / the SDK's *net* CPU (its process minus the median CPU of loading the SDK and building its client, i.e. its stream loop). Ratio = median over runs of SDK net CPU_i / agenthost CPU_i. Target: ≥ 5×. Peak RSS of the same run (target ≤ 16 MB); the 10 MB answer: growth = (peak RSS − peak RSS of \`stack.lua ... startup\`) / answer size (target ≤ 2.5×)."
out ""
out "| format | agenthost events / CPU-s | agenthost peak RSS MiB | SDK events / net CPU-s | ratio | with on_event_reuse: events / CPU-s | ratio |"
out "|---|---:|---:|---:|---:|---:|---:|"
net_ratio() { # agenthost-prefix wire -> median over runs of (node_i - node_start_i) / agenthost_i
    local i a n st
    for ((i = 1; i <= RUNS; i++)); do
        a=$(val "$2.$1.$i" cpu_s) n=$(val "$2.node.$i" cpu_s) st=$(val "start.node-$2.$i" cpu_s)
        if [ -n "$a" ] && [ -n "$n" ] && [ -n "$st" ]; then
            awk -v a="$a" -v n="$n" -v s="$st" 'BEGIN { if (a > 0) printf "%.6f\n", (n - s) / a }'
        fi
    done | med
}
for wire in "${WIRES[@]}"; do
    e=${EVENTS[$wire]}
    c=$(vals "$wire.count" cpu_s | med) r=$(vals "$wire.reuse" cpu_s | med)
    rss=$(vals "$wire.count" rss_kb | med)
    sdk='' ratio='' ratio_r=''
    if [ "$node_ok" = 1 ]; then
        n=$(vals "$wire.node" cpu_s | med) st=$(vals "start.node-$wire" cpu_s | med)
        [ -n "$n" ] && [ -n "$st" ] && sdk=$(calc "$e / ($n - $st)")
        ratio=$(net_ratio count "$wire") ratio_r=$(net_ratio reuse "$wire")
    fi
    out "| $wire | $(fmt %.0f "$([ -n "$c" ] && calc "$e / $c")") | $(fmt %.1f "$([ -n "$rss" ] && calc "$rss / 1024")") | $(fmt %.0f "$sdk") | $(fmt ×%.1f "$ratio") | $(fmt %.0f "$([ -n "$r" ] && calc "$e / $r")") | $(fmt ×%.1f "$ratio_r") |"
done
out ""
st_rss=$(vals start.stack rss_kb | med)
for m in anthropic.stack anthropic.count openai.stack responses.stack; do
    br=$(vals "big-$m" rss_kb | med)
    out "- 10 MB answer ($(val "big-$m.1" text_bytes) bytes, ${m%.*}, $([ "${m#*.}" = stack ] && echo "no hook" || echo "counting hook")): peak RSS $(fmt %.1f "$([ -n "$br" ] && calc "$br / 1024")") MiB, start-up $(fmt %.1f "$([ -n "$st_rss" ] && calc "$st_rss / 1024")") MiB: growth ×$(fmt %.2f "$([ -n "$br" ] && [ -n "$st_rss" ] && calc "($br - $st_rss) * 1024 / $BIG_BYTES")") of the answer."
done
out ""
# -- 7
out "## 7. Beyond one machine: Redis (docs/scale-out.md)"
out ""
out "Retry amplification (attempts / requests) under 50 % injected 5xx, max_attempts 5, budget max_tokens 10, token_ratio 0.1; in brackets the runs that completed (tests/bench/fleet_bench.sh):"
out ""
out "$("$BENCH/fleet_bench.sh" "$BUILD_DIR")"
out ""
out "The cost of a shared decision against the local one (tests/bench/redis_bench.c, one loop, unix socket):"
out ""
out "$("$BUILD_DIR/tests/bench/redis_bench")"
out ""
out "What the Redis ledger leaves behind and its longest script (tests/bench/ledger_growth_bench.c):"
out ""
out "$("$BUILD_DIR/tests/bench/ledger_growth_bench")"
out ""
out "## 8. A cut inside a single-block answer (docs/worker.md)"
out ""
out "Bytes asked for again and shown twice when a 2 KB one-block answer is cut at 90 %, default vs \`continue_partial_text = \"sentence\"\` (tests/bench/partial_text_bench.c, in-process mock):"
out ""
out '```'
out "$("$BUILD_DIR/tests/bench/partial_text_bench")"
out '```'
out ""
# -- 9
out "## 9. Every Lua runtime (docs/lua.md, Runtimes)"
out ""
out "Callgrind instructions per text delta of \`tests/bench/stack.lua\` run through \`tests/lua/host.lua\` by each interpreter, 20 000 deltas, anthropic (tests/bench/runtimes.sh). The C stack is the same on every runtime; the on_event hook costs what building its event table costs there (5.4 refills one table for a hook that provably keeps nothing; the other runtimes get a fresh table per event unless the agent sets on_event_reuse = true)."
out ""
out "$("$BENCH/runtimes.sh" "$BUILD_DIR" 20000)"
out ""
out "## 10. A short request beside plain libcurl (docs/performance.md)"
out ""
out "$("$BENCH/latency.sh" "$BUILD_DIR")"
# -- 11
out "## 11. Prompt caching: what a continuation costs (docs/performance.md)"
out ""
out "Billed-equivalent input tokens of the continuation of a cut last turn (cache read 0.1x, cache write 1.25x, the rest 1x) against an uncached resend of the same request, through the in-process mock's prompt cache (tests/bench/cache_bench.lua; mock tokens = bytes / 4)."
for shape in answers inputs even; do
    out ""
    out "$("$AH" "$BENCH/cache_bench.lua" 6 "$shape" 2>>"$LOG")"
done
out ""
# -- 12
out "## 12. What agenthost proxy adds, plain libcurl client (docs/performance.md, 11.1)"
out ""
out "$(RUNS=3 N=400 CONC_N=640 "$BENCH/proxy_latency.sh" "$BUILD_DIR" 2>>"$LOG")"
out ""
# -- 13
out "## 13. agenthost proxy at a fixed rate, open loop, as the published gateway figures are measured (docs/performance.md, 11.2)"
out ""
out "$(RATES="1000 2500 5000" RUNS=3 "$BENCH/proxy_rate.sh" "$BUILD_DIR" 2>>"$LOG")"
out ""
# -- 14
out "## 14. agenthost proxy by an independent gateway benchmark's method (docs/performance.md, 11.6)"
out ""
if command -v node >/dev/null 2>&1; then
    out "Five runs of \`node tests/bench/gateway_overhead.mjs\` (7 rounds of 25 sequential non-streaming Chat requests straight, through a socat byte relay when socat is installed, and through the proxy, after 15 of each; milliseconds):"
    out ""
    out '```'
    for _ in 1 2 3 4 5; do
        out "$(timeout 300 node "$BENCH/gateway_overhead.mjs" "$AH" 2>>"$LOG")"
    done
    out '```'
else
    out "skipped: no node"
fi
out ""
out "Raw data: \`$(basename "$BUILD_DIR")/bench-work/\` (per-run measurements in raw/, callgrind files in callgrind/). Bench time: $(($(date +%s) - started)) s."
