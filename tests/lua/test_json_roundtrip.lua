-- test_json_roundtrip.lua - receipts round-trip exactly through canonical JSON and the
-- exact decoder (lua/tools_json.c): random nested values (strings with every byte and
-- escape, integers up to the extremes, floats, booleans, nested tables) come back equal,
-- with integers still integers. Seeded, so a failure repeats; the generator is exact in
-- doubles, so every runtime draws the same values.
local ah = require "agenthost"
local T = require "toolcheck"

local seed = 12345
local function rnd(n) -- deterministic, 1..n: seed = (seed * 1103515245 + 12345) mod 2^31,
  -- the multiplier split as 16838 * 2^16 + 20077 so no product passes 2^53
  seed = ((seed * 16838 % 2147483648) * 65536 + seed * 20077 + 12345) % 2147483648
  return seed % n + 1
end

-- On 5.3/5.4 the extremes of the integers; where numbers are doubles (5.1, 5.2, LuaJIT)
-- 2^53 is the widest whole number, and 12345678901234567 is 12345678901234568 there.
local SPECIAL
if T.has_integers then
  SPECIAL = { 0, 1, -1, 9007199254740992, -9007199254740992, 9007199254740993,
              math.maxinteger, math.mininteger, 12345678901234567, 0.5, -0.25, 1e300, -1e-300,
              3.0e-7, 1500.0, 2.0^60 }
else
  SPECIAL = { 0, 1, -1, 2^53, -2^53, 2^53 - 1, 12345678901234567, 0.5, -0.25, 1e300,
              -1e-300, 3.0e-7, 1500.0, 2.0^60 }
end

local function rstring()
  local n = rnd(12) - 1
  local b = {}
  for i = 1, n do
    local k = rnd(6)
    if k == 1 then b[i] = string.char(rnd(32) - 1)          -- control, NUL included
    elseif k == 2 then b[i] = ({ '"', "\\", "/", "\127" })[rnd(4)]
    elseif k == 3 then b[i] = T.utf8_char(rnd(0x10FFFF - 0xE000) + 0xDFFF) -- past surrogates
    else b[i] = string.char(rnd(94) + 32) end
  end
  return table.concat(b)
end

local function rvalue(depth)
  local k = rnd(depth > 3 and 4 or 6)
  if k == 1 then return SPECIAL[rnd(#SPECIAL)]
  elseif k == 2 then return rstring()
  elseif k == 3 then return rnd(2) == 1
  elseif k == 4 then return rnd(1000000) - 500000
  elseif k == 5 then
    local t = {}
    for i = 1, rnd(4) do t[i] = rvalue(depth + 1) end
    return t
  else
    local t = {}
    for _ = 1, rnd(4) do t[rstring() .. "k"] = rvalue(depth + 1) end
    return t
  end
end

-- Canonical JSON writes an integral float as an integer (1500.0 and 1500 are one amount),
-- so one below 2^53 comes back as that integer; everything else comes back as it went.
-- With doubles, a whole number beyond 2^53 comes back as that number or as the string of
-- its digits (the JSON holds an integer beyond +-2^53).
local function same(a, b, path)
  if T.has_integers then
    if math.type(a) == "float" and math.type(b) == "integer" and a == b and
       math.abs(a) < 2^53 then
      return true
    end
    if math.type(a) ~= math.type(b) then
      return false, path .. ": " .. tostring(math.type(a)) .. " vs " .. tostring(math.type(b))
    end
  elseif type(a) == "number" and type(b) == "string" and a == math.floor(a) and
         math.abs(a) > 2^53 and b:match("^%-?%d+$") and tonumber(b) == a then
    return true
  end
  if type(a) ~= type(b) then return false, path .. ": type " .. type(a) .. " vs " .. type(b) end
  if type(a) ~= "table" then
    -- T.show, not %q: Lua 5.1's %q takes only strings and numbers
    return a == b, path .. ": " .. T.show(a) .. " vs " .. T.show(b)
  end
  for k, v in pairs(a) do
    local ok, why = same(v, b[k], path .. "." .. tostring(k))
    if not ok then return false, why end
  end
  for k in pairs(b) do if a[k] == nil then return false, path .. ": extra " .. tostring(k) end end
  return true
end

T.test("random receipts come back exactly (and so do their duplicates)", function()
  local ledger = ah.ledger {}
  local current
  local t = ah.tool { name = "echo", run = function() return current end }
  local bad = 0
  for i = 1, 400 do
    current = { v = rvalue(0) }
    local r = t:call({ i = i }, { key = "r" .. i, ledger = ledger })
    local ok, why = same(current, r.receipt, "$")
    if not ok then
      bad = bad + 1
      if bad <= 3 then T.ok(false, "value " .. i .. ": " .. why) end
    end
    local again = t:call({ i = i }, { key = "r" .. i, ledger = ledger })
    ok, why = same(current, again.receipt, "$")
    if not ok and bad <= 3 then T.ok(false, "duplicate " .. i .. ": " .. why) end
  end
  T.eq(bad, 0, "every value round-tripped")
end)

T.done()
