-- Helper of tests/cli/test_lua_host.sh: raises at run time (line 2, called from line 3).
local function f() error("deliberate failure") end
f()
