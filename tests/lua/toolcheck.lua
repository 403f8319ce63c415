-- toolcheck.lua - the tiny assertion helper of the tool/ledger/batch Lua tests
-- (tests/lua/test_tools_call.lua, test_tools_agent.lua, test_ledger.lua, test_batch.lua,
-- plain_tools.lua).
-- Each test is a named function; a failed check records a message and the test goes on,
-- so one run reports every failure. done() raises when anything failed, which makes the
-- host exit non-zero. The runtime facts and shims (M.runtime, M.has_integers, M.pcall,
-- M.is_integer, ...) are ahtest.lua's, re-exported here.
local A = require "ahtest"
local M = { failed = 0, passed = 0, current = "?" }
for _, k in ipairs { "runtime", "has_integers", "yields_across_pcall", "unpack", "pack", "load",
                     "is_integer", "utf8_len", "utf8_char", "pcall", "trace_pcall" } do
  M[k] = A[k]
end

local function show(v)
  if type(v) == "string" then return string.format("%q", v) end
  if type(v) ~= "table" then return tostring(v) end
  local keys = {}
  for k in pairs(v) do keys[#keys + 1] = k end
  table.sort(keys, function(a, b) return tostring(a) < tostring(b) end)
  local parts = {}
  for _, k in ipairs(keys) do parts[#parts + 1] = tostring(k) .. "=" .. show(v[k]) end
  return "{" .. table.concat(parts, ", ") .. "}"
end
M.show = show

local function deep_eq(a, b)
  if type(a) ~= type(b) then return false end
  if type(a) ~= "table" then return a == b end
  for k, v in pairs(a) do if not deep_eq(v, b[k]) then return false end end
  for k in pairs(b) do if a[k] == nil then return false end end
  return true
end
M.deep_eq = deep_eq

local function fail(what, detail)
  M.failed = M.failed + 1
  io.stderr:write(string.format("FAIL [%s] %s: %s\n", M.current, tostring(what), detail))
end

function M.eq(got, want, what)
  if deep_eq(got, want) then
    M.passed = M.passed + 1
  else
    fail(what, "got " .. show(got) .. ", want " .. show(want))
  end
end

function M.ok(cond, what)
  if cond then M.passed = M.passed + 1 else fail(what, "not true") end
end

-- fn must raise an error whose text contains `needle` (plain text match).
function M.raises(fn, needle, what)
  local ok, err = A.pcall(fn)
  if ok then
    fail(what, "did not raise")
  elseif not tostring(err):find(needle, 1, true) then
    fail(what, "raised " .. show(tostring(err)) .. ", want it to mention " .. show(needle))
  else
    M.passed = M.passed + 1
  end
end

-- A test body may wait (M.pcall: on PUC 5.1 it runs in a coroutine of its own).
function M.test(name, fn)
  M.current = name
  local ok, err = A.trace_pcall(fn)
  if not ok then fail("test raised", tostring(err)) end
  io.stdout:write("ran ", name, "\n")
end

function M.done()
  print(string.format("%d checks passed, %d failed", M.passed, M.failed))
  if M.failed > 0 then error(M.failed .. " check(s) failed", 0) end
end

-- A scratch file path for this process (removed by the caller).
function M.tmpname(suffix)
  local p = os.tmpname()
  os.remove(p)
  return p .. (suffix or "")
end

return M
