-- agenthost.policy: the default retry policy, restated in Lua for you to copy and edit.
--
-- The defaults live in C (core/include/agenthost/policy.h, ah_policy_init); this file
-- only repeats them so a script can start from a complete table. An agent without a
-- `policy` gets exactly these values; the core never reads this file. Every field, its
-- range and the backoff formulas: docs/retry-policy.md.
--
--   local policy = require("agenthost.policy"):copy()   -- yours to change
--   policy.max_attempts = 6
--   policy.retry_on = function(err) return err.status == 409 or ah.is_retryable(err) end
--   local agent = ah.agent{ client = client, policy = policy }
--
-- (require caches modules, so the table itself is shared: change a copy, not it.)
-- All durations are milliseconds; 0 turns an optional limit off.
local defaults = {
    -- Every attempt, the first one included: 4 = one try plus up to three retries.
    max_attempts = 4,
    -- Backoff before retry n (n = the attempt that failed, from 1):
    --   full jitter: wait = random(0, min(cap_ms, base_ms * 2^(n-1)))
    base_ms = 500,
    cap_ms = 30000,
    jitter = "full",               -- "full" | "equal" | "decorrelated" | "none"
    -- A server's Retry-After / retry-after-ms is a floor under the jittered wait
    -- ("floor"), or not used at all ("ignore").
    retry_after = "floor",
    -- A server asking for a longer wait than this ends the call at once (no sleeping).
    max_retry_after_ms = 60000,
    -- One attempt may take this long before it is aborted as a retryable timeout.
    attempt_timeout_ms = 0,        -- 0 = no limit
    -- The whole call, attempts and waits together; a wait that would cross it gives up.
    deadline_ms = 0,               -- 0 = no limit
    -- A started stream silent this long is cut (and continued, like any cut stream):
    -- 5 minutes, longer than a reasoning model's quiet stretch; 0 = no limit.
    idle_timeout_ms = 300000,
    -- Continuations of cut streams per LLM call; past it the run fails.
    max_continuations = 3,
    -- continue_partial_text = "sentence",  -- or "line": a cut inside a text block keeps
    --   its complete sentences (lines) instead of asking for the whole block again; the
    --   default (false) keeps only complete blocks (docs/worker.md).
    -- One response's content (text, reasoning, tool arguments) may be this large; past
    -- it the stream is stopped and the run fails with a `budget` error.
    max_response_bytes = 33554432, -- 32 MiB; 0 = no limit
    -- retry_on = function(err) return ah.is_retryable(err) end,
    --   replaces the retry predicate; err has kind, status, message, provider_type,
    --   retry_after_ms. The default retries HTTP 408 425 429 500 502 503 504 529,
    --   connect errors and timeouts (a server's x-should-retry overrides the status).
    --   A Lua error inside it is logged once and the default verdict is used.
}

-- copy() lives in the metatable, so the table holds policy fields only and can be
-- passed as a policy as it is.
local methods = {}
function methods.copy(self)
    local t = {}
    for k, v in pairs(self) do t[k] = v end
    return t
end
return setmetatable(defaults, { __index = methods })
