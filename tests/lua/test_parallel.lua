-- ah.parallel: 20 agents at once against one mock that injects faults; every run
-- completes, results come back in order, all in one thread over one loop.
local ah = require "agenthost"
local T = require "ahtest"

local plan = {}
local faults = { { status = 503 }, { status = 529 }, { cut_after_events = 4 },
                 { status = 429, headers = { ["retry-after-ms"] = 5 } }, { reset = true },
                 { status = 502 }, { error_event_after = 3 }, { ok = true } }
for i = 1, 24 do plan[i] = faults[(i - 1) % #faults + 1] end
local m <close> = ah.mock{ plan = plan }

local agents = {}
for i, p in ipairs(T.providers) do
  agents[i] = ah.agent{ client = ah.client{ provider = p, model = "m", base_url = m.url },
                        on_event = false, policy = T.fast{ max_attempts = 6 } }
end
local fns = {}
for i = 1, 20 do
  fns[i] = function()
    local agent = agents[(i - 1) % #agents + 1]
    return agent:run("question number " .. i)
  end
end
local results = ah.parallel(fns)
T.eq(results.n, 20, "results.n")
local faulted = 0
for i = 1, 20 do
  local r = results[i]
  T.eq(r.outcome, "completed", "run " .. i .. " outcome")
  T.contains(r.text, "question number " .. i .. '"', "run " .. i .. " answers its own question")
  faulted = faulted + r.stats.retries + r.stats.continuations
end
assert(faulted >= 10, "faults were injected and survived: " .. faulted)
assert(#m:requests() >= 30, "the mock saw the retries")
T.ok("20 concurrent runs through faults complete, results in order")

-- an error in one function is that slot's result; the others are unaffected
local r = ah.parallel{
  function() return "first" end,
  function() error("second failed") end,
  function() error(ah.permanent("third failed")) end,
  function() return nil end,
  function() ah.sleep(1); return "fifth" end,
}
T.eq(r[1], "first", "slot 1")
T.eq(r[2].ok, false, "slot 2 ok")
T.contains(r[2].error, "second failed", "slot 2 error")
T.contains(r[2].traceback, "stack traceback", "slot 2 traceback")
T.eq(r[3].error, "third failed", "slot 3 error value's message")
T.eq(r[4], nil, "slot 4 returned nothing")
T.eq(r[5], "fifth", "slot 5")
T.eq(r.n, 5, "n counts nil slots")
T.ok("a failing function fills its own slot with {ok=false, error=...}")

-- nested: parallel inside parallel, each running agents
local nested = ah.parallel{
  function() return ah.parallel{ function() return agents[1]:run("a").text end,
                                 function() return agents[2]:run("b").text end } end,
  function() return agents[3]:run("c").text end,
}
T.contains(nested[1][1], '"a"', "nested 1.1")
T.contains(nested[1][2], '"b"', "nested 1.2")
T.contains(nested[2], '"c"', "nested 2")
T.eq(#ah.parallel{}, 0, "empty parallel")
T.ok("nested ah.parallel")
