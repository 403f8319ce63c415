#!/usr/bin/env bash
# tests/bench/large_answer.sh BUILD_DIR [BYTES] - peak RSS of one agent run whose answer is
# BYTES (default 10 MB) of text, per wire format, minus the same script stopped before
# the run (the baseline). The mock runs in its own process, so only the client counts.
set -euo pipefail
B=$(cd "${1:?usage: large_answer.sh BUILD_DIR [BYTES]}" && pwd)
N=${2:-10000000}
W=$(mktemp -d)
trap 'kill "$MP" 2>/dev/null || true; rm -rf "$W"' EXIT
python3 -c "import json,sys; json.dump({'steps':[],'then':{'ok':True,'text':'abcdefghi '*($N//10),'delta_bytes':4096}}, open(sys.argv[1],'w'))" "$W/plan.json"
cat > "$W/run.lua" <<'LUA'
local ah = require "agenthost"
local client = ah.client{ provider = arg[2], model = "m", base_url = arg[1] }
local agent = ah.agent{ client = client, on_event = false }
if arg[3] == "base" then os.exit(0) end
local r = agent:run("hi")
assert(r.outcome == "completed" and #r.text == tonumber(arg[4]), r.error and r.error.message)
LUA
"$B/agenthost" mock --plan "$W/plan.json" > "$W/url" & MP=$!
for _ in $(seq 50); do [ -s "$W/url" ] && break; sleep 0.1; done
URL=$(head -n1 "$W/url")
rss() { /usr/bin/time -f %M "$B/agenthost" "$W/run.lua" "$URL" "$1" "$2" "$N" 2>&1 >/dev/null | tail -n1; }
echo "| format | answer | peak RSS above baseline | ratio |"
echo "|---|---|---|---|"
for f in anthropic openai responses; do
    base=$(rss "$f" base); run=$(rss "$f" run)
    awk -v f="$f" -v n="$N" -v b="$base" -v r="$run" \
        'BEGIN { d = (r - b) * 1024; printf "| %s | %.1f MB | %.1f MB | %.2fx |\n", f, n / 1e6, d / 1e6, d / n }'
done
