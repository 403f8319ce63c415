-- fleet_driver.lua - drives P worker processes (fleet_worker.lua) against one in-process
-- mock and one redis-server, and prints what the mock saw.
--   agenthost fleet_driver.lua AGENTHOST_BIN SCENARIO P RUNS [OUTAGE] [RPM] [REDIS_URL]
-- SCENARIO: shared | local (retry budgets; the mock answers 503 to everything, or to its
-- first OUTAGE requests only, or, with OUTAGE = -2, to every other request),
-- pace | nopace (a mock enforcing RPM). Output: key=value lines (requests, s429, s503,
-- elapsed_ms, and each worker's line).
local ah = require "agenthost"
local R = require "redisfix"
local bin, scenario, P, RUNS = arg[1], arg[2], tonumber(arg[3]), tonumber(arg[4])
local outage, rpm, redis_url = tonumber(arg[5] or "-1"), tonumber(arg[6] or "0"), arg[7]
local here = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"

local redis = R.start()
redis_url = redis_url or redis.url
-- string.rep(s, n, sep) is 5.2+
local function rep(s, n, sep)
  if n <= 0 then return "" end
  return string.rep(s .. sep, n - 1) .. s
end
local plan
if scenario == "pace" or scenario == "nopace" then
  -- the mock allows 3 more back to back than the pacer's burst (1): a request a
  -- process sends late (2 cores, 8 processes) moves the mock's schedule, not the pacer's
  plan = string.format('{"steps": [], "rate_limit": {"requests_per_minute": %d, "burst": 4}}',
                       rpm)
elseif outage == -2 then -- every other request fails: 50 % injected 5xx
  plan = '{"steps": [' .. rep('{"status": 503}, {"ok": true}', 20000, ", ") .. ']}'
elseif outage >= 0 then
  plan = '{"steps": [' .. rep('{"status": 503}', outage, ", ") .. ']}'
else
  plan = '{"steps": [], "then": {"status": 503}}'
end
local m = ah.mock { plan_json = plan }

local function now_ms()
  local f = io.popen("date +%s%3N")
  local v = tonumber(f:read("*l"))
  f:close()
  return v
end

local mode = scenario
local cmds = {}
for i = 1, P do
  cmds[#cmds + 1] = string.format("'%s' '%s' '%s' %s '%s' %d fleet %d 5 &", bin,
    here .. "fleet_worker.lua", m.url, mode, redis_url, RUNS, rpm)
end
local t0 = now_ms()
local pipe = io.popen("{ " .. table.concat(cmds, " ") .. " wait; } 2>" .. redis.dir .. "/err")
local lines = pipe:read("*a")
pipe:close()
local elapsed = now_ms() - t0
local reqs = m:requests()
local n429, n503 = 0, 0
for _, r in ipairs(reqs) do
  if r.status == 429 then n429 = n429 + 1 end
  if r.status == 503 then n503 = n503 + 1 end
end
print("requests=" .. #reqs)
print("s429=" .. n429)
print("s503=" .. n503)
print("elapsed_ms=" .. elapsed)
io.write(lines)
local ef = io.open(redis.dir .. "/err")
for l in ef:lines() do print("stderr: " .. l) end
ef:close()
m:close()
redis.stop()
