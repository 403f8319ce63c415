-- fleet_worker.lua - one agenthost process of the fleet tests (tests/cli/test_redis_fleet.sh,
-- tests/bench/fleet_bench.sh). Runs RUNS agent runs against the mock at BASE_URL and
-- prints one line: "runs=N completed=C failed=F attempts=A retries=R paced=P".
--   agenthost fleet_worker.lua BASE_URL MODE REDIS_URL RUNS [KEY] [RPM] [MAX_ATTEMPTS]
-- MODE: "shared" (ah.retry_budget on Redis), "local" (a budget per process), "pace"
-- (ah.rate_limit on Redis at RPM, no budget), "nopace" (nothing), "ledger" (see below).
local ah = require "agenthost"
local base, mode, redis, runs, key = arg[1], arg[2], arg[3], tonumber(arg[4]), arg[5]
local rpm, max_attempts = tonumber(arg[6] or "0"), tonumber(arg[7] or "5")
key = key or "fleet"

if mode == "shared" then
  ah.retry_budget { redis = redis, key = key, max_tokens = 10, token_ratio = 0.1 }
elseif mode == "local" then
  ah.retry_budget { max_tokens = 10, token_ratio = 0.1 }
end
local rate_limit
if mode == "pace" then
  rate_limit = ah.rate_limit { redis = redis, key = key, requests_per_minute = rpm }
end
local client = ah.client { provider = "anthropic", model = "m", base_url = base, api_key = "k",
                           rate_limit = rate_limit }
local paced = 0
local agent = ah.agent {
  client = client,
  policy = { max_attempts = max_attempts, base_ms = 1, cap_ms = 4 },
  on_event = function(ev) if ev.type == "llm_paced" then paced = paced + 1 end end,
}
local c, f, attempts, retries = 0, 0, 0, 0
for i = 1, runs do
  local r = agent:run("hello " .. i)
  if r.outcome == "completed" then c = c + 1 else f = f + 1 end
  attempts = attempts + r.stats.attempts
  retries = retries + r.stats.retries
end
print(string.format("runs=%d completed=%d failed=%d attempts=%d retries=%d paced=%d", runs, c,
                    f, attempts, retries, paced))
