-- Helper of tests/cli/test_lua_host.sh: one run with a retry, a continuation and a tool,
-- with a planted API key, so the events file can be checked.
local ah = require "agenthost"
local m = ah.mock{ plan = { { status = 529 }, { cut_after_events = 4 } } }
local agent = ah.agent{
  client = ah.client{ provider = "anthropic", model = "m", base_url = m.url,
                      api_key = arg[1] },
  on_event = false, policy = { base_ms = 1, cap_ms = 2 },
  tools = { add = { run = function() return 3 end } } }
local r = agent:run("go")
assert(r.outcome == "completed", r.outcome)
print("ran " .. r.run_id)
m:close()
