-- test_claims_close.lua - closing the Lua state while tool calls hold or wait for a claim
-- (os.exit(0, true) from a coroutine: lua_close finalizes every suspended call) frees
-- everything in a safe order: the tool's own ledger, made for the first call, is
-- finalized after the call states that still release claims in it. Meaningful under
-- ASan and valgrind (.ci runs both): before, the ledger went first and the calls' __gc
-- touched freed memory. (Lua 5.1's os.exit has no `close` argument: there the process
-- ends without lua_close, so this test only shows that nothing hangs.)
local ah = require "agenthost"
local t = ah.tool { name = "t", run = function() ah.sleep(60000) end }
local path_tool = ah.tool { name = "p", run = function() ah.sleep(60000) end }
local path = os.tmpname()
ah.parallel {
  function() return t:call({}, { key = "k" }) end,                   -- holds "k"
  function() ah.sleep(1) return t:call({}, { key = "k" }) end,       -- waits for "k"
  function() return path_tool:call({}, { key = "k", ledger = path }) end, -- a path opened now
  function()
    ah.sleep(20)
    io.write("closing with calls in flight\n")
    os.remove(path)
    os.remove(path .. "-wal")
    os.remove(path .. "-shm")
    os.exit(0, true)
  end,
}
error("not reached")
