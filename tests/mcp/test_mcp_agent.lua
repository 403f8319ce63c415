-- test_mcp_agent.lua - an agent whose tools come from MCP servers, through the built-in
-- mock provider (its model calls the first tool offered, then answers from the result),
-- in all three wire formats: the tool is offered as <server>__<tool>, tool_call_start /
-- _end carry `server`, the effect runs once per call, and a crash after the effect is an
-- outcome the model is told is unknown, never a replay. Also: a name collision is an
-- error naming both tools; a server that fails does not take the run down.
local ah = require "agenthost"
local fix = require "mcpfix"
local check = fix.check
local fast = { base_ms = 10, cap_ms = 50, max_attempts = 3 }
local pay = ah.mcp{ name = "pay", command = fix.stdio_command(), env = fix.env(), policy = fast,
  tools = { lookup = { enabled = false }, slow = { enabled = false } } }
check(#pay:tools() == 2, "disabled tools are hidden (" .. #pay:tools() .. ")")

for _, provider in ipairs({ "anthropic", "openai", "responses" }) do
  for _, fault in ipairs({ "none", "crash_after" }) do
    local m = ah.mock{ plan = { { ok = true, tool_args = { fault = fault } }, { ok = true } } }
    local events = {}
    local agent = ah.agent{ client = ah.client{ provider = provider, model = "mock-model",
      base_url = m.url }, mcp = { pay }, on_event = function(e) events[#events + 1] = e end }
    local r = agent:run("charge it")
    local start, finish
    for _, e in ipairs(events) do
      if e.type == "tool_call_start" then start = e end
      if e.type == "tool_call_end" then finish = e end
    end
    local what = provider .. "/" .. fault
    check(r.outcome == "completed", what .. ": the run completes (" .. tostring(r.outcome) .. ")")
    check(start and start.name == "pay__charge" and start.server == "pay",
      what .. ": the model called pay__charge, tool_call_start.server = pay")
    local key = start and start.run_id and (start.run_id .. ":" .. start.id)
    check(key and fix.effects("charge", key) == 1, what .. ": the effect ran once under the run's key")
    if fault == "none" then
      check(finish.outcome == "ok" and finish.server == "pay", what .. ": tool_call_end ok")
    else
      check(finish.outcome == "outcome_unknown", what .. ": tool_call_end outcome_unknown")
      local result
      for _, msg in ipairs(r.history) do
        for _, b in ipairs(msg.content or {}) do
          if b.type == "tool_result" then result = b end
        end
      end
      check(result and result.is_error and tostring(result.content):find("may or may not have happened"),
        what .. ": the model is told the effect may or may not have happened")
    end
    m:close()
  end
end

-- run:cancel while an MCP call hangs: the run ends cancelled and the server is told
do
  local m = ah.mock{ plan = { { ok = true, tool_args = { fault = "hang" } } } }
  local started
  local agent = ah.agent{ client = ah.client{ provider = "anthropic", model = "mock-model",
    base_url = m.url }, mcp = { pay },
    on_event = function(e) if e.type == "tool_call_start" then started = e end end }
  local run = agent:start("charge and hang")
  while not started do ah.sleep(10) end
  local key = started.run_id .. ":" .. started.id
  -- until the server holds the call (its effect is written before it hangs)
  while fix.effects("charge", key) == 0 do ah.sleep(10) end
  run:cancel()
  local r = run:wait()
  local told = false
  for _ = 1, 200 do -- the notification's effect in the server's file
    if fix.effects("cancelled", key) == 1 then told = true break end
    ah.sleep(10)
  end
  check(r.outcome == "cancelled", "run:cancel during an MCP call: the run ends cancelled")
  check(told, "the server was told (notifications/cancelled reached the tool)")
  m:close()
end

-- two tools offered under one name: an error from ah.agent naming both
local m = ah.mock{}
local client = ah.client{ provider = "anthropic", model = "mock-model", base_url = m.url }
local ok, err = pcall(ah.agent, { client = client, mcp = { pay },
  tools = { pay__charge = { run = function() return 1 end } } })
check(not ok and tostring(err):find("pay__charge", 1, true) and tostring(err):find("'charge' of MCP server 'pay'", 1, true),
  "a collision names both: " .. tostring(err))

-- a server that never starts: a clear error, the run goes on without its tools
local bad = ah.mcp{ name = "nope", command = { "/nonexistent/mcp-server" } }
check(bad.state == "failed" and bad.reason:find("cannot start", 1, true), "spawn failure: failed, " .. tostring(bad.reason))
local a = ah.agent{ client = client, mcp = { bad }, on_event = false }
local r = a:run("hello")
check(r.outcome == "completed", "a failed server does not take the run down")
-- a server that never answers initialize
local mute = ah.mcp{ name = "mute", command = { "sleep", "30" }, init_timeout_ms = 300 }
local okt, e2 = pcall(function() return mute:tools() end)
check(not okt and tostring(e2):find("mute", 1, true) and mute.state == "failed",
  "a server that never answers initialize fails, naming it: " .. tostring(e2))
-- non-JSON and over-long lines on stdout: dropped with a warning, the server goes on
local noisy = ah.mcp{ name = "noisy", command = { "sh", "-c",
  "echo 'not json'; exec node '" .. fix.tmp .. "/fault_server.mjs' stdio" }, env = fix.env() }
check(#noisy:tools() == 4, "a non-JSON line on stdout is dropped, the server works")
m:close()
pay:close()
mute:close()
noisy:close()
fix.finish()
