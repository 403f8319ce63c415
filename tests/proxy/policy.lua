-- policy.lua - the proxy's policy in the SDK tests: quick retries (the mock's faults are
-- instant), a short idle time-out so a stalled stream is continued quickly.
return {
  policy = { max_attempts = 4, base_ms = 1, cap_ms = 5, idle_timeout_ms = 150,
             max_continuations = 3 },
}
