-- Helper of tests/cli/test_gate.sh: fails in the way named by arg[1].
local how = arg[1]
if how == "string" then
  local function f() error("main chunk failed") end
  f()
elseif how == "table" then
  error({ code = 7 })
elseif how == "tostring" then
  error(setmetatable({}, { __tostring = function() error("tostring fails too") end }))
elseif how == "nested" then
  local ah = require "agenthost"
  ah.parallel { function() return 1 end }
  coroutine.wrap(function() error("inside a coroutine of the script") end)()
elseif how == "log_handler" then
  local ah = require "agenthost"
  ah.log_handler(function(level, line) error("the handler broke on: " .. line) end, "info")
  -- a log line from the library: a tool body that crashes is logged at warning level
  local t = ah.tool { name = "crashy", run = function() error("body bug") end }
  t:call({})
  print("went on")
elseif how == "log_handler_waits" then
  local ah = require "agenthost"
  ah.log_handler(function() ah.sleep(1) end, "info")
  local t = ah.tool { name = "crashy", run = function() error("body bug") end }
  t:call({})
  print("went on")
end
