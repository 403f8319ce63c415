-- cache_bench.lua - what the continuation of a cut turn costs with prompt caching, for
-- tests/bench/run.sh (section 10) and by hand:
--   agenthost tests/bench/cache_bench.lua [TURNS] [SHAPE]
-- A conversation of TURNS turns (6) through the built-in mock (in-process, its prompt
-- cache as docs/mock.md "Prompt caching" describes), ~20k mock tokens (bytes / 4) of
-- system prompt, user turns and answers; the last turn's stream is cut half-way and
-- continued. For each provider the continuation's llm_call_end gives its whole prompt
-- (input_tokens) and what the cache read and wrote; billed-equivalent input =
--   (input - read - write) * 1 + read * 0.1 + write * 1.25
-- against an uncached resend of the same request (input * 1). The same conversation with
-- cache = false is run too: what the provider bills without agenthost's cache markers
-- (OpenAI and Gemini cache by prefix on their own; Anthropic caches only what is marked).
-- Two continuations: the default one (a cut inside the answer's only text block asks
-- for the block again, so the continuation resends the cut request) and
-- continue_partial_text = "sentence" (the complete sentences are kept and sent back:
-- a prefill, or the prompt rung's assistant turn plus "continue").
-- SHAPE: "answers" (the default: short questions, long answers, as a tool-heavy or
-- writing agent has), "inputs" (long user turns, short answers), "even" (both long).
-- Prints a markdown table; numbers, never assertions (exit 1 only if a run fails).
local ah = require "agenthost"

local TURNS = tonumber(arg and arg[1]) or 6
local SHAPE = (arg and arg[2]) or "answers"
local PROVIDERS = { "anthropic", "openai", "responses", "gemini" }
local MODEL = { anthropic = "claude-sonnet-4-5", openai = "gpt-5", responses = "gpt-5",
                gemini = "gemini-2.5-flash" }
local DELTAS = 40

-- text of about n bytes, different per seed (so no two turns share a prefix by chance)
local WORDS = { "cache", "prefix", "stream", "token", "answer", "history", "agent",
                "provider", "resend", "context", "budget", "model", "turn", "block" }
local function text(n, seed)
  local out, len, i = {}, 0, seed
  while len < n do
    i = (i * 1103515245 + 12345) % 2147483648
    local w = WORDS[(i >> 16) % #WORDS + 1]
    if #out % 12 == 11 then w = w .. "." end -- sentences, for continue_partial_text
    out[#out + 1] = w
    len = len + #w + 1
  end
  return table.concat(out, " ")
end

-- bytes of system prompt, each user turn, each answer; ~80 KB = ~20k mock tokens in all
local sizes = {
  answers = { system = 7000, user = 1400, answer = 12500 },
  inputs = { system = 7000, user = 12500, answer = 1400 },
  even = { system = 7000, user = 7000, answer = 7000 },
}
local size = assert(sizes[SHAPE], "SHAPE must be answers, inputs or even")
local SYSTEM = text(size.system, 7)
local ANSWER = text(size.answer, 11)

local function conversation(provider, cache, partial)
  -- every turn answers in full, but the last, which is cut half-way through its deltas
  -- (Anthropic: message_start + content_block_start come first) and then continued
  local steps = {}
  for i = 1, TURNS - 1 do steps[i] = { ok = true } end
  steps[TURNS] = { cut_after_events = DELTAS // 2 + 2 }
  local m <close> = ah.mock{ text = ANSWER, text_deltas = DELTAS,
                             plan = { steps = steps, ["then"] = { ok = true } } }
  local ends = {}
  local agent = ah.agent{
    client = ah.client{ provider = provider, model = MODEL[provider], base_url = m.url,
                        cache = cache },
    system = SYSTEM,
    policy = { base_ms = 1, cap_ms = 5, continue_partial_text = partial },
    on_event = function(ev)
      if ev.type == "llm_call_end" then ends[#ends + 1] = ev end
    end,
  }
  local history, r
  for t = 1, TURNS do
    r = agent:run(text(size.user, 100 + t), { history = history })
    if r.outcome ~= "completed" then
      error(string.format("%s turn %d: %s %s", provider, t, r.outcome,
                          r.error and r.error.message or ""))
    end
    history = r.history
  end
  if r.stats.continuations ~= 1 then
    error(provider .. ": the last turn was not cut and continued once")
  end
  local c = ends[#ends]
  local read, write = math.max(c.cache_read_tokens or 0, 0),
                      math.max(c.cache_write_tokens or 0, 0)
  local billed = (c.input_tokens - read - write) + 0.1 * read + 1.25 * write
  return { input = c.input_tokens, read = read, write = write, billed = billed,
           ratio = billed / c.input_tokens, stats = r.stats }
end

print(string.format("%d turns, shape %q: system %d B, user turns %d B, answers %d B; " ..
                    "the last answer cut after %d of %d deltas and continued",
                    TURNS, SHAPE, size.system, size.user, size.answer, DELTAS // 2,
                    DELTAS))
print("")
print("| provider | model | continuation | input | cache read | cache write | " ..
      "billed-equivalent | of a resend | cache = false: billed | of a resend |")
print("|---|---|---|---|---|---|---|---|---|---|")
for _, p in ipairs(PROVIDERS) do
  for _, partial in ipairs{ false, "sentence" } do
    local mode = partial and "partial text kept" or "default"
    local on, off = conversation(p, nil, partial or nil), conversation(p, false, partial or nil)
    print(string.format("| %s | %s | %s | %d | %d | %d | %.0f | %.1f %% | %.0f | %.1f %% |",
                        p, MODEL[p], mode, on.input, on.read, on.write, on.billed,
                        100 * on.ratio, off.billed, 100 * off.ratio))
  end
end
