-- test_policy_script.lua - scripts/policy.lua restates the C defaults (core/policy.c,
-- ah_policy_init) without drift: every number equals policy.h's AH_POLICY_DEFAULT_* or
-- the value ah_policy_init sets, the table is accepted as an agent's policy as it is,
-- and copy() gives an independent table.
local T = require "ahtest"
local ah = require "agenthost"
local policy = require "agenthost.policy"

local here = arg[0]:match("^(.*)/[^/]*$") or "."
local function read(rel)
    return assert(io.open(here .. "/../../" .. rel)):read("*a")
end

local header = read("core/include/agenthost/policy.h")
local function c_default(name)
    local v = header:match("AH_POLICY_DEFAULT_" .. name .. "%s*=%s*(%d+)")
    assert(v, "policy.h has no AH_POLICY_DEFAULT_" .. name)
    return tonumber(v) -- "500" -> 500, an integer where the runtime has them
end
for field, name in pairs({ max_attempts = "MAX_ATTEMPTS", base_ms = "BASE_MS",
                           cap_ms = "CAP_MS", max_retry_after_ms = "MAX_RETRY_AFTER_MS",
                           max_continuations = "MAX_CONTINUATIONS",
                           idle_timeout_ms = "IDLE_TIMEOUT_MS" }) do
    T.eq(policy[field], c_default(name), field)
end
T.ok("the numbers equal policy.h's AH_POLICY_DEFAULT_*")

-- The modes and the "none" limits, as ah_policy_init sets them.
local init = read("core/policy.c"):match("void ah_policy_init%(ah_policy %*p%)(.-)\n}")
assert(init, "ah_policy_init not found")
T.contains(init, "AH_JITTER_FULL", "jitter")
T.eq(policy.jitter, "full", "jitter")
T.contains(init, "AH_RETRY_AFTER_FLOOR", "retry_after")
T.eq(policy.retry_after, "floor", "retry_after")
for _, f in ipairs({ "attempt_timeout_ms", "deadline_ms" }) do
    T.eq(policy[f], 0, f)
end
T.ok("modes and limits as ah_policy_init sets them")

-- Every field is a real policy field with a valid value: the agent takes it as it is.
local client = ah.client{ provider = "anthropic", model = "m", base_url = "http://127.0.0.1:9" }
ah.agent{ client = client, policy = policy, on_event = false }
local n = 0
for _ in pairs(policy) do n = n + 1 end
T.eq(n, 11, "field count (every policy field but retry_on)")
T.ok("accepted as an agent's policy")

local mine = policy:copy()
mine.max_attempts = 9
T.eq(policy.max_attempts, 4, "the shared table")
T.eq(policy.idle_timeout_ms, 300000, "a stalled stream is cut after 5 minutes")
T.eq(getmetatable(mine), nil, "a plain table")
ah.agent{ client = client, policy = mine, on_event = false }
T.ok("copy() is independent and plain")
