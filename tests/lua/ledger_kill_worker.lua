-- ledger_kill_worker.lua - the worker of tests/cli/test_ledger_kill.sh (not a test itself).
--   agenthost ledger_kill_worker.lua DB SIDE N
-- Charges keys K-1..K-N through a SQLite ledger at DB. Before each key it reads one line
-- from stdin (so the test decides how far it gets); each body execution appends the key
-- to the file SIDE (the "real world" effect, flushed before the body returns); after each
-- call it prints "committed KEY seq=S duplicate=D" and flushes. The test kills it with
-- SIGKILL while it waits for the next line, then runs it again with the same keys.
local ah = require "agenthost"
local db, side, n = arg[1], arg[2], tonumber(arg[3])
local ledger = ah.ledger { path = db }
local charge = ah.tool { name = "charge", run = function(args, ctx)
  local f = assert(io.open(side, "a"))
  f:write(ctx.key, "\n")
  f:close()
  return { charged = args.amount, key = ctx.key }
end }
for i = 1, n do
  if not io.read("*l") then break end
  local key = "K-" .. i
  local r = charge:call({ amount = 100 * i }, { key = key, ledger = ledger })
  assert(r.ok, r.error and r.error.message)
  io.write(("committed %s seq=%d duplicate=%s\n"):format(key, r.seq, tostring(r.duplicate)))
  io.flush()
end
