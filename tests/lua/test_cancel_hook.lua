-- A run cancelled from on_event at a tool call's tool_call_start: the call does not run
-- (no body starts once a cancel is asked for), the run ends cancelled - also when the
-- cancel's wake-up is the only work left, which the scheduler once took for a deadlock -
-- and history answers the call as never started, so the next turn is accepted. Found by
-- the Lua soak (tests/soak/soak.lua). Valid Lua 5.1 and 5.4.
local ah = require "agenthost"
local T = require "ahtest"

local WAITING = "error: the tool call was cancelled before it started; it did not run"

local m = ah.mock{}
for _, provider in ipairs(T.providers) do
  for _, concurrency in ipairs{ 1, 8 } do
    local what = provider .. ", max_tool_concurrency " .. concurrency
    m:set_plan{ { ok = true, tool_calls = 2 } }
    local client = ah.client{ provider = provider, model = "m", base_url = m.url }
    local bodies, run = 0, nil
    local agent = ah.agent{
      client = client, policy = T.fast(), max_tool_concurrency = concurrency,
      on_event = function(ev)
        if ev.type == "tool_call_start" then run:cancel("from the hook") end
      end,
      tools = { slow = { description = "slow", schema = { type = "object" },
        run = function() bodies = bodies + 1 return "ran" end } },
    }
    run = agent:start("use slow")
    local r = run:wait()
    T.eq(r.outcome, "cancelled", what .. ": cancelled")
    T.eq(r.error.message, "cancelled: from the hook", what .. ": with the reason")
    T.eq(bodies, 0, what .. ": no body ran")
    local results = r.history[3] and r.history[3].content or {}
    T.eq(#results, 2, what .. ": both calls answered")
    T.eq(results[1].content, WAITING, what .. ": the first as never started")
    T.eq(results[2].content, WAITING, what .. ": the second too")
    local plain = ah.agent{ client = client, policy = T.fast(), on_event = false }
    T.eq(plain:run("and now?", { history = r.history }).outcome, "completed",
         what .. ": the next turn is accepted")
  end
end
T.ok("a cancel from tool_call_start keeps the call from running and the run ends")
m:close()
