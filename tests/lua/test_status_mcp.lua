-- test_status_mcp.lua - the status display's words for MCP servers (scripts/status.lua,
-- docs/mcp.md): a restart, a tool's progress, a failed server. Portable Lua.
local here = (arg and arg[0] or ""):match("^(.*)/[^/]*$") or "."
local ok, status = pcall(require, "agenthost.status")
if not ok then status = dofile(here .. "/../../scripts/status.lua") end
local fails = 0
local function eq(got, want, what)
  if got ~= want then
    fails = fails + 1
    print(string.format("FAIL: %s: got %q, want %q", what, tostring(got), tostring(want)))
  else
    print("ok: " .. what)
  end
end
local function sink()
  local s = { out = {} }
  function s:write(...) for _, v in ipairs({ ... }) do self.out[#self.out + 1] = v end return self end
  function s:flush() end
  function s:text() return table.concat(self.out) end
  return s
end
local out = sink()
local st = status.new{ stream = out, tty = false, unicode = false }
st:update{ type = "mcp_server", server = "fs", state = "restarting", attempt = 2, max_attempts = 5 }
st:update{ type = "mcp_progress", server = "fs", id = "t1", name = "fs__search", progress = 2, total = 5 }
st:update{ type = "mcp_server", server = "gh", state = "failed", reason = "exited with status 1" }
eq(out:text(), "agenthost: fs: restarting (2/5)\nagenthost: fs__search 40%\n" ..
  "agenthost: MCP server gh failed - exited with status 1\n", "log lines")
local k, text = st:describe{ type = "mcp_progress", name = "x", progress = 0.5 }
eq(text, "x ...", "progress without a total")
eq(k, "transient", "progress is transient")
print(fails == 0 and "all passed" or fails .. " failed")
os.exit(fails == 0 and 0 or 1)
