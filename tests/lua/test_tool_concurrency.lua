-- Concurrent tool calls inside an agent: the calls of one response run in coroutines of
-- their own, at most max_tool_concurrency at a time (default 8), started in call order;
-- an exclusive tool runs alone; results enter history in call order whatever order they
-- finish in; a run's budget stays exact under concurrency. The mock's `tool_calls = N`
-- plan field makes one response call the tool N times (every wire format).
local ah = require "agenthost"
local T = require "ahtest"

local m = ah.mock{}
local clients = {}
for _, p in ipairs(T.providers) do
  clients[p] = ah.client{ provider = p, model = "m", base_url = m.url }
end
local client = clients.anthropic

-- A tool that records how many of its bodies run at once; the k-th started sleeps less
-- than the one before it, so later calls finish first.
local function slow_tool(state, extra)
  local spec = { description = "slow", schema = { type = "object" },
    run = function()
      state.started = state.started + 1
      local k = state.started
      state.running = state.running + 1
      if state.running > state.max then state.max = state.running end
      ah.sleep(5 + 3 * (12 - k))
      state.running = state.running - 1
      state.finished[#state.finished + 1] = k
      return "r" .. k
    end }
  for key, v in pairs(extra or {}) do spec[key] = v end
  return spec
end

local function run_with(n, agent_extra, tool_extra, provider)
  m:set_plan{ { ok = true, tool_calls = n } }
  local state = { started = 0, running = 0, max = 0, finished = {} }
  local events = {}
  local spec = { client = clients[provider or "anthropic"], tools = { slow = slow_tool(state, tool_extra) },
                 on_event = function(ev) events[#events + 1] = ev end }
  for k, v in pairs(agent_extra or {}) do spec[k] = v end
  local r = ah.agent(spec):run("go")
  return r, state, events
end

-- results in call order: the i-th tool_result answers the i-th tool_use, and (calls start
-- in call order) holds the i-th started body's result
local function in_call_order(r, n, what)
  local uses, results = r.history[2].content, r.history[3].content
  local k = 0
  for _, b in ipairs(uses) do
    if b.type == "tool_use" then
      k = k + 1
      T.eq(results[k].tool_use_id, b.id, what .. ": result " .. k .. " answers call " .. k)
    end
  end
  T.eq(k, n, what .. ": calls")
  return results
end

for _, p in ipairs(T.providers) do
  local r, s = run_with(6, { max_tool_concurrency = 2 }, nil, p)
  local w = p .. ", bound 2"
  T.eq(r.outcome, "completed", w .. ": outcome")
  T.eq(s.started, 6, w .. ": every call ran")
  T.eq(s.max, 2, w .. ": at most 2 at once")
  local results = in_call_order(r, 6, w)
  for i = 1, 6 do T.eq(results[i].content, "r" .. i, w .. ": result " .. i) end
  T.eq(r.stats.tool_calls, 6, w .. ": stats.tool_calls")
  T.contains(r.text, "The tool returned: r1 | r2 | r3 | r4 | r5 | r6", w .. ": the answer")
  T.ok(p .. ": max_tool_concurrency = 2: six calls, two at a time, results in call order")
end

do
  local r, s = run_with(10)
  T.eq(s.max, 8, "default: 8 at once")
  local results = in_call_order(r, 10, "default")
  T.eq(results[10].content, "r10", "default: the last result")
  T.ok("the default bound is 8")
end

do
  local r, s = run_with(4, { max_tool_concurrency = 8 }, { exclusive = true })
  T.eq(s.started, 4, "exclusive: every call ran")
  T.eq(s.max, 1, "exclusive: one at a time")
  T.eq(table.concat(s.finished, ","), "1,2,3,4", "exclusive: one after the other")
  in_call_order(r, 4, "exclusive")
  T.ok("an exclusive tool runs alone")
end

do
  local r, s, events = run_with(6, { max_tool_concurrency = 6, budget = 3 })
  T.eq(r.outcome, "completed", "budget: outcome")
  T.eq(s.started, 3, "budget: exactly 3 bodies ran")
  T.eq(r.stats.tool_attempts, 3, "budget: stats.tool_attempts")
  T.eq(r.stats.tool_calls, 6, "budget: every call was answered")
  local outcomes, spent = {}, 0
  for _, ev in ipairs(events) do
    if ev.type == "tool_call_end" then outcomes[#outcomes + 1] = ev.outcome end
    if ev.type == "budget_exhausted" then spent = spent + 1 end
  end
  table.sort(outcomes)
  T.eq(table.concat(outcomes, ","),
       "budget_exhausted,budget_exhausted,budget_exhausted,ok,ok,ok", "budget: outcomes")
  T.eq(spent, 1, "budget: one budget_exhausted event")
  local results = in_call_order(r, 6, "budget")
  for i = 1, 3 do T.eq(results[i].content, "r" .. i, "budget: result " .. i) end
  for i = 4, 6 do T.contains(results[i].content, "budget is exhausted", "budget: result " .. i) end
  T.ok("a budget of 3 under 6 concurrent calls runs exactly 3 bodies")
end

T.raises(function() ah.agent{ client = client, tools = { t = slow_tool({}, { exclusive = 1 }) } } end,
         "ah.agent: tools.t: exclusive must be a boolean")
T.ok("exclusive is checked")
m:close()
