#!/usr/bin/env bash
# tests/bench/mcp_bench.sh BUILD_DIR - MCP tool calls (docs/mcp.md, docs/performance.md
# section 12). Numbers, never assertions.
#   1. Calls per second and client CPU per call, sequential calls of one tool over stdio
#      and over streamable HTTP to the same server (tests/mcp/fault_server.mjs, the
#      official SDK 1.32.2, its `lookup` tool without a fault): agenthost (server:call,
#      tests/bench/mcp_calls.lua) against the official TypeScript client
#      (Client.callTool, tests/bench/mcp_sdk_calls.mjs), back to back in one run, RUNS
#      times; medians. Each client measures itself over CALLS calls after 50 warm-up
#      calls: wall time, and its own process's CPU (user + system; the server's is not
#      counted).
#   2. Effects per key over the fault matrix: agenthost (tests/bench/mcp_faults.lua)
#      against a typical host loop on the official client (tests/bench/mcp_host_loop.mjs:
#      retry any error 3 times, reconnect when the transport closed), the same cases on
#      the same fault servers, effects counted from the server's effect file. Both use
#      TIMEOUT_MS per request (the SDK's default is 60000).
#      Also with CONC (16) calls in flight at once (ah.parallel / Promise.all).
# Environment: RUNS (5), CALLS (2000), CONC (16), TIMEOUT_MS (3000). Needs node and npm (the servers
# and the SDK are installed by tests/mcp/install.sh into BUILD_DIR/mcp-deps).
set -euo pipefail
BUILD_DIR=$(cd "${1:?usage: tests/bench/mcp_bench.sh BUILD_DIR}" && pwd)
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
RUNS=${RUNS:-5}
CALLS=${CALLS:-2000}
CONC=${CONC:-16}
TIMEOUT_MS=${TIMEOUT_MS:-3000}
AH=$BUILD_DIR/agenthost
[ -x "$AH" ] || { echo "mcp_bench.sh: $AH not built" >&2; exit 1; }
MODULES=$(bash "$ROOT/tests/mcp/install.sh" "$BUILD_DIR/mcp-deps" | tail -1)
WORK=$(mktemp -d)
PIDS=()
cleanup() {
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
    rm -rf "$WORK"
}
trap cleanup EXIT
# node resolves the scripts' imports through a node_modules link beside them
ln -s "$MODULES" "$WORK/node_modules"
cp "$ROOT/tests/mcp/fault_server.mjs" "$ROOT/tests/bench/mcp_sdk_calls.mjs" \
    "$ROOT/tests/bench/mcp_host_loop.mjs" "$WORK/"
mkdir -p "$WORK/state"
: >"$WORK/effects"
export COUNT_FILE=$WORK/effects STATE_DIR=$WORK/state
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
start_http() { # EVENTS -> URL
    local port
    port=$(free_port)
    EVENTS=$1 node --import "$ROOT/tests/mcp/loopback.mjs" "$WORK/fault_server.mjs" http "$port" \
        >>"$WORK/server.log" 2>&1 &
    PIDS+=($!)
    for _ in $(seq 200); do (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break; sleep 0.05; done
    URL="http://127.0.0.1:$port/mcp"
}
start_http 1
EVENTS_URL=$URL
start_http 0
PLAIN_URL=$URL
STDIO_CMD="node $WORK/fault_server.mjs stdio"
field() { sed -n "s/.*$1=\([0-9.]*\).*/\1/p"; }
med() { sort -n | awk '{ v[NR] = $1 } END { if (NR) print (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2) }'; }
ver() { sed -n 's/^[[:space:]]*"version":[[:space:]]*"\([^"]*\)".*/\1/p' "$MODULES/$1/package.json" | head -n1; }

echo "## MCP tool calls ($(date -u +%Y-%m-%d), $(nproc) cores, node $(node --version), @modelcontextprotocol/sdk $(ver @modelcontextprotocol/sdk))"
echo
echo "Calls of one tool, $CALLS measured after 50 warm-up calls, one at a time and $CONC at once, median of $RUNS runs; CPU is the client process's own (user + system)."
echo
echo "| transport | in flight | client | calls/s | CPU µs per call | runs |"
echo "|---|---|---|---|---|---|"
for t in stdio http; do
  for conc in 1 "$CONC"; do
    target=$STDIO_CMD
    [ "$t" = http ] && target=$EVENTS_URL
    : >"$WORK/ah.$t.$conc" ; : >"$WORK/sdk.$t.$conc"
    for _ in $(seq "$RUNS"); do
        "$AH" "$ROOT/tests/bench/mcp_calls.lua" "$t" "$target" "$CALLS" "$conc" >>"$WORK/ah.$t.$conc" 2>>"$WORK/client.log" || true
        (cd "$WORK" && node mcp_sdk_calls.mjs "$t" "$target" "$CALLS" "$conc") >>"$WORK/sdk.$t.$conc" 2>>"$WORK/client.log" || true
    done
    for c in ah sdk; do
        f=$WORK/$c.$t.$conc
        n=$(grep -c calls= "$f" || true)
        rate=$(awk '{ for (i = 1; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] } print v["calls"] * 1000 / v["wall_ms"] }' "$f" | med)
        cpu=$(awk '{ for (i = 1; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] } print v["cpu_ms"] * 1000 / v["calls"] }' "$f" | med)
        name=agenthost
        [ "$c" = sdk ] && name="official client (Client.callTool)"
        printf '| %s | %s | %s | %.0f | %.0f | %d |\n' "$t" "$conc" "$name" "${rate:-0}" "${cpu:-0}" "$n"
    done
  done
done
echo

"$AH" "$ROOT/tests/bench/mcp_faults.lua" "$STDIO_CMD" "$EVENTS_URL" "$PLAIN_URL" "$TIMEOUT_MS" ah \
    >"$WORK/faults.ah" 2>>"$WORK/client.log" || true
(cd "$WORK" && node mcp_host_loop.mjs "$STDIO_CMD" "$EVENTS_URL" "$PLAIN_URL" "$TIMEOUT_MS" node) \
    >"$WORK/faults.node" 2>>"$WORK/client.log" || true
effects() { grep -cx "$1" "$COUNT_FILE" || true; }
echo "Fault matrix: each case on a fresh connection, the fault once per key, timeout $TIMEOUT_MS ms per request, 4 attempts at most. \`charge\` is not safe to repeat; \`lookup\` is read-only on a server agenthost is told to trust. effects: how many times the tool's effect ran for that key; then: a plain call on the same connection works afterwards."
echo
echo "| case | agenthost: outcome, attempts, effects, ms, then | host loop on the official client: outcome, attempts, effects, ms, then |"
echo "|---|---|---|"
paste -d'\n' "$WORK/faults.ah" "$WORK/faults.node" | awk 'NR % 2 { a = $0; next } { print a "\t" $0 }' |
while IFS=$'\t' read -r a n; do
    c=$(echo "$a" | sed 's/case=\([^ ]*\).*/\1/')
    tool=$(echo "$c" | cut -d/ -f2)
    row=""
    for l in "$a" "$n"; do
        key=$(echo "$l" | sed 's/.*key=\([^ ]*\).*/\1/')
        o=$(echo "$l" | sed 's/.*outcome=\([^ ]*\).*/\1/')
        row="$row | $o, $(echo "$l" | field attempts), $(effects "$tool $key"), $(echo "$l" | field ms), $(echo "$l" | field then)"
    done
    echo "| $c$row |"
done
echo
summary() { # file prefix
    awk -v tool=charge '$1 ~ "/" tool "/" { print }' "$1" | while read -r l; do
        key=$(echo "$l" | sed 's/.*key=\([^ ]*\).*/\1/')
        o=$(echo "$l" | sed 's/.*outcome=\([^ ]*\).*/\1/')
        echo "$(effects "charge $key") $o $(echo "$l" | field then)"
    done | awk '{ n++; if ($1 > 1) { twice++; if ($2 == "ok") twiceok++ } if ($2 == "outcome_unknown") unk++; if ($3 == 0) lost++ }
        END { printf "%d cases of charge: applied twice in %d (%d of them reported ok), outcome_unknown reported in %d, the tool lost afterwards in %d", n, twice, twiceok, unk, lost }'
}
echo "- agenthost: $(summary "$WORK/faults.ah")"
echo "- host loop on the official client: $(summary "$WORK/faults.node")"
