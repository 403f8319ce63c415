-- What a tool body returns is recorded as canonical JSON, or the call fails saying why
-- (issue 26, finding 5): a table that contains itself (which once hung, growing without
-- bound), a function, a thread, NaN or an infinity anywhere in it is a permanent error
-- naming the path; a result over the 16 MiB cap is an error instead of a copy of any
-- size; a table reached twice without a cycle is fine. Inside an agent the model gets
-- the error as the tool's answer. Valid Lua 5.1 to 5.4.
local ah = require "agenthost"
local T = require "ahtest"

local function call(name, body)
  return ah.tool{ name = name, run = body }:call({}, { key = name })
end

local function fails_with(r, needle, what)
  T.eq(r.ok, false, what .. ": ok")
  T.eq(r.outcome, "failed", what .. ": outcome")
  T.eq(r.error.kind, "permanent", what .. ": a permanent error (never retried)")
  T.eq(r.attempts, 1, what .. ": one attempt")
  T.contains(r.error.message, needle, what .. ": the message")
end

local t = {}
t.a = { x = t }
t.b = { y = t }
fails_with(call("two_cycles", function() return t end), "$.a.x", "two paths back to the root")
local s = {}
s.self = s
fails_with(call("self", function() return s end), "$.self", "a table inside itself")
T.contains(call("self2", function() return s end).error.message, "cycle", "says cycle")
T.ok("a cyclic result fails the call at once, naming where the cycle closes")

fails_with(call("fn", function() return { items = { 1, print } } end), "$.items[2]",
           "a function")
fails_with(call("co", function() return { c = coroutine.create(function() end) } end), "$.c",
           "a thread")
fails_with(call("nan", function() return { n = 0 / 0 } end), "NaN", "NaN")
fails_with(call("inf", function() return { big = { 1 / 0 } } end), "$.big[1]", "infinity")
T.ok("functions, threads, NaN and infinities are errors naming the path")

fails_with(call("huge", function() return string.rep("x", 17 * 1024 * 1024) end),
           "16 MiB", "a result over the cap")
T.ok("a result over 16 MiB is an error")

local shared = { v = 1 }
local r = call("dag", function() return { a = shared, b = { shared, shared } } end)
T.eq(r.ok, true, "a shared table is not a cycle")
T.eq(r.receipt.b[2].v, 1, "and is recorded in full")
T.ok("a table reached twice without a cycle is recorded")

-- inside an agent: the model is told, the run goes on
local m = ah.mock{}
local agent = ah.agent{
  client = ah.client{ provider = "anthropic", model = "m", base_url = m.url },
  on_event = false,
  tools = { loop = { description = "returns a cycle", schema = { type = "object" },
                     run = function() return s end } } }
local res = agent:run("call the tool")
T.eq(res.outcome, "completed", "the run completes")
local answer
for _, msg in ipairs(res.history) do
  for _, b in ipairs(msg.content) do
    if b.type == "tool_result" then answer = b end
  end
end
T.eq(answer ~= nil, true, "the model got a tool result")
T.eq(answer.is_error, true, "marked as an error")
T.contains(answer.content, "cycle", "saying why")
T.ok("in an agent the model sees the error as the tool's answer")
m:close()
