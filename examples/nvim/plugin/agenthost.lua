-- examples/nvim: :AgentAsk {question} and :AgentCancel (lua/agenthost_ask/init.lua).
-- Loads nothing until a command is used.
if vim.g.loaded_agenthost_ask then
    return
end
vim.g.loaded_agenthost_ask = true

-- When this plugin is the examples/nvim directory of an agenthost checkout (also through
-- a symlink) and `require "agenthost"` finds no installed module, use the one built in
-- the checkout: CMake's build/ (build/lua-5.1/agenthost.so, build/lua/agenthost/*.lua) or
-- a luarocks tree in rocks/ (see README.md).
local function use_checkout()
    local uv = vim.uv or vim.loop
    for template in package.cpath:gmatch("[^;]+") do -- package.searchpath, also on PUC 5.1
        if uv.fs_stat((template:gsub("%?", "agenthost"))) then
            return
        end
    end
    local me = debug.getinfo(1, "S").source:gsub("^@", "")
    local real = uv.fs_realpath(me) or me
    local root = vim.fn.fnamemodify(real, ":h:h:h:h") -- <root>/examples/nvim/plugin/x.lua
    local candidates = {
        { root .. "/build/lua-5.1", root .. "/build/lua" },
        { root .. "/rocks/lib/lua/5.1", root .. "/rocks/share/lua/5.1" },
    }
    for _, c in ipairs(candidates) do
        if uv.fs_stat(c[1] .. "/agenthost.so") then
            package.cpath = c[1] .. "/?.so;" .. package.cpath
            package.path = c[2] .. "/?.lua;" .. package.path
            return
        end
    end
end
use_checkout()

vim.api.nvim_create_user_command("AgentAsk", function(o)
    require("agenthost_ask").ask(o.args)
end, { nargs = "+", desc = "agenthost: ask; the answer streams into a scratch buffer" })

vim.api.nvim_create_user_command("AgentCancel", function()
    require("agenthost_ask").cancel()
end, { nargs = 0, desc = "agenthost: cancel this buffer's answer (else the latest)" })
