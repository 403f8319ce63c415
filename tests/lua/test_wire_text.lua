-- test_wire_text.lua - what a tool returns reaches the next request intact and valid:
-- a NUL byte is sent as the text \u0000 (it used to cut the result there), bytes that
-- are not UTF-8 become U+FFFD (they made the next request body invalid JSON text for the
-- provider), for every wire format, against ah.mock.
local ah = require "agenthost"
local T = require "ahtest"

local m = ah.mock{}
for _, provider in ipairs(T.providers) do
  local client = ah.client{ provider = provider, model = "mock-model", base_url = m.url }
  local agent = ah.agent{ client = client, max_steps = 3, policy = T.fast(),
    tools = { t = { description = "returns odd bytes", schema = { type = "object" },
                    run = function() return "ab\0cd \255\254 end" end } } } -- \xff\xfe (\x is 5.2+)
  local before = #m:requests()
  local r = agent:run("call the tool")
  T.eq(r.outcome, "completed", provider .. " outcome")
  local reqs = m:requests()
  T.eq(#reqs - before, 2, provider .. " two requests")
  local body = reqs[#reqs].body
  T.eq(T.utf8_len(body) ~= nil, true, provider .. " the next body is valid UTF-8")
  T.contains(body, "ab\\\\u0000cd", provider .. " the NUL is escaped, nothing after it lost")
  -- U+FFFD is EF BF BD (\u{...} is 5.3+)
  T.contains(body, "cd \239\191\189\239\191\189 end", provider .. " invalid bytes are U+FFFD")
  T.contains(r.text, "end", provider .. " the model saw the whole result")
end
T.ok("tool results: NUL escaped, invalid UTF-8 replaced")
m:close()
