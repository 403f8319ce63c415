-- lua_bench.lua - Lua-level measurements (not a test; run by hand):
--   agenthost tests/bench/lua_bench.lua [N_RUNS] [N_DELTAS]
-- 1. N concurrent agent runs (ah.parallel) against one in-process mock: wall time and
--    resident memory growth per run (VmRSS sampled while all runs are in flight; the
--    mock's connection threads are in the same process and included).
-- 2. One streamed answer of N_DELTAS text deltas, with and without a Lua on_event hook:
--    CPU seconds (os.clock), i.e. what the per-delta Lua table + protected call costs.
local ah = require "agenthost"
local n_runs = tonumber(arg[1]) or 200
local n_deltas = tonumber(arg[2]) or 200000

local function rss_kb()
  for line in io.lines("/proc/self/status") do
    local v = line:match("^VmRSS:%s+(%d+)")
    if v then return tonumber(v) end
  end
end

local function wall_ms() -- os.time is seconds; read the monotonic clock from /proc/uptime
  local f = io.open("/proc/uptime"); local s = f:read("n"); f:close(); return s * 1000
end

do
  local m <close> = ah.mock{}
  local agent = ah.agent{ client = ah.client{ provider = "anthropic", model = "m", base_url = m.url },
                          on_event = false }
  agent:run("warm up")
  collectgarbage()
  local base = rss_kb()
  local peak = base
  local fns = {}
  for i = 1, n_runs do
    fns[i] = function()
      local r = agent:run("question " .. i)
      peak = math.max(peak, rss_kb())
      return r.outcome
    end
  end
  local t0 = wall_ms()
  local res = ah.parallel(fns)
  local t1 = wall_ms()
  for i = 1, n_runs do assert(res[i] == "completed") end
  print(string.format("| concurrent runs | %d |", n_runs))
  print(string.format("| wall time, all runs | %.0f ms |", t1 - t0))
  print(string.format("| RSS growth while in flight | %.0f KiB (%.1f KiB per run) |",
                      peak - base, (peak - base) / n_runs))
end

do
  local text = string.rep("word ", 8)
  local m <close> = ah.mock{ text = text, text_deltas = n_deltas }
  local client = ah.client{ provider = "anthropic", model = "m", base_url = m.url }
  local quiet = ah.agent{ client = client, on_event = false }
  local count = 0
  local hooked = ah.agent{ client = client, on_event = function(ev)
    if ev.type == "text_delta" then count = count + #ev.text end
  end }
  quiet:run("x")
  local c0 = os.clock(); quiet:run("x"); local c1 = os.clock()
  hooked:run("x"); local c2 = os.clock()
  print(string.format("| %d deltas, no hook | %.3f s CPU |", n_deltas, c1 - c0))
  print(string.format("| %d deltas, Lua on_event | %.3f s CPU (%.2f us per delta extra) |",
                      n_deltas, c2 - c1, (c2 - c1 - (c1 - c0)) * 1e6 / n_deltas))
end
