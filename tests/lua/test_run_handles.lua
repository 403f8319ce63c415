-- Run handles: agent:start -> run.id, run:wait(), run:cancel([reason]); agent:run is
-- start + wait. A cancel ends the run at once wherever it is (a stalled stream, a backoff
-- wait, a continuation, a tool that is waiting): outcome cancelled, one run_end, and no
-- further request to the provider.
local ah = require "agenthost"
local T = require "ahtest"

local m = ah.mock{ text_deltas = 6 }
local client = ah.client{ provider = "anthropic", model = "m", base_url = m.url }

local function agent_with(events, extra)
  local spec = { client = client, policy = T.fast{ idle_timeout_ms = 60000,
                                                    max_retry_after_ms = 60000 },
                 on_event = function(ev)
                   events[#events + 1] = ev
                   if events.on then events.on(ev) end
                 end }
  for k, v in pairs(extra or {}) do spec[k] = v end
  return ah.agent(spec)
end

local function count(events, type)
  local n = 0
  for _, ev in ipairs(events) do if ev.type == type then n = n + 1 end end
  return n
end

-- ---- start / wait -------------------------------------------------------------------
do
  m:set_plan(nil)
  local events = {}
  local agent = agent_with(events)
  local run = agent:start("hello")
  T.eq(type(run.id), "string", "run.id")
  T.contains(tostring(run), "agenthost.run", "tostring")
  local r = run:wait()
  T.eq(r.outcome, "completed", "outcome")
  T.eq(r.run_id, run.id, "run.id is the result's run_id")
  T.eq(events[1].run_id, run.id, "and the events'")
  T.eq(run:wait(), r, "a second wait returns the same result")
  T.eq(run:cancel(), false, "cancelling an ended run does nothing")
  T.eq(run.id, r.run_id, "run.id after the end")
  T.ok("agent:start returns a handle; run:wait gives the result (once built, always the same)")
end

-- ---- cancel in each place a run can be ------------------------------------------------
local cancel_now -- the running case's cancel, for a tool body to call
local function cancel_case(name, plan, when, extra)
  m:set_plan(plan)
  local before = #m:requests()
  local events = {}
  local agent = agent_with(events, extra)
  local run
  events.on = function(ev)
    if when(ev) then run:cancel("user pressed stop") end
  end
  run = agent:start("tell me a story")
  cancel_now = function() run:cancel("user pressed stop") end
  local r = run:wait()
  T.eq(r.outcome, "cancelled", name .. ": outcome")
  T.eq(r.error.kind, "cancelled", name .. ": error kind")
  T.eq(r.error.message, "cancelled: user pressed stop", name .. ": the reason")
  T.eq(count(events, "run_end"), 1, name .. ": one run_end")
  T.eq(events[#events].type, "run_end", name .. ": run_end is the last event")
  T.eq(events[#events].outcome, "cancelled", name .. ": run_end.outcome")
  return #m:requests() - before, r, events
end

do
  local sent = cancel_case("stalled stream", { { stall_after_events = 4 } },
    function(ev) return ev.type == "text_delta" end)
  T.eq(sent, 1, "stalled stream: no further request")
  T.ok("a cancel ends a stalled stream at once")

  sent = cancel_case("backoff wait", { { status = 503, headers = { ["retry-after"] = "30" } } },
    function(ev) return ev.type == "llm_retry" end)
  T.eq(sent, 1, "backoff wait: the retry is not sent")
  T.ok("a cancel ends a 30 s backoff wait at once")

  sent = cancel_case("continuation", { { cut_after_events = 5 } },
    function(ev) return ev.type == "llm_continuation" end)
  T.eq(sent, 1, "continuation: the continuation is not sent")
  T.ok("a cancel ends a run between a cut stream and its continuation")

  -- (cancelled from its body: a cancel at tool_call_start keeps the body from starting)
  local after_sleep, started = 0, 0
  local tools = { slow = { description = "slow", schema = { type = "object" },
    run = function()
      started = started + 1
      cancel_now()
      ah.sleep(30000)
      after_sleep = after_sleep + 1
      return "done"
    end } }
  local _, r = cancel_case("waiting tool", nil, function() return false end,
    { tools = tools })
  T.eq(started, 1, "waiting tool: the body started")
  -- the tool's coroutine was ended: the loop goes on without it (no 30 s timer holds the
  -- script) and the body never gets past its wait
  ah.sleep(20)
  collectgarbage()
  collectgarbage()
  T.eq(after_sleep, 0, "waiting tool: the body never went on")
  T.eq(#r.history, 3, "waiting tool: history has the question, the tool call and its result")
  T.ok("a cancel ends a run whose tool is waiting, and stops the tool")

  -- a sub-agent running inside the tool body is cancelled with it
  m:set_plan{ { ok = true }, { stall_after_events = 4 } } -- the outer call, the sub's
  local before = #m:requests()
  local sub_events, outer_events = {}, {}
  local sub = agent_with(sub_events)
  local run
  sub_events.on = function(ev)
    if ev.type == "text_delta" then run:cancel("stop") end
  end
  local outer = agent_with(outer_events, { tools = { delegate = {
    description = "asks another agent", schema = { type = "object" },
    run = function() return sub:run("sub question").text end } } })
  run = outer:start("use delegate")
  local r2 = run:wait()
  T.eq(r2.outcome, "cancelled", "sub-agent: the outer run is cancelled")
  for _ = 1, 100 do
    if count(sub_events, "run_end") > 0 then break end
    ah.sleep(2)
  end
  T.eq(count(sub_events, "run_end"), 1, "sub-agent: its run ended, once")
  T.eq(sub_events[#sub_events].outcome, "cancelled", "sub-agent: cancelled too")
  T.eq(sub_events[#sub_events].error.message,
       "cancelled: the tool call that ran it was cancelled", "sub-agent: says why")
  T.eq(#m:requests() - before, 2, "sub-agent: no further request")
  T.ok("a sub-agent run by a cancelled tool call is cancelled with it")

  -- cancelled before its first request went out
  m:set_plan(nil)
  local before = #m:requests()
  local run = agent_with({}):start("never sent")
  T.eq(run:cancel(), true, "cancel before the first step")
  T.eq(run:wait().outcome, "cancelled", "outcome")
  T.eq(#m:requests() - before, 0, "nothing was sent")
  T.ok("a run cancelled before it started sends nothing")
end

-- ---- under ah.parallel -------------------------------------------------------------------
do
  m:set_plan{ steps = { { stall_after_events = 3 } }, ["then"] = { ok = true } }
  local events = {}
  local agent = agent_with(events)
  local slow
  local before = #m:requests()
  local results = ah.parallel{
    function()
      slow = agent:start("stalls")
      return slow:wait()
    end,
    function()
      -- the stalling plan step must go to the first run: start once its request is in
      while #m:requests() == before do ah.sleep(2) end
      local r = agent:run("completes")
      -- the other run is still stalled: stop it from here
      T.eq(slow:cancel(), true, "the stalled run was still going")
      return r
    end,
  }
  T.eq(results[1].outcome, "cancelled", "parallel: the stalled run is cancelled")
  T.eq(results[2].outcome, "completed", "parallel: the other completes")
  T.eq(count(events, "run_end"), 2, "parallel: one run_end each")
  T.ok("runs under ah.parallel are cancelled one by one")
end
m:close()
