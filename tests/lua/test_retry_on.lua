-- policy.retry_on replaces the retry predicate: it sees the error as a table and the
-- default verdict; true/false decide; anything else (or an error inside it) leaves the
-- default in charge and the run goes on.
local ah = require "agenthost"
local T = require "ahtest"

local m = ah.mock{}
local client = ah.client{ provider = "anthropic", model = "m", base_url = m.url }

-- a 400 is not retryable by default; retry_on says retry it
local seen = {}
local agent = ah.agent{ client = client, on_event = false, policy = T.fast{
  retry_on = function(err, default)
    seen[#seen + 1] = { kind = err.kind, status = err.status, msg = tostring(err),
                        ptype = err.provider_type, default = default }
    if err.status == 400 then return true end
    return default
  end } }
m:set_plan{ { status = 400 } }
local r = agent:run("hello")
T.eq(r.outcome, "completed", "400 retried by retry_on")
T.eq(r.stats.attempts, 2, "two attempts")
T.eq(r.stats.retries, 1, "one retry")
T.eq(#seen, 1, "retry_on called once")
T.eq(seen[1].kind, "http", "err.kind")
T.eq(seen[1].status, 400, "err.status")
T.eq(seen[1].ptype, "invalid_request_error", "err.provider_type")
T.eq(seen[1].default, false, "default verdict for a 400")
T.contains(seen[1].msg, "400", "tostring(err)")
T.eq(ah.is_retryable{ kind = "http", status = 400 }, false, "is_retryable 400")
T.ok("retry_on retries a 400 the defaults would not")

-- a 503 is retryable by default; retry_on says no
local calls = 0
local strict = ah.agent{ client = client, on_event = false, policy = T.fast{
  retry_on = function(err, default) calls = calls + 1; return false end } }
m:set_plan{ { status = 503 } }
r = strict:run("hello")
T.eq(r.outcome, "failed", "503 not retried")
T.eq(r.stats.attempts, 1, "one attempt")
T.eq(r.error.status, 503, "error.status")
T.eq(calls, 1, "retry_on called once")
T.eq(ah.is_retryable(r.error), true, "the defaults would have retried it")
T.ok("retry_on refuses to retry a 503")

-- retry_on may delegate to ah.is_retryable
local delegating = ah.agent{ client = client, on_event = false, policy = T.fast{
  retry_on = function(err) return ah.is_retryable(err) end } }
m:set_plan{ { status = 529 }, { status = 429, headers = { ["retry-after-ms"] = 5 } } }
r = delegating:run("hello")
T.eq(r.outcome, "completed", "delegating retry_on")
T.eq(r.stats.attempts, 3, "529 and 429 retried")
T.ok("retry_on = ah.is_retryable behaves like the defaults")

-- retry_on raising: logged once, the default decides, the run goes on
local raised = 0
local broken = ah.agent{ client = client, on_event = false, policy = T.fast{
  retry_on = function(err) raised = raised + 1; error("bug in retry_on") end } }
m:set_plan{ { status = 503 }, { status = 502 } }
r = broken:run("hello")
T.eq(r.outcome, "completed", "default verdict used after a failing retry_on")
T.eq(r.stats.attempts, 3, "both 5xx retried by default")
T.eq(raised, 2, "the hook was still asked each time")
m:set_plan{ { status = 400 } }
r = broken:run("again")
T.eq(r.outcome, "failed", "default verdict: 400 not retried")
T.ok("a failing retry_on leaves the defaults in charge and the run goes on")

-- returning nil (not a boolean) also means: the default decides
local undecided = ah.agent{ client = client, on_event = false, policy = T.fast{
  retry_on = function() return nil end } }
m:set_plan{ { status = 503 } }
T.eq(undecided:run("x").stats.attempts, 2, "nil -> default (retry 503)")
T.ok("retry_on returning nil defers to the default")

-- the process-level retry budget throttles retries of agents created after it
local budget = ah.retry_budget{ max_tokens = 4, token_ratio = 0.1 }
local gave_up
local throttled = ah.agent{ client = client, policy = T.fast{ max_attempts = 10 },
  on_event = function(ev) if ev.type == "llm_gave_up" then gave_up = ev end end }
m:set_plan{ steps = { { status = 503 } }, ["then"] = { status = 503 } }
r = throttled:run("x")
T.eq(r.outcome, "failed", "budget outcome")
T.eq(gave_up.reason, "retry_budget", "gave up because of the retry budget")
T.eq(r.stats.attempts, 2, "one retry, then the budget closed")
assert(budget:tokens() < 4, "tokens were spent")
ah.retry_budget(false)
T.ok("ah.retry_budget throttles retries across agents")
m:close()
