-- on_event_coalesce: adjacent deltas of one block reach the hook merged (their texts
-- concatenated, the first one's fields), flushed at `bytes`, `ms` after the first one (a
-- timer: a pause in the stream does not hold text back) and before any other event;
-- without it every delta is its own event.
local ah = require "agenthost"
local T = require "ahtest"

local m = ah.mock{ text_deltas = 12 }
local client = ah.client{ provider = "anthropic", model = "m", base_url = m.url }

local function run(coalesce, plan)
  local deltas, order = {}, {}
  local agent = ah.agent{ client = client, policy = T.fast(), on_event_coalesce = coalesce,
    on_event = function(ev)
      order[#order + 1] = ev.type
      if ev.type == "text_delta" then
        deltas[#deltas + 1] = { text = ev.text, ts_ms = ev.ts_ms, block = ev.block,
                                llm_call = ev.llm_call, run_id = ev.run_id }
      end
    end }
  m:set_plan(plan)
  local r = agent:run("tell me a story")
  T.eq(r.outcome, "completed", "outcome")
  local texts = {}
  for i, d in ipairs(deltas) do texts[i] = d.text end
  T.eq(table.concat(texts), r.text, "the deltas are the answer")
  for _, d in ipairs(deltas) do
    T.eq(d.run_id, r.run_id, "a merged delta keeps its run")
    T.eq(T.is_integer(d.llm_call) and T.is_integer(d.block), true, "and its fields")
  end
  return deltas, order
end

local each = run(nil)
assert(#each >= 12, "without coalescing every delta is its own event (" .. #each .. ")")

-- one merged delta: nothing flushes it but the end of the block's stream
local one, order = run({ ms = 60000, bytes = 1048576 })
T.eq(#one, 1, "all the deltas merged")
assert(T.is_integer(one[1].ts_ms) and one[1].ts_ms >= each[1].ts_ms,
       "a merged delta has a ts_ms")
local seen_end
for _, t in ipairs(order) do
  if t == "llm_call_end" then seen_end = true end
  assert(not (seen_end and t == "text_delta"), "the merged delta comes before llm_call_end")
end
T.ok("coalescing merges adjacent deltas and flushes them before the next event")

-- bytes: flushed as soon as that many are buffered
local capped = run({ ms = 60000, bytes = 10 })
assert(#capped > 1 and #capped < #each, "fewer, larger events: " .. #capped)
for i = 1, #capped - 1 do
  assert(#capped[i].text >= 10, "a flushed delta holds at least `bytes` bytes")
end
T.ok("on_event_coalesce.bytes caps a merged delta")

-- ms: a pause in the stream flushes what came before it (the timer), so the first merged
-- delta is exactly the text sent before the pause
local plan = { { stall_after_events = 6, stall_ms = 300 } }
local split = run(nil, plan)
local before = {}
for i = 1, #split do
  if i > 1 and split[i].ts_ms - split[i - 1].ts_ms >= 200 then break end
  before[#before + 1] = split[i].text
end
assert(#before > 0 and #before < #split, "the stall is between two deltas")
local timed = run(20, plan)
T.eq(timed[1].text, table.concat(before), "the timer flushed the text before the pause")
assert(#timed < #split, "and merged the rest")
T.ok("on_event_coalesce = ms flushes on a timer")

T.raises(function() ah.agent{ client = client, on_event_coalesce = 0 } end,
         "on_event_coalesce must be a whole number from 1")
T.raises(function() ah.agent{ client = client, on_event_coalesce = "x" } end,
         "on_event_coalesce must be a number of ms")
T.raises(function() ah.agent{ client = client, on_event_coalesce = { bytes = 0 } } end,
         "on_event_coalesce.bytes must be a whole number from 1")
T.raises(function() ah.agent{ client = client, on_event_coalesce = { msx = 1 } } end,
         "msx")
T.ok("on_event_coalesce is checked")
m:close()
