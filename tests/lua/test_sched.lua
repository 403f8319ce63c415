-- The scheduler: the main chunk is a coroutine of the host; waits yield to the loop, so
-- sleepers interleave; agent:run also works inside a coroutine the script made (it drives
-- the loop itself) and inside a pcall or a metamethod (it yields across them, except on
-- PUC Lua 5.1, where that is an error that says so).
local ah = require "agenthost"
local T = require "ahtest"

-- No order of two real timers is assumed (under valgrind on a busy machine the second
-- sleep may start after the first is due): "slow" keeps sleeping until "fast" has run,
-- which it can only do if each sleep yields to the other coroutines.
local order = {}
local fast_done = false
local r = ah.parallel{
  function()
    repeat ah.sleep(1) until fast_done
    order[#order + 1] = "slow"
  end,
  function() ah.sleep(5); order[#order + 1] = "fast"; fast_done = true end,
  function() order[#order + 1] = "now" end,
}
T.eq(table.concat(order, ","), "now,fast,slow", "sleepers interleave")
T.ok("ah.sleep yields to other coroutines")

local m = ah.mock{}
local agent = ah.agent{ client = ah.client{ provider = "openai", model = "m", base_url = m.url },
                        on_event = false }

-- inside a coroutine the script made: the run drives the loop itself
local co = coroutine.wrap(function(q) local x = agent:run(q); coroutine.yield(x.outcome); return "end" end)
T.eq(co("from a user coroutine"), "completed", "run inside coroutine.wrap")
T.eq(co(), "end", "the user's coroutine resumes normally")
T.ok("agent:run inside a user coroutine")

-- inside pcall and inside a metamethod: both yieldable on 5.2+ and LuaJIT; PUC Lua 5.1
-- cannot yield across either, and the wait says so (an error, never a hang or a crash)
local ok, res = pcall(function() return agent:run("in pcall") end)
local t = setmetatable({}, { __index = function(_, k) return agent:run(k).outcome end })
if T.yields_across_pcall then
  T.eq(ok and res.outcome, "completed", "run inside pcall")
  T.eq(t["in a metamethod"], "completed", "run inside __index")
  T.ok("agent:run inside pcall and a metamethod")
else
  T.eq(ok, false, "5.1: a wait inside pcall is an error")
  T.contains(res, "yield", "5.1: the error says why")
  local ok2, err2 = T.pcall(function() return t["in a metamethod"] end) -- not through pcall
  T.eq(ok2, false, "5.1: a wait inside __index is an error")
  T.contains(err2, "yield", "5.1: the error says why")
  T.eq(agent:run("after them").outcome, "completed", "5.1: the agent runs on")
  T.ok("5.1: agent:run inside pcall and a metamethod is an error that says so")
end

-- plain coroutine.yield in a managed coroutine lets the others run
local seen = {}
ah.parallel{
  function() for i = 1, 3 do seen[#seen + 1] = "a" .. i; coroutine.yield() end end,
  function() for i = 1, 3 do seen[#seen + 1] = "b" .. i; coroutine.yield() end end,
}
T.eq(table.concat(seen, ","), "a1,b1,a2,b2,a3,b3", "cooperative yields")
T.ok("coroutine.yield in a managed coroutine is a cooperative yield")

-- the script's arguments
T.eq(arg[0]:match("test_sched%.lua$") ~= nil, true, "arg[0] is the script")
T.eq(type(arg[-1]), "string", "arg[-1] is the interpreter")
T.ok("arg")
m:close()
