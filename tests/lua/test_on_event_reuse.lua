-- on_event_reuse = true: the hook gets one table per run for each delta type, refilled
-- for every delta (valid during the call only); every other event is still a fresh
-- table; without the option every event is its own table.
local ah = require "agenthost"
local T = require "ahtest"

local m = ah.mock{ text_deltas = 6 }
local client = ah.client{ provider = "anthropic", model = "m", base_url = m.url }

local function run(reuse)
  local seen, texts, others, fields_ok = {}, {}, {}, true
  local agent = ah.agent{ client = client, policy = T.fast(), on_event_reuse = reuse,
    on_event = function(ev)
      if ev.type == "text_delta" then
        seen[#seen + 1] = ev
        texts[#texts + 1] = ev.text
        local n = 0
        for _ in pairs(ev) do n = n + 1 end
        -- type, run_id, ts_ms, llm_call, block, text
        fields_ok = fields_ok and n == 6 and T.is_integer(ev.llm_call)
                    and T.is_integer(ev.block) and type(ev.text) == "string"
                    and type(ev.run_id) == "string" and T.is_integer(ev.ts_ms)
      else
        others[#others + 1] = ev
      end
    end }
  local r = agent:run("tell me a story")
  T.eq(r.outcome, "completed", "outcome")
  T.eq(table.concat(texts), r.text, "the deltas, read during the call, are the answer")
  assert(fields_ok, "every delta table has exactly its six fields")
  assert(#seen >= 6, "one call per delta")
  return seen, others
end

local seen, others = run(true)
for i = 2, #seen do assert(rawequal(seen[i], seen[1]), "the same table for every delta") end
for i = 2, #others do
  assert(not rawequal(others[i], others[i - 1]), "other events are fresh tables")
end
T.eq(others[1].type, "run_start", "other events keep their fields")
T.ok("on_event_reuse = true reuses one delta table")

seen = run(false)
assert(not rawequal(seen[1], seen[2]), "a table per delta by default")
T.eq(seen[1].text ~= nil, true, "kept tables keep their values")
T.ok("without on_event_reuse every delta is its own table")

T.raises(function() ah.agent{ client = client, on_event_reuse = 1 } end,
         "on_event_reuse must be a boolean")
T.ok("on_event_reuse is checked")
m:close()
