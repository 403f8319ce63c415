-- ahtest.lua - tiny helpers shared by the Lua tests (tests/lua/test_*.lua): each test
-- asserts, prints an "ok" line per check and exits non-zero on the first failure.
local T = {}

function T.ok(name)
  io.write("ok - ", name, "\n")
end

function T.eq(got, want, what)
  if got ~= want then
    error(string.format("%s: got %s, want %s", what or "value", tostring(got), tostring(want)), 2)
  end
end

-- Run fn, expect an error whose message contains `needle` (plain text).
function T.raises(fn, needle, what)
  local ok, err = pcall(fn)
  if ok then error((what or "call") .. ": expected an error containing '" .. needle .. "'", 2) end
  err = tostring(err)
  if not err:find(needle, 1, true) then
    error(string.format("%s: error '%s' does not contain '%s'", what or "call", err, needle), 2)
  end
  return err
end

function T.contains(hay, needle, what)
  if not tostring(hay):find(needle, 1, true) then
    error(string.format("%s: '%s' does not contain '%s'", what or "text", tostring(hay), needle), 2)
  end
end

-- A policy that retries fast (tests never wait on real backoff).
function T.fast(extra)
  local p = { max_attempts = 4, base_ms = 1, cap_ms = 5, max_retry_after_ms = 2000 }
  for k, v in pairs(extra or {}) do p[k] = v end
  return p
end

T.providers = { "anthropic", "openai", "responses" }

return T
