-- test_integers.lua - integers stay integers end to end: a tool's result reaches the
-- model and the ledger digit for digit (12345678901234567, 2^53, -2^63), a duplicate
-- and ledger:entries() return them as Lua integers, and a model's integer arguments reach
-- the body exactly. Regression: results were written with 14 significant digits
-- (1.2345678901235e+16) and receipts read back through doubles.
local ah = require "agenthost"
local T = require "toolcheck"

local BIG = 12345678901234567
local P53 = 1 << 53
local MIN = math.mininteger

local function result() return { n = BIG, p = P53, p1 = P53 + 1, min = MIN, f = 0.5 } end

local function check_exact(r, what)
  T.eq({ math.type(r.n), r.n == BIG }, { "integer", true }, what .. ": 12345678901234567")
  T.eq({ math.type(r.p), r.p == P53 }, { "integer", true }, what .. ": 2^53")
  T.eq(r.p1 == P53 + 1, true, what .. ": 2^53 + 1")
  T.eq(r.min == MIN, true, what .. ": math.mininteger")
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
    -- the fingerprint sees the exact argument: BIG + 1 is another call
    local other = t:call({ id = BIG + 1 }, { key = "I-1", ledger = ledger })
    T.eq(other.error and other.error.kind, "idempotency_mismatch", "BIG + 1 is not BIG")
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
  T.eq({ math.type(seen), seen == BIG }, { "integer", true }, "the body's argument")
  local body = mock:requests()[2].body
  for _, digits in ipairs { "12345678901234567", "9007199254740992", "9007199254740993",
                            "-9223372036854775808" } do
    T.ok(body:find(digits, 1, true), "the request carries " .. digits)
  end
  T.ok(not body:find("e+16", 1, true) and not body:find("e+15", 1, true), "no exponent form")
  mock:close()
end)

T.done()
