-- redisfix.lua - a real redis-server for a Lua test or worker: started on a unix socket in
-- a fresh temp dir (no persistence, no TCP), stopped (and the dir removed) by stop() or at
-- exit (a finalizer: a userdata's on 5.1 and LuaJIT, whose tables have none). restart()
-- keeps the socket path, so clients reconnect to the new server.
local M = {}

local function sh(cmd)
  local ok = os.execute(cmd)
  return ok == true or ok == 0
end

local function wait_for(f, tries)
  for _ = 1, tries do
    if f() then return true end
    sh("sleep 0.02")
  end
  return false
end

function M.start()
  local p = io.popen("mktemp -d /tmp/ah-redis-lua-XXXXXX")
  local dir = p:read("*l")
  p:close()
  local self = { dir = dir, sock = dir .. "/redis.sock", pidfile = dir .. "/redis.pid" }
  self.url = "unix:" .. self.sock
  function self.spawn()
    assert(sh(string.format("redis-server --port 0 --unixsocket %s --save '' --appendonly no "
      .. "--dir %s --daemonize yes --pidfile %s >/dev/null 2>&1", self.sock, dir, self.pidfile)),
      "redis-server did not start")
    assert(wait_for(function()
      return sh(string.format("redis-cli -s %s ping 2>/dev/null | grep -q PONG", self.sock))
    end, 250), "redis-server does not answer")
  end
  function self.cli(args)
    local f = io.popen(string.format("redis-cli -s %s %s 2>&1", self.sock, args))
    local out = f:read("*a")
    f:close()
    return (out:gsub("%s+$", ""))
  end
  function self.kill(sig)
    local f = io.open(self.pidfile)
    if not f then return end
    local pid = f:read("*l")
    f:close()
    sh(string.format("kill -%s %s 2>/dev/null", sig or "KILL", pid))
    -- not `kill -0`: the daemon is nobody's child here, and a container's init may
    -- leave it a zombie; gone is when it no longer answers
    wait_for(function()
      return not sh(string.format("redis-cli -s %s ping 2>/dev/null | grep -q PONG", self.sock))
    end, 250)
    os.remove(self.pidfile)
    os.remove(self.sock)
  end
  function self.restart()
    self.kill("KILL")
    self.spawn()
  end
  local stopped = false
  function self.stop()
    if stopped then return end
    stopped = true
    self.kill("KILL") -- nothing to save; SIGTERM makes redis take a second to shut down
    sh("rm -rf '" .. dir .. "'")
  end
  self.spawn()
  setmetatable(self, { __gc = function() self.stop() end, __close = function() self.stop() end })
  if rawget(_G, "newproxy") then -- 5.1, LuaJIT: only a userdata is finalized
    self.finalizer = newproxy(true)
    getmetatable(self.finalizer).__gc = function() self.stop() end
  end
  return self
end

return M
