-- waits.lua - every function of the agenthost module that waits, written in Lua over C
-- primitives that never wait. Compiled into the module and run once per Lua state by
-- luaopen_agenthost with the module table M and the private primitives P.
--
-- Why in Lua: Lua 5.1 and LuaJIT have no lua_yieldk/lua_pcallk, so a C function cannot
-- suspend its coroutine and continue later. Here a wait is `await(w)`: w is a waitable
-- object a C primitive returned (its C struct begins with a lah_wait); inside a coroutine
-- the scheduler manages, and where a yield can reach the scheduler, await yields with
-- Lua's own coroutine.yield and the scheduler resumes it once w is ready; anywhere else
-- (the main chunk of a plain `lua`, the user's own coroutine, a C callback) it steps the
-- scheduler itself until w is ready. The same code on every runtime (docs/lua.md
-- "Runtimes"). Every function checks first that waiting is allowed (not inside a hook).
--
-- Valid Lua 5.1 to 5.4; no global is read after load.
local M, P = ...
local ready, park, drive, check_wait = P.ready, P.park, P.drive, P.check_wait
local yield = coroutine.yield

local function await(w, what)
  while not ready(w) do
    if park(w, what) then
      yield()
    else
      drive(w)
    end
  end
end

-- ah.sleep(ms): a loop timer; other coroutines run meanwhile.
local sleep_start = P.sleep_start
function M.sleep(ms)
  check_wait("ah.sleep")
  await(sleep_start(ms), "ah.sleep")
end

-- ah.parallel{ fn, ... } -> { result1, ..., n = N }
local parallel_start, parallel_result = P.parallel_start, P.parallel_result
function M.parallel(fns)
  check_wait("ah.parallel")
  local p = parallel_start(fns)
  await(p, "ah.parallel")
  return parallel_result(p)
end

-- agent:run(input [, opts]) = agent:start then run:wait; run:wait() -> result
local run_start, run_result = P.run_start, P.run_result
function P.agent_methods.run(agent, input, opts)
  check_wait("agent:run")
  local run = run_start(agent, input, opts, "agent:run")
  await(run, "agent:run")
  return run_result(run)
end
function P.run_methods.wait(run)
  check_wait("run:wait")
  await(run, "run:wait")
  return run_result(run)
end

-- tool:call(args [, opts]) -> record; P.tool_call_into is the agent's form (results in C)
local tool_begin, tool_step = P.tool_begin, P.tool_step
local function call(tool, args, opts, into)
  check_wait("tool:call")
  local st = tool_begin(tool, args, opts, into)
  while true do
    local done, a, b = tool_step(st)
    if done then
      return a, b
    end
    await(st, "tool:call")
  end
end
function P.tool_methods.call(tool, args, opts)
  local record = call(tool, args, opts, false)
  return record
end
function P.tool_call_into(tool, args, opts)
  local result, receipt = call(tool, args, opts, true)
  return result, receipt
end

-- ah.batch(items, fn [, opts]) -> { done, failed, skipped, calls, budget, results, items }
local batch_start, batch_pump, batch_result = P.batch_start, P.batch_pump, P.batch_result
function M.batch(items, fn, opts)
  check_wait("ah.batch")
  local b = batch_start(items, fn, opts)
  while batch_pump(b) do
    await(b, "ah.batch")
  end
  return batch_result(b)
end

-- ledger:entries() / ledger:count(): a Redis ledger first fetches a snapshot
local ledger_methods, ledger_refresh, ledger_refreshed =
  P.ledger_methods, P.ledger_refresh, P.ledger_refreshed
local function refreshed(what, fn)
  return function(ledger)
    check_wait(what)
    local w = ledger_refresh(ledger)
    if w then
      await(w, what)
      ledger_refreshed(w, what)
    end
    local r = fn(ledger)
    return r
  end
end
ledger_methods.entries = refreshed("ledger:entries()", ledger_methods.entries)
ledger_methods.count = refreshed("ledger:count()", ledger_methods.count)
P.ledger_mt.__len = function(ledger)
  local n = ledger:count()
  return n
end

-- MCP servers (lua/mcp.c, docs/mcp.md): server:tools() and server:call() first wait for
-- the server to settle (ready, failed or closed), then for the call; P.mcp_call_into is an
-- agent's form (results for C, as P.tool_call_into)
local mcp_settle, mcp_tools = P.mcp_settle, P.mcp_tools
local mcp_call_start, mcp_call_result = P.mcp_call_start, P.mcp_call_result
local function settle(server, what)
  local w = mcp_settle(server)
  if w then
    await(w, what)
  end
end
function P.mcp_methods.tools(server)
  check_wait("server:tools()")
  settle(server, "server:tools()")
  local list = mcp_tools(server)
  return list
end
local function mcp_call(server, name, args, opts, into)
  check_wait("server:call()")
  settle(server, "server:call()")
  local c = mcp_call_start(server, name, args, opts, into)
  await(c, "server:call()")
  local a, b = mcp_call_result(c)
  return a, b
end
-- server:close(): over HTTP, waits (where waiting is allowed) for the session's DELETE,
-- which the core bounds; elsewhere (a hook) it only begins closing
local mcp_close = P.mcp_close
function P.mcp_methods.close(server)
  local w = mcp_close(server)
  if w and pcall(check_wait, "server:close()") then
    await(w, "server:close()")
  end
end
function P.mcp_methods.call(server, name, args, opts)
  local record = mcp_call(server, name, args, opts, false)
  return record
end
function P.mcp_call_into(server, name, args, opts)
  local result, text = mcp_call(server, name, args, opts, true)
  return result, text
end
-- agent:run waits for its MCP servers to settle before the run starts (their tools are
-- offered as they are then); agent:start does not wait
local agent_mcp_pending = P.agent_mcp_pending
local agent_run = P.agent_methods.run
function P.agent_methods.run(agent, input, opts)
  check_wait("agent:run")
  while true do
    local w = agent_mcp_pending(agent)
    if not w then
      break
    end
    settle(w, "agent:run")
  end
  local r = agent_run(agent, input, opts)
  return r
end
