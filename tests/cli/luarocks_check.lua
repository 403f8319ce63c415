-- luarocks_check.lua TREE - run by tests/cli/test_luarocks.sh with LUA_PATH/LUA_CPATH set
-- to the luarocks tree TREE alone: the installed module and its scripts work, and every
-- file of agenthost that this process uses comes from TREE.
-- Valid Lua 5.1 to 5.4 and LuaJIT.
local tree = assert(arg[1], "usage: luarocks_check.lua TREE")
local failed = 0
local function check(cond, what)
  if cond then
    print("ok: " .. what)
  else
    print("FAIL: " .. what)
    failed = failed + 1
  end
end
local function under_tree(path)
  return type(path) == "string" and path:sub(1, #tree + 1) == tree .. "/"
end

local ah = require "agenthost"
local status = require "agenthost.status"
local policy = require "agenthost.policy"
check(type(ah.version) == "string", "the module loads (ah.version " .. tostring(ah.version) .. ")")

-- The scripts: from the tree's share/lua/<V>/agenthost/.
local src = debug.getinfo(status.new, "S").source:gsub("^@", "")
check(under_tree(src) and src:find("/share/lua/5%.%d/agenthost/status%.lua$") ~= nil,
      "agenthost.status from the tree (" .. src .. ")")
local defaults = policy:copy()
check(defaults.max_attempts == 4 and defaults.base_ms == 500, "agenthost.policy: the defaults")

-- An agent through a 503 and a stream cut mid-text, with the tree's status display.
local lines = {}
local out = { write = function(_, s) lines[#lines + 1] = s end, flush = function() end }
local display = status.new { stream = out, tty = false, log_retries = true, prefix = "" }
local m = ah.mock { plan = { { status = 503 }, { cut_after_events = 4 } } }
local p = policy:copy()
p.base_ms, p.cap_ms = 1, 5
local agent = ah.agent { client = ah.client { provider = "anthropic", model = "m",
                                              base_url = m.url, api_key = "k" },
                         policy = p, on_event = function(ev) display:update(ev) end }
local r = agent:run("from the rock")
check(r.outcome == "completed", "the run completes (" .. tostring(r.outcome) .. ")")
local want = 'You said: "from the rock". This is a deterministic reply from the agenthost mock provider.'
check(r.text == want, "the exact answer (" .. tostring(r.text) .. ")")
check(r.stats.retries == 2, "two retries (the 503, and the cut that kept nothing): " ..
      tostring(r.stats.retries))
check(r.stats.continuations == 1, "one continuation (the cut): " .. tostring(r.stats.continuations))
check(#m:requests() == 3, "three requests: " .. #m:requests())
local shown = table.concat(lines)
check(shown:find("503", 1, true) ~= nil, "the status display names the 503: " .. shown:gsub("\n", " | "))
m:close()

-- Every mapped file of agenthost is the tree's: nothing from a checkout or a build dir.
local maps = io.open("/proc/self/maps")
if maps then
  local mods, stray = {}, {}
  for line in maps:lines() do
    local path = line:match("%s(/%S+)$")
    if path and path:find("agenthost", 1, true) then
      if under_tree(path) then mods[path] = true
      elseif not stray[path] then stray[path] = true; stray[#stray + 1] = path end
    end
  end
  maps:close()
  local n = 0
  for path in pairs(mods) do
    n = n + 1
    check(path:find("/lib/lua/5%.%d/agenthost%.so$") ~= nil, "mapped from the tree: " .. path)
  end
  check(n == 1, "one agenthost.so mapped, the tree's")
  check(#stray == 0, "no other agenthost file mapped: " .. table.concat(stray, " "))
end

print(failed == 0 and "all passed" or (failed .. " failed"))
os.exit(failed == 0 and 0 or 1)
