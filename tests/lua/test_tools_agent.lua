-- test_tools_agent.lua - an agent's tools go through the same tool:call path as a
-- script's: the tool policy's retries, the run's ledger (duplicates across runs through
-- idempotency_key), the default key run_id:tool_call_id, and the run's budget. Against
-- the built-in mock provider over loopback (it calls the first tool offered, with
-- arguments built from the schema's required properties, then answers with the result).
local ah = require "agenthost"
local T = require "toolcheck"

local mock = ah.mock {}
local client = ah.client { provider = "anthropic", model = "mock-1", base_url = mock.url,
                           api_key = "test-key" }
local SCHEMA = { type = "object", required = { "order", "amount" },
                 properties = { order = { type = "string" }, amount = { type = "integer" } } }

local function charge_agent(opts)
  local w = { runs = 0, ctx = {}, events = {} }
  w.agent = ah.agent {
    client = client, max_steps = 4, ledger = opts.ledger, budget = opts.budget,
    tools = { charge = {
      description = "charge an order", schema = SCHEMA,
      policy = { max_attempts = 3, base_ms = 1 },
      idempotency_key = opts.idempotency_key,
      run = function(args, ctx)
        w.runs = w.runs + 1
        w.ctx[#w.ctx + 1] = { key = ctx.key, attempt = ctx.attempt, run_id = ctx.run_id,
                              tool_call_id = ctx.tool_call_id }
        if ctx.attempt <= (opts.fails or 0) then error(ah.transient("gateway timeout")) end
        return { charged = args.amount, order = args.order }
      end,
    } },
    on_event = function(ev)
      if ev.type == "tool_call_end" or ev.type == "budget_exhausted" then
        w.events[#w.events + 1] = ev
      end
    end,
  }
  return w
end

T.test("transient failures of an agent's tool are retried by its policy", function()
  local w = charge_agent { fails = 1 }
  local r = w.agent:run("charge the order")
  T.eq(r.outcome, "completed", "run completed")
  T.eq(w.runs, 2, "body ran twice")
  T.eq(#w.events, 1, "one tool_call_end")
  T.eq({ w.events[1].outcome, w.events[1].attempts, w.events[1].duplicate }, { "ok", 2, false },
       "tool_call_end")
  T.ok(r.text:find('"charged":42', 1, true), "the model saw the receipt: " .. tostring(r.text))
end)

T.test("the default key is run_id:tool_call_id, passed in ctx", function()
  local w = charge_agent {}
  w.agent:run("charge the order")
  local c = w.ctx[1]
  T.ok(c.run_id and c.tool_call_id, "run_id and tool_call_id are set")
  T.eq(c.key, tostring(c.run_id) .. ":" .. tostring(c.tool_call_id), "default key")
end)

T.test("the run's ledger: a repeated key across runs returns the original receipt", function()
  local ledger = ah.ledger {}
  local w = charge_agent { ledger = ledger,
                           idempotency_key = function(args) return "order-" .. args.order end }
  local r1 = w.agent:run("charge the order")
  local r2 = w.agent:run("charge the order again")
  T.eq(w.runs, 1, "body ran once over two runs")
  T.eq({ w.events[2].duplicate, w.events[2].attempts }, { true, 0 }, "second is a duplicate")
  local rows = ledger:entries()
  T.eq(#rows, 1, "one ledger row")
  T.eq(rows[1].key, "order-mock_order", "keyed by idempotency_key")
  T.eq(rows[1].receipt, { charged = 42, order = "mock_order" }, "receipt recorded")
  T.eq(r1.text, r2.text, "both runs saw the same receipt")
end)

T.test("the run's budget: spent means the body is not called", function()
  local w = charge_agent { fails = 5, budget = 2 }
  local r = w.agent:run("charge the order")
  T.eq(w.runs, 2, "two executions, then the budget refused the third")
  local types = {}
  for _, ev in ipairs(w.events) do types[#types + 1] = ev.type .. ":" .. tostring(ev.outcome or ev.budget) end
  T.eq(types, { "budget_exhausted:tool_calls", "tool_call_end:budget_exhausted" }, "events")
  T.ok(r.outcome ~= nil, "the run ended without raising")
  local w0 = charge_agent { budget = 0 }
  w0.agent:run("charge the order")
  T.eq(w0.runs, 0, "budget 0: never called")
end)

mock:close()
T.done()
