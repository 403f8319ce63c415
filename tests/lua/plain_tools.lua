-- plain_tools.lua - tools, ledgers and batches from a plain lua5.4 that loads the module:
-- the main chunk cannot yield, so a tool's retry wait and a batch drive the scheduler
-- themselves (lah_await's blocking path). Same code, same results as under the host.
local ah = require "agenthost"
local T = require "toolcheck"

T.test("a retrying call blocks the plain main chunk and completes", function()
  local runs = 0
  local tool = ah.tool { name = "charge", policy = { max_attempts = 3, base_ms = 5, jitter = "none" },
    run = function(args)
      runs = runs + 1
      if runs <= 2 then error(ah.transient("timeout")) end
      return { charged = args.amount }
    end }
  local ledger = ah.ledger {}
  local r = tool:call({ amount = 1500 }, { key = "A-1", ledger = ledger, budget = ah.budget(4) })
  T.eq({ r.ok, r.attempts, r.seq, runs }, { true, 3, 1, 3 }, "retried to success")
  local again = tool:call({ amount = 1500 }, { key = "A-1", ledger = ledger })
  T.eq({ again.duplicate, again.seq, runs }, { true, 1, 3 }, "duplicate")
end)

T.test("a concurrent batch runs from the plain main chunk", function()
  -- s's first attempt waits (yielding) until x has started, so f and x run meanwhile at
  -- any speed; a fixed backoff raced x's start (valgrind on a busy machine lost it)
  local order, started = {}, {}
  local tool = ah.tool { name = "slow", policy = { max_attempts = 2, base_ms = 20, jitter = "none" },
    run = function(_, ctx)
      order[#order + 1] = ctx.key .. ":" .. ctx.attempt
      started[ctx.key] = true
      if ctx.key == "s" and ctx.attempt == 1 then
        repeat ah.sleep(1) until started.x
        error(ah.transient("later"))
      end
      return true
    end }
  local b = ah.batch({ { key = "s" }, { key = "f" }, { key = "x" } }, function(item, ctx)
    return tool:call({}, { key = item.key, budget = ctx.budget })
  end, { concurrency = 2, budget = 3 })
  T.eq(order, { "s:1", "f:1", "x:1" }, "f and x ran while s waited")
  T.eq({ b.done, b.failed, b.skipped, b.calls }, { { "f", "x" }, { "s" }, {}, 3 },
       "s's retry found the budget spent")
  T.eq(b.results.s.outcome, "budget_exhausted", "s ran out mid-retry")
end)

T.done()
