-- What a new user tripped on, one regression check each: integral floats (what
-- lua-cjson gives for every JSON number) are whole numbers everywhere and 3.5 is an error
-- naming the field; base_url "" and "http://" fail at ah.client; require
-- "agenthost.status" works before require "agenthost" (see cli test); ah.log_handler
-- routes, silences and restores the library's log lines; a Lua error in a tool body is
-- logged once with its traceback.
local status_mod = require "agenthost.status" -- before require "agenthost": the host finds it
local ah = require "agenthost"
local T = require "ahtest"
local cjson = require "cjson"

T.eq(type(status_mod.new), "function", "agenthost.status loads before agenthost")
T.ok("require 'agenthost.status' works before require 'agenthost'")

-- ---- whole numbers ----------------------------------------------------------------------
local cfg = cjson.decode('{"max_steps":3,"max_tokens":100,"budget":2,"concurrency":2,' ..
                         '"deltas":3,"tools":4,"retries":1,"attempts":3}')
if T.has_integers then -- elsewhere every number is a float (a double)
  T.eq(math.type(cfg.max_steps), "float", "lua-cjson gives floats")
end
local m = ah.mock{ text_deltas = cfg.deltas }
local client = ah.client{ provider = "anthropic", model = "m", base_url = m.url,
                          max_tokens = cfg.max_tokens }
local agent = ah.agent{ client = client, max_steps = cfg.max_steps, budget = cfg.budget,
                        max_tool_concurrency = cfg.tools, on_event = false,
                        policy = { max_attempts = cfg.attempts, base_ms = 1 } }
local r = agent:run("hi", { output = { max_retries = cfg.retries } })
T.eq(r.outcome, "bad_output", "the run ran (a text answer is not JSON)")
T.eq(r.stats.output_retries, 1, "output.max_retries = 1.0 counted as 1")
local b = ah.batch({ { key = "a" }, { key = "b" } }, function() return { ok = true } end,
                   { budget = cfg.budget, concurrency = cfg.concurrency })
T.eq(#b.done + #b.failed + #b.skipped, 2, "ah.batch with float budget and concurrency")
T.eq(ah.budget(2.0).remaining, 2, "ah.budget(2.0)")
ah.mock{ plan = { { cut_after_events = cfg.attempts } }, port = 0.0 }:close()
ah.mock{ plan_json = '[{"cut_after_events": 3.0}]' }:close()
local tool = ah.tool{ name = "t", run = function() return "ok" end }
T.eq(tool:call({}, { budget = 1.0 }).outcome, "ok", "tool:call budget = 1.0")
T.ok("integral floats are accepted wherever a whole number is expected")

local bad = {
  { function() ah.agent{ client = client, max_steps = 3.5 } end, "ah.agent: max_steps must be a whole number" },
  { function() ah.agent{ client = client, budget = 2.5 } end, "ah.agent: budget must be a whole number" },
  { function() ah.agent{ client = client, max_tool_concurrency = 1.5 } end,
    "ah.agent: max_tool_concurrency must be a whole number" },
  { function() ah.agent{ client = client, max_tool_concurrency = 0 } end,
    "ah.agent: max_tool_concurrency must be a whole number from 1 to 1000 (got 0)" },
  { function() ah.client{ provider = "openai", model = "m", base_url = m.url, max_tokens = 3.5 } end,
    "ah.client: max_tokens must be a whole number >= 1 (got 3.5)" },
  { function() ah.mock{ text_deltas = 2.5 } end, "ah.mock: text_deltas must be a whole number" },
  { function() ah.mock{ plan = { { cut_after_events = 3.5 } } } end,
    "ah.mock: plan step 1: field 'cut_after_events' must be an integer" },
  { function() ah.batch({}, function() end, { concurrency = 2.5 }) end,
    "ah.batch: concurrency must be a whole number" },
  { function() ah.batch({}, function() end, { budget = 0.5 }) end, "ah.batch: budget must be a whole number" },
  { function() ah.budget(1.5) end, "ah.budget(n): n must be a whole number" },
  { function() agent:run("x", { output = { max_retries = 0.5 } }) end,
    "agent:run: output.max_retries must be a whole number" },
  { function() ah.agent{ client = client, policy = { max_attempts = 3.5 } } end,
    "ah.agent: policy.max_attempts must be a whole number (got 3.5)" },
}
for i, c in ipairs(bad) do T.raises(c[1], c[2], "case " .. i) end
T.ok("3.5 is an error naming the field")

-- ---- base_url ---------------------------------------------------------------------------
T.raises(function() ah.client{ provider = "anthropic", model = "m", base_url = "http://" } end,
         "ah.client: base_url 'http://' has no host")
T.raises(function() ah.client{ provider = "openai", model = "m", base_url = "" } end,
         "ah.client: base_url must not be empty (leave it out for the provider's public "
         .. "API, https://api.openai.com)")
T.raises(function() ah.client{ provider = "openai", model = "m", base_url = "https:///v1" } end,
         "has no host")
T.eq(ah.client{ provider = "anthropic", model = "m", api_key = "k" }.url,
     "https://api.anthropic.com/v1/messages",
     "no base_url at all still means the public API")
T.ok("base_url '' and 'http://' are errors at ah.client")

-- ---- ah.log_handler ---------------------------------------------------------------------
local lines = {}
ah.log_handler(function(level, message, event_type)
  lines[#lines + 1] = { level, message, event_type }
end)
m:set_plan{ { status = 503, headers = { ["retry-after-ms"] = "1" } } }
local r2 = ah.agent{ client = client, on_event = false, policy = { base_ms = 1 } }:run("x")
T.eq(r2.outcome, "completed", "the run")
T.eq(#lines, 1, "one log line (the retry)")
T.eq(lines[1][1], "warning", "level")
T.contains(lines[1][2], "LLM request 1 of " .. r2.run_id .. ": HTTP 503", "message names the run")
T.eq(lines[1][3], "llm_retry", "event_type")

-- a Lua error in a tool body: logged once, with its traceback
lines = {}
local calls = 0
local buggy = ah.agent{ client = client, on_event = false, tools = {
  oops = { description = "d", schema = { type = "object" },
           run = function() calls = calls + 1; local t = nil; return t.field end } } }
local r3 = buggy:run("use the tool")
T.eq(calls, 1, "the body ran")
buggy:run("again") -- the same tool fails again: not logged twice
T.eq(calls, 2, "the body ran twice")
T.eq(#lines, 1, "logged once")
T.contains(lines[1][2], "tool 'oops' (" .. r3.run_id .. "): ", "names the tool and the run")
-- 5.3/5.4 say "attempt to index a nil value (local 't')", 5.1/5.2/LuaJIT
-- "attempt to index local 't' (a nil value)"
T.contains(lines[1][2], "attempt to index", "the error")
T.contains(lines[1][2], "a nil value", "the error")
T.contains(lines[1][2], "stack traceback:", "with its traceback")
T.eq(r3.outcome, "completed", "the run goes on (the model sees the error)")
-- an error value raised on purpose is the tool saying how it failed: not logged
lines = {}
ah.agent{ client = client, on_event = false, tools = {
  nope = { description = "d", schema = { type = "object" },
           run = function() error(ah.permanent("no such order")) end } } }:run("x")
T.eq(#lines, 0, "ah.permanent is not a bug: no log line")
T.ok("a Lua error in a tool body is logged once with its traceback")

-- false silences; a handler that raises is reported once and the run goes on
ah.log_handler(false)
m:set_plan{ { status = 503, headers = { ["retry-after-ms"] = "1" } } }
T.eq(ah.agent{ client = client, on_event = false }:run("x").outcome, "completed", "silenced")
ah.log_handler(function() error("handler bug") end)
m:set_plan{ { status = 503, headers = { ["retry-after-ms"] = "1" } } }
T.eq(ah.agent{ client = client, on_event = false }:run("x").outcome, "completed",
     "a failing handler does not hurt the run")
ah.log_handler(nil) -- back to stderr
T.raises(function() ah.log_handler(42) end, "ah.log_handler: expected a function, false or nil")
T.ok("ah.log_handler: false silences, nil restores stderr, a failing handler is survived")
m:close()
