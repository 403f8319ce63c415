-- ledger_fleet_worker.lua - one process of tests/cli/test_redis_ledger_fleet.sh.
--   agenthost ledger_fleet_worker.lua MODE REDIS_URL SIDE_FILE [N] [LEASE_MS]
-- Every body appends "<key> <pid>" to SIDE_FILE (one write, O_APPEND) before it returns,
-- so the file counts body executions across processes. Modes:
--   dup       N keys K-1..K-N, 10 calls at a time; prints "<key> <ok> <duplicate> <seq>
--             <receipt.by>" per key
--   mismatch  key K-1 with other arguments; prints "<ok> <error kind>"
--   hold      claims key HOLD and sleeps in its body until killed (prints "holding")
--   takeover  key HOLD with a deadline past the lease; prints "<ok> <duplicate> <by>"
--   restart   N keys R-1..R-N one after the other, 20 ms each; prints per key
--             "<key> <ok> <kind or -> <ran: 1|0> <unrecorded|->", 50 ms pause after a failure
local ah = require "agenthost"
local mode, url, side, n = arg[1], arg[2], arg[3], tonumber(arg[4] or "100")
local lease = tonumber(arg[5] or "30000")
local pid = io.open("/proc/self/stat"):read("*n")

local ledger = ah.ledger { redis = url, prefix = "fleet:", lease_ms = lease }
local ran = {}
local function body_ms(ms)
  return function(args, ctx)
    local f = io.open(side, "a")
    f:write(ctx.key, " ", pid, "\n")
    f:close()
    ran[ctx.key] = true
    if ms > 0 then ah.sleep(ms) end
    return { by = pid, key = ctx.key, amount = args.amount }
  end
end

if mode == "dup" then
  local tool = ah.tool { name = "charge", run = body_ms(5) }
  for base = 0, n - 1, 10 do
    local fns = {}
    for i = base + 1, math.min(base + 10, n) do
      fns[#fns + 1] = function()
        return tool:call({ amount = i }, { key = "K-" .. i, ledger = ledger })
      end
    end
    for j, r in ipairs(ah.parallel(fns)) do
      -- tostring: Lua 5.1's %s takes only strings and numbers
      print(string.format("K-%d %s %s %s %s", base + j, tostring(r.ok), tostring(r.duplicate),
                          tostring(r.seq), tostring(r.receipt and r.receipt.by)))
    end
  end
elseif mode == "mismatch" then
  local tool = ah.tool { name = "charge", run = body_ms(0) }
  local r = tool:call({ amount = -1 }, { key = "K-1", ledger = ledger })
  print(r.ok, r.error and r.error.kind)
elseif mode == "hold" then
  local tool = ah.tool { name = "charge", run = function(args, ctx)
    body_ms(0)(args, ctx)
    print("holding")
    io.stdout:flush()
    ah.sleep(60000)
  end }
  tool:call({ amount = 1 }, { key = "HOLD", ledger = ledger })
elseif mode == "takeover" then
  local tool = ah.tool { name = "charge", policy = { deadline_ms = lease * 4 },
                         run = body_ms(0) }
  local r = tool:call({ amount = 1 }, { key = "HOLD", ledger = ledger })
  print(r.ok, r.duplicate, r.receipt and r.receipt.by == pid and "me" or "other",
        r.outcome)
elseif mode == "restart" then
  local tool = ah.tool { name = "charge", policy = { max_attempts = 1 }, run = body_ms(20) }
  for i = 1, n do
    local r = tool:call({ amount = i }, { key = "R-" .. i, ledger = ledger })
    print(string.format("R-%d %s %s %d %s", i, tostring(r.ok), r.error and r.error.kind or "-",
                        ran["R-" .. i] and 1 or 0,
                        r.error and r.error.message:find("effect ran", 1, true) and "unrecorded"
                          or "-"))
    io.stdout:flush()
    if not r.ok then ah.sleep(50) end -- a worker backs off while its ledger is down
  end
end
