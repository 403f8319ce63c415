-- provider = "gemini" through the mock: the model in the path, the key in x-goog-api-key,
-- a tool round (functionCall / functionResponse and the thought signature sent back), a
-- cut stream continued, the raw JSON error tail after the events retried as a failed
-- attempt, a 429 whose RetryInfo is the retry's floor, and the prefill refusal of the
-- models that refuse a trailing model turn, learnt once.
local ah = require "agenthost"
local T = require "ahtest"

local KEY = "gm-test-PLANTED-0123456789"
local m = ah.mock{}
local client = ah.client{ provider = "gemini", model = "gemini-2.5-flash", base_url = m.url,
                          api_key = KEY }
T.eq(client.provider, "gemini", "client.provider")
local agent = ah.agent{ client = client, policy = T.fast(), max_steps = 4,
  tools = { lookup = { description = "Look a word up",
                       schema = { type = "object", properties = { word = { type = "string" } } },
                       run = function(args) return "found " .. tostring(args.word) end } } }
local r = agent:run("Look up a word")
T.eq(r.outcome, "completed", "tool round outcome")
T.contains(r.text, "The tool returned: found", "the answer quotes the result")
local reqs = m:requests()
T.eq(#reqs, 2, "two requests")
T.eq(reqs[1].path, "/v1beta/models/gemini-2.5-flash:streamGenerateContent", "the model's path")
T.contains(reqs[2].body, '"functionResponse":{"name":"lookup"', "the result by name")
T.contains(reqs[2].body, '"thoughtSignature":"c2lnX21vY2s"', "the signature goes back")
T.eq(reqs[2].body:find('"id":"gc_', 1, true), nil, "a made-up call id is not sent")
T.eq(r.stats.tool_calls, 1, "one tool call")

-- a cut, continued (gemini-2.5 continues a trailing model turn: prefill)
local m2 = ah.mock{ plan = { { cut_after_events = 2 } }, text_deltas = 5,
                    text = "One two three four five six seven." }
local c2 = ah.client{ provider = "gemini", model = "gemini-2.5-flash", base_url = m2.url,
                      api_key = KEY }
r = ah.agent{ client = c2, policy = T.fast() }:run("count")
T.eq(r.outcome, "completed", "cut outcome")
T.eq(r.text, "One two three four five six seven.", "the text whole once")
T.eq(r.stats.continuations, 1, "one continuation")

-- the error after the events (raw JSON, no data: line) is the provider's in-stream error
local m3 = ah.mock{ plan = { { error_event_after = 1, error_type = "UNAVAILABLE",
                               message = "The model is overloaded." } } }
local c3 = ah.client{ provider = "gemini", model = "gemini-2.5-flash", base_url = m3.url,
                      api_key = KEY }
local errs = {}
r = ah.agent{ client = c3, policy = T.fast(), on_event = function(ev)
  if ev.type == "llm_retry" or ev.type == "llm_continuation" then errs[#errs + 1] = ev end
end }:run("hi")
T.eq(r.outcome, "completed", "after the error tail")
assert(#errs >= 1, "the error tail was seen")

-- 429 with RetryInfo: its retryDelay is the floor of the wait
local body = '{"error":{"code":429,"message":"quota","status":"RESOURCE_EXHAUSTED",'
  .. '"details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"0.3s"}]}}'
local m4 = ah.mock{ plan = { { status = 429, body = body } } }
local c4 = ah.client{ provider = "gemini", model = "gemini-2.5-flash", base_url = m4.url,
                      api_key = KEY }
local retry
r = ah.agent{ client = c4, policy = T.fast(), on_event = function(ev)
  if ev.type == "llm_retry" then retry = ev end
end }:run("hi")
T.eq(r.outcome, "completed", "after the 429")
assert(retry and retry.wait_ms >= 300, "the wait is at least the RetryInfo delay")
T.eq(retry.wait_source, "server", "the wait is the server's")

-- a model that refuses a trailing model turn: the table says prompt, so no 400
local m5 = ah.mock{ plan = { { cut_after_events = 2 } }, text_deltas = 4,
                    text = "Alpha beta gamma delta." }
local c5 = ah.client{ provider = "gemini", model = "gemini-3.6-flash", base_url = m5.url,
                      api_key = KEY }
r = ah.agent{ client = c5, policy = T.fast() }:run("go")
T.eq(r.outcome, "completed", "prompt rung outcome")
local last = m5:requests()[#m5:requests()]
T.contains(last.body, '"role":"user"', "the continuation asks in a user turn")
T.eq(#m5:requests(), 2, "no refused request")
for _, q in ipairs(m:requests()) do
  T.eq(q.body:find(KEY, 1, true), nil, "no key in a body")
end
T.ok("gemini")
