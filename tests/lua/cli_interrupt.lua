-- Driven by tests/cli/test_interrupt.sh and tests/bench/cancel_latency.sh: runs that wait
-- somewhere (MODE: stream = a stalled stream, backoff = a 30 s Retry-After, tool = a tool
-- sleeping 30 s, idle = no run at all, read = blocked reading stdin), touching READY once
-- the wait has begun, so the harness knows when to send SIGINT. ROUNDS runs one after the
-- other (each waits the same way); after them the script prints what it got and exits 0.
local ah = require "agenthost"
local mode, ready, rounds = arg[1], arg[2], tonumber(arg[3] or "1")

local function touch(n)
  local f = assert(io.open(ready .. "." .. n, "w"))
  f:close()
end

if mode == "idle" then
  touch(1)
  ah.sleep(30000)
  print("slept")
  return
elseif mode == "read" then
  touch(1)
  print("read", io.read("*l"))
  return
end

local steps = {}
for i = 1, rounds do
  steps[i] = mode == "stream" and { stall_after_events = 5 }
          or mode == "backoff" and { status = 503, headers = { ["retry-after"] = "30" } }
          or { ok = true }
end
local m = ah.mock{ plan = steps, text_deltas = 8 }
local client = ah.client{ provider = "anthropic", model = "m", base_url = m.url }
local round = 0
local tools = mode == "tool" and {
  slow = { description = "slow", schema = { type = "object" },
           run = function() touch(round); ah.sleep(30000); return "late" end } } or nil
local agent = ah.agent{
  client = client, tools = tools,
  policy = { idle_timeout_ms = 60000, max_retry_after_ms = 60000, base_ms = 1 },
  on_event = function(ev)
    if (mode == "stream" and ev.type == "text_delta") or
       (mode == "backoff" and ev.type == "llm_retry") then
      touch(round)
    end
  end,
}
for i = 1, rounds do
  round = i
  local r = agent:run("wait for me")
  print(i, r.outcome, r.error and r.error.message or "")
end
print("the script goes on", #m:requests())
m:close()
