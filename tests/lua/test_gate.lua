-- test_gate.lua - the one gate between C and Lua (lua/gate.c, docs/lua.md "Errors in
-- hooks"): an agent's internals never go through the module table (a script that
-- patches ah.ledger, ah.budget, ah.tool, ah.client or a tool's `call` method does not
-- change what an agent does), and errors in validate, tool bodies and batch items carry
-- a traceback. Against the built-in mock provider over loopback.
local ah = require "agenthost"
local T = require "toolcheck"

local mock = ah.mock {}
local client = ah.client { provider = "anthropic", model = "mock-1", base_url = mock.url,
                           api_key = "test-key" }
local SCHEMA = { type = "object", required = { "order" },
                 properties = { order = { type = "string" } } }

-- the library's log lines, for the traceback checks
local logs = {}
ah.log_handler(function(level, line) logs[#logs + 1] = level .. ": " .. line end, "debug")
local function logged(needle)
  for _, l in ipairs(logs) do if l:find(needle, 1, true) then return l end end
  return nil
end

local agent_new, tool_new = ah.agent, ah.tool
local function lookup_agent(budget)
  local w = { runs = 0 }
  w.agent = agent_new {
    client = client, max_steps = 4, budget = budget, on_event = false,
    tools = { lookup = {
      description = "look an order up", schema = SCHEMA,
      run = function(args, ctx)
        w.runs = w.runs + 1
        w.key = ctx.key
        return { found = args.order }
      end,
    } },
  }
  return w
end

T.test("patching the module table does not change an agent", function()
  local saved = {}
  local function boom(name) return function() error("patched " .. name .. " was called", 2) end end
  for _, name in ipairs { "ledger", "budget", "tool", "client", "batch", "parallel" } do
    saved[name] = ah[name]
    ah[name] = boom(name)
  end
  local ok, err = T.pcall(function() -- the run waits: T.pcall, for PUC 5.1
    local w = lookup_agent(2) -- a number: a fresh budget per run, made by the agent
    local r = w.agent:run("look the order up")
    T.eq(r.outcome, "completed", "the run completed")
    T.eq(w.runs, 1, "the tool ran once")
    T.ok(r.text:find('"found"', 1, true), "the model saw the receipt: " .. tostring(r.text))
    T.ok(type(w.key) == "string" and w.key:find(":", 1, true), "the default key: " .. tostring(w.key))
    local again = w.agent:run("look the order up")
    T.eq(again.outcome, "completed", "a second run (its own ledger and budget)")
    T.eq(w.runs, 2, "the second run's tool call ran (not a duplicate)")
    -- removing the names altogether changes nothing either
    for name in pairs(saved) do ah[name] = nil end
    local w2 = lookup_agent(1)
    T.eq(w2.agent:run("look it up").outcome, "completed", "with the names removed")
    T.eq(w2.runs, 1, "the tool ran")
  end)
  for name, fn in pairs(saved) do ah[name] = fn end
  T.ok(ok, "no patched function was called: " .. tostring(err))
end)

T.test("an agent does not call tools through their `call` method", function()
  local mt = getmetatable(tool_new { name = "probe", run = function() return true end })
  T.eq(type(mt), "table", "a tool's metatable is reachable")
  local index = mt.__index
  local patched = 0
  mt.__index = function(t, k)
    if k == "call" then
      patched = patched + 1
      return function() error("patched call") end
    end
    return index(t, k)
  end
  local ok, err = T.pcall(function() -- the run waits: T.pcall, for PUC 5.1
    local w = lookup_agent(nil)
    local r = w.agent:run("look the order up")
    T.eq(r.outcome, "completed", "the run completed")
    T.eq(w.runs, 1, "the body ran")
    T.ok(r.text:find('"found"', 1, true), "the receipt reached the model")
  end)
  mt.__index = index
  T.ok(ok, "the run went fine: " .. tostring(err))
  T.eq(patched, 0, "tool.call was never looked up")
end)

T.test("a tool body's error is logged once with its traceback", function()
  local function crash(args) return args.order.no_such_field.x end -- a bug: indexes nil
  local agent = agent_new {
    client = client, max_steps = 4, on_event = false,
    tools = { crashy = { description = "crashes", schema = SCHEMA, run = crash } },
  }
  local r = agent:run("call it")
  T.eq(r.outcome, "completed", "the run goes on: the model is told the tool failed")
  local line = logged("tool 'crashy'")
  T.ok(line ~= nil, "the failure is logged")
  T.ok(line and line:find("stack traceback:", 1, true), "with a traceback: " .. tostring(line))
  T.ok(line and line:find("test_gate.lua", 1, true), "naming the body's file")
end)

T.test("a raising validate is logged once with its traceback", function()
  local m = ah.mock {}
  local c = ah.client { provider = "openai", model = "m", base_url = m.url }
  local agent = agent_new { client = c, on_event = false, policy = { max_attempts = 1 } }
  m:set_plan { steps = { { ok = true, text = '{"a": 1}' } }, ["then"] = { ok = true, text = '{"a": 2}' } }
  local function broken(obj) return obj.missing.field end
  local r = agent:run("JSON please", { output = { validate = broken, max_retries = 1 } })
  T.eq(r.outcome, "bad_output", "a raising validator rejects")
  T.ok(not r.error.message:find("stack traceback", 1, true), "the model's reason has no traceback")
  local line = logged("output.validate:")
  T.ok(line ~= nil, "the failure is logged")
  T.ok(line and line:find("stack traceback:", 1, true), "with a traceback: " .. tostring(line))
  m:close()
end)

T.test("a batch item's error carries its traceback", function()
  local b = ah.batch({ { n = 1 }, { n = 2 } }, function(item)
    if item.n == 2 then error("item crashed") end
    return item.n
  end)
  T.eq(b.done, { 1 }, "done")
  T.eq(b.failed, { 2 }, "failed")
  local rec = b.results[2]
  T.ok(rec.error.message:find("item crashed", 1, true), "the message is the error's")
  T.ok(not rec.error.message:find("stack traceback", 1, true), "and only the message")
  T.ok(type(rec.traceback) == "string" and rec.traceback:find("stack traceback:", 1, true),
       "result.traceback: " .. tostring(rec.traceback))
  T.ok(rec.traceback and rec.traceback:find("item crashed", 1, true), "it starts with the message")
  local line = logged("batch item 2 failed")
  T.ok(line and line:find("stack traceback:", 1, true), "logged with it: " .. tostring(line))
  -- an error value keeps its kind
  local b2 = ah.batch({ 1 }, function() error(ah.transient("later")) end)
  T.eq(b2.results[1].error.kind, "transient", "an error value is kept as raised")
end)

ah.log_handler(nil)
T.done()
