-- Run by a plain lua5.4 with LUA_CPATH pointing at the build dir: the module loads, and
-- agent:run / ah.parallel drive the loop themselves (no host scheduler around them).
local ah = require "agenthost"
local T = require "ahtest"

T.eq(type(ah.version), "string", "ah.version")
local m = ah.mock{ plan = { { status = 503 }, { cut_after_events = 4 } } }
local agent = ah.agent{ client = ah.client{ provider = "anthropic", model = "m", base_url = m.url },
                        on_event = false, policy = T.fast() }
local r = agent:run("from plain lua")
T.eq(r.outcome, "completed", "outcome")
T.contains(r.text, "from plain lua", "text")
T.eq(r.stats.retries, 2, "retried (the 503, and the cut that kept nothing)")
T.eq(r.stats.continuations, 1, "continued")
T.ok("agent:run from plain lua5.4 through a retry and a continuation")

local results = ah.parallel{ function() return agent:run("one").outcome end,
                             function() return agent:run("two").outcome end }
T.eq(results[1], "completed", "parallel 1")
T.eq(results[2], "completed", "parallel 2")
T.ok("ah.parallel from plain lua5.4")

local calls = 0
r = ah.agent{ client = ah.client{ provider = "openai", model = "m", base_url = m.url },
  on_event = false, tools = { t = { policy = { base_ms = 1, cap_ms = 1 },
    run = function(_, ctx) calls = calls + 1; if ctx.attempt == 1 then error(ah.transient("x")) end; return "ok" end } } }:run("go")
T.eq(r.outcome, "completed", "tool run")
T.eq(calls, 2, "tool retried")
T.ok("tools from plain lua5.4")
m:close()
