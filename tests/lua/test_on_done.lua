-- agent:start(input, { on_done = fn }) and ah.step(): a host that never blocks. on_done
-- gets the run's result (the same table run:wait() returns) once, at the next step after
-- the run ended, outside the loop: it may start another run, it may not wait (that is
-- an error, logged, and the host goes on). ah.step() returns the runs in flight, counting
-- a run until its on_done has run. Valid Lua 5.1 to 5.4.
local ah = require "agenthost"
local T = require "ahtest"

local m = ah.mock{ plan = { { status = 503 }, { cut_after_events = 4 } } }
local agent = ah.agent{
  client = ah.client{ provider = "anthropic", model = "m", base_url = m.url },
  on_event = false, policy = T.fast() }

local function step_until(cond, what)
  for _ = 1, 2000000 do
    if cond() then return end
    ah.step()
  end
  error("never happened: " .. what)
end

local got, order = {}, {}
local first
first = agent:start("first", { on_done = function(r)
  got[#got + 1] = r
  order[#order + 1] = "first"
  -- starting a run from on_done is allowed
  agent:start("second", { on_done = function(r2)
    got[#got + 1] = r2
    order[#order + 1] = "second"
  end })
end })
T.eq(type(first.id), "string", "agent:start returns the handle at once")
T.eq(#got, 0, "nothing delivered before a step")
T.eq(ah.step() >= 1, true, "ah.step counts the run in flight")
step_until(function() return #got == 2 end, "both on_done")
T.eq(table.concat(order, ","), "first,second", "in order")
T.eq(got[1].outcome, "completed", "first completed")
T.eq(got[1].stats.retries, 2, "through the 503 and the cut (it kept nothing: a retry)")
T.eq(got[2].outcome, "completed", "second completed")
T.contains(got[2].text, "second", "second's answer")
T.eq(first:wait(), got[1], "on_done got the table run:wait returns")
T.eq(ah.step(), 0, "nothing in flight once every on_done ran")
T.ok("on_done gets the result once, may start a run; ah.step counts runs in flight")

-- waiting inside on_done is refused (logged once), and the host goes on
local lines = {}
ah.log_handler(function(_, msg) lines[#lines + 1] = msg end)
local after = false
agent:start("third", { on_done = function()
  ah.sleep(1)
  after = true
end })
step_until(function() return ah.step() == 0 end, "third delivered")
ah.log_handler(nil)
T.eq(after, false, "the wait raised")
local said = table.concat(lines, "\n")
T.contains(said, "on_done (run_", "the log names the hook and the run")
T.contains(said, "cannot be called inside on_done", "and says why")
T.ok("a wait inside on_done is an error, logged; nothing hangs")

-- on_done must be a function
T.raises(function() agent:start("x", { on_done = 1 }) end, "on_done must be a function")
-- a run without on_done leaves the count once it ended
local r = agent:start("fourth")
r:wait()
T.eq(ah.step(), 0, "a plain run is not in flight after it ended")
T.ok("checks")
m:close()
