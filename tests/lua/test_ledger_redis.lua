-- test_ledger_redis.lua - the Redis ledger has the memory/SQLite ledger's semantics, against
-- a real redis-server: a duplicate key returns the original receipt and seq without
-- running the body; other arguments are idempotency_mismatch (body not run), also while
-- the key is in flight; two calls at once run the body once; two handles (two processes,
-- as far as Redis knows) share one ledger; entries() and #ledger; entries carry a TTL;
-- a claim whose holder vanished is taken over after its lease; a connection Redis drops
-- during a body costs nothing (no failure, no second run); an unreachable Redis fails
-- the call closed with kind `ledger`, body not run.
local ah = require "agenthost"
local T = require "toolcheck"
local R = require "redisfix"

local redis = R.start()

local function charge_tool(p, ms)
  return ah.tool { name = "charge", policy = p.policy, run = function(args, ctx)
    p.runs = p.runs + 1
    if ms then ah.sleep(ms) end
    return { charge = "ch_" .. p.runs, amount = args.amount }
  end }
end

local n = 0
local function new_ledger(opts)
  n = n + 1
  opts = opts or {}
  opts.redis = redis.url
  opts.prefix = opts.prefix or ("t" .. n .. ":")
  return ah.ledger(opts)
end

T.test("redis: a duplicate returns the original receipt and seq", function()
  local p = { runs = 0 }
  local tool, ledger = charge_tool(p), new_ledger()
  T.eq(ledger.backend, "redis", "backend")
  local a = tool:call({ amount = 5 }, { key = "A-1", ledger = ledger })
  local b = tool:call({ amount = 5 }, { key = "A-1", ledger = ledger })
  local c = tool:call({ amount = 7 }, { key = "A-2", ledger = ledger })
  T.eq({ a.ok, a.duplicate, a.seq }, { true, false, 1 }, "first")
  T.eq({ b.ok, b.duplicate, b.seq, b.attempts }, { true, true, 1, 0 }, "second")
  T.eq(b.receipt, a.receipt, "original receipt")
  T.eq(c.seq, 2, "next seq")
  T.eq(p.runs, 2, "two bodies")
  local es = ledger:entries()
  T.eq(#es, 2, "two entries")
  T.eq({ es[1].key, es[1].seq, es[1].receipt.charge }, { "A-1", 1, "ch_1" }, "entry 1")
  T.eq({ es[2].key, es[2].seq }, { "A-2", 2 }, "entry 2 in seq order")
  T.eq(ledger:count(), 2, "count")
end)

T.test("redis: other arguments are refused and the body does not run", function()
  local p = { runs = 0 }
  local tool, ledger = charge_tool(p), new_ledger()
  tool:call({ amount = 5 }, { key = "M-1", ledger = ledger })
  local r = tool:call({ amount = 6 }, { key = "M-1", ledger = ledger })
  T.eq({ r.ok, r.error and r.error.kind, p.runs }, { false, "idempotency_mismatch", 1 },
       "mismatch")
  T.ok(r.error.message:find("M-1", 1, true), "names the key: " .. r.error.message)
end)

T.test("redis: two calls at once run the body once; in flight + other args refused", function()
  local p = { runs = 0 }
  local tool, ledger = charge_tool(p, 50), new_ledger()
  local rs = ah.parallel {
    function() return tool:call({ amount = 5 }, { key = "K-1", ledger = ledger }) end,
    function() return tool:call({ amount = 5 }, { key = "K-1", ledger = ledger }) end,
    function() return tool:call({ amount = 9 }, { key = "K-1", ledger = ledger }) end,
  }
  T.eq(p.runs, 1, "body ran once")
  T.eq({ rs[1].ok, rs[1].duplicate }, { true, false }, "holder")
  T.eq({ rs[2].ok, rs[2].duplicate, rs[2].seq }, { true, true, 1 }, "waiter got the receipt")
  T.eq(rs[2].receipt, rs[1].receipt, "same receipt")
  T.eq({ rs[3].ok, rs[3].error and rs[3].error.kind }, { false, "idempotency_mismatch" },
       "other arguments in flight")
end)

T.test("redis: two handles share one ledger; a waiter with a deadline ends in_progress", function()
  local prefix = "shared" .. n .. ":"
  local a, b = new_ledger { prefix = prefix }, new_ledger { prefix = prefix }
  local p = { runs = 0 }
  local holder = charge_tool(p, 300)
  local wp = { runs = 0, policy = { deadline_ms = 60 } }
  local waiter = charge_tool(wp)
  local rs = ah.parallel {
    function() return holder:call({ amount = 5 }, { key = "S-1", ledger = a }) end,
    function()
      ah.sleep(20)
      return waiter:call({ amount = 5 }, { key = "S-1", ledger = b })
    end,
  }
  T.eq({ p.runs, wp.runs }, { 1, 0 }, "only the holder ran")
  T.eq({ rs[2].ok, rs[2].outcome }, { false, "in_progress" }, "waiter gave up in time")
  local again = waiter:call({ amount = 5 }, { key = "S-1", ledger = b })
  T.eq({ again.ok, again.duplicate, again.receipt.charge }, { true, true, "ch_1" },
       "the other handle sees the receipt")
end)

T.test("redis: a holder that fails hands the key to the waiter", function()
  local p = { runs = 0, fail = true }
  local tool = ah.tool { name = "charge", policy = { max_attempts = 1 },
    run = function(args)
      p.runs = p.runs + 1
      ah.sleep(30)
      if p.fail then
        p.fail = false
        error(ah.permanent("declined"))
      end
      return { charge = "ch_" .. p.runs }
    end }
  local ledger = new_ledger()
  local rs = ah.parallel {
    function() return tool:call({ amount = 5 }, { key = "F-1", ledger = ledger }) end,
    function() return tool:call({ amount = 5 }, { key = "F-1", ledger = ledger }) end,
  }
  T.eq(p.runs, 2, "the waiter ran the body after the holder failed")
  T.eq({ rs[1].ok, rs[1].error and rs[1].error.kind }, { false, "permanent" }, "holder")
  T.eq({ rs[2].ok, rs[2].duplicate }, { true, false }, "waiter ran it")
  -- ledger:count() rather than #ledger: a Redis ledger's count waits for Redis, and PUC
  -- Lua 5.1 cannot wait inside a metamethod (docs/lua.md, "Runtimes")
  T.eq(ledger:count(), 1, "one entry")
  if T.yields_across_pcall then T.eq(#ledger, 1, "#ledger too") end
end)

T.test("redis: two agent runs whose tool calls map to one key charge once", function()
  local mock = ah.mock {}
  local client = ah.client { provider = "anthropic", model = "m", base_url = mock.url,
                             api_key = "k" }
  local charged = 0
  local agent = ah.agent {
    client = client, max_steps = 3, ledger = new_ledger(), on_event = false,
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
  mock:close()
end)

T.test("redis: entries carry the TTL", function()
  local ledger = new_ledger { prefix = "ttl:", ttl_s = 100 }
  charge_tool({ runs = 0 }):call({ amount = 1 }, { key = "T-1", ledger = ledger })
  local pttl = tonumber(redis.cli("pttl ttl:e:T-1"))
  T.ok(pttl and pttl > 90000 and pttl <= 100000, "pttl " .. tostring(pttl))
end)

T.test("redis: a dead holder's claim is taken over after its lease", function()
  -- a claim left by a holder that died: written as the ledger writes it
  local ledger = new_ledger { prefix = "lease:", lease_ms = 200 }
  redis.cli("hset lease:c:L-1 fp x holder dead until 1 token 1")
  redis.cli("set lease:fence 1")
  local p, fences = { runs = 0 }, {}
  local tool = ah.tool { name = "charge", run = function(args, ctx)
    p.runs = p.runs + 1
    fences[#fences + 1] = ctx.fence
    return { ok = true }
  end }
  local r = tool:call({ amount = 1 }, { key = "L-1", ledger = ledger })
  T.eq({ r.ok, r.duplicate, p.runs }, { true, false, 1 }, "taken over at once (lease over)")
  tool:call({ amount = 1 }, { key = "L-2", ledger = ledger })
  T.ok(#fences == 2 and fences[1] > 1 and fences[2] > fences[1],
       "ctx.fence: the claims' fencing tokens, increasing: " .. table.concat(fences, " "))
end)

T.test("redis: a connection Redis dropped during the body is no duplicate effect", function()
  -- Redis's `timeout`, a load balancer's idle timeout or CLIENT KILL drops the ledger's
  -- connection while the body runs (blocking the loop, or on it): the receipt still
  -- reaches Redis and the second caller of the key gets it, the body ran once.
  local prefix = "drop" .. n .. ":"
  local a, b = new_ledger { prefix = prefix, lease_ms = 300 },
               new_ledger { prefix = prefix, lease_ms = 300 }
  for _, on_loop in ipairs({ false, true }) do
    local p = { runs = 0 }
    local tool = ah.tool { name = "charge", run = function(args, ctx)
      p.runs = p.runs + 1
      redis.cli("client kill type normal")
      if on_loop then ah.sleep(20) end
      return { charge = "ch_" .. p.runs }
    end }
    local key = on_loop and "D-2" or "D-1"
    local r1 = tool:call({ amount = 5 }, { key = key, ledger = a })
    local r2 = tool:call({ amount = 5 }, { key = key, ledger = b })
    T.eq({ r1.ok, r1.duplicate, r1.error and r1.error.message },
         { true, false, nil }, "first caller recorded its receipt")
    T.eq({ r2.ok, r2.duplicate, r2.receipt and r2.receipt.charge },
         { true, true, "ch_1" }, "second caller got it")
    T.eq(p.runs, 1, "the body ran once")
  end
end)

T.test("redis unreachable: the call fails closed with kind ledger", function()
  local ledger = ah.ledger { redis = "unix:/nonexistent-dir/redis.sock" }
  local p = { runs = 0 }
  local r = charge_tool(p):call({ amount = 1 }, { key = "U-1", ledger = ledger })
  T.eq({ r.ok, r.error and r.error.kind, p.runs }, { false, "ledger", 0 }, "fail closed")
  T.ok(not T.pcall(function() return ledger:entries() end), "entries() raises")
end)

T.test("ah.ledger{redis} checks its fields", function()
  T.raises(function() ah.ledger { redis = "http://x" } end, "redis://", "bad url")
  T.raises(function() ah.ledger { redis = redis.url, ttl_s = -1 } end, "ttl_s", "ttl")
  T.raises(function() ah.ledger { redis = redis.url, path = "x.db" } end, "exclude", "both")
  T.raises(function() ah.ledger { redis = redis.url, prefx = "x" } end, "prefix",
           "did you mean")
end)

collectgarbage()
collectgarbage() -- close the ledgers (and their connections) before the server goes
redis.stop()
T.done()
