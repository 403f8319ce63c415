-- claims_worker.lua - the worker of tests/cli/test_ledger_processes.sh (not a test).
--   agenthost claims_worker.lua DB SIDE N BODY_MS [CONCURRENCY [LEASE_MS [DEADLINE_MS]]]
-- Charges keys P-1..P-N through the SQLite ledger at DB (claims leased for LEASE_MS,
-- default the ledger's), CONCURRENCY calls at a time (default 4), each body sleeping
-- BODY_MS on the loop; a call waits at most DEADLINE_MS for a key in flight elsewhere. Every body execution appends
-- "KEY PID" to the file SIDE (the real-world effect). Several of these run at once on one
-- file; the test checks that each key's body ran exactly once across all of them.
-- Prints "done OK DUP INPROGRESS FAILED" at the end.
local ah = require "agenthost"
local db, side, n, body_ms = arg[1], arg[2], tonumber(arg[3]), tonumber(arg[4])
local conc = tonumber(arg[5] or "4")
local lease = tonumber(arg[6] or "")
local deadline = tonumber(arg[7] or "")
local ledger = ah.ledger { path = db, lease_ms = lease }
local pid = io.open("/proc/self/stat"):read("*n")
local charge = ah.tool { name = "charge", policy = { deadline_ms = deadline },
                         run = function(args, ctx)
  local f = assert(io.open(side, "a"))
  f:write(ctx.key, " ", pid, "\n")
  f:close()
  ah.sleep(body_ms)
  return { charged = args.amount, key = ctx.key, by = pid }
end }
local counts = { ok = 0, dup = 0, in_progress = 0, failed = 0 }
local items = {}
for i = 1, n do items[i] = { key = "P-" .. i, args = { amount = i } } end
ah.batch(items, function(item)
  local r = charge:call(item.args, { key = item.key, ledger = ledger })
  if r.ok and r.duplicate then counts.dup = counts.dup + 1
  elseif r.ok then counts.ok = counts.ok + 1
  elseif r.outcome == "in_progress" then counts.in_progress = counts.in_progress + 1
  else
    counts.failed = counts.failed + 1
    io.stderr:write(item.key, ": ", tostring(r.error and r.error.message), "\n")
  end
  return r
end, { concurrency = conc })
print(("done %d %d %d %d"):format(counts.ok, counts.dup, counts.in_progress, counts.failed))
io.stdout:flush()
