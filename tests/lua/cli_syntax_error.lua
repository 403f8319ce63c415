-- Helper of tests/cli/test_lua_host.sh: a syntax error on line 3.
local ok = true
local x = = 2
