-- The stop reasons and limits of 2026 through the mock, each ending in its outcome
-- (docs/lua.md, "Outcomes"): refusal -> refused (with the category, the turn not kept),
-- pause_turn resent as a new step, max_tokens completed or continued with
-- policy.continue_on_max_tokens, model_context_window_exceeded and a context-length 400
-- -> context_exceeded (on_context_exceeded's one more try), a spend-limit 429 not retried.
local ah = require "agenthost"
local T = require "ahtest"

local function check(cond, what)
  if not cond then error(what, 2) end
end

local function run(provider, plan, agent_opts, input)
  local m = ah.mock{ plan = plan }
  local events = {}
  local opts = { client = ah.client{ provider = provider, model = "m", base_url = m.url },
                 policy = T.fast(), on_event = function(ev) events[#events + 1] = ev end }
  for k, v in pairs(agent_opts or {}) do opts[k] = v end
  local r = ah.agent(opts):run(input or "Hello there")
  return r, events, m
end

-- refusal: Anthropic stop_reason refusal with stop_details; Chat content_filter;
-- Responses incomplete for content_filter
for _, p in ipairs(T.providers) do
  local r = run(p, { { ok = true, stop_reason = "refusal", refusal_category = "cyber" } })
  T.eq(r.outcome, "refused", p .. ": refusal outcome")
  T.eq(r.stop_reason, "refusal", p .. ": result.stop_reason")
  T.eq(r.error.kind, "refused", p .. ": error kind")
  if p == "anthropic" then
    T.eq(r.error.category, "cyber", "anthropic: the category from stop_details")
  end
  T.eq(#r.history, 1, p .. ": the refused turn is not kept")
  T.eq(r.stats.continuations, 0, p .. ": never continued")
end

-- pause_turn: resent as the next step, the paused turn last
do
  local r, _, m = run("anthropic", { { ok = true, stop_reason = "pause_turn" } })
  T.eq(r.outcome, "completed", "pause_turn: completed")
  T.eq(r.stats.steps, 2, "pause_turn: the resend is a step")
  T.eq(r.stats.continuations, 0, "pause_turn: not a continuation")
  local reqs = m:requests()
  T.eq(#reqs, 2, "pause_turn: two requests")
  T.contains(reqs[2].body, '"role":"assistant"', "pause_turn: the paused turn is sent back")
end

-- max_tokens: completed, stop_reason max_tokens; continued with continue_on_max_tokens
for _, p in ipairs(T.providers) do
  local r = run(p, { { ok = true, stop_reason = "max_tokens" } })
  T.eq(r.outcome, "completed", p .. ": max_tokens completes")
  T.eq(r.stop_reason, "max_tokens", p .. ": stop_reason max_tokens")
  local r2, ev2 = run(p, { { ok = true, stop_reason = "max_tokens" } },
                      { policy = T.fast{ continue_on_max_tokens = 1 } })
  T.eq(r2.outcome, "completed", p .. ": continued max_tokens completes")
  T.eq(r2.stats.continuations, 1, p .. ": one continuation")
  T.eq(r2.stop_reason, "end_turn", p .. ": the continuation ended the turn")
  local conts = 0
  for _, ev in ipairs(ev2) do if ev.type == "llm_continuation" then conts = conts + 1 end end
  T.eq(conts, 1, p .. ": llm_continuation")
end

-- model_context_window_exceeded, and the context-length 400 of every format
do
  local r = run("anthropic", { { ok = true, stop_reason = "model_context_window_exceeded" } })
  T.eq(r.outcome, "context_exceeded", "stop reason model_context_window_exceeded")
  for _, p in ipairs(T.providers) do
    local r4, ev4 = run(p, { { status = 400, context_exceeded = true } })
    T.eq(r4.outcome, "context_exceeded", p .. ": a context-length 400")
    T.eq(r4.error.kind, "context_exceeded", p .. ": its error kind")
    T.eq(r4.stats.retries, 0, p .. ": never retried")
    check(#ev4 > 0, p .. ": events")
  end
end

-- on_context_exceeded: one more try with the history it returns
do
  local seen
  local r = run("anthropic", { { status = 400, context_exceeded = true } },
                { on_context_exceeded = function(h)
                    seen = #h
                    return { h[#h] } -- only the new input
                  end }, "Summarise it all")
  T.eq(seen, 1, "the hook saw the history with the new input")
  T.eq(r.outcome, "completed", "the shorter history went through")
  local calls = 0
  local r2 = run("openai", { steps = { { status = 400, context_exceeded = true } },
                             ["then"] = { status = 400, context_exceeded = true } },
                 { on_context_exceeded = function(h) calls = calls + 1; return h end })
  T.eq(calls, 1, "once a run")
  T.eq(r2.outcome, "context_exceeded", "still too long: context_exceeded")
  local r3 = run("openai", { { status = 400, context_exceeded = true } },
                 { on_context_exceeded = function() return nil end })
  T.eq(r3.outcome, "context_exceeded", "nil: context_exceeded")
end

-- a spend limit: not retried, and the message says why. Gemini has none of its own:
-- its quota 429 (RESOURCE_EXHAUSTED) is also a per-minute limit's, a rate limit retried.
do
  local r = run("gemini", { { status = 429, spend_limit = true } })
  T.eq(r.outcome, "completed", "gemini: a quota 429 is retried")
  T.eq(r.stats.retries, 1, "gemini: one retry")
end
for _, p in ipairs(T.providers) do
  if p ~= "gemini" then
  local r, ev = run(p, { { status = 429, spend_limit = true } })
  T.eq(r.outcome, "failed", p .. ": spend limit fails")
  T.eq(r.error.kind, "spend_limit", p .. ": error kind spend_limit")
  T.eq(r.stats.retries, 0, p .. ": not retried")
  T.contains(r.error.message, "spend limit reached, not retried", p .. ": says why")
  local reason
  for _, e in ipairs(ev) do if e.type == "llm_gave_up" then reason = e.reason end end
  T.eq(reason, "spend_limit", p .. ": llm_gave_up.reason")
  end
end

T.ok("the stop reasons of 2026 end in their outcomes")
