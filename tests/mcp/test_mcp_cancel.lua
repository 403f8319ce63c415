-- test_mcp_cancel.lua - a server:call made outside an agent is cancelled too: by Ctrl-C
-- in the agenthost program (the first SIGINT cancels it, the server is told, the script
-- goes on), and by run:cancel when a Lua tool's body made it. Waits are bounded polls on
-- what the fault server writes, never timed assertions.
local ah = require "agenthost"
local fix = require "mcpfix"
local check = fix.check
local function poll(cond) -- up to 10 s
  for _ = 1, 500 do
    if cond() then return true end
    ah.sleep(20)
  end
  return false
end
local function q(s) return "'" .. s:gsub("'", "'\\''") .. "'" end

-- Ctrl-C: a script in its own agenthost process, SIGINT once its call hangs at the server
local child = fix.tmp .. "/child.lua"
local f = assert(io.open(child, "w"))
f:write([[
local ah = require "agenthost"
local cmd, count, state = arg[1], arg[2], arg[3]
local s = ah.mcp{ name = "pay", command = { "node", cmd, "stdio" },
  env = { COUNT_FILE = count, STATE_DIR = state } }
local r = s:call("charge", { fault = "hang" }, { key = "int1", timeout_ms = 60000 })
print("first", r.outcome, r.error and r.error.kind, r.error and r.error.message)
r = s:call("charge", {}, { key = "int2" })
print("then", r.ok and "ok" or tostring(r.error))
s:close()
]])
f:close()
local out = fix.tmp .. "/child.out"
local bin = fix.build .. "/agenthost"
local pid = fix.sh(q(bin) .. " " .. q(child) .. " " .. q(fix.tmp .. "/fault_server.mjs") .. " " ..
  q(fix.count_file) .. " " .. q(fix.tmp) .. " >" .. q(out) .. " 2>" .. q(out .. ".err") ..
  " </dev/null & echo $!")
check(poll(function() return fix.effects("charge", "int1") == 1 end),
  "the child's call reached the server (it hangs there)")
os.execute("kill -INT " .. pid)
local gone = poll(function() return os.execute("kill -0 " .. pid .. " 2>/dev/null") ~= 0 and
  os.execute("kill -0 " .. pid .. " 2>/dev/null") ~= true end)
if not gone then os.execute("kill -9 " .. pid) end
local text = fix.sh("cat " .. q(out))
check(gone and text:find("first\tfailed\tcancelled\ttool call cancelled: interrupted (Ctrl-C)", 1, true),
  "Ctrl-C cancels a bare server:call: it fails with error kind cancelled (" .. text .. ")")
check(text:find("then\tok", 1, true) and fix.effects("charge", "int2") == 1,
  "the script goes on: the next call works")
check(poll(function() return fix.effects("cancelled", "int1") == 1 end),
  "the server was told (notifications/cancelled reached the tool)")
check(fix.effects("charge", "int1") == 1, "the cancelled call's effect: once, never replayed")

-- run:cancel while a Lua tool's body waits in server:call
local pay = ah.mcp{ name = "pay", command = fix.stdio_command(), env = fix.env() }
local m = ah.mock{ plan = { { ok = true, tool_calls = { { name = "charge_card", arguments = {} } } } } }
local agent = ah.agent{ client = ah.client{ provider = "anthropic", model = "mock-model",
  base_url = m.url }, on_event = false,
  tools = { charge_card = { description = "charge", schema = { type = "object" },
    run = function(_, ctx)
      local r = pay:call("charge", { fault = "hang" }, { key = "body1", timeout_ms = 60000 })
      return r.outcome
    end } } }
local run = agent:start("charge")
check(poll(function() return fix.effects("charge", "body1") == 1 end),
  "the tool body's server:call reached the server")
run:cancel()
local r = run:wait()
check(r.outcome == "cancelled", "run:cancel ends the run (" .. tostring(r.outcome) .. ")")
check(poll(function() return fix.effects("cancelled", "body1") == 1 end),
  "the server was told: a Lua tool's server:call is cancelled with its run")
pay:close()
m:close()

fix.finish()
