#!/usr/bin/env bash
# tests/bench/runtimes.sh BUILD_DIR [DELTAS] - what one text delta costs on each Lua
# runtime the module was built for (5.1, 5.2, 5.3, 5.4, LuaJIT), beside 5.4: callgrind
# instructions of tests/bench/stack.lua through tests/lua/host.lua against one mock
# reply of DELTAS deltas, `none` (no Lua per event: the C stack), `count` (an on_event
# that counts text_delta) and `startup` (the fixed cost). Per event = (mode - startup) /
# DELTAS; the hook = count - none. Instructions, not seconds: the same on a busy machine.
# Prints a markdown table; numbers, never assertions.
set -euo pipefail
B=$(cd "${1:?usage: runtimes.sh BUILD_DIR [DELTAS]}" && pwd)
DELTAS=${2:-20000}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
W=$(mktemp -d)
trap 'kill $mock 2>/dev/null; rm -rf "$W"' EXIT
awk -v n="$DELTAS" 'BEGIN {
    split("the and for are but not you all any can her was one our out day get has him his how man new now old see two way who did its let put say she too use", w, " ");
    printf "{\"steps\": [], \"then\": {\"ok\": true, \"text\": \"";
    for (i = 0; i < n; i++) printf "%s%s", (i ? " " : ""), w[i % 40 + 1];
    printf "\"}}\n" }' >"$W/plan.json"
"$B/agenthost" mock --port 0 --text-deltas "$DELTAS" --plan "$W/plan.json" >"$W/url" 2>/dev/null &
mock=$!
for _ in $(seq 100); do [ -s "$W/url" ] && break; sleep 0.05; done
url=$(head -n1 "$W/url")
instr() { # interpreter module-dir mode
    LUA_CPATH="$2/?.so;;" LUA_PATH="$B/lua/?.lua;$ROOT/tests/lua/?.lua;;" \
        valgrind --tool=callgrind --callgrind-out-file="$W/cg" "$1" "$ROOT/tests/lua/host.lua" \
        "$ROOT/tests/bench/stack.lua" anthropic "$url" "$3" 2>&1 >/dev/null |
        sed -n 's/.*Collected : \([0-9]*\).*/\1/p'
}
echo "| runtime | instructions/event, C stack (no hook) | instructions/event, counting on_event | the hook alone | hook × 5.4 |"
echo "|---|---|---|---|---|"
base=
for rt in lua5.4:"$B" lua5.1:"$B/lua-5.1" luajit:"$B/lua-5.1" lua5.2:"$B/lua-5.2" lua5.3:"$B/lua-5.3"; do
    interp=${rt%%:*} dir=${rt#*:}
    command -v "$interp" >/dev/null && [ -f "$dir/agenthost.so" ] || continue
    s=$(instr "$interp" "$dir" startup) n=$(instr "$interp" "$dir" none) c=$(instr "$interp" "$dir" count)
    [ -n "$s" ] && [ -n "$n" ] && [ -n "$c" ] || { echo "| $interp | (failed) | | | |"; continue; }
    hook=$(((c - n) / DELTAS))
    [ -z "$base" ] && base=$hook
    echo "| $interp | $(((n - s) / DELTAS)) | $(((c - s) / DELTAS)) | $hook | ×$(awk -v h="$hook" -v b="$base" 'BEGIN { printf "%.2f", h / b }') |"
done
