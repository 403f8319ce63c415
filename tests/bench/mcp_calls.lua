-- mcp_calls.lua - sequential MCP tool calls through agenthost, for tests/bench/mcp_bench.sh:
--   agenthost tests/bench/mcp_calls.lua stdio|http TARGET N [CONC]
-- stdio: TARGET is the server's command line (split on spaces); http: its URL. Calls the
-- fault server's `lookup` tool (no key, so no ledger: what a plain call costs) WARM times,
-- then N times measured, CONC (default 1) at a time (ah.parallel of CONC coroutines). Prints "calls=N wall_ms=W cpu_ms=C" (this process alone:
-- os.clock is its CPU time, user + system, every thread); exits 1 if any call failed, so a
-- benchmark never reports the speed of a failure.
local ah = require "agenthost"
local mode, target, n, conc = arg[1], arg[2], tonumber(arg[3] or "2000"), tonumber(arg[4] or "1")
assert((mode == "stdio" or mode == "http") and target, "usage: mcp_calls.lua stdio|http TARGET N")
local WARM = 50

local function wall_ms()
  local p = io.popen("date +%s%N")
  local ns = p:read("*l")
  p:close()
  return tonumber(ns) / 1e6
end

local cfg = { name = "bench" }
if mode == "stdio" then
  local argv = {}
  for w in target:gmatch("%S+") do argv[#argv + 1] = w end
  cfg.command = argv
  cfg.env = { NODE_PATH = os.getenv("NODE_PATH"), COUNT_FILE = "/dev/null",
              STATE_DIR = os.getenv("STATE_DIR") or "/tmp" }
else
  cfg.url = target
end
local s = ah.mcp(cfg)
assert(#s:tools() > 0, "the server listed no tools: " .. tostring(s.reason))
for _ = 1, WARM do
  local r = s:call("lookup", { amount = 1 })
  if not r.ok then error("warm-up call failed: " .. tostring(r.error)) end
end
local failed = false
local function worker(from)
  return function()
    for i = from, n, conc do
      local r = s:call("lookup", { amount = i })
      if not r.ok then
        io.stderr:write("mcp_calls.lua: call " .. i .. " failed: " .. tostring(r.error) .. "\n")
        failed = true
        return
      end
    end
  end
end
local c0, w0 = os.clock(), wall_ms()
if conc == 1 then
  worker(1)()
else
  local fns = {}
  for k = 1, conc do fns[k] = worker(k) end
  ah.parallel(fns)
end
local w1, c1 = wall_ms(), os.clock()
if failed then os.exit(1) end
print(string.format("calls=%d wall_ms=%.1f cpu_ms=%.1f", n, w1 - w0, (c1 - c0) * 1000))
s:close()
