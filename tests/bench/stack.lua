-- stack.lua - one streamed answer through the whole stack, for tests/bench/run.sh:
--   agenthost tests/bench/stack.lua WIRE BASE_URL [none|hook|startup]
-- Lua agent -> worker -> provider decoder -> SSE parser -> libcurl, against a mock in
-- another process. `none`: on_event = false (no Lua per event); `hook`: an on_event that
-- does nothing (the per-event cost of building the event table and the protected call);
-- `count`: an on_event that counts text_delta events (the measured agent of the goal);
-- `reuse`: the same with on_event_reuse = true (one delta table per run, refilled);
-- `hookreuse`: the empty hook with on_event_reuse = true;
-- `keep`: a hook that keeps the last event (it gets a fresh table per event);
-- `coalesce`: the counting hook with on_event_coalesce = 50 (deltas merged for a display:
--   fewer, larger events; not the measured default path);
-- `startup`: build the client and agent, send nothing (the process's fixed cost).
-- Prints "stack text_bytes=N attempts=A"; exits 1 unless the run completed in one
-- attempt, so a benchmark never reports the speed of a failure.
local ah = require "agenthost"
local wire, url, mode = arg[1], arg[2], arg[3] or "none"
assert(wire and url,
       "usage: stack.lua WIRE BASE_URL [none|hook|count|reuse|hookreuse|keep|coalesce|startup]")

local on_event, deltas = false, 0
if mode == "hook" or mode == "hookreuse" then on_event = function(ev) end end
local last
if mode == "keep" then on_event = function(ev) last = ev end end
if mode == "count" or mode == "reuse" or mode == "coalesce" then
  on_event = function(ev) if ev.type == "text_delta" then deltas = deltas + 1 end end
end
local agent = ah.agent{
  client = ah.client{ provider = wire, model = "mock-bench", base_url = url,
                      max_tokens = 64000 },
  on_event = on_event,
  on_event_reuse = (mode == "reuse" or mode == "hookreuse") or nil,
  on_event_coalesce = mode == "coalesce" and 50 or nil,
}
if mode == "startup" then
  print("stack startup")
  return
end
local r = agent:run("stream a long answer")
if r.outcome ~= "completed" or r.stats.attempts ~= 1 then
  io.stderr:write(string.format("stack.lua: %s run ended %s after %d attempts: %s\n",
    wire, r.outcome, r.stats.attempts, r.error and tostring(r.error.message) or ""))
  os.exit(1)
end
print(string.format("stack text_bytes=%d attempts=%d deltas=%d", #r.text, r.stats.attempts,
                    deltas))
