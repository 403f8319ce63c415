#!/usr/bin/env bash
# `agenthost batch.lua | head -1`: once the reader of a pipe on stdout has gone, the
# script ends as it ends lua (whose next write dies of SIGPIPE): no further LLM call is
# made, and the program dies of SIGPIPE (status 141), silently. It used to make every
# call of the batch (200 of 200) after head had gone.
#
# The script prints its first answer, then waits (up to 20 s, in the event loop) before
# the other 199: nothing here depends on how soon head goes, only on its going; the
# events file counts the LLM calls made.
set -u
bin=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cat >"$tmp/batch.lua" <<'LUA'
local ah = require "agenthost"
local m = ah.mock{}
local a = ah.agent{ client = ah.client{ provider = "anthropic", model = "m", base_url = m.url },
                    on_event = false }
io.stdout:setvbuf("line")
for i = 1, 200 do
  local r = a:run("question " .. i)
  print(i, r.outcome)
  if i == 1 then
    for _ = 1, 2000 do ah.sleep(10) end
  end
end
m:close()
LUA
"$bin" --events "$tmp/ev.jsonl" "$tmp/batch.lua" 2>"$tmp/err" | head -1 >"$tmp/out"
status=("${PIPESTATUS[@]}")
calls=$(grep -c '"type":"llm_call_start"' "$tmp/ev.jsonl")
fail=0
[ "$(cat "$tmp/out")" = "$(printf '1\tcompleted')" ] && echo "ok: head got the first answer" ||
    { echo "FAIL: head got '$(cat "$tmp/out")'"; fail=1; }
[ "$calls" -eq 1 ] && echo "ok: 1 LLM call of 200: none after the reader went away" ||
    { echo "FAIL: $calls LLM calls after head -1"; fail=1; }
[ "${status[0]}" -eq 141 ] && echo "ok: the program died of SIGPIPE (status 141), like lua" ||
    { echo "FAIL: exit status ${status[0]}, want 141"; fail=1; }
[ ! -s "$tmp/err" ] && echo "ok: nothing said on stderr" ||
    { echo "FAIL: stderr:"; cat "$tmp/err"; fail=1; }
exit $fail
