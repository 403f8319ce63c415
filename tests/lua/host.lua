-- host.lua - runs a test script the way the agenthost program does, in a plain interpreter:
--
--   lua5.1 tests/lua/host.lua tests/lua/test_x.lua [ARGS...]    (or luajit, lua5.2/5.3/5.4)
--
-- with LUA_CPATH finding that runtime's agenthost.so and LUA_PATH the staged scripts
-- (<build>/lua/?.lua, for agenthost.status) and tests/lua/?.lua. As under `agenthost
-- SCRIPT`: `arg` is what lua gives a script (arg[0] the script, arg[1..] its arguments,
-- what came before at negative indices: arg[-1] is this file), `...` holds the arguments,
-- and the main chunk runs in a coroutine of the module's scheduler (ah.parallel), so its
-- waits yield to the one loop, driven from the main thread until the chunk ends. A script
-- that raises: its message and traceback on stderr, exit status 1 (the state is closed
-- first, so finalizers run: a test's redis-server is stopped); one that cannot be opened:
-- status 2; os.exit(n) in the script ends the process with n, as there.
--
-- What only the program has: Ctrl-C handling, --events / AGENTHOST_EVENTS, its log handler
-- ownership, and the script searcher that finds agenthost.* before require "agenthost"
-- (here the module is loaded before the script; LUA_PATH finds agenthost.status).
local unpack = table.unpack or unpack
local me = arg and arg[0] or "host.lua"

local function fail(status, msg)
  io.stderr:write(me, ": ", msg, "\n")
  -- close the state where the runtime can (5.2+, LuaJIT), so finalizers run; on 5.1 the
  -- dead chunk's values are at least collected
  collectgarbage()
  collectgarbage()
  os.exit(status, true)
end

local script = arg and arg[1]
if not script then fail(2, "usage: " .. me .. " SCRIPT.lua [ARGS...]") end

-- arg for the script: everything moves down one place, as if this file were the interpreter
local given, first = arg, 0
while given[first - 1] ~= nil do first = first - 1 end
local nargs = #given - 1
local script_arg = {}
for i = first, #given do script_arg[i - 1] = given[i] end
arg = script_arg

local f = io.open(script, "rb")
if not f then fail(2, "cannot open script '" .. script .. "'") end
f:close()
local chunk, err = loadfile(script)
if not chunk then fail(1, err) end

local ah = require "agenthost"
-- the main chunk's true when it returns; its error record ({ ok = false, error,
-- traceback }) when it raises
local ok, results = pcall(ah.parallel, {
  function() chunk(unpack(script_arg, 1, nargs)) return true end,
})
if not ok then fail(1, tostring(results)) end -- the scheduler itself: a deadlock
local r = results[1]
if r ~= true then
  fail(1, type(r) == "table" and tostring(r.traceback or r.error) or tostring(r))
end
