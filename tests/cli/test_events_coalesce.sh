#!/usr/bin/env bash
# With on_event_coalesce the hook gets merged deltas while `agenthost --events FILE`
# still writes every delta as its own JSON line, with the same text in the end.
set -u
bin=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cat >"$tmp/script.lua" <<'LUA'
local ah = require "agenthost"
local m <close> = ah.mock{ text_deltas = 10 }
local n, texts = 0, {}
local a = ah.agent{ client = ah.client{ provider = "anthropic", model = "m", base_url = m.url },
                    on_event_coalesce = 60000,
                    on_event = function(ev)
                      if ev.type == "text_delta" then n = n + 1; texts[n] = ev.text end
                    end }
local r = a:run("hello there")
assert(r.outcome == "completed", tostring(r.error and r.error.message))
assert(n == 1, "the hook got " .. n .. " deltas, not one merged delta")
assert(table.concat(texts) == r.text, "the merged delta is the answer")
io.open(arg[1], "w"):write(r.text):close()
LUA
"$bin" --events "$tmp/events.jsonl" "$tmp/script.lua" "$tmp/answer.txt" ||
    { echo "FAIL: script exited $?"; exit 1; }
python3 - "$tmp/events.jsonl" "$tmp/answer.txt" <<'PY' || exit 1
import json, sys
evs = [json.loads(l) for l in open(sys.argv[1], encoding="utf-8")]
deltas = [e["text"] for e in evs if e["type"] == "text_delta"]
answer = open(sys.argv[2], encoding="utf-8").read()
if len(deltas) < 10:
    print("FAIL: the events file has %d text_delta lines, want every delta" % len(deltas)); sys.exit(1)
if "".join(deltas) != answer:
    print("FAIL: the events file's deltas are not the answer"); sys.exit(1)
print("ok: the hook got one merged delta, the events file %d deltas" % len(deltas))
PY
