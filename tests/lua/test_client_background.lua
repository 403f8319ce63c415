-- ah.client{ provider = "responses", background = true }: OpenAI Responses background
-- mode. The field is checked (a boolean, only for responses); a cut stream is re-attached
-- to the same response at the last sequence number, and the mock records the re-attach.
local ah = require "agenthost"
local T = require "ahtest"

T.raises(function() ah.client{ provider = "responses", model = "m", background = "yes" } end,
  "ah.client: background must be a boolean (true or false), got string")
T.raises(function() ah.client{ provider = "responses", model = "m", background = 1 } end,
  "ah.client: background must be a boolean (true or false), got number")
T.raises(function() ah.client{ provider = "anthropic", model = "m", background = true } end,
  "ah.client: background: only the responses provider has background mode (provider is anthropic)")
T.raises(function() ah.client{ provider = "openai", model = "m", background = true } end,
  "background: only the responses provider")
T.raises(function() ah.client{ provider = "responses", model = "m", backgroud = true } end,
  "ah.client: unknown field 'backgroud' (did you mean 'background'?)")
-- false and nil are both "off", for every provider
ah.client{ provider = "anthropic", model = "m", background = false, api_key = "k" }
T.ok("background is validated, with the field named")

local m = ah.mock{ plan = { { cut_after_events = 6 } }, text = "Resumed exactly once." }
local client = ah.client{ provider = "responses", model = "m", base_url = m.url,
                          background = true }
local events = {}
local agent = ah.agent{ client = client, policy = T.fast(),
                        on_event = function(ev) events[#events + 1] = ev end }
local r = agent:run("hi")
T.eq(r.outcome, "completed", "outcome")
T.eq(r.text, "Resumed exactly once.", "text")
local reqs = m:requests()
T.eq(#reqs, 2, "one POST and one re-attach")
T.eq(reqs[1].method, "POST", "the request")
T.contains(reqs[1].body, '"background":true', "background in the body")
T.contains(reqs[1].body, '"store":true', "store in the body")
T.eq(reqs[2].method, "GET", "the re-attach")
T.contains(reqs[2].path, "?stream=true&starting_after=5", "re-attach after the last event")
local cont
for _, ev in ipairs(events) do
  if ev.type == "llm_continuation" then cont = ev end
end
T.eq(cont and cont.mode, "resume", "llm_continuation.mode")
T.ok("a cut background stream is re-attached and completes")
m:close()
