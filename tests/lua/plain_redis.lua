-- plain_redis.lua - the Redis store from a plain lua5.4 that loads the module (the main
-- chunk cannot yield: agent:run, tool:call and ledger:entries() drive the loop themselves,
-- Redis's socket included): a shared budget stops retries across two agents, a shared
-- pacer emits llm_paced, the Redis ledger deduplicates and lists its entries.
local ah = require "agenthost"
local T = require "toolcheck"
local R = require "redisfix"

local redis = R.start()
local mock = ah.mock { plan_json = '{"steps": [], "then": {"status": 503}}' }

T.test("a shared budget bounds two agents' retries together", function()
  ah.retry_budget { redis = redis.url, key = "plain", max_tokens = 4, token_ratio = 0.1 }
  local client = ah.client { provider = "anthropic", model = "m", base_url = mock.url,
                             api_key = "k" }
  local p = { max_attempts = 5, base_ms = 1, cap_ms = 2 }
  local a = ah.agent { client = client, policy = p, on_event = false }
  local b = ah.agent { client = client, policy = p, on_event = false }
  local ra, rb = a:run("one"), b:run("two")
  T.eq({ ra.outcome, rb.outcome }, { "failed", "failed" }, "both fail in the outage")
  -- 4 tokens: one retry in all (3 left > 2), shared by both agents
  T.eq(ra.stats.retries + rb.stats.retries, 1, "one retry between them")
  T.eq(#mock:requests(), 3, "three requests")
  ah.retry_budget(false)
end)

T.test("a shared pacer paces and says so", function()
  mock:set_plan(nil)
  local rl = ah.rate_limit { redis = redis.url, key = "plain-rl", requests_per_minute = 60 }
  local client = ah.client { provider = "anthropic", model = "m", base_url = mock.url,
                             api_key = "k", rate_limit = rl }
  local paced = {}
  local agent = ah.agent { client = client, on_event = function(ev)
    if ev.type == "llm_paced" then paced[#paced + 1] = ev.wait_ms end
  end }
  T.eq(agent:run("a").outcome, "completed", "first")
  T.eq(agent:run("b").outcome, "completed", "second")
  T.eq(#paced, 1, "the second was paced")
  T.ok(paced[1] and paced[1] > 0 and paced[1] <= 1000, "wait " .. tostring(paced[1]))
end)

T.test("the Redis ledger from a plain main chunk", function()
  local ledger = ah.ledger { redis = redis.url, prefix = "plain:" }
  local runs = 0
  local tool = ah.tool { name = "charge", run = function(args)
    runs = runs + 1
    return { charged = args.amount }
  end }
  local a = tool:call({ amount = 5 }, { key = "P-1", ledger = ledger })
  local b = tool:call({ amount = 5 }, { key = "P-1", ledger = ledger })
  T.eq({ a.ok, b.duplicate, b.seq, runs }, { true, true, 1, 1 }, "deduplicated")
  local es = ledger:entries()
  T.eq({ #es, es[1].key, es[1].receipt.charged }, { 1, "P-1", 5 }, "entries")
  ledger:close()
end)

mock:close()
collectgarbage()
collectgarbage()
redis.stop()
T.done()
