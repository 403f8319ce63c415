-- test_claims.lua - claim-then-execute from Lua: two calls with one key at the same time
-- run the body ONCE (memory and SQLite ledgers); the second waits on the loop for the
-- first's receipt and gets it with duplicate = true; a holder that fails hands the key
-- on; a holder in another handle (another process, as far as the file knows) makes a
-- caller with a deadline end `in_progress`; other arguments while in flight are
-- `idempotency_mismatch`. Regression: both bodies ran and the second said duplicate.
local ah = require "agenthost"
local T = require "toolcheck"

local function slow_charge(p, ms)
  return ah.tool { name = "charge", policy = p.policy, run = function(args, ctx)
    p.runs = p.runs + 1
    ah.sleep(ms or 20) -- the body is in flight while the other call arrives
    if p.fail then
      p.fail = false
      error(ah.permanent("declined"))
    end
    return { charge = "ch_" .. p.runs, amount = args.amount }
  end }
end

for _, backend in ipairs { "memory", "sqlite" } do
  local function new_ledger()
    if backend == "memory" then return ah.ledger {} end
    return ah.ledger { path = T.tmpname(".db") }
  end

  T.test(backend .. ": two calls with one key at once run the body once", function()
    local p = { runs = 0 }
    local tool, ledger = slow_charge(p), new_ledger()
    local rs = ah.parallel {
      function() return tool:call({ amount = 5 }, { key = "K-1", ledger = ledger }) end,
      function() return tool:call({ amount = 5 }, { key = "K-1", ledger = ledger }) end,
    }
    T.eq(p.runs, 1, "body ran once")
    T.eq({ rs[1].ok, rs[1].duplicate, rs[1].seq }, { true, false, 1 }, "first")
    T.eq({ rs[2].ok, rs[2].duplicate, rs[2].seq, rs[2].attempts }, { true, true, 1, 0 },
         "second: the original, marked duplicate")
    T.eq(rs[2].receipt, rs[1].receipt, "same receipt")
    T.eq(#ledger, 1, "one entry")
  end)

  T.test(backend .. ": a holder that fails hands the key to the waiter", function()
    local p = { runs = 0, fail = true, policy = { max_attempts = 1 } }
    local tool, ledger = slow_charge(p), new_ledger()
    local rs = ah.parallel {
      function() return tool:call({ amount = 5 }, { key = "K-2", ledger = ledger }) end,
      function() return tool:call({ amount = 5 }, { key = "K-2", ledger = ledger }) end,
    }
    T.eq(p.runs, 2, "the waiter ran the body after the holder failed")
    T.eq({ rs[1].ok, rs[1].error and rs[1].error.kind }, { false, "permanent" }, "holder")
    T.eq({ rs[2].ok, rs[2].duplicate }, { true, false }, "waiter ran it")
    T.eq(#ledger, 1, "one entry")
  end)

  T.test(backend .. ": other arguments while the key is in flight are refused", function()
    local p = { runs = 0 }
    local tool, ledger = slow_charge(p), new_ledger()
    local rs = ah.parallel {
      function() return tool:call({ amount = 5 }, { key = "K-3", ledger = ledger }) end,
      function() return tool:call({ amount = 6 }, { key = "K-3", ledger = ledger }) end,
    }
    T.eq(p.runs, 1, "only the holder ran")
    T.eq({ rs[2].ok, rs[2].error and rs[2].error.kind }, { false, "idempotency_mismatch" },
         "mismatch")
  end)
end

T.test("sqlite: a key held by another handle ends in_progress at the caller's deadline", function()
  local path = T.tmpname(".db")
  local a, b = ah.ledger { path = path }, ah.ledger { path = path }
  local p = { runs = 0 }
  local holder = slow_charge(p, 200)
  local waiter_p = { runs = 0, policy = { deadline_ms = 30 } }
  local waiter = slow_charge(waiter_p)
  local rs = ah.parallel {
    function() return holder:call({ amount = 5 }, { key = "K-4", ledger = a }) end,
    function()
      -- once the holder's body runs (its claim is committed), not after a guessed 5 ms:
      -- on a loaded machine the claim's commit can take longer than that
      while p.runs == 0 do ah.sleep(1) end
      return waiter:call({ amount = 5 }, { key = "K-4", ledger = b })
    end,
  }
  T.eq({ p.runs, waiter_p.runs }, { 1, 0 }, "only the holder ran")
  T.eq(rs[1].ok, true, "holder ok")
  T.eq({ rs[2].ok, rs[2].outcome }, { false, "in_progress" }, "waiter gave up")
  T.ok(rs[2].error.message:find("in flight", 1, true), "says why: " .. rs[2].error.message)
  -- once recorded, the other handle sees the receipt
  local again = waiter:call({ amount = 5 }, { key = "K-4", ledger = b })
  T.eq({ again.ok, again.duplicate, again.receipt.charge }, { true, true, "ch_1" }, "after")
end)

T.test("two runs whose tool calls map to one key charge once", function()
  local mock = ah.mock {}
  local client = ah.client { provider = "anthropic", model = "m", base_url = mock.url,
                             api_key = "k" }
  local ledger = ah.ledger {}
  local charged = 0
  local agent = ah.agent {
    client = client, max_steps = 3, ledger = ledger,
    tools = { charge = {
      description = "charge", schema = { type = "object", properties = {} },
      idempotency_key = function() return "order-7" end,
      run = function()
        charged = charged + 1
        ah.sleep(20)
        return { charged = 100 }
      end,
    } },
  }
  local rs = ah.parallel {
    function() return agent:run("charge order 7") end,
    function() return agent:run("charge order 7") end,
  }
  T.eq({ rs[1].outcome, rs[2].outcome }, { "completed", "completed" }, "both runs complete")
  T.eq(charged, 1, "charged once")
  T.eq(#ledger, 1, "one ledger entry")
  mock:close()
end)

T.done()
