-- test_hooks_wait.lua - hooks must not wait: ah.parallel, ah.sleep, agent:run, tool:call
-- and ah.batch called inside any hook (an agent's on_event, policy.retry_on,
-- output.validate, idempotency_key; a tool's on_event, retry_on, idempotency_key) raise
-- a clear error BEFORE they have any effect (no child coroutine starts, no body runs, no
-- request is sent), and the run goes on with the default. Regression: ah.parallel in
-- on_event was a heap use-after-free (its children wrote into a collected state), and
-- agent:run in on_event recursed until "C stack overflow".
local ah = require "agenthost"
local T = require "toolcheck"

local mock = ah.mock {}
local client = ah.client { provider = "anthropic", model = "m", base_url = mock.url,
                           api_key = "k" }
local effects = 0 -- anything a refused call might have started bumps this
local victim = ah.tool { name = "victim", run = function() effects = effects + 1 end }
local plain = ah.agent { client = client, max_steps = 1 }

-- Each waiting call, as a function that would have an effect if it ran at all.
local WAITS = {
  ["ah.parallel"] = function() return ah.parallel { function() effects = effects + 1 end } end,
  ["ah.sleep"] = function() return ah.sleep(1) end,
  ["agent:run"] = function() return plain:run("nested") end,
  ["tool:call"] = function() return victim:call({}, { key = "k" }) end,
  ["ah.batch"] = function()
    return ah.batch({ 1 }, function() effects = effects + 1 end)
  end,
}

-- Call the wait inside a hook; record what it raised.
local function attempt(name, seen)
  local ok, err = pcall(WAITS[name])
  seen[#seen + 1] = ok and "not refused" or tostring(err)
end

local function check_refused(seen, name, where)
  T.ok(#seen > 0, where .. ": the hook ran")
  for _, msg in ipairs(seen) do
    T.ok(msg:find(name .. " cannot be called inside a hook", 1, true),
         where .. ": " .. name .. " refused with a clear error: " .. msg)
  end
end

-- One run whose every hook calls hook(which); returns the result and its request count.
local function run_with_hooks(hook)
  local before = #mock:requests()
  local a = ah.agent {
    client = client, max_steps = 3,
    policy = { max_attempts = 2, base_ms = 1,
               retry_on = function() hook("retry_on") return true end },
    tools = { add = { description = "add", schema = { type = "object", properties = {} },
                      idempotency_key = function() hook("key") end,
                      run = function() return 1 end } },
    on_event = function(ev)
      if ev.type == "run_start" or ev.type == "tool_call_end" then hook("on_event") end
    end,
  }
  mock:set_plan { { status = 503 }, { ok = true }, { ok = true, text = '{"a":1}' } }
  local r = a:run("x", { output = { validate = function()
    hook("validate")
    return true
  end } })
  mock:set_plan(nil)
  return r, #mock:requests() - before
end

local names = {}
for name in pairs(WAITS) do names[#names + 1] = name end
table.sort(names)

for _, name in ipairs(names) do
  T.test(name .. " inside agent hooks is refused before it has any effect", function()
    effects = 0
    local seen = { on_event = {}, retry_on = {}, key = {}, validate = {} }
    local r, requests = run_with_hooks(function(which) attempt(name, seen[which]) end)
    local _, baseline = run_with_hooks(function() end)
    T.eq(r.outcome, "completed", "the run goes on")
    check_refused(seen.on_event, name, "on_event")
    check_refused(seen.retry_on, name, "retry_on")
    check_refused(seen.key, name, "idempotency_key")
    check_refused(seen.validate, name, "validate")
    T.eq(effects, 0, "no child, body or batch item ran")
    T.eq(requests, baseline, "no request from the refused call")
  end)

  T.test(name .. " inside a tool's hooks is refused", function()
    effects = 0
    local seen = { on_event = {}, retry_on = {}, key = {} }
    local fails = 1
    local t = ah.tool {
      name = "t", policy = { max_attempts = 2, base_ms = 1,
                             retry_on = function() attempt(name, seen.retry_on) return true end },
      idempotency_key = function() attempt(name, seen.key) end,
      on_event = function() attempt(name, seen.on_event) end,
      run = function()
        if fails > 0 then
          fails = fails - 1
          error(ah.transient("once"))
        end
        return "done"
      end,
    }
    local r = t:call({}, { key = "k1" })
    T.eq({ r.ok, r.attempts }, { true, 2 }, "the call goes on")
    check_refused(seen.on_event, name, "tool on_event")
    check_refused(seen.retry_on, name, "tool retry_on")
    check_refused(seen.key, name, "tool idempotency_key")
    T.eq(effects, 0, "nothing ran")
  end)
end

T.test("the issue's repro: ah.parallel in on_event", function()
  local a = ah.agent { client = client, max_steps = 1,
                       on_event = function() ah.parallel { function() return 1 end } end }
  T.eq(a:run("x").outcome, "completed", "completed, no crash")
end)

T.test("waiting outside hooks still works", function()
  local rs = ah.parallel { function() ah.sleep(1) return 1 end, function() return 2 end }
  T.eq({ rs[1], rs[2] }, { 1, 2 }, "parallel")
  T.eq(plain:run("x").outcome, "completed", "run")
end)

mock:close()
T.done()
