-- test_batch.lua - ah.batch (docs/tools.md): one shared budget counted in body executions,
-- items reached after it is spent are skipped and never started, keys in item order,
-- concurrency through scheduler coroutines.
local ah = require "agenthost"
local T = require "toolcheck"

local ORDERS = {
  { key = "A-1", args = { amount = 1500 } },
  { key = "A-2", args = { amount = 2300 } },
  { key = "A-3", args = { amount = 900 } },
}

-- charge: A-1 fails transiently twice, then succeeds; the others succeed.
local function world(policy)
  local w = { runs = {}, started = {}, total = 0 }
  w.charge = ah.tool { name = "charge", policy = policy or { max_attempts = 3, base_ms = 1 },
    run = function(args, ctx)
      w.runs[ctx.key] = (w.runs[ctx.key] or 0) + 1
      if ctx.key == "A-1" and w.runs[ctx.key] <= 2 then error(ah.transient("gateway timeout")) end
      w.total = w.total + args.amount
      return { charged = args.amount }
    end }
  w.ledger = ah.ledger {}
  w.fn = function(o, ctx)
    w.started[#w.started + 1] = o.key
    return w.charge:call(o.args, { key = o.key, ledger = w.ledger, budget = ctx.budget })
  end
  return w
end

T.test("one budget of 4: A-1 takes 3, A-2 takes 1, A-3 is skipped", function()
  local w = world()
  local b = ah.batch(ORDERS, w.fn, { budget = 4 })
  T.eq(b.done, { "A-1", "A-2" }, "done")
  T.eq(b.failed, {}, "failed")
  T.eq(b.skipped, { "A-3" }, "skipped")
  T.eq(b.calls, 4, "calls = body executions")
  T.eq(b.budget, { limit = 4, used = 4 }, "budget")
  T.eq(w.runs, { ["A-1"] = 3, ["A-2"] = 1 }, "executions per order")
  T.eq(w.started, { "A-1", "A-2" }, "A-3 was never started")
  T.eq({ b.results["A-1"].attempts, b.results["A-2"].attempts }, { 3, 1 }, "results per key")
  T.eq(b.results["A-3"], { ok = false, outcome = "skipped" }, "skipped result")
  T.eq(b.items, 3, "items")
  T.eq(w.total, 3800, "charged A-1 and A-2")
  -- what was kept: run again with a new budget; done items are duplicates
  local again = ah.batch(ORDERS, w.fn, { budget = 4 })
  T.eq({ again.done, again.skipped, again.calls }, { { "A-1", "A-2", "A-3" }, {}, 1 }, "resume")
  T.eq({ again.results["A-1"].duplicate, again.results["A-2"].duplicate,
         again.results["A-3"].duplicate }, { true, true, false }, "duplicates")
  T.eq(w.total, 4700, "each order charged once in all")
end)

T.test("a budget of 0 starts nothing", function()
  local w = world()
  local events = {}
  local b = ah.batch(ORDERS, w.fn, { budget = 0, on_event = function(e) events[#events + 1] = e end })
  T.eq({ b.done, b.failed, b.skipped, b.calls }, { {}, {}, { "A-1", "A-2", "A-3" }, 0 }, "all skipped")
  T.eq(w.started, {}, "fn never called")
  T.eq(T.is_integer(events[1] and events[1].ts_ms), true, "the event has a time")
  events[1].ts_ms = nil
  T.eq(events, { { type = "budget_exhausted", budget = "batch", used = 0, limit = 0 } }, "one event")
end)

T.test("keys are item.key or the index; failures and errors are failed", function()
  local items = { { n = 1 }, { key = "named", n = 2 }, { n = 3 }, { n = 4 }, "plain" }
  local b = ah.batch(items, function(item)
    if type(item) == "string" then return { ok = false } end
    if item.n == 3 then error("fn crashed") end
    if item.n == 4 then return false end
    return item.n
  end)
  T.eq(b.done, { 1, "named" }, "done keys")
  T.eq(b.failed, { 3, 4, 5 }, "failed keys")
  T.eq(b.results[1], 1, "what fn returned")
  T.eq(b.results[3].error.kind, "permanent", "a raised error becomes a failed record")
  T.ok(b.results[3].error.message:find("fn crashed", 1, true), "with its message")
  T.eq(b.budget.limit, nil, "no budget given: no limit")
  T.eq(b.calls, 0, "no tool calls")
end)

T.test("concurrency K runs up to K items at once", function()
  for _, k in ipairs { 1, 2, 3 } do
    local inflight, peak = 0, 0
    local tool = ah.tool { name = "slow", policy = { max_attempts = 2, base_ms = 5, jitter = "none" },
      run = function(_, ctx)
        if ctx.attempt == 1 then error(ah.transient("wait")) end
        return true
      end }
    local items = {}
    for i = 1, 6 do items[i] = { key = "i" .. i } end
    local b = ah.batch(items, function(item, ctx)
      inflight = inflight + 1
      if inflight > peak then peak = inflight end
      local r = tool:call({}, { key = item.key, budget = ctx.budget })
      inflight = inflight - 1
      return r
    end, { concurrency = k })
    T.eq(peak, k, "peak with K=" .. k)
    T.eq({ #b.done, b.calls }, { 6, 12 }, "all done with K=" .. k)
    T.eq(b.done, { "i1", "i2", "i3", "i4", "i5", "i6" }, "keys in item order with K=" .. k)
  end
end)

T.test("with concurrency, an item whose call finds the budget spent is skipped", function()
  local fixed = { max_attempts = 3, base_ms = 5, jitter = "none" }
  local w = world(fixed)
  -- K=3: A-1 fails, A-2 and A-3 succeed while A-1 waits; A-1's retry takes the 4th unit,
  -- fails again, and its third attempt is refused.
  local b = ah.batch(ORDERS, w.fn, { budget = 4, concurrency = 3 })
  T.eq({ b.done, b.failed, b.skipped, b.calls }, { { "A-2", "A-3" }, { "A-1" }, {}, 4 }, "lists")
  T.eq(b.results["A-1"].outcome, "budget_exhausted", "A-1 ran out mid-retry")
  T.eq(b.results["A-1"].attempts, 2, "after two attempts")
  -- a fourth item reached while others still hold the last unit is skipped, not failed
  local w2 = world(fixed)
  local items = { ORDERS[2], ORDERS[3], { key = "A-4", args = { amount = 1 } } }
  local b2 = ah.batch(items, w2.fn, { budget = 2, concurrency = 3 })
  T.eq({ b2.done, b2.skipped, b2.calls }, { { "A-2", "A-3" }, { "A-4" }, 2 }, "refused before running")
  T.eq(w2.started, { "A-2", "A-3", "A-4" }, "A-4 was started, but no body ran for it")
end)

T.test("a duplicate item costs nothing", function()
  local w = world()
  local items = { ORDERS[2], ORDERS[2], ORDERS[3] }
  local b = ah.batch(items, w.fn, { budget = 2 })
  T.eq({ b.done, b.calls, w.total, #w.ledger }, { { "A-2", "A-2", "A-3" }, 2, 3200, 2 }, "dup")
end)

T.test("options are checked", function()
  T.raises(function() ah.batch({}, print, { budgt = 1 }) end, "budgt", "unknown option")
  T.raises(function() ah.batch({}, print, { concurrency = 0 }) end, "concurrency", "K >= 1")
  T.raises(function() ah.batch({}, print, { budget = -1 }) end, ">= 0", "budget >= 0")
  local shared = ah.budget(1)
  local b1 = ah.batch({ 1, 2 }, function(_, ctx)
    return ah.tool { name = "t", run = function() end }:call({}, { budget = ctx.budget })
  end, { budget = shared })
  T.eq({ b1.done, b1.skipped, shared.used }, { { 1 }, { 2 }, 1 }, "an ah.budget is shared")
end)

T.done()
