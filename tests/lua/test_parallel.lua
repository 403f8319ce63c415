-- ah.parallel: 50 agents at once against one mock that injects faults; every run
-- completes, results come back in order, all in one thread over one loop.
local ah = require "agenthost"
local T = require "ahtest"

local plan = {}
local faults = { { status = 503 }, { status = 529 }, { cut_after_events = 4 },
                 { status = 429, headers = { ["retry-after-ms"] = 5 } }, { reset = true },
                 { status = 502 }, { error_event_after = 3 }, { ok = true } }
for i = 1, 60 do plan[i] = faults[(i - 1) % #faults + 1] end
local m = ah.mock{ plan = plan }

local agents = {}
-- The steps go to requests in the order they reach the mock, which no test controls: a run
-- whose retries come back before the other runs' first requests arrive (a loaded machine
-- starting 50 runs) takes step after step. So the limits let one run meet every fault of
-- the plan: max_attempts above its 60 steps (a cut that keeps nothing or an in-stream
-- error counts an attempt like a 503 does), max_continuations above its 8 cuts.
for i, p in ipairs(T.providers) do
  agents[i] = ah.agent{ client = ah.client{ provider = p, model = "m", base_url = m.url },
                        on_event = false,
                        policy = T.fast{ max_attempts = 64, max_continuations = 8 } }
end
local fns = {}
local N = 50
for i = 1, N do
  fns[i] = function()
    local agent = agents[(i - 1) % #agents + 1]
    return agent:run("question number " .. i)
  end
end
local results = ah.parallel(fns)
T.eq(results.n, N, "results.n")
local faulted, attempts = 0, 0
for i = 1, N do
  local r = results[i]
  local s = r.stats
  T.eq(r.outcome, "completed", "run " .. i .. " outcome (" ..
       tostring(r.error and r.error.message) .. ")")
  T.contains(r.text, "question number " .. i .. '"', "run " .. i .. " answers its own question")
  -- per-agent stats are that run's own: one model turn; every attempt is the turn's
  -- request, a continuation's, or a retry (a continuation that kept nothing or that the
  -- provider's error caused is both: its request counts once)
  T.eq(s.llm_calls, 1, "run " .. i .. " llm_calls (model turns)")
  assert(s.attempts >= s.llm_calls + s.continuations and
         s.attempts <= s.llm_calls + s.continuations + s.retries,
         "run " .. i .. " attempts between turns + continuations and that + retries")
  faulted = faulted + s.retries + s.continuations
  attempts = attempts + s.attempts
end
assert(faulted >= 40, "faults were injected and survived: " .. faulted)
-- no request is counted twice or by the wrong run: the mock saw exactly the sum
T.eq(#m:requests(), attempts, "mock requests = sum of every run's attempts")
T.ok(N .. " concurrent runs through faults complete, results in order, stats per run")

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
m:close()
