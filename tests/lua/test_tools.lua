-- Tools declared in ah.agent: bodies run in coroutines of their own, transient failures
-- are retried per the tool's policy, anything else goes back to the model as a tool
-- error and the run completes.
local ah = require "agenthost"
local T = require "ahtest"

local m = ah.mock{}
local client = ah.client{ provider = "anthropic", model = "m", base_url = m.url }
local schema = { type = "object", properties = { a = { type = "integer" }, b = { type = "integer" } },
                 required = { "a", "b" } }

local function tool_result(r)
  for _, msg in ipairs(r.history) do
    for _, b in ipairs(msg.content) do
      if b.type == "tool_result" then return b end
    end
  end
end

-- transient twice, then success, with max_attempts = 3
local attempts, keys = {}, {}
local flaky = ah.agent{ client = client, on_event = false, tools = {
  add = { description = "Add two integers", schema = schema,
          policy = { max_attempts = 3, base_ms = 1, cap_ms = 2 },
          run = function(args, ctx)
            attempts[#attempts + 1] = ctx.attempt
            keys[#keys + 1] = ctx.key
            if ctx.attempt < 3 then error(ah.transient("database busy")) end
            return { sum = args.a + args.b }
          end } } }
local r = flaky:run("add 42 and 42")
T.eq(r.outcome, "completed", "outcome")
T.eq(#attempts, 3, "three body executions")
T.eq(attempts[3], 3, "ctx.attempt counts")
T.eq(keys[1], keys[3], "one idempotency key for all attempts")
T.contains(keys[1], r.run_id .. ":", "default key is run_id:tool_call_id")
T.eq(r.stats.tool_calls, 1, "tool_calls")
T.eq(r.stats.tool_attempts, 3, "tool_attempts")
local tr = tool_result(r)
T.eq(tr.is_error, false, "tool result is not an error")
T.eq(tr.content, '{"sum":84}', "the result went to the model as JSON")
T.contains(r.text, '{"sum":84}', "and the model answered with it")
T.eq(r.history[2].content[2].type, "tool_use", "tool_use in history")
T.eq(r.history[2].content[2].input.a, 42, "tool_use.input decoded")
T.ok("transient twice then success with max_attempts 3")

-- transient every time: max_attempts bounds it, the model gets the error
local always = 0
local hopeless = ah.agent{ client = client, on_event = false, tools = {
  add = { schema = schema, policy = { max_attempts = 2, base_ms = 1, cap_ms = 1 },
          run = function() always = always + 1; error(ah.transient("still busy")) end } } }
r = hopeless:run("add")
T.eq(r.outcome, "completed", "the run completes")
T.eq(always, 2, "max_attempts bounds the body")
tr = tool_result(r)
T.eq(tr.is_error, true, "is_error")
T.eq(tr.content, "error: still busy", "the model sees the error")
T.ok("transient failures stop at max_attempts")

-- a plain error (a bug) is permanent: not retried, a tool error for the model
local plain = 0
local buggy = ah.agent{ client = client, on_event = false, tools = {
  add = { schema = schema, policy = { max_attempts = 4, base_ms = 1, cap_ms = 1 },
          run = function(args) plain = plain + 1; return args.nope.field end } } }
local ends = {}
buggy = ah.agent{ client = client, tools = {
  add = { schema = schema, policy = { max_attempts = 4, base_ms = 1, cap_ms = 1 },
          run = function(args) plain = plain + 1; return args.nope.field end } },
  on_event = function(ev) if ev.type == "tool_call_end" then ends[#ends + 1] = ev end end }
r = buggy:run("add")
T.eq(r.outcome, "completed", "run completes after a tool bug")
T.eq(plain, 1, "a plain error is not retried")
tr = tool_result(r)
T.eq(tr.is_error, true, "tool error")
T.contains(tr.content, "error: ", "error prefix")
T.contains(tr.content, "attempt to index", "the error message") -- the wording of the rest
T.contains(tr.content, "a nil value", "the error message")        -- differs across runtimes
T.contains(r.text, "The tool returned: error:", "the model saw it")
T.eq(ends[1].outcome, "error", "tool_call_end.outcome")
T.eq(ends[1].attempts, 1, "tool_call_end.attempts")
T.eq(ends[1].name, "add", "tool_call_end.name")
T.ok("a plain error goes to the model as a tool error and the run completes")

-- ah.permanent is not retried either
local perm = 0
r = ah.agent{ client = client, on_event = false, tools = {
  add = { schema = schema, run = function() perm = perm + 1; error(ah.permanent("card declined")) end } } }:run("pay")
T.eq(perm, 1, "permanent: one attempt")
T.eq(tool_result(r).content, "error: card declined", "permanent message")
T.ok("ah.permanent is not retried")

-- retry_on in a tool policy overrides the rules
local seen = 0
r = ah.agent{ client = client, on_event = false, tools = {
  add = { schema = schema, policy = { max_attempts = 3, base_ms = 1, cap_ms = 1,
                                      retry_on = function(err) return err.message:find("retry me", 1, true) ~= nil end },
          run = function(_, ctx) seen = seen + 1
                  if ctx.attempt == 1 then error("retry me") end
                  return "done" end } } }:run("go")
T.eq(seen, 2, "retry_on retried a plain error")
T.eq(tool_result(r).content, "done", "a string result goes as is")
T.ok("tool policy.retry_on")

-- idempotency_key decides the key; a body may wait (a sub-agent) without blocking others
local sub = ah.agent{ client = client, on_event = false }
local got_key
r = ah.agent{ client = client, on_event = false, tools = {
  add = { schema = schema,
          idempotency_key = function(args, ctx) return "order-" .. args.a .. "-" .. ctx.name end,
          run = function(args, ctx)
            got_key = ctx.key
            local inner = sub:run("inner question")
            return { inner = inner.outcome, sum = args.a + args.b }
          end } } }:run("go")
T.eq(got_key, "order-42-add", "idempotency_key")
T.contains(tool_result(r).content, '"inner":"completed"', "sub-agent inside a tool")
T.contains(tool_result(r).content, '"sum":84', "and the tool's own result")
T.ok("idempotency_key and a sub-agent inside a tool body")

-- tools given as a list keep working, with a stable order
r = ah.agent{ client = client, on_event = false, tools = {
  { name = "zeta", schema = schema, run = function() return "z" end },
  { name = "alpha", schema = schema, run = function() return "a" end } } }:run("x")
T.eq(tool_result(r).content, "a", "the first tool in name order is offered first")
T.ok("tools as a list")
m:close()
