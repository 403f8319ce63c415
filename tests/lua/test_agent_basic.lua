-- ah.client / ah.agent / agent:run over each wire format against ah.mock: the result's
-- fields, history, stats, and what reached the provider.
local ah = require "agenthost"
local T = require "ahtest"

local m = ah.mock{}
local KEY = "sk-test-PLANTED-0123456789abcdef"

for _, provider in ipairs(T.providers) do
  local client = ah.client{ provider = provider, model = "mock-model", base_url = m.url,
                            api_key = KEY, max_tokens = 128 }
  T.eq(client.provider, provider, "client.provider")
  T.eq(client.api_key, nil, "the key is not readable back")
  local deltas = {}
  local agent = ah.agent{ client = client, system = "You are terse.", max_steps = 3,
                          policy = T.fast(),
                          on_event = function(ev)
                            if ev.type == "text_delta" then deltas[#deltas + 1] = ev.text end
                          end }
  local before = #m:requests()
  local r = agent:run("What is   the answer?")
  T.eq(r.outcome, "completed", provider .. " outcome")
  T.eq(r.error, nil, provider .. " error")
  T.contains(r.text, 'You said: "What is the answer?"', provider .. " text")
  T.eq(table.concat(deltas), r.text, provider .. " deltas add up to the text")
  T.eq(type(r.run_id), "string", provider .. " run_id")
  -- history: the user's input, then the assistant's answer
  T.eq(#r.history, 2, provider .. " history length")
  T.eq(r.history[1].role, "user", provider .. " history[1].role")
  T.eq(r.history[1].content[1].type, "text", provider .. " history[1] block")
  T.eq(r.history[1].content[1].text, "What is   the answer?", provider .. " history[1] text")
  T.eq(r.history[2].role, "assistant", provider .. " history[2].role")
  T.eq(r.history[2].partial, false, provider .. " history[2].partial")
  T.eq(r.history[2].content[1].text, r.text, provider .. " history[2] text")
  -- stats
  T.eq(r.stats.llm_calls, 1, provider .. " llm_calls")
  T.eq(r.stats.attempts, 1, provider .. " attempts")
  T.eq(r.stats.retries, 0, provider .. " retries")
  T.eq(r.stats.continuations, 0, provider .. " continuations")
  T.eq(r.stats.tool_calls, 0, provider .. " tool_calls")
  T.eq(r.stats.output_retries, 0, provider .. " output_retries")
  assert(r.stats.input_tokens > 0 and r.stats.output_tokens > 0, provider .. " tokens")
  -- the request the mock saw
  local reqs = m:requests()
  T.eq(#reqs, before + 1, provider .. " one request")
  local q = reqs[#reqs]
  T.eq(q.wire, provider, provider .. " wire")
  T.eq(q.stream, true, provider .. " streamed")
  T.eq(q.status, 200, provider .. " status")
  T.eq(q.step, "ok", provider .. " step")
  T.contains(q.body, "You are terse.", provider .. " system prompt sent")
  -- the model goes in the body, or (Gemini) in the path
  T.contains(q.body .. q.path, "mock-model", provider .. " model sent")
  assert(not q.body:find(KEY, 1, true), provider .. ": the key is not in the body")
  local auth = q.headers["x-api-key"] or q.headers["authorization"]
    or q.headers["x-goog-api-key"]
  T.contains(auth, "[REDACTED]", provider .. " auth header recorded redacted")
  T.ok(provider .. ": run completes with text, history, stats and the request as sent")
end

-- a client's base URL may already name the version or the whole path
local c2 = ah.client{ provider = "openai", model = "m", base_url = m.url .. "/v1" }
T.eq(c2.url, m.url .. "/v1/chat/completions", "base_url ending in /v1")
local c3 = ah.client{ provider = "anthropic", model = "m", api_key = "k" }
T.eq(c3.url, "https://api.anthropic.com/v1/messages", "default base_url")
T.ok("client URLs")

-- the same agent runs again with a fresh history
local agent = ah.agent{ client = ah.client{ provider = "anthropic", model = "m", base_url = m.url },
                        on_event = false }
local a, b = agent:run("first"), agent:run("second")
T.contains(a.text, "first", "first run")
T.contains(b.text, "second", "second run")
T.eq(#b.history, 2, "second run starts from an empty history")
assert(a.run_id ~= b.run_id, "each run has its own id")
T.ok("an agent runs many times, each run with its own history and id")

-- a provider that fails for good: the run fails with a classified error
m:set_plan{ { status = 401 } }
local r = agent:run("who am I")
T.eq(r.outcome, "failed", "401 outcome")
T.eq(r.error.kind, "http", "401 kind")
T.eq(r.error.status, 401, "401 status")
T.eq(r.stats.attempts, 1, "401 is not retried")
T.contains(tostring(r.error), "401", "tostring(error) gives the message")
T.ok("a 401 fails the run with an http error, not retried")
m:close()
