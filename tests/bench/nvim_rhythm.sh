#!/usr/bin/env bash
# tests/bench/nvim_rhythm.sh BUILD_DIR - the editor's rhythm while 4 agents stream with
# faults, agenthost attached vs a `curl -sN` job per request (tests/bench/nvim_rhythm.lua
# says what is measured; docs/performance.md has the numbers). A benchmark: numbers,
# never pass/fail. Needs nvim, curl and the 5.1-ABI module (BUILD_DIR/lua-5.1).
# Needs python3 (tests/bench/pace_proxy.py paces the streams).
# Environment: RUNS (5), BURST_DELTAS (2000), PACED_DELTAS (400), RATE (16384 bytes/s per
# stream), IDLE_MS (2000).
set -euo pipefail
BUILD_DIR=$(cd "${1:?usage: tests/bench/nvim_rhythm.sh BUILD_DIR}" && pwd)
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
for f in "$BUILD_DIR/agenthost" "$BUILD_DIR/lua-5.1/agenthost.so" "$BUILD_DIR/lua/agenthost/nvim.lua"; do
    [ -e "$f" ] || { echo "nvim_rhythm.sh: $f not built" >&2; exit 1; }
done
for tool in nvim curl python3; do
    command -v "$tool" >/dev/null || { echo "nvim_rhythm.sh: $tool not found" >&2; exit 1; }
done
nvim --version | head -n1
uptime
AH_BUILD_DIR=$BUILD_DIR PROXY=$ROOT/tests/bench/pace_proxy.py timeout 1800 nvim --headless -u NONE -i NONE \
    -c "luafile $ROOT/tests/bench/nvim_rhythm.lua"
