#!/usr/bin/env bash
# Events of tool calls and batches made outside an agent reach the host's sink
# (agenthost --events FILE) as JSON Lines with the docs/lua.md fields.
set -u
bin=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cat >"$tmp/script.lua" <<'LUA'
local ah = require "agenthost"
local t = ah.tool { name = "charge", policy = { max_attempts = 2, base_ms = 0 },
  run = function(_, ctx) if ctx.attempt == 1 then error(ah.transient("blip")) end return 1 end }
local ledger = ah.ledger {}
t:call({}, { key = "A-1", ledger = ledger })
t:call({}, { key = "A-1", ledger = ledger })
t:call({}, { key = "A-2", budget = 0 })
ah.batch({ 1 }, function() end, { budget = 0 })
LUA
"$bin" --events "$tmp/events.jsonl" "$tmp/script.lua" || { echo "FAIL: script exited $?"; exit 1; }
want='{"type":"tool_retry","id":"A-1","name":"charge","failed_attempt":1,"max_attempts":2,"wait_ms":0,"error":{"kind":"transient","status":null,"message":"blip","provider_type":null,"retry_after_ms":null}}
{"type":"tool_call_end","id":"A-1","name":"charge","outcome":"ok","duplicate":false,"attempts":2,"server":null}
{"type":"tool_call_end","id":"A-1","name":"charge","outcome":"ok","duplicate":true,"attempts":0,"server":null}
{"type":"budget_exhausted","budget":"tool_calls","used":0,"limit":0}
{"type":"tool_call_end","id":"A-2","name":"charge","outcome":"budget_exhausted","duplicate":false,"attempts":0,"server":null}
{"type":"budget_exhausted","budget":"batch","used":0,"limit":0}'
# every event carries run_id (null: no run) and ts_ms (wall ms) right after its type
if grep -vq '^{"type":"[a-z_]*","run_id":null,"ts_ms":[0-9]\{13\},' "$tmp/events.jsonl"; then
    echo "FAIL: an event lacks run_id/ts_ms"; cat "$tmp/events.jsonl"; exit 1
fi
got=$(sed 's/,"run_id":null,"ts_ms":[0-9]*//' "$tmp/events.jsonl")
if [ "$got" != "$want" ]; then
    echo "FAIL: events"; echo "got:"; echo "$got"; echo "want:"; echo "$want"; exit 1
fi
echo "ok: 5 events"
