-- seq.lua - K agent runs one after another over one client, for tests/bench/scale.sh:
--   agenthost tests/bench/seq.lua BASE_URL K [WIRE]
-- The system calls per request are (calls at 2K - calls at K) / K, so start-up and the
-- first connection cancel out. Exits 1 unless every run completed.
local ah = require "agenthost"
local url, k, wire = arg[1], tonumber(arg[2]), arg[3] or "anthropic"
assert(url and k, "usage: seq.lua BASE_URL K [WIRE]")

local agent = ah.agent{
  client = ah.client{ provider = wire, model = "mock-bench", base_url = url },
  on_event = false,
}
local done = 0
for i = 1, k do
  if agent:run("question number " .. i).outcome == "completed" then done = done + 1 end
end
print(string.format("seq runs=%d completed=%d", k, done))
if done ~= k then
  io.stderr:write(string.format("seq.lua: only %d of %d runs completed\n", done, k))
  os.exit(1)
end
