-- test_checked_when_built.lua - what can be checked when an agent or a mock is built is
-- checked then: a tool's schema given as JSON text is parsed by ah.agent, and a schema
-- that is not an object schema is refused there, naming the tool (not at the first
-- request); an empty Lua table where the mock's plan expects a list (plan = {}, steps =
-- {}, tool_calls = {}) is an empty list; a plan step's tool_calls list names the calls
-- the model makes (any tool, with the given arguments), so a test can drive any tool.
local ah = require "agenthost"
local T = require "ahtest"

local m = ah.mock{ plan = {} }
local client = ah.client{ provider = "anthropic", model = "m", base_url = m.url }
local function agent_with(schema)
  return ah.agent{ client = client, on_event = false,
                   tools = { add = { description = "Add.", schema = schema,
                                     run = function(args) return "ok" end } } }
end
for _, case in ipairs({
  { '{"type": "object", "properties": {"a": ', "schema is not valid JSON at offset 39" },
  { '{"type": "string"}', 'schema is not an object schema: its "type" is "string"' },
  { '[{"type": "object"}]', "schema is not a JSON object (it is an array)" },
  { '"object"', "schema is not a JSON object (it is a string)" },
  { { type = "array", items = { type = "integer" } },
    'schema is not an object schema: its "type" is "array"' },
}) do
  T.raises(function() agent_with(case[1]) end, "ah.agent: tools.add: " .. case[2],
    "schema " .. tostring(case[1]))
end
T.eq(#m:requests(), 0, "nothing was sent")
-- good ones: JSON text, a table, no type (any JSON object), none at all
agent_with('{"type": "object", "properties": {"a": {"type": "integer"}}}')
agent_with({ type = "object", properties = { a = { type = "integer" } } })
agent_with('{"properties": {}}')
agent_with(nil)
T.ok("a tool's schema is parsed and checked when the agent is built, naming the tool")
m:close()

-- empty tables where the plan expects lists
local m2 = ah.mock{ plan = { steps = {}, ["then"] = { status = 400 } } }
local r = ah.agent{ client = ah.client{ provider = "anthropic", model = "m",
  base_url = m2.url }, on_event = false }:run("hi")
T.eq(r.outcome, "failed", "steps = {}: no step, then the 'then' step at once")
T.eq(m2:requests()[1].status, 400, "the 'then' step answered the first request")
m2:close()
T.ok("plan = {} and steps = {} are empty lists")

-- the plan names the calls: tool b (not the first one offered), with its arguments;
-- then, an empty list: no call although tools are offered
local ran = {}
local m3 = ah.mock{ plan = {
  { ok = true, tool_calls = { { name = "double", arguments = { n = 21 } } } },
  { ok = true },
  { ok = true, tool_calls = {} },
  { ok = true, tool_calls = { { name = "double", arguments = { n = 1 } },
                              { name = "no_such_tool" } } },
} }
local tools = {
  add = { description = "Add.", schema = { type = "object" },
          run = function() ran[#ran + 1] = "add"; return "0" end },
  double = { description = "Double n.", schema = { type = "object", properties = {
               n = { type = "integer" } }, required = { "n" } },
             run = function(args) ran[#ran + 1] = "double " .. args.n
               return tostring(args.n * 2) end },
}
local a = ah.agent{ client = ah.client{ provider = "openai", model = "m", base_url = m3.url },
                    on_event = false, tools = tools }
local r1 = a:run("double 21")
T.eq(r1.outcome, "completed", "outcome")
T.eq(table.concat(ran, ","), "double 21", "the named tool ran, with the named arguments")
T.eq(r1.text, "The tool returned: 42", "answered from its result")
local r2 = a:run("no tools now")
T.eq(#ran, 1, "tool_calls = {}: no call")
T.contains(r2.text, 'You said: "no tools now"', "answered directly")
local r3 = a:run("two calls")
T.eq(ran[2], "double 1", "the listed calls of one response")
T.contains(r3.text, "The tool returned: 2 | ", "both answered; the unknown one as an error")
T.eq(#m3:requests(), 5, "five requests")
m3:close()
T.ok("a plan's tool_calls names the tools the model calls, and their arguments")
