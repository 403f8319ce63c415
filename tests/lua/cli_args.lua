-- Helper of tests/cli/test_lua_host.sh: prints what the script sees as arguments.
local n = select("#", ...)
print("n=" .. n, "arg0=" .. arg[0], "arg1=" .. tostring(arg[1]), "arg2=" .. tostring(arg[2]),
      "dots1=" .. tostring((...)), "argneg1=" .. tostring(arg[-1]), "#arg=" .. #arg)
