-- mcpfix.lua - what the MCP tests share: the npm servers (tests/mcp/install.sh, cached in
-- the build directory), a fault server over stdio or HTTP on a free loopback port, and
-- the effect counter it writes. Portable Lua (5.1 to 5.4, LuaJIT).
local M = {}

local function sh(cmd)
  local p = io.popen(cmd)
  local out = p:read("*a")
  p:close()
  return (out:gsub("%s+$", ""))
end
M.sh = sh

M.src = os.getenv("AH_SOURCE_DIR") or "."
M.build = os.getenv("AH_BUILD_DIR") or "."
M.modules = sh("bash '" .. M.src .. "/tests/mcp/install.sh' '" .. M.build .. "/mcp-deps' 2>&1 | tail -1")
if not M.modules:match("node_modules$") then
  io.stderr:write("mcpfix: the MCP servers could not be installed: " .. M.modules .. "\n")
  os.exit(77)
end
M.tmp = sh("mktemp -d")
M.count_file = M.tmp .. "/effects"
M.fault = M.src .. "/tests/mcp/fault_server.mjs"

function M.env(extra)
  local e = { COUNT_FILE = M.count_file, STATE_DIR = M.tmp, NODE_PATH = M.modules }
  for k, v in pairs(extra or {}) do e[k] = v end
  return e
end

-- the fault server as an ah.mcp command (node resolves its imports from the modules
-- through a symlink next to it)
local link = M.tmp .. "/fault_server.mjs"
sh("ln -s '" .. M.modules .. "' '" .. M.tmp .. "/node_modules'; cp '" .. M.fault .. "' '" .. link .. "'")
function M.stdio_command()
  return { "node", link, "stdio" }
end

-- effects applied per "<tool> <key>"
function M.effects(tool, key)
  local f = io.open(M.count_file)
  if not f then return 0 end
  local n = 0
  for line in f:lines() do
    if line == tool .. " " .. key then n = n + 1 end
  end
  f:close()
  return n
end

function M.free_port()
  return tonumber(sh("python3 -c 'import socket; s=socket.socket(); s.bind((\"127.0.0.1\",0)); print(s.getsockname()[1])'"))
end

-- start an HTTP server (node script and args) on a free port; returns its URL and a stop
local servers = {}
function M.http(script_args, env)
  local port = M.free_port()
  local envs = ""
  for k, v in pairs(M.env(env)) do envs = envs .. k .. "='" .. v .. "' " end
  local pidf = M.tmp .. "/pid." .. port
  os.execute(envs .. "PORT=" .. port .. " nohup node --import '" .. M.src ..
    "/tests/mcp/loopback.mjs' " .. script_args:gsub("PORT", tostring(port)) ..
    " >" .. M.tmp .. "/log." .. port .. " 2>&1 & echo $! > " .. pidf)
  local pid = sh("cat " .. pidf)
  servers[#servers + 1] = pid
  -- wait until it listens (the harness's wait, not the library's)
  os.execute("for i in $(seq 100); do (exec 3<>/dev/tcp/127.0.0.1/" .. port ..
    ") 2>/dev/null && exit 0; sleep 0.05; done; exit 1")
  return "http://127.0.0.1:" .. port .. "/mcp", pid
end

-- the 2026-07-28 server (tests/mcp/modern_server.mjs, the v2 SDK), over HTTP or stdio
local modern = M.tmp .. "/modern_server.mjs"
sh("cp '" .. M.src .. "/tests/mcp/modern_server.mjs' '" .. modern .. "'")
function M.modern_http()
  return M.http("'" .. modern .. "' http PORT", {})
end
function M.modern_stdio_command()
  return { "node", modern, "stdio" }
end

function M.fault_http(events)
  return M.http("'" .. link .. "' http PORT", { EVENTS = events and "1" or "0" })
end

function M.stop()
  for _, pid in ipairs(servers) do os.execute("kill " .. pid .. " 2>/dev/null") end
  servers = {}
  os.execute("rm -rf '" .. M.tmp .. "'")
end

-- a test's checks: "ok: what" or "FAIL: what", counted; M.finish() stops the servers,
-- says how it went and exits (1 when anything failed)
local fails = 0
function M.check(cond, what)
  if cond then print("ok: " .. what) else fails = fails + 1 print("FAIL: " .. what) end
end
function M.finish()
  M.stop()
  print(fails == 0 and "all passed" or (fails .. " failed"))
  os.exit(fails == 0 and 0 or 1)
end

return M
