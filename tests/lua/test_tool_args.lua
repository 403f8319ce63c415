-- test_tool_args.lua - a tool call whose arguments are valid JSON but not an object
-- ([1,2,3], 42, "s", null, true) goes back to the model as a tool error, in all three
-- wire formats; the run goes on (history keeps what the model sent; the next request
-- carries the call with {}), the body never runs. Regression: these runs failed with
-- "cannot encode the request".
local ah = require "agenthost"
local T = require "toolcheck"

local PROVIDERS = { "anthropic", "openai", "responses" }
local BAD = { "[1,2,3]", "42", '"s"', "null", "true" }

for _, provider in ipairs(PROVIDERS) do
  for _, bad in ipairs(BAD) do
    T.test(provider .. ": arguments " .. bad .. " are a tool error, not a failed run", function()
      local mock = ah.mock { plan = { { ok = true, tool_args = bad } } }
      local runs = 0
      local ends = {}
      local a = ah.agent {
        client = ah.client { provider = provider, model = "m", base_url = mock.url,
                             api_key = "k" },
        max_steps = 4,
        tools = { add = { description = "add", run = function() runs = runs + 1 end,
                          schema = { type = "object", properties = {} } } },
        on_event = function(ev)
          if ev.type == "tool_call_end" then ends[#ends + 1] = ev.outcome end
        end,
      }
      local r = a:run("x")
      T.eq(r.outcome, "completed", "the run completes (" .. tostring(r.error and r.error.message) .. ")")
      T.eq(runs, 0, "the body never ran")
      T.eq(ends, { "error" }, "one tool_call_end, outcome error")
      local reqs = mock:requests()
      T.eq(#reqs, 2, "the tool error went back to the model")
      local body = reqs[2] and reqs[2].body or ""
      T.ok(body:find("not a JSON object", 1, true), "the model is told why")
      local empty = provider == "anthropic" and '"input":{}' or '"arguments":"{}"'
      T.ok(body:find(empty, 1, true), "the call goes back with {} arguments")
      local history_args
      for _, m in ipairs(r.history) do
        for _, b in ipairs(m.content or {}) do
          if b.type == "tool_use" then history_args = b.arguments end
        end
      end
      T.eq(history_args, bad, "history keeps what the model sent")
      mock:close()
    end)
  end
end

T.done()
