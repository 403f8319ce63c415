-- on_event sees every event as a table with the documented fields (docs/lua.md); a hook that raises is
-- logged once and the run completes as if it were not there.
local ah = require "agenthost"
local T = require "ahtest"

local m = ah.mock{ text_deltas = 4 }
local client = ah.client{ provider = "anthropic", model = "m", base_url = m.url }

local evs = {}
local agent = ah.agent{ client = client, policy = T.fast{ idle_timeout_ms = 5000 },
                        on_event = function(ev) evs[#evs + 1] = ev end }
m:set_plan{ { status = 503, headers = { ["retry-after-ms"] = 3 } }, { cut_after_events = 5 } }
local r = agent:run("tell me a story please")
T.eq(r.outcome, "completed", "outcome")
local by = {}
for _, ev in ipairs(evs) do by[ev.type] = by[ev.type] or {}; table.insert(by[ev.type], ev) end
T.eq(evs[1].type, "run_start", "first event")
T.eq(evs[#evs].type, "run_end", "last event")
T.eq(evs[1].run_id, r.run_id, "run_start.run_id")
-- every event names its run and carries the wall time (ms since the epoch), in order
local prev = 0
for i, ev in ipairs(evs) do
  T.eq(ev.run_id, r.run_id, "event " .. i .. " (" .. ev.type .. ").run_id")
  T.eq(T.is_integer(ev.ts_ms), true, "event " .. i .. ".ts_ms is a whole number")
  assert(ev.ts_ms >= prev and math.abs(ev.ts_ms - os.time() * 1000) < 60000,
         "ts_ms is wall time and never goes back: " .. ev.ts_ms)
  prev = ev.ts_ms
end
T.eq(evs[#evs].outcome, "completed", "run_end.outcome")
T.eq(evs[#evs].error, nil, "run_end.error is nil on success")
local retry = by.llm_retry[1]
T.eq(retry.llm_call, 1, "llm_retry.llm_call")
T.eq(retry.failed_attempt, 1, "llm_retry.failed_attempt")
T.eq(retry.max_attempts, 4, "llm_retry.max_attempts")
T.eq(retry.status, 503, "llm_retry.status")
T.eq(retry.wait_source, "server", "llm_retry.wait_source")
assert(retry.wait_ms >= 3, "llm_retry.wait_ms floors at the hint")
T.eq(retry.error.kind, "http", "llm_retry.error.kind")
T.eq(retry.error.retry_after_ms, 3, "llm_retry.error.retry_after_ms")
local cont = by.llm_continuation[1]
T.eq(cont.continuation, 1, "llm_continuation.continuation")
T.eq(cont.max_continuations, 3, "llm_continuation.max_continuations")
assert(cont.committed_blocks >= 0 and cont.discarded_blocks >= 0, "continuation counts")
T.eq(type(cont.reason), "string", "llm_continuation.reason")
local starts = by.llm_call_start
T.eq(starts[1].attempt, 1, "llm_call_start.attempt")
T.eq(starts[1].continuation, 0, "llm_call_start.continuation")
T.eq(starts[#starts].continuation, 1, "the continuation's llm_call_start")
local ends = by.llm_call_end
T.eq(ends[#ends].stop_reason, "end_turn", "llm_call_end.stop_reason")
assert(ends[#ends].output_tokens > 0, "llm_call_end.output_tokens")
for _, d in ipairs(by.text_delta) do
  assert(type(d.text) == "string" and d.block and d.llm_call, "text_delta fields")
end
T.eq(cont.mode, "regenerate", "llm_continuation.mode: the cut kept nothing")
T.eq(ends[1].stop_reason, "interrupted", "the cut request's own llm_call_end")
T.eq(#ends, #starts - 1, "every request that streamed ends (the 503 did not stream)")
T.eq(r.stats.continuations, 1, "stats.continuations")
-- the 503's retry, and the cut that kept nothing: the same request again is a retry
T.eq(r.stats.retries, 2, "stats.retries")
T.eq(r.stats.llm_calls, 1, "stats.llm_calls counts model turns")
T.ok("events carry the documented fields through a retry and a continuation")

-- a hook that fails on every event: the run completes, every event still reaches it
local n = 0
local noisy = ah.agent{ client = client, policy = T.fast(),
                        on_event = function(ev) n = n + 1; error("hook bug " .. ev.type) end }
m:set_plan(nil)
r = noisy:run("hello")
T.eq(r.outcome, "completed", "outcome with a failing hook")
assert(n >= 4, "the hook kept being called")
T.contains(r.text, "hello", "text unaffected")
r = noisy:run("hello again")
T.eq(r.outcome, "completed", "second run with a failing hook")
T.ok("on_event raising does not stop the run")

-- a hook that yields is an error too (hooks must not yield), reported, run goes on
local yielder = ah.agent{ client = client, policy = T.fast(),
                          on_event = function() coroutine.yield() end }
T.eq(yielder:run("x").outcome, "completed", "yielding hook")
T.ok("on_event yielding is caught")

-- on_event = false: no hook and no default display
T.eq(ah.agent{ client = client, on_event = false }:run("quiet").outcome, "completed", "quiet")
T.ok("on_event = false")

-- a hook that tries to wait (ah.sleep, another agent's run) gets an error, not a
-- re-entered event loop; the run goes on
local inner = ah.agent{ client = client, on_event = false }
local tried = 0
local waiter = ah.agent{ client = client, policy = T.fast(), on_event = function(ev)
  if ev.type == "run_start" then tried = tried + 1; inner:run("nested") end
  if ev.type == "llm_call_start" then ah.sleep(1) end
end }
r = waiter:run("outer")
T.eq(r.outcome, "completed", "a waiting hook does not break the run")
T.eq(tried, 1, "the hook ran")
T.ok("waiting inside a hook is refused")
m:close()
