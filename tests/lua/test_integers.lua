-- test_integers.lua - integers stay integers end to end: a tool's result reaches the
-- model and the ledger digit for digit (12345678901234567, 2^53, -2^63), a duplicate
-- and ledger:entries() return them as Lua integers, and a model's integer arguments reach
-- the body exactly. Regression: results were written with 14 significant digits
-- (1.2345678901235e+16) and receipts read back through doubles.
-- On runtimes whose numbers are doubles (5.1, 5.2, LuaJIT) a Lua number is exact up to
-- 2^53: what is checked there is that boundary, that a model's integer beyond +-2^53
-- reaches the body as the string of its digits, and that the model gets those digits back
-- exactly (the history keeps the arguments' JSON text).
local ah = require "agenthost"
local T = require "toolcheck"

local INT = T.has_integers
local BIG = 12345678901234567 -- on doubles: 12345678901234568, the nearest one
local P53 = 9007199254740992  -- 2^53: an integer literal on 5.3+
local MIN = math.mininteger or -9223372036854775808

local function result()
  if INT then return { n = BIG, p = P53, p1 = P53 + 1, min = MIN, f = 0.5 } end
  return { n = BIG, p = P53, p1 = P53 - 1, min = -P53, f = 0.5 }
end

-- A double beyond 2^53 in a receipt comes back as that number, or as the string of its
-- digits (what the receipt's JSON holds is an integer beyond +-2^53).
local function same_double(v, want)
  if type(v) == "string" then return v:match("^%-?%d+$") ~= nil and tonumber(v) == want end
  return v == want
end

local function check_exact(r, what)
  if INT then
    T.eq({ math.type(r.n), r.n == BIG }, { "integer", true }, what .. ": 12345678901234567")
    T.eq({ math.type(r.p), r.p == P53 }, { "integer", true }, what .. ": 2^53")
    T.eq(r.p1 == P53 + 1, true, what .. ": 2^53 + 1")
    T.eq(r.min == MIN, true, what .. ": math.mininteger")
  else
    T.ok(same_double(r.n, BIG), what .. ": 12345678901234568 (the double): " .. T.show(r.n))
    T.eq({ type(r.p), r.p == P53 }, { "number", true }, what .. ": 2^53")
    T.eq({ type(r.p1), r.p1 == P53 - 1 }, { "number", true }, what .. ": 2^53 - 1")
    T.eq({ type(r.min), r.min == -P53 }, { "number", true }, what .. ": -2^53")
  end
  T.eq(r.f, 0.5, what .. ": a float stays a float")
end

for _, backend in ipairs { "memory", "sqlite" } do
  T.test(backend .. ": receipts keep their integers, duplicates and entries too", function()
    local ledger = backend == "memory" and ah.ledger {} or ah.ledger { path = T.tmpname(".db") }
    local t = ah.tool { name = "big", run = result }
    local first = t:call({ id = BIG }, { key = "I-1", ledger = ledger })
    check_exact(first.receipt, "first")
    local again = t:call({ id = BIG }, { key = "I-1", ledger = ledger })
    T.eq(again.duplicate, true, "a duplicate")
    check_exact(again.receipt, "duplicate")
    check_exact(ledger:entries()[1].receipt, "entries")
    -- the fingerprint sees the exact argument: the next number after BIG is another call
    -- (BIG + 1; with doubles BIG + 2, the next one there is)
    local other = t:call({ id = BIG + (INT and 1 or 2) }, { key = "I-1", ledger = ledger })
    T.eq(other.error and other.error.kind, "idempotency_mismatch", "BIG + 1 is not BIG")
    ledger:close()
  end)
end

T.test("the model gets the tool's integers exactly, the body the model's", function()
  local mock = ah.mock { plan = { { ok = true, tool_args = '{"id":12345678901234567}' } } }
  local seen
  local a = ah.agent {
    client = ah.client { provider = "anthropic", model = "m", base_url = mock.url,
                         api_key = "k" },
    max_steps = 3,
    tools = { big = { description = "big", schema = { type = "object", properties = {} },
                      run = function(args) seen = args.id return result() end } },
  }
  local r = a:run("x")
  T.eq(r.outcome, "completed", "completed")
  if INT then
    T.eq({ math.type(seen), seen == BIG }, { "integer", true }, "the body's argument")
  else
    T.eq(seen, "12345678901234567", "the body's argument: beyond 2^53, the digits")
  end
  local body = mock:requests()[2].body
  local digits = INT and { "12345678901234567", "9007199254740992", "9007199254740993",
                           "-9223372036854775808" }
                 or { "12345678901234567", "9007199254740992", "9007199254740991",
                      "-9007199254740992" }
  for _, d in ipairs(digits) do
    T.ok(body:find(d, 1, true), "the request carries " .. d)
  end
  T.ok(not body:find("e+16", 1, true) and not body:find("e+15", 1, true), "no exponent form")
  mock:close()
end)

-- A model's integers on each side of +-2^53 and past 2^64: on 5.3/5.4 integers (one too
-- large for 64 bits is a float, as before); with doubles, a number up to 2^53 and the
-- string of its digits beyond. Either way the tool_use goes back to the model as the
-- model wrote it.
T.test("a model's integers beyond 2^53 reach the body exactly and go back as written", function()
  local ARGS = '{"p53":9007199254740992,"p53p1":9007199254740993,"m53":-9007199254740992,' ..
               '"m53m1":-9007199254740993,"huge":12345678901234567890,"small":42}'
  local mock = ah.mock { plan = { { ok = true, tool_args = ARGS } } }
  local seen
  local a = ah.agent {
    client = ah.client { provider = "anthropic", model = "m", base_url = mock.url,
                         api_key = "k" },
    max_steps = 3,
    tools = { big = { description = "big", schema = { type = "object", properties = {} },
                      run = function(args) seen = args return "seen" end } },
  }
  local r = a:run("x")
  T.eq(r.outcome, "completed", "completed")
  T.ok(type(seen) == "table", "the body ran")
  seen = seen or {}
  T.eq({ type(seen.small), seen.small }, { "number", 42 }, "42")
  T.eq({ type(seen.p53), seen.p53 == 2 ^ 53 }, { "number", true }, "2^53 is a number")
  T.eq({ type(seen.m53), seen.m53 == -2 ^ 53 }, { "number", true }, "-2^53 is a number")
  if INT then
    T.eq({ math.type(seen.p53p1), seen.p53p1 == P53 + 1 }, { "integer", true }, "2^53 + 1")
    T.eq({ math.type(seen.m53m1), seen.m53m1 == -P53 - 1 }, { "integer", true }, "-2^53 - 1")
    T.eq({ math.type(seen.huge), seen.huge == 12345678901234567890.0 }, { "float", true },
         "past 2^64: the nearest float")
  else
    T.eq(seen.p53p1, "9007199254740993", "2^53 + 1: the digits")
    T.eq(seen.m53m1, "-9007199254740993", "-2^53 - 1: the digits")
    T.eq(seen.huge, "12345678901234567890", "past 2^64: the digits")
  end
  -- what goes back to the model: the tool_use as the model sent it, digit for digit
  local use
  for _, m in ipairs(r.history) do
    for _, b in ipairs(m.content or {}) do
      if b.type == "tool_use" then use = b end
    end
  end
  T.eq(use and use.arguments, ARGS, "history keeps the arguments' JSON text")
  local body = mock:requests()[2].body
  for _, d in ipairs { "9007199254740993", "-9007199254740993", "12345678901234567890" } do
    T.ok(body:find(d, 1, true), "the request carries " .. d)
  end
  mock:close()
end)

T.done()
