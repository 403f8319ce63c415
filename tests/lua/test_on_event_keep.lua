-- A hook that keeps its event tables, in any of the ways Lua can keep a value, finds each
-- one holding its own event's values after the run (the default is a fresh table per
-- event; only a hook that provably cannot keep or change its table gets a refilled one,
-- and for it that is the same); a hook that only reads sees every delta.
local ah = require "agenthost"
local T = require "ahtest"

local m = ah.mock{ text_deltas = 8 }
local client = ah.client{ provider = "anthropic", model = "m", base_url = m.url }

local function run(hook, opts)
  local agent = ah.agent{ client = client, policy = T.fast(), on_event = hook,
                          on_event_reuse = opts and opts.reuse }
  local r = agent:run("tell me a story please")
  T.eq(r.outcome, "completed", "outcome")
  return r
end

local function check(kept, r, how)
  local texts = {}
  for _, ev in ipairs(kept) do
    if ev.type == "text_delta" then texts[#texts + 1] = ev.text end
  end
  assert(#texts >= 8, how .. ": every delta kept (" .. #texts .. ")")
  T.eq(table.concat(texts), r.text, how .. ": each kept table holds its own delta")
end

local kept = {}
check(kept, run(function(ev) kept[#kept + 1] = ev end), "appended")
local k2, n = {}, 0
check(k2, run(function(ev) n = n + 1; k2[n] = ev end), "indexed")
local k3 = {}
check(k3, run(function(ev) table.insert(k3, ev) end), "table.insert")
local k4 = {}
local function keep(e) k4[#k4 + 1] = e end
check(k4, run(function(ev) keep(ev) end), "passed to a function")
local k5, last = {}, nil
check(k5, run(function(ev) if last then k5[#k5 + 1] = last end; last = ev end), "upvalue")
k5[#k5 + 1] = last
local k6 = {}
check(k6, run(function(ev) local f = function() return ev end; k6[#k6 + 1] = f() end),
      "closure")
local k7, byref, seq = {}, {}, 0
local r7 = run(function(ev) seq = seq + 1; byref[ev] = seq end)
for ev, i in pairs(byref) do k7[i] = ev end
check(k7, r7, "as a key")
T.ok("kept event tables keep their values however they are kept")

-- read-only hooks: every delta seen with its values, whether or not refilled
local count, texts = 0, {}
local r = run(function(ev)
  if ev.type == "text_delta" then count = count + 1; texts[count] = ev.text end
end)
T.eq(table.concat(texts), r.text, "a reading hook sees every delta's text")
assert(count >= 8, "and every delta")
T.ok("a hook that only reads sees every delta")
m:close()
