-- mcp_faults.lua - agenthost through the fault matrix of tests/bench/mcp_bench.sh, the
-- same cases in the same order as mcp_host_loop.mjs (the typical host loop on the
-- official client): max_attempts 4 (1 + 3 retries, as that loop), timeout_ms =
-- TIMEOUT_MS, the server declared trusted (so the read-only `lookup` is safe to repeat;
-- `charge` has no annotations and is not).
--   agenthost mcp_faults.lua STDIO_CMD EVENTS_URL PLAIN_URL TIMEOUT_MS PREFIX
-- Prints one line per case: "case=T/TOOL/FAULT key=K outcome=O attempts=A ms=M then=OK"
-- (then: whether a plain call on the same server works afterwards). Every case starts
-- on a fresh ah.mcp.
local ah = require "agenthost"
local stdio_cmd, events_url, plain_url, timeout, prefix =
  arg[1], arg[2], arg[3], tonumber(arg[4] or "60000"), arg[5]

local function wall_ms()
  local p = io.popen("date +%s%N")
  local ns = p:read("*l")
  p:close()
  return tonumber(ns) / 1e6
end
local policy = { max_attempts = 4, base_ms = 100, cap_ms = 1000 }
local matrix = {
  { "stdio", { "none", "crash_before", "crash_after", "hang" } },
  { "http-events", { "none", "cut", "busy", "expire", "expire2", "hang" } },
  { "http-plain", { "none", "cut", "busy", "expire", "hang" } },
}
local function server(kind)
  local cfg = { name = "pay", policy = policy, timeout_ms = timeout, trust = true,
                restart = { max = 15, window_s = 60 } }
  if kind == "stdio" then
    local argv = {}
    for w in stdio_cmd:gmatch("%S+") do argv[#argv + 1] = w end
    cfg.command = argv
    cfg.env = { COUNT_FILE = os.getenv("COUNT_FILE"), STATE_DIR = os.getenv("STATE_DIR") }
  else
    cfg.url = kind == "http-events" and events_url or plain_url
  end
  return ah.mcp(cfg)
end
for _, m in ipairs(matrix) do
  local kind, faults = m[1], m[2]
  for _, tool in ipairs({ "charge", "lookup" }) do
    for _, fault in ipairs(faults) do
      local s = server(kind) -- a fresh server per case, as mcp_host_loop.mjs
      local key = prefix .. "-" .. kind .. "-" .. tool .. "-" .. fault
      local t0 = wall_ms()
      local r = s:call(tool, { fault = fault }, { key = key })
      local ms = wall_ms() - t0
      local th = s:call(tool, {}, { key = key .. "-then" })
      print(string.format("case=%s/%s/%s key=%s outcome=%s attempts=%d ms=%d then=%d", kind,
        tool, fault, key, r.outcome, r.attempts, math.floor(ms + 0.5), th.ok and 1 or 0))
      s:close()
    end
  end
end
