-- scale.lua - N concurrent agent runs in one process, for tests/bench/run.sh:
--   agenthost tests/bench/scale.lua BASE_URL N [WIRE]
-- N functions under one ah.parallel, each one agent:run (one LLM call) against a mock
-- in another process. N = 0 builds the client and agent only: the baseline the per-run
-- memory is measured from. The caller measures the process (wall, CPU, peak RSS);
-- this prints how many runs completed and exits 1 if any did not.
local ah = require "agenthost"
local url, n, wire = arg[1], tonumber(arg[2]), arg[3] or "anthropic"
assert(url and n, "usage: scale.lua BASE_URL N [WIRE]")

local agent = ah.agent{
  client = ah.client{ provider = wire, model = "mock-bench", base_url = url },
  on_event = false,
}
local fns = {}
for i = 1, n do
  fns[i] = function() return agent:run("question number " .. i).outcome end
end
local res = n > 0 and ah.parallel(fns) or { n = 0 }
local done = 0
for i = 1, n do
  if res[i] == "completed" then done = done + 1 end
end
print(string.format("scale runs=%d completed=%d", n, done))
if done ~= n then
  io.stderr:write(string.format("scale.lua: only %d of %d runs completed\n", done, n))
  os.exit(1)
end
