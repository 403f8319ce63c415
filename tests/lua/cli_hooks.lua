-- Helper of tests/cli/test_lua_host.sh: hooks that fail on every call; the run
-- completes and each failure is logged once (the shell test counts the lines).
local ah = require "agenthost"
local m = ah.mock{ plan = { { status = 503 }, { status = 503 }, { status = 503 } } }
local agent = ah.agent{
  client = ah.client{ provider = "openai", model = "m", base_url = m.url },
  policy = { base_ms = 1, cap_ms = 2, retry_on = function() error("retry_on is broken") end },
  on_event = function() error("on_event is broken") end }
local r = agent:run("go")
assert(r.outcome == "completed", r.outcome)
r = agent:run("again")
assert(r.outcome == "completed", r.outcome)
print("completed twice")
m:close()
