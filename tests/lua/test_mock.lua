-- ah.mock from Lua: url, requests(), set_plan, and the one idempotent close shared by
-- m:close(), <close> and __gc.
local ah = require "agenthost"
local T = require "ahtest"

local m = ah.mock{ plan = { { status = 529 } }, text = "fixed reply" }
T.eq(type(m.url), "string", "m.url")
T.contains(m.url, "http://127.0.0.1:", "m.url is loopback")
assert(m.port > 0, "m.port")
local agent = ah.agent{ client = ah.client{ provider = "responses", model = "m", base_url = m.url },
                        on_event = false, policy = T.fast() }
local r = agent:run("hi")
T.eq(r.text, "fixed reply", "text option")
local reqs = m:requests()
T.eq(#reqs, 2, "two requests")
T.eq(reqs[1].step, "status", "step kind")
T.eq(reqs[1].step_index, 1, "step index")
T.eq(reqs[1].status, 529, "status")
T.eq(reqs[2].step, "ok", "then ok")
T.eq(reqs[2].path, "/v1/responses", "path")
T.eq(reqs[2].method, "POST", "method")
T.eq(reqs[2].wire, "responses", "wire")
T.eq(type(reqs[2].headers["content-type"]), "string", "headers by lower-case name")
T.ok("ah.mock serves, faults and records")

m:set_plan{ { status = 400 } }
T.eq(agent:run("x").outcome, "failed", "set_plan took effect")
m:set_plan(nil)
T.eq(agent:run("x").outcome, "completed", "set_plan(nil) clears it")
T.raises(function() m:set_plan{ { bogus = 1 } } end, "plan step 1: unknown field 'bogus'")
T.ok("set_plan")

m:close()
m:close() -- idempotent
T.eq(m.url, nil, "url after close")
T.raises(function() m:requests() end, "closed")
T.ok("close is idempotent")

-- <close> is Lua 5.4 syntax: compiled from a string where the runtime has it
if T.runtime == "5.4" then
  local scoped = T.load([[
    local ah, T = ...
    local scoped <close> = ah.mock{ plan_json = '[{"status": 503}]' }
    T.contains(scoped.url, "127.0.0.1", "scoped mock")
    return scoped
  ]])(ah, T)
  T.eq(scoped.url, nil, "<close> closed the mock at the end of its scope")
end
local dropped = ah.mock{}
dropped = nil
collectgarbage()
collectgarbage()
T.ok("<close> (5.4) and garbage collection close the mock")
