-- test_rate_limit.lua - ah.rate_limit from Lua (local pacing, no Redis): a client's limit
-- paces every run of an agent on it, an llm_paced event comes before the attempt it
-- delays, the agent's own limit wins over the client's, and bad fields are named.
local ah = require "agenthost"
local T = require "toolcheck"

local mock = ah.mock {}
T.test("a client's rate limit paces its agents", function()
  -- one slot per second: the second run is paced unless the first took a second or more
  -- (valgrind on a busy machine): then it may go at once, and that is checked instead
  local rl = ah.rate_limit { requests_per_minute = 60 }
  T.ok(tostring(rl):find("local", 1, true), "tostring: " .. tostring(rl))
  local client = ah.client { provider = "anthropic", model = "m", base_url = mock.url,
                             api_key = "k", rate_limit = rl }
  local evs = {}
  local agent = ah.agent { client = client, on_event = function(ev) evs[#evs + 1] = ev end }
  for i = 1, 2 do T.eq(agent:run("hi " .. i).outcome, "completed", "run " .. i) end
  local paced, before_start, starts = 0, 0, {}
  for i, ev in ipairs(evs) do
    if ev.type == "llm_call_start" then starts[#starts + 1] = ev.ts_ms end
    if ev.type == "llm_paced" then
      paced = paced + 1
      T.ok(ev.wait_ms > 0 and ev.wait_ms <= 1000, "wait_ms " .. ev.wait_ms)
      T.eq(ev.limit, "requests_per_minute", "limit")
      T.eq(type(ev.llm_call), "number", "llm_call")
      if evs[i + 1] and evs[i + 1].type == "llm_call_start" then
        before_start = before_start + 1
      end
    end
  end
  T.eq(#starts, 2, "two attempts")
  if paced == 0 then -- the slot had come by itself: allowed only a second after the first
    T.ok(starts[2] - starts[1] >= 900, "unpaced only after the slot: " .. (starts[2] - starts[1]))
  else
    T.eq(paced, 1, "the 2nd run was paced")
    T.eq(before_start, 1, "llm_paced comes right before its llm_call_start")
  end
end)

T.test("the status display words a paced wait", function()
  local st = require("agenthost.status").new { stream = io.stdout, tty = false }
  local kind, text = st:describe { type = "llm_paced", llm_call = 1, wait_ms = 250,
                                   limit = "tokens_per_minute" }
  T.eq({ kind, text }, { "transient", "pacing: next LLM request in 250ms (token rate limit)" },
       "llm_paced line")
end)

T.test("the agent's rate limit wins over the client's", function()
  local slow = ah.rate_limit { requests_per_minute = 1 }
  local client = ah.client { provider = "anthropic", model = "m", base_url = mock.url,
                             api_key = "k", rate_limit = slow }
  local evs = {}
  local agent = ah.agent { client = client, on_event = function(ev) evs[#evs + 1] = ev end,
                           rate_limit = ah.rate_limit { requests_per_minute = 6e5 } }
  for i = 1, 2 do agent:run("x " .. i) end
  for _, ev in ipairs(evs) do
    T.ok(ev.type ~= "llm_paced" or ev.wait_ms <= 1, "not paced by the client's 1/min")
  end
end)

T.test("bad fields are named", function()
  T.raises(function() ah.rate_limit {} end, "requests_per_minute or tokens_per_minute",
           "a limit is required")
  T.raises(function() ah.rate_limit { requests_per_minut = 5 } end, "requests_per_minute",
           "did you mean")
  T.raises(function() ah.rate_limit { requests_per_minute = -5 } end, ">= 0", "negative")
  T.raises(function() ah.rate_limit { requests_per_minute = "5" } end, "must be a number",
           "type")
  T.raises(function() ah.rate_limit { requests_per_minute = 5, burst = 0 } end, "burst",
           "burst")
  T.raises(function() ah.rate_limit { requests_per_minute = 5, follow_headers = 1 } end,
           "follow_headers must be a boolean", "follow_headers")
  T.ok(ah.rate_limit { requests_per_minute = 5, follow_headers = false }, "follow_headers")
  T.raises(function() ah.rate_limit { requests_per_minute = 5, redis = "redis://h:1" } end,
           "key is required", "key with redis")
  T.raises(function() ah.rate_limit { requests_per_minute = 5, redis = "http://h", key = "k" } end,
           "redis://", "bad url")
  T.raises(function() ah.client { provider = "anthropic", model = "m", rate_limit = 5 } end,
           "rate_limit must be an ah.rate_limit", "client field")
  T.raises(function() ah.retry_budget { redis = "redis://h:1" } end, "key is required",
           "budget key")
end)

mock:close()
T.done()
