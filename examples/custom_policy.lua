-- custom_policy.lua - changing the retry rules in Lua, against the mock with faults.
--
--   agenthost examples/custom_policy.lua
--
-- Five short scenes, each a fresh mock plan and one agent; each prints what happened,
-- measured from the run's result and events:
--   1. retry_on: a 409 is not retryable by default; a predicate that knows this API
--      retries it.
--   2. deadline_ms: a server asking for a 5 s wait that would cross the deadline ends
--      the call at once instead of sleeping.
--   3. max_attempts + backoff: an outage longer than the policy gives up cleanly.
--   4. a shared retry budget: during an outage, four agents together retry far less
--      than four agents each retrying on their own (ah.retry_budget).
--   5. a tool-call budget: a flaky tool's retries stop when the run's budget is spent.
local ah = require "agenthost"

local function agent_for(mock, opts)
    opts.client = ah.client{ provider = "anthropic", model = "mock-model", base_url = mock.url }
    opts.on_event = opts.on_event or false   -- quiet: we print a summary instead
    return ah.agent(opts)
end

local function summary(r, gave_up)
    local s = r.stats
    local line = ("outcome %s after %d attempt%s (%d retr%s)"):format(r.outcome, s.attempts,
        s.attempts == 1 and "" or "s", s.retries, s.retries == 1 and "y" or "ies")
    if gave_up then line = line .. ", gave up: " .. gave_up end
    return line
end

-- Records the give-up reason of a run.
local function watcher()
    local w = {}
    w.on_event = function(ev)
        if ev.type == "llm_gave_up" then w.reason = ev.reason end
    end
    return w
end

-- 1 ---------------------------------------------------------------------------------
print("1. retry_on: this API answers 409 while a previous write is settling")
do
    local mock = ah.mock{ plan = { { status = 409 } } }
    local w = watcher()
    local r = agent_for(mock, { on_event = w.on_event }):run("save it")
    print("   default policy:  " .. summary(r, w.reason))
    mock:set_plan{ { status = 409 } }
    w = watcher()
    r = agent_for(mock, {
        on_event = w.on_event,
        policy = { base_ms = 100,
                   retry_on = function(err, default)
                       if err.status == 409 then return true end
                       return default
                   end },
    }):run("save it")
    print("   with retry_on:   " .. summary(r, w.reason))
    mock:close()
end

-- 2 ---------------------------------------------------------------------------------
print("2. deadline_ms = 2000: the server asks for 5 s (Retry-After: 5)")
do
    local mock = ah.mock{ plan = { { status = 429, headers = { ["Retry-After"] = "5" } } } }
    local w, waited = watcher(), nil
    local r = agent_for(mock, {
        policy = { deadline_ms = 2000 },
        on_event = function(ev)
            w.on_event(ev)
            if ev.type == "llm_gave_up" then waited = ev.elapsed_ms end
        end,
    }):run("hello")
    print(("   %s"):format(summary(r, w.reason)))
    print(("   it ended after %d ms instead of sleeping 5 s past the deadline"):format(
        waited or -1))
    mock:close()
end

-- 3 ---------------------------------------------------------------------------------
print("3. max_attempts = 3, base_ms = 100: the provider is down (503 on every request)")
do
    local mock = ah.mock{ plan = { steps = { { status = 503 } }, ["then"] = { status = 503 } } }
    local w, waits = watcher(), {}
    local r = agent_for(mock, {
        policy = { max_attempts = 3, base_ms = 100, cap_ms = 1000 },
        on_event = function(ev)
            w.on_event(ev)
            if ev.type == "llm_retry" then waits[#waits + 1] = ev.wait_ms .. " ms" end
        end,
    }):run("hello")
    print(("   %s"):format(summary(r, w.reason)))
    print(("   waits %s (full jitter: random in [0, 100], then [0, 200])"):format(
        table.concat(waits, ", ")))
    print(("   error: %s"):format(r.error.message))
    mock:close()
end

-- 4 ---------------------------------------------------------------------------------
print("4. the same outage, four agents at once, max_attempts = 4 each")
do
    local function outage(with_budget)
        local mock = ah.mock{ plan = { steps = { { status = 503 } }, ["then"] = { status = 503 } } }
        -- Every retry takes a token, every success gives 0.1 back; retries stop while
        -- half the tokens or fewer would remain (gRPC-style throttling).
        local budget = with_budget and ah.retry_budget{ max_tokens = 10, token_ratio = 0.1 }
        local runs = {}
        for i = 1, 4 do
            local a = agent_for(mock, { policy = { base_ms = 20, cap_ms = 50 } })
            runs[i] = function() return a:run("hello") end
        end
        local results = ah.parallel(runs)
        if with_budget then ah.retry_budget(false) end  -- later agents: no budget
        local requests = #mock:requests()
        mock:close()
        local retries = 0
        for i = 1, results.n do retries = retries + results[i].stats.retries end
        return requests, retries
    end
    for _, shared in ipairs({ false, true }) do
        local n, retries = outage(shared)
        print(("   %-42s %2d requests, %2d of them retries"):format(shared and
            "sharing ah.retry_budget{max_tokens = 10}:" or "each on its own:", n, retries))
    end
end

-- 5 ---------------------------------------------------------------------------------
print("5. budget = 3 tool executions per run; the tool fails transiently every time")
do
    local mock = ah.mock{}
    local executions = 0
    local outcome, exhausted
    local r = agent_for(mock, {
        budget = 3,
        tools = { fetch = {
            description = "Fetch a page.",
            schema = { type = "object", required = { "url" },
                       properties = { url = { type = "string" } } },
            policy = { max_attempts = 10, base_ms = 10 },
            run = function()
                executions = executions + 1
                error(ah.transient("upstream timeout"))
            end,
        } },
        on_event = function(ev)
            if ev.type == "tool_call_end" then outcome = ev.outcome end
            if ev.type == "budget_exhausted" then
                exhausted = ("%s %d/%d"):format(ev.budget, ev.used, ev.limit)
            end
        end,
    }):run("fetch it")
    print(("   the body ran %d times (not 10), tool outcome %s, event budget_exhausted %s")
        :format(executions, tostring(outcome), tostring(exhausted)))
    print(("   the run goes on (%s); the model was told: %s"):format(r.outcome, r.text))
    mock:close()
end
