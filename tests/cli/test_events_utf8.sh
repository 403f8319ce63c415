#!/usr/bin/env bash
# agenthost --events FILE stays valid JSON Lines in valid UTF-8 when the provider sends
# bytes that are not UTF-8 (the mock's invalid_utf8 step: the reply starts with FF FE),
# for every wire format: the bytes arrive as U+FFFD. They used to be written raw.
set -u
bin=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cat >"$tmp/script.lua" <<'LUA'
local ah = require "agenthost"
local step = { ok = true, invalid_utf8 = true }
local m <close> = ah.mock{ plan = { step, step, step } }
for _, p in ipairs{ "anthropic", "openai", "responses" } do
  local a = ah.agent{ client = ah.client{ provider = p, model = "m", base_url = m.url },
                      on_event = false }
  local r = a:run("hello there")
  assert(r.outcome == "completed", p .. ": " .. tostring(r.error and r.error.message))
  assert(utf8.len(r.text), p .. ": the text is not valid UTF-8")
end
LUA
"$bin" --events "$tmp/events.jsonl" "$tmp/script.lua" || { echo "FAIL: script exited $?"; exit 1; }
python3 - "$tmp/events.jsonl" <<'PY' || exit 1
import json, sys
raw = open(sys.argv[1], "rb").read()
lines = raw.split(b"\n")[:-1]
bad = 0
for i, l in enumerate(lines, 1):
    try:
        json.loads(l.decode("utf-8"))
    except Exception as e:
        bad += 1
        print("FAIL: line %d: %s: %r" % (i, e, l[:80]))
if bad or not lines:
    sys.exit(1)
if "\ufffd".encode() not in raw:
    print("FAIL: no U+FFFD in the events"); sys.exit(1)
print("ok: %d event lines, all valid UTF-8 JSON" % len(lines))
PY
