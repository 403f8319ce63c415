-- The continuation ladder from Lua: ah.client{ continuation = ... }, the rung the table
-- picks, the prompt rung with the default text, a restatement trimmed (stats and
-- llm_call_end.trimmed_bytes), llm_continuation.mode, and a refused prefill switching
-- an "auto" client to the prompt rung.
local ah = require "agenthost"
local T = require "ahtest"

local add = { description = "Add two integers.",
              schema = { type = "object", required = { "a", "b" },
                         properties = { a = { type = "integer" }, b = { type = "integer" } } },
              run = function(args) return tostring(args.a + args.b) end }

-- The setting is checked and readable.
local m0 = ah.mock{}
local c = ah.client{ provider = "anthropic", model = "claude-opus-4-6", base_url = m0.url }
T.eq(c.continuation, "auto", "default setting")
T.eq(c.rung, "prompt", "claude-opus-4-6 takes the prompt rung")
T.eq(ah.client{ provider = "anthropic", model = "claude-sonnet-4-5", base_url = m0.url }.rung,
     "prefill", "claude-sonnet-4-5 takes the prefill rung")
T.eq(ah.client{ provider = "openai", model = "gpt-x", base_url = m0.url }.rung, "prompt",
     "chat completions take the prompt rung")
T.eq(ah.client{ provider = "anthropic", model = "claude-opus-4-6", base_url = m0.url,
                continuation = "prefill" }.rung, "prefill", "an explicit setting wins")
local ok, err = pcall(ah.client, { provider = "anthropic", model = "x", base_url = m0.url,
                                   continuation = "promt" })
T.eq(ok, false, "bad setting")
T.contains(err, "unknown continuation 'promt' (did you mean 'prompt'?)", "bad setting message")

-- A Claude 4.6 model whose stream is cut after its text, and which restates that text
-- when asked to continue: the prompt rung, the restatement trimmed, the tool run once.
local TEXT = "I will call add now."
local m = ah.mock{ plan = { steps = { { cut_after_events = 11 } },
                            ["then"] = { ok = true, restate = true } } }
local events = {}
local agent = ah.agent{
  client = ah.client{ provider = "anthropic", model = "claude-opus-4-6", base_url = m.url },
  tools = { add = add }, policy = T.fast(),
  on_event = function(ev) events[#events + 1] = ev end }
local r = agent:run("What is 42 + 42?")
T.eq(r.outcome, "completed", "outcome")
T.eq(r.text, "The tool returned: 84", "answer")
T.eq(r.stats.continuations, 1, "one continuation")
T.eq(r.stats.trimmed_bytes, #TEXT, "stats.trimmed_bytes")
local mode, trimmed, shown = nil, 0, {}
for _, ev in ipairs(events) do
  if ev.type == "llm_continuation" then mode = ev.mode end
  if ev.type == "llm_call_end" then trimmed = trimmed + ev.trimmed_bytes end
  if ev.type == "text_delta" and ev.llm_call == 2 then shown[#shown + 1] = ev.text end
end
T.eq(mode, "prompt", "llm_continuation.mode")
T.eq(trimmed, #TEXT, "llm_call_end.trimmed_bytes")
T.eq(table.concat(shown), "", "the restatement never reached text_delta")
local reqs = m:requests()
T.eq(reqs[2].restated, #TEXT, "the mock restated the text")
T.contains(reqs[2].body, "Your previous reply was cut off.", "the default prompt was sent")
-- history: user, the partial text, the visible prompt, the tool call, its result, answer
T.eq(r.history[2].partial, true, "the cut message stays marked partial")
T.eq(r.history[2].content[1].text, TEXT, "committed once")
T.eq(r.history[3].role, "user", "the prompt is visible history")
T.eq(r.history[4].content[1].type, "tool_use", "the continuation holds only the tool call")

-- A model the table thinks takes a prefill, on a server that refuses it: one 400,
-- then the prompt rung for the rest of the client's life; the user never sees the 400.
local m2 = ah.mock{ plan = { steps = { { cut_after_events = 11 } },
                             ["then"] = { ok = true, refuse_prefill = true } } }
local client2 = ah.client{ provider = "anthropic", model = "claude-sonnet-4-5",
                           base_url = m2.url }
local gave_up = 0
local a2 = ah.agent{ client = client2, tools = { add = add }, policy = T.fast(),
                     on_event = function(ev)
                       if ev.type == "llm_gave_up" then gave_up = gave_up + 1 end
                     end }
local r2 = a2:run("What is 42 + 42?")
T.eq(r2.outcome, "completed", "refused prefill: outcome")
T.eq(r2.stats.retries, 0, "refused prefill: not a retry")
T.eq(r2.stats.continuations, 1, "refused prefill: not a continuation")
T.eq(gave_up, 0, "refused prefill: no give-up reaches the user")
T.eq(client2.rung, "prompt", "the client switched to the prompt rung")
local refused = 0
for _, q in ipairs(m2:requests()) do if q.status == 400 then refused = refused + 1 end end
T.eq(refused, 1, "one 400 from the mock")
T.ok("the continuation ladder from Lua")
m2:close()
m:close()
m0:close()
