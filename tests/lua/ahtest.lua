-- ahtest.lua - tiny helpers shared by the Lua tests (tests/lua/test_*.lua): each test
-- asserts, prints an "ok" line per check and exits non-zero on the first failure. Also the
-- runtime facts and shims that let one test file run on Lua 5.1, 5.2, 5.3, 5.4 and LuaJIT
-- (docs/testing.md "Every Lua runtime"). Valid Lua 5.1 and 5.4, like every test file.
local T = {}

-- ---- the runtime --------------------------------------------------------------------

-- "5.1", "5.2", "5.3", "5.4" or "luajit".
T.runtime = type(rawget(_G, "jit")) == "table" and "luajit"
            or _VERSION:match("^Lua (%d+%.%d+)") or _VERSION
-- 5.3 and 5.4 have an integer subtype; on 5.1, 5.2 and LuaJIT every number is a double
-- (3 == 3.0, tostring(3.0) == "3"), and a JSON integer beyond +-2^53 reaches Lua as a
-- string of its digits.
T.has_integers = math.type ~= nil
-- Can a wait yield across pcall and metamethods? Not on PUC Lua 5.1, where pcall is a C
-- call; LuaJIT and 5.2+ can.
T.yields_across_pcall = T.runtime ~= "5.1"

T.unpack = table.unpack or unpack
T.pack = table.pack or function(...) return { n = select("#", ...), ... } end
T.load = loadstring or load -- load(string) is 5.2+; 5.1 and LuaJIT have loadstring

-- A whole number: an integer on 5.3/5.4, an integral (finite) double elsewhere.
function T.is_integer(v)
  if math.type then return math.type(v) == "integer" end
  return type(v) == "number" and v == math.floor(v) and v - v == 0
end

-- utf8.len / utf8.char where the runtime has them (5.3+), the same in Lua elsewhere.
-- utf8_len(s) -> number of code points, or nil and the byte position of the first
-- invalid sequence (strict: no overlong forms, no surrogates, nothing past U+10FFFF).
function T.utf8_len(s)
  if rawget(_G, "utf8") then return utf8.len(s) end
  local i, n, len = 1, #s, 0
  while i <= n do
    local c = s:byte(i)
    local need, min, cp
    if c < 0x80 then need, min, cp = 0, 0, c
    elseif c >= 0xC2 and c <= 0xDF then need, min, cp = 1, 0x80, c - 0xC0
    elseif c >= 0xE0 and c <= 0xEF then need, min, cp = 2, 0x800, c - 0xE0
    elseif c >= 0xF0 and c <= 0xF4 then need, min, cp = 3, 0x10000, c - 0xF0
    else return nil, i end
    for k = 1, need do
      local cc = s:byte(i + k)
      if not cc or cc < 0x80 or cc > 0xBF then return nil, i end
      cp = cp * 64 + (cc - 0x80)
    end
    if cp < min or cp > 0x10FFFF or (cp >= 0xD800 and cp <= 0xDFFF) then return nil, i end
    i = i + need + 1
    len = len + 1
  end
  return len
end

function T.utf8_char(cp)
  if rawget(_G, "utf8") then return utf8.char(cp) end
  local f = math.floor
  if cp < 0x80 then return string.char(cp) end
  if cp < 0x800 then return string.char(0xC0 + f(cp / 64), 0x80 + cp % 64) end
  if cp < 0x10000 then
    return string.char(0xE0 + f(cp / 4096), 0x80 + f(cp / 64) % 64, 0x80 + cp % 64)
  end
  return string.char(0xF0 + f(cp / 262144), 0x80 + f(cp / 4096) % 64,
                     0x80 + f(cp / 64) % 64, 0x80 + cp % 64)
end

local function in_coroutine()
  local co, main = coroutine.running() -- 5.1: nil on the main thread; 5.2+: co, true
  return co ~= nil and not main
end

-- pcall for a function that may wait (agent:run, tool:call, ah.sleep...): like pcall,
-- (true, results...) or (false, message). Where a wait cannot yield across pcall (PUC
-- 5.1 in a scheduler coroutine, e.g. a test_*.lua main chunk) it runs fn in a coroutine
-- of its own under ah.parallel, which catches the error: the message is then text (an
-- error value's message, not the value). AHTEST_PCALL=parallel in the environment takes
-- that path on every runtime.
-- ah.parallel as it was when this file loaded, if the module was (test_gate.lua patches
-- the module table)
local loaded = package.loaded.agenthost
local parallel = type(loaded) == "table" and loaded.parallel or nil
local function protected(with_traceback, fn, ...)
  local args = T.pack(...)
  local forced = os.getenv("AHTEST_PCALL") == "parallel"
  if not in_coroutine() or (T.yields_across_pcall and not forced) then
    if not with_traceback then return pcall(fn, ...) end
    return xpcall(function() return fn(T.unpack(args, 1, args.n)) end, debug.traceback)
  end
  parallel = parallel or require("agenthost").parallel
  local r = parallel { function() return T.pack(true, fn(T.unpack(args, 1, args.n))) end }[1]
  if type(r) == "table" and r[1] == true then return T.unpack(r, 1, r.n) end
  if type(r) ~= "table" then return false, "ah.parallel gave " .. tostring(r) end
  return false, with_traceback and r.traceback or r.error
end

function T.pcall(fn, ...) return protected(false, fn, ...) end
-- The same, the message followed by its traceback (xpcall with debug.traceback).
function T.trace_pcall(fn, ...) return protected(true, fn, ...) end

-- ---- checks -------------------------------------------------------------------------

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
  local ok, err = T.pcall(fn)
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

T.providers = { "anthropic", "openai", "responses", "gemini" }

return T
