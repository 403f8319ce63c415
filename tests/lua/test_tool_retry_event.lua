-- tool_retry reaches Lua: a tool's transient failure that is retried is an event (id,
-- name, failed_attempt, max_attempts, wait_ms, error) to the call's on_event and, for an
-- agent's tool, to the agent's on_event; policy.continue_partial_text takes false and
-- the two modes from Lua. Valid Lua 5.1 to 5.4.
local ah = require "agenthost"
local T = require "ahtest"

local tries = 0
local flaky = ah.tool{ name = "flaky", policy = { max_attempts = 3, base_ms = 1, cap_ms = 2 },
  run = function()
    tries = tries + 1
    if tries < 3 then error(ah.transient("busy " .. tries)) end
    return "ok"
  end }
local seen = {}
local r = flaky:call({}, { key = "k1", on_event = function(ev) seen[#seen + 1] = ev end })
T.eq(r.ok, true, "the third attempt succeeds")
local retries = {}
for _, ev in ipairs(seen) do if ev.type == "tool_retry" then retries[#retries + 1] = ev end end
T.eq(#retries, 2, "two tool_retry events")
T.eq(retries[1].name, "flaky", "name")
T.eq(retries[1].failed_attempt, 1, "failed_attempt")
T.eq(retries[2].failed_attempt, 2, "the second")
T.eq(retries[1].max_attempts, 3, "max_attempts")
T.eq(type(retries[1].wait_ms), "number", "wait_ms")
T.contains(tostring(retries[1].error.message), "busy 1", "the error")
T.ok("a bare tool:call's retries are tool_retry events")

local m = ah.mock{}
local n = 0
local events = {}
local agent = ah.agent{
  client = ah.client{ provider = "anthropic", model = "m", base_url = m.url },
  on_event = function(ev) events[#events + 1] = ev end,
  tools = { add = { description = "add", schema = { type = "object" },
    policy = { max_attempts = 2, base_ms = 1, cap_ms = 2 },
    run = function()
      n = n + 1
      if n == 1 then error(ah.transient("not yet")) end
      return "2"
    end } } }
local res = agent:run("add")
T.eq(res.outcome, "completed", "the run completes")
local tr
for _, ev in ipairs(events) do if ev.type == "tool_retry" then tr = ev end end
T.eq(tr ~= nil, true, "the agent's on_event got tool_retry")
T.eq(tr.name, "add", "for its tool")
T.eq(tr.run_id, res.run_id, "with the run's id")
T.ok("an agent's tool retries reach its on_event")

for _, v in ipairs({ false, "sentence", "line" }) do
  local a = ah.agent{ client = ah.client{ provider = "anthropic", model = "m", base_url = m.url },
                      on_event = false, policy = { continue_partial_text = v } }
  T.eq(a:run("hi").outcome, "completed", "continue_partial_text = " .. tostring(v))
end
T.raises(function() ah.agent{ client = ah.client{ provider = "anthropic", model = "m",
  base_url = m.url }, policy = { continue_partial_text = true } } end,
  "continue_partial_text", "true is refused, naming the field")
T.ok("continue_partial_text takes false, sentence and line")
m:close()
