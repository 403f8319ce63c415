-- test_ledger.lua - the idempotency ledger from Lua (docs/tools.md): duplicates return the
-- original receipt and seq without running the body, a key reused with other arguments
-- is refused, SQLite ledgers survive the handle, and what counts as "the same call".
local ah = require "agenthost"
local T = require "toolcheck"

-- A charge tool over a fake payment processor: processor.total is the money moved.
local function processor()
  local p = { total = 0, runs = 0 }
  p.tool = ah.tool { name = "charge", run = function(args, ctx)
    p.runs = p.runs + 1
    p.total = p.total + args.amount
    return { charge = "ch_" .. tostring(ctx.key) .. "_" .. p.runs, amount = args.amount }
  end }
  return p
end

T.test("a duplicate delivery returns the original receipt and seq, body not run", function()
  local p, ledger = processor(), ah.ledger {}
  local budget = ah.budget(10)
  local first = p.tool:call({ amount = 2300 }, { key = "A-2", ledger = ledger, budget = budget })
  local again = p.tool:call({ amount = 2300 }, { key = "A-2", ledger = ledger, budget = budget })
  T.eq({ first.ok, first.duplicate, first.seq }, { true, false, 1 }, "first")
  T.eq({ again.ok, again.duplicate, again.seq, again.attempts }, { true, true, 1, 0 }, "again")
  T.eq(again.receipt, first.receipt, "the original receipt")
  T.eq(again.outcome, "ok", "a duplicate is a success")
  T.eq({ p.runs, p.total }, { 1, 2300 }, "charged once")
  T.eq(#ledger, 1, "one ledger row")
  T.eq(budget.used, 1, "a duplicate spends no budget")
end)

T.test("a key reused with different arguments is refused, body not run", function()
  local p, ledger = processor(), ah.ledger {}
  p.tool:call({ amount = 900 }, { key = "A-3", ledger = ledger })
  local r = p.tool:call({ amount = 901 }, { key = "A-3", ledger = ledger })
  T.eq({ r.ok, r.outcome, r.attempts, r.duplicate }, { false, "failed", 0, false }, "refused")
  T.eq(r.error.kind, "idempotency_mismatch", "error kind idempotency_mismatch")
  T.ok(r.error.message:find("reused with different arguments", 1, true), "says why")
  T.eq({ p.runs, p.total, #ledger }, { 1, 900, 1 }, "nothing charged, nothing recorded")
  -- the same key on another tool is refused too (the tool's name is fingerprinted)
  local other = ah.tool { name = "refund", run = function() p.runs = p.runs + 1 end }
  local r2 = other:call({ amount = 900 }, { key = "A-3", ledger = ledger })
  T.eq({ r2.ok, r2.error and r2.error.kind, p.runs }, { false, "idempotency_mismatch", 1 }, "other tool")
end)

T.test("arguments are canonical: key order and 1500 vs 1500.0 do not matter", function()
  local p, ledger = processor(), ah.ledger {}
  local a = { amount = 1500, meta = { b = 2, a = 1, list = { 1, 2 } } }
  local b = {}
  b.meta = { list = { 1, 2 } }
  b.meta.a = 1
  b.amount = 1500.0
  b.meta.b = 2
  p.tool:call(a, { key = "A-1", ledger = ledger })
  local r = p.tool:call(b, { key = "A-1", ledger = ledger })
  T.eq({ r.ok, r.duplicate, p.runs }, { true, true, 1 }, "same call")
  local r2 = p.tool:call({ amount = 1500, meta = { a = 1, b = 2, list = { 2, 1 } } },
                         { key = "A-1", ledger = ledger })
  T.eq({ r2.ok, p.runs }, { false, 1 }, "array order does matter")
end)

T.test("entries() lists key, seq and receipt in seq order", function()
  local p, ledger = processor(), ah.ledger {}
  for i, k in ipairs { "k1", "k2", "k3" } do p.tool:call({ amount = i }, { key = k, ledger = ledger }) end
  p.tool:call({ amount = 2 }, { key = "k2", ledger = ledger })
  local e = ledger:entries()
  T.eq(#e, 3, "three rows")
  for i, k in ipairs { "k1", "k2", "k3" } do
    T.eq({ e[i].key, e[i].seq, e[i].receipt.amount }, { k, i, i }, "row " .. i)
    T.ok(T.is_integer(e[i].created_ms) and e[i].created_ms > 0, "created_ms " .. i)
  end
  T.eq(ledger.backend, "memory", "backend")
  T.eq(ledger:count(), 3, "count()")
end)

T.test("without a key nothing is recorded; ledger = false turns it off", function()
  local p, ledger = processor(), ah.ledger {}
  p.tool:call({ amount = 1 }, { ledger = ledger })
  local r = p.tool:call({ amount = 1 }, { ledger = ledger })
  T.eq({ r.ok, r.duplicate, r.seq, p.runs, #ledger }, { true, false, nil, 2, 0 }, "no key")
  p.tool:call({ amount = 1 }, { key = "x", ledger = false })
  p.tool:call({ amount = 1 }, { key = "x", ledger = false })
  T.eq(p.runs, 4, "ledger = false")
end)

T.test("in memory by default: each tool keeps its own ledger for keyed calls", function()
  local p = processor()
  p.tool:call({ amount = 5 }, { key = "d" })
  local r = p.tool:call({ amount = 5 }, { key = "d" })
  T.eq({ r.duplicate, r.seq, p.runs }, { true, 1, 1 }, "default ledger")
end)

T.test("SQLite: recorded effects survive the handle and the path is shared", function()
  local path = T.tmpname(".db")
  local p = processor()
  local l1 = ah.ledger { path = path }
  T.eq({ l1.backend, l1.path }, { "sqlite", path }, "backend and path")
  local first = p.tool:call({ amount = 1500 }, { key = "A-1", ledger = l1 })
  l1:close()
  T.eq(l1.backend, "closed", "closed")
  T.raises(function() l1:entries() end, "closed", "a closed ledger refuses")
  local l2 = ah.ledger(path)
  local again = p.tool:call({ amount = 1500 }, { key = "A-1", ledger = l2 })
  T.eq({ again.duplicate, again.seq, p.runs }, { true, first.seq, 1 }, "reopened")
  T.eq(again.receipt, first.receipt, "original receipt")
  l2:close()
  -- a path string is opened once and shared by every call naming it
  local r1 = p.tool:call({ amount = 1500 }, { key = "A-1", ledger = path })
  local r2 = p.tool:call({ amount = 7 }, { key = "B-1", ledger = path })
  local r3 = p.tool:call({ amount = 7 }, { key = "B-1", ledger = path })
  T.eq({ r1.duplicate, r2.duplicate, r3.duplicate, r3.seq, p.runs }, { true, false, true, 2, 2 },
       "path option")
  local l3 = ah.ledger { path = path }
  T.eq(#l3, 2, "two rows on disk")
  l3:close()
  os.remove(path)
  os.remove(path .. "-wal")
  os.remove(path .. "-shm")
end)

T.test("a ledger that cannot be opened is an error naming the path", function()
  T.raises(function() ah.ledger { path = "/nonexistent-dir/x/effects.db" } end,
           "/nonexistent-dir/x/effects.db", "bad path")
  T.raises(function() ah.ledger { pth = "x.db" } end, "pth", "unknown field")
  local tool = ah.tool { name = "t", run = function() end }
  T.raises(function() tool:call({}, { key = "k", ledger = 42 }) end, "ledger", "bad ledger option")
end)

T.test("a ledger in use cannot be closed", function()
  local ledger = ah.ledger {}
  local tool = ah.tool { name = "t", run = function() ledger:close() end }
  local r = tool:call({}, { key = "k", ledger = ledger })
  T.eq(r.ok, false, "the body's close failed")
  T.ok(r.error.message:find("in use", 1, true), "says it is in use")
  T.eq(ledger.backend, "memory", "still open")
  ledger:close()
  ledger:close() -- idempotent
  T.eq(ledger.backend, "closed", "closed after the call")
end)

T.done()
