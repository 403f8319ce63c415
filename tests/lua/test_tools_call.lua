-- test_tools_call.lua - tool:call rules (docs/tools.md, issue 5): what is retried, max_attempts,
-- retry_on, budgets, ctx, keys, validation. Every count is measured inside the bodies.
local ah = require "agenthost"
local T = require "toolcheck"

-- A tool whose body fails `fails` times with `kind` (a function of the attempt may be
-- given instead), then returns a receipt. runs[key] counts body executions.
local function flaky(opts)
  local runs, seen = {}, {}
  local tool = ah.tool {
    name = opts.name or "charge",
    policy = opts.policy,
    idempotency_key = opts.idempotency_key,
    run = function(args, ctx)
      runs[ctx.key or "-"] = (runs[ctx.key or "-"] or 0) + 1
      seen[#seen + 1] = { key = ctx.key, attempt = ctx.attempt, run_id = ctx.run_id,
                          tool = ctx.tool, tool_call_id = ctx.tool_call_id }
      if ctx.attempt <= (opts.fails or 0) then
        local kind = opts.kind or "transient"
        if kind == "transient" then error(ah.transient("blip " .. ctx.attempt)) end
        if kind == "permanent" then error(ah.permanent("declined")) end
        if kind == "plain" then error("boom") end
        if kind == "table" then error({ code = 7 }) end
      end
      return { charged = args.amount, attempt = ctx.attempt }
    end,
  }
  local function total()
    local n = 0
    for _, v in pairs(runs) do n = n + v end
    return n
  end
  return tool, runs, seen, total
end

T.test("transient failures are retried until success", function()
  local tool, _, _, total = flaky { fails = 2, policy = { max_attempts = 3, base_ms = 1 } }
  local r = tool:call({ amount = 1500 }, { key = "A-1" })
  T.eq(r.ok, true, "ok")
  T.eq(r.outcome, "ok", "outcome")
  T.eq(r.attempts, 3, "attempts")
  T.eq(total(), 3, "body executions")
  T.eq(r.receipt, { charged = 1500, attempt = 3 }, "receipt is what the body returned")
  T.eq(r.error, nil, "no error on success")
end)

T.test("max_attempts counts all attempts", function()
  for _, max in ipairs { 1, 2, 3, 5 } do
    local tool, _, _, total = flaky { fails = 100, policy = { max_attempts = max, base_ms = 0 } }
    local r = tool:call({ amount = 1 }, { key = "k" })
    T.eq(r.outcome, "failed", "outcome with max " .. max)
    T.eq(r.attempts, max, "attempts with max " .. max)
    T.eq(total(), max, "executions with max " .. max)
    T.eq(r.error.kind, "transient", "the last error is kept")
  end
end)

T.test("permanent and unknown failures are not retried by default", function()
  for _, kind in ipairs { "permanent", "plain", "table" } do
    local tool, _, _, total = flaky { fails = 100, kind = kind,
                                      policy = { max_attempts = 4, base_ms = 0 } }
    local r = tool:call({ amount = 1 }, { key = "k" })
    T.eq(r.attempts, 1, kind .. ": one attempt")
    T.eq(total(), 1, kind .. ": one execution")
    T.eq(r.error.kind, "permanent", kind .. ": counts as permanent")
  end
  local tool = flaky { fails = 1, kind = "plain" }
  local r = tool:call({}, { key = "k" })
  T.ok(r.error.message:find("boom", 1, true), "a plain error keeps its message")
end)

T.test("retry-everything takes max_attempts on a permanent failure, the split one", function()
  local everything = function() return true end
  local split = function(err) return err.kind == "transient" end
  local tool, _, _, total = flaky { fails = 100, kind = "permanent",
                                    policy = { max_attempts = 3, base_ms = 0, retry_on = everything } }
  local r = tool:call({ amount = 1 }, { key = "D-1" })
  T.eq({ r.attempts, total(), r.outcome }, { 3, 3, "failed" }, "retry-everything")
  tool, _, _, total = flaky { fails = 100, kind = "permanent",
                              policy = { max_attempts = 3, base_ms = 0, retry_on = split } }
  r = tool:call({ amount = 1 }, { key = "D-1" })
  T.eq({ r.attempts, total(), r.outcome }, { 1, 1, "failed" }, "split")
  tool, _, _, total = flaky { fails = 2, policy = { max_attempts = 3, base_ms = 0, retry_on = split } }
  r = tool:call({ amount = 1 }, { key = "A-1" })
  T.eq({ r.attempts, total(), r.outcome }, { 3, 3, "ok" }, "split retries transient")
end)

T.test("retry_on sees every error as raised, once per failure", function()
  local seen = {}
  local tool, _, _, total = flaky {
    fails = 2, kind = "permanent",
    policy = { max_attempts = 4, base_ms = 0, retry_on = function(err, default)
      seen[#seen + 1] = { kind = err.kind, message = err.message, default = default }
      return true
    end },
  }
  local r = tool:call({ amount = 1 }, { key = "k" })
  T.eq(r.attempts, 3, "two failures retried, third attempt succeeds")
  T.eq(total(), 3, "executions")
  T.eq(seen, { { kind = "permanent", message = "declined", default = false },
               { kind = "permanent", message = "declined", default = false } },
       "retry_on called once per failure with the error")
end)

T.test("a failing retry_on is logged and the default decides", function()
  local boom = function() error("predicate bug") end
  local tool, _, _, total = flaky { fails = 1, policy = { max_attempts = 3, base_ms = 0, retry_on = boom } }
  local r = tool:call({}, { key = "t" })
  T.eq({ r.outcome, r.attempts, total() }, { "ok", 2, 2 }, "transient still retried")
  tool, _, _, total = flaky { fails = 9, kind = "permanent",
                              policy = { max_attempts = 3, base_ms = 0, retry_on = boom } }
  r = tool:call({}, { key = "p" })
  T.eq({ r.outcome, r.attempts, total() }, { "failed", 1, 1 }, "permanent still not retried")
end)

T.test("a budget error is never retried, whatever retry_on says", function()
  local budget = ah.budget(2)
  local tool, _, _, total = flaky { fails = 100,
                                    policy = { max_attempts = 5, base_ms = 0,
                                               retry_on = function() return true end } }
  local r = tool:call({}, { key = "k", budget = budget })
  T.eq(r.outcome, "budget_exhausted", "outcome")
  T.eq(r.ok, false, "not ok")
  T.eq(r.error.kind, "budget", "error kind")
  T.eq(r.attempts, 2, "two executions granted")
  T.eq(total(), 2, "body ran twice")
  T.eq({ budget.used, budget.limit, budget.remaining }, { 2, 2, 0 }, "budget spent")
end)

T.test("a budget of 0 calls nothing and raises nothing", function()
  local events = {}
  local budget = ah.budget(0)
  local tool, _, _, total = flaky {}
  local ok, r = T.pcall(tool.call, tool, { amount = 5 }, { key = "z", budget = budget,
                      on_event = function(ev) events[#events + 1] = ev end })
  T.eq(ok, true, "no exception")
  T.eq({ r.ok, r.outcome, r.attempts, r.error.kind }, { false, "budget_exhausted", 0, "budget" },
       "result")
  T.eq(total(), 0, "body never ran")
  T.eq(T.is_integer(events[1] and events[1].ts_ms), true, "the event has a time")
  events[1].ts_ms = nil
  T.eq(events[1], { type = "budget_exhausted", budget = "tool_calls", used = 0, limit = 0 },
       "budget_exhausted event")
  T.eq(events[2] and events[2].type, "tool_call_end", "then tool_call_end")
  T.eq(events[2] and events[2].outcome, "budget_exhausted", "its outcome")
  -- a second refusal of the same budget does not repeat the event
  events = {}
  tool:call({ amount = 6 }, { key = "y", budget = budget, on_event = function(ev) events[#events + 1] = ev end })
  T.eq(#events, 1, "only tool_call_end the second time")
  T.eq(budget.refused, 2, "both refusals counted")
  -- a number is a budget for this call alone
  local r2 = tool:call({ amount = 7 }, { key = "x", budget = 0 })
  T.eq({ r2.outcome, total() }, { "budget_exhausted", 0 }, "budget = 0 option")
end)

T.test("a budget counts executions, retries included, across calls", function()
  local budget = ah.budget(4)
  local tool, runs = flaky { fails = 2, policy = { max_attempts = 3, base_ms = 0 } }
  local a = tool:call({ amount = 1500 }, { key = "A-1", budget = budget })
  local b = tool:call({ amount = 2300 }, { key = "A-2", budget = budget })
  local c = tool:call({ amount = 900 }, { key = "A-3", budget = budget })
  T.eq({ a.outcome, a.attempts }, { "ok", 3 }, "A-1 took three")
  -- A-2 fails transiently on its first attempt too (same body): one execution left
  T.eq({ b.outcome, b.attempts }, { "budget_exhausted", 1 }, "A-2 got the last unit")
  T.eq({ c.outcome, c.attempts }, { "budget_exhausted", 0 }, "A-3 got nothing")
  T.eq(runs, { ["A-1"] = 3, ["A-2"] = 1 }, "executions per key")
  T.eq(budget.used, 4, "used")
end)

T.test("ctx carries key, attempt, run_id, tool_call_id and the tool's name", function()
  local tool, _, seen = flaky { name = "refund", fails = 1, policy = { max_attempts = 2, base_ms = 0 } }
  tool:call({ amount = 3 }, { key = "R-9", run_id = "run-1", tool_call_id = "toolu_1" })
  T.eq(seen, { { key = "R-9", attempt = 1, run_id = "run-1", tool = "refund", tool_call_id = "toolu_1" },
               { key = "R-9", attempt = 2, run_id = "run-1", tool = "refund", tool_call_id = "toolu_1" } },
       "ctx per attempt")
end)

T.test("idempotency_key(args, ctx) decides the key", function()
  local proposals = {}
  local tool, runs = flaky { idempotency_key = function(args, ctx)
    proposals[#proposals + 1] = ctx.key
    return "order-" .. args.order
  end }
  local ledger = ah.ledger {}
  local r1 = tool:call({ order = 7, amount = 1 }, { key = "delivery-1", ledger = ledger })
  local r2 = tool:call({ order = 7, amount = 1 }, { key = "delivery-2", ledger = ledger })
  T.eq({ r1.key, r2.key }, { "order-7", "order-7" }, "keys")
  T.eq(r2.duplicate, true, "second delivery is a duplicate")
  T.eq(runs, { ["order-7"] = 1 }, "body ran once")
  T.eq(proposals, { "delivery-1", "delivery-2" }, "the hook sees the caller's key")
  -- a failing hook keeps the caller's key
  local bad = flaky { idempotency_key = function() error("hook bug") end }
  local r3 = bad:call({ amount = 1 }, { key = "caller" })
  T.eq({ r3.ok, r3.key }, { true, "caller" }, "caller's key kept")
end)

T.test("retry waits are loop timers: other work runs meanwhile", function()
  local order = {}
  local slow = ah.tool { name = "slow", policy = { max_attempts = 2, base_ms = 30, jitter = "none" },
    run = function(_, ctx)
      order[#order + 1] = "slow" .. ctx.attempt
      if ctx.attempt == 1 then error(ah.transient("later")) end
      return true
    end }
  local fast = ah.tool { name = "fast", run = function() order[#order + 1] = "fast"; return true end }
  local b = ah.batch({ { key = "s" }, { key = "f" } }, function(item)
    if item.key == "s" then return slow:call({}, {}) end
    return fast:call({}, {})
  end, { concurrency = 2 })
  T.eq(b.done, { "s", "f" }, "both done")
  T.eq(order, { "slow1", "fast", "slow2" }, "fast ran during slow's backoff")
end)

T.test("the policy's deadline ends the retries", function()
  local tool, _, _, total = flaky { fails = 100,
                                    policy = { max_attempts = 5, base_ms = 60000, cap_ms = 60000, jitter = "none",
                                               deadline_ms = 1000 } }
  local r = tool:call({}, { key = "k" })
  T.eq({ r.outcome, r.attempts, total(), r.error.kind }, { "failed", 1, 1, "transient" },
       "a wait past the deadline gives up at once")
end)

T.test("a server-style hint on a tool error is a floor; one past the cap gives up", function()
  local hinted = function(ms)
    local runs = 0
    local tool = ah.tool { name = "h", policy = { max_attempts = 3, base_ms = 0, max_retry_after_ms = 100 },
      run = function()
        runs = runs + 1
        if runs == 1 then error({ kind = "transient", message = "slow down", retry_after_ms = ms }) end
        return runs
      end }
    return tool:call({}, { key = "k" }), function() return runs end
  end
  local r, runs = hinted(5000)
  T.eq({ r.outcome, r.attempts, runs(), r.error.retry_after_ms }, { "failed", 1, 1, 5000 },
       "a hint beyond max_retry_after_ms ends the call")
  r, runs = hinted(20)
  T.eq({ r.outcome, r.attempts, runs() }, { "ok", 2, 2 }, "a hint within the cap is waited")
end)

T.test("a body may call other tools; ctx.budget and ctx.ledger pass on", function()
  local inner_runs = 0
  local inner = ah.tool { name = "inner", policy = { max_attempts = 2, base_ms = 1 },
    run = function(_, ctx)
      inner_runs = inner_runs + 1
      if ctx.attempt == 1 then error(ah.transient("again")) end
      return ctx.key
    end }
  local outer = ah.tool { name = "outer", run = function(args, ctx)
    local r = inner:call(args, { key = ctx.key .. "/inner", budget = ctx.budget, ledger = ctx.ledger })
    return { inner = r.receipt, attempts = r.attempts }
  end }
  local budget, ledger = ah.budget(10), ah.ledger {}
  local r = outer:call({ x = 1 }, { key = "o", budget = budget, ledger = ledger })
  T.eq(r.receipt, { inner = "o/inner", attempts = 2 }, "inner result")
  T.eq({ budget.used, #ledger, inner_runs }, { 3, 2, 2 }, "one budget and ledger for both")
  local again = outer:call({ x = 1 }, { key = "o", budget = budget, ledger = ledger })
  T.eq({ again.duplicate, budget.used, inner_runs }, { true, 3, 2 }, "outer duplicate")
end)

T.test("declarations are checked", function()
  local run = function() end
  T.raises(function() ah.tool { name = "x", run = run, polcy = {} } end, "polcy", "unknown field")
  T.raises(function() ah.tool { name = "x", run = run, policy = { max_attempt = 3 } } end,
           "max_attempt", "unknown policy field")
  T.raises(function() ah.tool { name = "x", run = run, policy = { max_attempts = 0 } } end,
           "max_attempts", "bad max_attempts")
  T.raises(function() ah.tool { name = "x" } end, "run", "run is required")
  T.raises(function() ah.tool { run = run } end, "name", "name is required")
  local tool = ah.tool { name = "x", run = run }
  T.raises(function() tool:call({}, { kye = "a" }) end, "kye", "unknown call option")
  T.raises(function() tool:call({ f = print }, { key = "a" }) end, "$.f", "args must be JSON")
  T.raises(function() tool:call({ list = { 1, 0 / 0 } }, { key = "a" }) end, "$.list[2] as JSON: NaN",
           "NaN in args, with its path")
  T.raises(function() ah.budget(-1) end, ">= 0", "negative budget")
  T.eq(tool.name, "x", "tool.name")
end)

T.test("receipts go through JSON: a first call and its duplicate look the same", function()
  local ledger = ah.ledger {}
  local n = 0
  local tool = ah.tool { name = "ship", run = function(args)
    n = n + 1
    return { id = "s-1", items = { "a", "b" }, weight = 1.5, paid = true, note = args.note }
  end }
  local r1 = tool:call({ note = "x" }, { key = "S", ledger = ledger })
  local r2 = tool:call({ note = "x" }, { key = "S", ledger = ledger })
  local want = { id = "s-1", items = { "a", "b" }, weight = 1.5, paid = true, note = "x" }
  T.eq(r1.receipt, want, "first receipt")
  T.eq(r2.receipt, want, "duplicate receipt")
  T.eq(n, 1, "one execution")
  local str = ah.tool { name = "s", run = function() return "plain text" end }
  T.eq(str:call({}, { key = "p" }).receipt, "plain text", "a string receipt")
  -- a result JSON cannot hold is the body's (permanent) error, naming where it is: not a
  -- receipt that says "function: 0x..." or -nan (issue 26, finding 5)
  local odd = ah.tool { name = "o", run = function() return { f = print, n = 0 / 0 } end }
  local ro = odd:call({}, { key = "o", ledger = ledger })
  T.eq({ ro.ok, ro.outcome, ro.error.kind, ro.attempts }, { false, "failed", "permanent", 1 },
       "a result JSON cannot hold fails the call")
  T.eq(ro.error.message:find("$.f", 1, true) ~= nil, true, "the error names the bad field")
  T.eq(#ledger:entries(), 1, "nothing recorded for it (the ledger holds S alone)")
  local none = ah.tool { name = "n", run = function() end }
  local rn = none:call({}, { key = "n" })
  T.eq({ rn.ok, rn.receipt }, { true, nil }, "no receipt")
end)

-- The tool's wait comes from the core retry machine (the LLM calls' one): the error's
-- retry_after_ms is a floor over the jittered backoff, a hint past max_retry_after_ms or
-- a wait past the deadline ends the call at once; and the wait is a loop timer, so
-- another coroutine runs during it.
T.test("the backoff is the retry machine's, on a loop timer", function()
  local ticks, ticks_at = 0, {}
  local function hinted(policy)
    return ah.tool { name = "hinted", policy = policy, run = function(_, ctx)
      ticks_at[ctx.attempt] = ticks
      if ctx.attempt == 1 then
        error({ kind = "transient", message = "slow down", retry_after_ms = 60 })
      end
      return "ok"
    end }
  end
  local done = false
  local rs = ah.parallel {
    function()
      local r = hinted({ max_attempts = 2, base_ms = 0 }):call({}, {})
      done = true
      return r
    end,
    function()
      while not done do ah.sleep(5); ticks = ticks + 1 end
    end,
  }
  local r = rs[1]
  T.eq({ r.ok, r.attempts }, { true, 2 }, "retried once")
  T.eq(ticks_at[1], 0, "no tick before the first attempt")
  T.eq(ticks_at[2] >= 1, true, "the other coroutine ran during the 60 ms wait ("
       .. tostring(ticks_at[2]) .. " ticks)")

  ticks_at = {}
  r = hinted({ max_attempts = 3, base_ms = 0, max_retry_after_ms = 10 }):call({}, {})
  T.eq({ r.ok, r.attempts, r.error.kind }, { false, 1, "transient" },
       "a hint past max_retry_after_ms ends the call at once")
  r = hinted({ max_attempts = 3, base_ms = 0, deadline_ms = 30 }):call({}, {})
  T.eq({ r.ok, r.attempts, r.error.kind }, { false, 1, "transient" },
       "a wait past the deadline ends the call at once")
end)

T.done()
