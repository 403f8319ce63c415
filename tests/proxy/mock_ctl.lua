-- mock_ctl.lua - the built-in mock under the control of a test driver (sdk_matrix.mjs):
-- prints the mock's URL, then reads one line per command from stdin:
--   <plan JSON>   set the fault plan (steps from the next request on), answers "ok"
--   none          no plan (every request ok), answers "ok"
--   count         answers the number of requests the mock has received
-- and ends at EOF.
local ah = require "agenthost"
local m = ah.mock{}
io.stdout:write(m.url, "\n")
io.stdout:flush()
for line in io.lines() do
  if line == "count" then
    io.stdout:write(tostring(#m:requests()), "\n")
  elseif line == "none" then
    m:set_plan(nil)
    io.stdout:write("ok\n")
  else
    m:set_plan(line)
    io.stdout:write("ok\n")
  end
  io.stdout:flush()
end
m:close()
