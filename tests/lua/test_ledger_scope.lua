-- test_ledger_scope.lua - an agent's default in-memory ledger belongs to one run: it
-- starts empty each run and is collected with it, so a long-lived agent does not grow by
-- every run's keys (they contain the run id and never hit again; the regression was
-- ~187 B per call, forever). `ledger = false` turns idempotency off; a ledger handle or
-- path is shared by every run.
local ah = require "agenthost"
local T = require "toolcheck"

local mock = ah.mock {}
local client = ah.client { provider = "anthropic", model = "m", base_url = mock.url,
                           api_key = "k" }

local function agent_with(ledger, key)
  local seen = { n = 0, sizes = {}, handles = setmetatable({}, { __mode = "k" }) }
  seen.agent = ah.agent {
    client = client, max_steps = 3, ledger = ledger,
    tools = { t = { description = "t", schema = { type = "object", properties = {} },
                    idempotency_key = key,
                    run = function(_, ctx)
                      seen.n = seen.n + 1
                      seen.sizes[#seen.sizes + 1] = ctx.ledger and #ctx.ledger or -1
                      if ctx.ledger then seen.handles[ctx.ledger] = true end
                      return seen.n
                    end } },
  }
  return seen
end

T.test("the default ledger is the run's: empty at each run, collected after", function()
  local s = agent_with(nil)
  local RUNS = 30
  for _ = 1, RUNS do
    T.eq(s.agent:run("x").outcome, "completed", "run completed")
  end
  T.eq(s.n, RUNS, "one body execution per run")
  local all_empty = true
  for _, size in ipairs(s.sizes) do all_empty = all_empty and size == 0 end
  T.ok(all_empty, "every run's ledger was empty when its tool ran: " .. T.show(s.sizes))
  collectgarbage("collect")
  collectgarbage("collect")
  local alive = 0
  for _ in pairs(s.handles) do alive = alive + 1 end
  T.eq(alive, 0, "no run's ledger outlives its run")
end)

T.test("ledger = false: no idempotency, no ledger", function()
  local s = agent_with(false, function() return "same" end)
  s.agent:run("x")
  s.agent:run("x")
  T.eq(s.n, 2, "the same key ran twice: nothing recorded it")
  T.eq(s.sizes, { -1, -1 }, "ctx.ledger is nil")
end)

T.test("a ledger handle or path is shared by every run", function()
  local shared = ah.ledger {}
  local s = agent_with(shared, function() return "same" end)
  s.agent:run("x")
  s.agent:run("x")
  T.eq({ s.n, #shared }, { 1, 1 }, "the second run's call was a duplicate")
  local path = T.tmpname(".db")
  local p = agent_with(path, function() return "same" end)
  p.agent:run("x")
  p.agent:run("x")
  T.eq(p.n, 1, "a path is one ledger for every run")
  T.raises(function() ah.agent { client = client, ledger = 42 } end,
           "ledger must be an ah.ledger, a path or false, got number", "bad ledger")
end)

mock:close()
T.done()
