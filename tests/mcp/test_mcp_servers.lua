-- test_mcp_servers.lua - real MCP servers from npm: @modelcontextprotocol/server-everything
-- over stdio and over streamable HTTP (bound to loopback by tests/mcp/loopback.mjs), and
-- @modelcontextprotocol/server-filesystem on a scratch directory.
local ah = require "agenthost"
local fix = require "mcpfix"
local check = fix.check
local everything = fix.modules .. "/@modelcontextprotocol/server-everything/dist/index.js"

local ev = ah.mcp{ name = "everything", command = { "node", everything, "stdio" } }
local tools = ev:tools()
local names = {}
for _, t in ipairs(tools) do names[t.name] = t end
check(names.echo and names["get-sum"] and type(names.echo.schema) == "table",
  "stdio: everything lists echo and get-sum with schemas (" .. #tools .. " tools)")
local r = ev:call("echo", { message = "hello" })
check(r.ok and r.text == "Echo: hello" and r.content[1].type == "text", "stdio: echo")
r = ev:call("get-structured-content", { location = "New York" })
check(r.ok and type(r.structured) == "table", "stdio: structured content")
ev:close()

local url = fix.http("'" .. everything .. "' streamableHttp")
local eh = ah.mcp{ name = "everything_http", url = url }
local progress = 0
r = eh:call("trigger-long-running-operation", { duration = 1, steps = 2 }, {
  on_event = function(e) if e.type == "mcp_progress" then progress = progress + 1 end end })
check(r.ok and progress == 2 and eh.protocol == "2025-11-25",
  "HTTP: a long operation streams progress over SSE (" .. progress .. ")")
r = eh:call("get-sum", { a = 20, b = 22 })
check(r.ok and r.text:find("42", 1, true), "HTTP: get-sum in the same session")
eh:close()

-- the stateless 2026-07-28 era, on the official v2 SDK: detected by server/discover
local mu = fix.modern_http()
local mo = ah.mcp{ name = "modern", url = mu }
r = mo:call("charge", { amount = 3 }, { key = "m1" })
check(mo.protocol == "2026-07-28" and r.ok and r.text == "charge done for m1",
  "2026-07-28: discovered, called statelessly (" .. tostring(mo.protocol) .. ", " .. tostring(r.error) .. ")")
check(fix.effects("charge", "m1") == 1, "2026-07-28: the key reached the server in _meta")
mo:close()

local dir = fix.tmp .. "/files"
os.execute("mkdir -p '" .. dir .. "' && printf 'hello from a file' > '" .. dir .. "/a.txt'")
local fs = ah.mcp{ name = "fs", command = { "node",
  fix.modules .. "/@modelcontextprotocol/server-filesystem/dist/index.js", dir } }
r = fs:call("read_text_file", { path = dir .. "/a.txt" })
check(r.ok and r.text == "hello from a file", "filesystem: read_text_file (" .. tostring(r.text or r.error) .. ")")
r = fs:call("read_text_file", { path = "/etc/passwd" })
check(not r.ok and r.outcome == "failed", "filesystem: outside its directory is the tool's error")
fs:close()
fix.finish()
