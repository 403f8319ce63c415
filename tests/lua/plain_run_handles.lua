-- Run by a plain lua5.4: run handles work without the host's scheduler around them. A
-- started run progresses while the script waits on anything (ah.sleep, run:wait);
-- run:cancel ends it at once; agent:run is start + wait.
local ah = require "agenthost"
local T = require "ahtest"

local m = ah.mock{ plan = { { stall_after_events = 3 } } }
local events = {}
local agent = ah.agent{ client = ah.client{ provider = "openai", model = "m", base_url = m.url },
                        policy = T.fast{ idle_timeout_ms = 60000 },
                        on_event = function(ev) events[#events + 1] = ev.type end }
local run = agent:start("stall please")
T.eq(type(run.id), "string", "run.id")
-- waiting on something else drives the loop: the run sends its request and stalls
while #m:requests() == 0 do ah.sleep(5) end
ah.sleep(20)
T.eq(run:cancel("enough"), true, "cancel while stalled")
local r = run:wait()
T.eq(r.outcome, "cancelled", "outcome")
T.eq(r.error.message, "cancelled: enough", "reason")
T.eq(events[#events], "run_end", "run_end last")
T.eq(#m:requests(), 1, "no further request")
T.ok("plain lua5.4: start, cancel a stalled stream, wait")

local r2 = agent:run("now complete")
T.eq(r2.outcome, "completed", "agent:run after a cancel")
T.ok("plain lua5.4: agent:run is start + wait")
m:close()
