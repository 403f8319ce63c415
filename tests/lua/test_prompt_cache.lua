-- Prompt caching through the mock (docs/worker.md, "Prompt caching"): a second turn whose
-- stream is cut is continued, and the continuation reads the earlier history from the
-- cache in every format (Anthropic cache_control breakpoints, OpenAI prompt_cache_key =
-- the conversation's id, the first run's); cache = false sends no marker.
local ah = require "agenthost"
local T = require "ahtest"

local function check(cond, what)
  if not cond then error(what, 2) end
end

local SYSTEM = string.rep("You are a careful assistant who answers exactly. ", 150)
local FIRST = string.rep("Tell me how prompt caching makes a resend cheap. ", 120)

local function two_turns(provider, cache)
  local m = ah.mock{ text_deltas = 20,
                     plan = { steps = { { ok = true }, { cut_after_events = 5 } },
                              ["then"] = { ok = true } } }
  local ends = {}
  local client = ah.client{ provider = provider, model = "m", base_url = m.url,
                            cache = cache }
  local agent = ah.agent{ client = client, system = SYSTEM, policy = T.fast(),
                          on_event = function(ev)
                            if ev.type == "llm_call_end" then ends[#ends + 1] = ev end
                          end }
  local r1 = agent:run(FIRST)
  T.eq(r1.outcome, "completed", provider .. ": turn 1")
  T.eq(r1.history.id, r1.run_id, provider .. ": the history keeps the conversation id")
  local r2 = agent:run("And what does a continuation cost?", { history = r1.history })
  T.eq(r2.outcome, "completed", provider .. ": turn 2")
  T.eq(r2.stats.continuations, 1, provider .. ": turn 2 was cut and continued")
  T.eq(r2.history.id, r1.run_id, provider .. ": the id stays the first run's")
  return m, ends, r1, r2
end

for _, provider in ipairs{ "anthropic", "openai", "responses" } do
  local m, ends, r1, r2 = two_turns(provider, nil)
  T.eq(#ends, 3, provider .. ": turn 1, the cut call, the continuation")
  local first, cut, cont = ends[1], ends[2], ends[3]
  T.eq(cut.stop_reason, "interrupted", provider .. ": the cut call")
  -- the continuation resends turn 1 and more; the cache covers at least turn 1's prompt
  check(cont.input_tokens > first.input_tokens, provider .. ": the continuation resends it all")
  check(cont.cache_read_tokens >= first.input_tokens - 128,
       provider .. ": the continuation reads the earlier history from the cache (" ..
       cont.cache_read_tokens .. " of " .. cont.input_tokens .. ")")
  local billed = (cont.input_tokens - cont.cache_read_tokens - cont.cache_write_tokens) +
                 0.1 * cont.cache_read_tokens + 1.25 * cont.cache_write_tokens
  check(billed < 0.5 * cont.input_tokens, provider .. ": billed-equivalent " .. billed ..
       " of " .. cont.input_tokens)
  T.eq(r2.stats.cache_read_tokens, cut.cache_read_tokens + cont.cache_read_tokens,
       provider .. ": stats count every call, the cut one too")
  local reqs = m:requests()
  if provider == "anthropic" then
    check(cut.cache_write_tokens > 0, "anthropic: the cut call wrote the earlier history")
    T.eq(first.cache_read_tokens, 0, "anthropic: nothing to read on turn 1")
    check(first.cache_write_tokens > 0, "anthropic: turn 1 wrote tools + system")
    T.contains(reqs[2].body, '"cache_control":{"type":"ephemeral"}', "breakpoints sent")
  else
    T.eq(first.cache_write_tokens, 0, provider .. ": no write figure")
    T.contains(reqs[2].body, '"prompt_cache_key":"' .. r1.run_id .. '"',
               provider .. ": prompt_cache_key is the conversation id")
    T.contains(reqs[3].body, '"prompt_cache_key":"' .. r1.run_id .. '"',
               provider .. ": the continuation keeps it")
  end
end

-- cache = false: no marker; Anthropic then reads nothing
for _, provider in ipairs{ "anthropic", "openai" } do
  local m, ends = two_turns(provider, false)
  for _, q in ipairs(m:requests()) do
    check(not q.body:find("cache_control", 1, true), provider .. ": no cache_control")
    check(not q.body:find("prompt_cache_key", 1, true), provider .. ": no prompt_cache_key")
  end
  if provider == "anthropic" then
    T.eq(ends[3].cache_read_tokens, 0, "anthropic: cache = false reads nothing")
  end
end

-- the options are checked
local m0 = ah.mock{}
local ok, err = pcall(ah.client, { provider = "anthropic", model = "m", base_url = m0.url,
                                   cache = "always" })
T.eq(ok, false, "bad cache")
T.contains(err, "cache must be \"auto\" or false", "bad cache message")
ok, err = pcall(ah.client, { provider = "anthropic", model = "m", base_url = m0.url,
                             cache_ttl = "2h" })
T.eq(ok, false, "bad cache_ttl")
T.contains(err, "cache_ttl '2h'", "bad cache_ttl message")
local c1h = ah.client{ provider = "anthropic", model = "m", base_url = m0.url,
                       cache_ttl = "1h", prompt_cache_key = "mine" }
check(c1h, "cache_ttl 1h and prompt_cache_key accepted")
T.ok("prompt caching through the mock")
