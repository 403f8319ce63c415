-- Helper of tests/cli/test_lua_host.sh: checks an events file (arg[1]) holds one valid
-- JSON object per line, from run_start to run_end, without the key (arg[2]).
local cjson = require "cjson"
local f = assert(io.open(arg[1]))
local types, n, evs = {}, 0, {}
for line in f:lines() do
  n = n + 1
  assert(not line:find(arg[2], 1, true), "line " .. n .. " holds the API key")
  local ok, ev = pcall(cjson.decode, line)
  assert(ok and type(ev) == "table", "line " .. n .. " is not a JSON object: " .. line)
  assert(type(ev.type) == "string", "line " .. n .. " has no type")
  types[#types + 1] = ev.type
  evs[#evs + 1] = ev
end
-- the continuation's rung and the trimmed count are in every event of their type
local MODES = { resume = true, prefill = true, prompt = true, regenerate = true }
for i, ev in ipairs(evs) do
  if ev.type == "llm_continuation" then
    assert(MODES[ev.mode], "line " .. i .. ": llm_continuation.mode is " .. tostring(ev.mode))
  elseif ev.type == "llm_call_end" then
    assert(type(ev.trimmed_bytes) == "number" and ev.trimmed_bytes >= 0,
           "line " .. i .. ": llm_call_end.trimmed_bytes is " .. tostring(ev.trimmed_bytes))
  end
end
f:close()
local seq = table.concat(types, " ")
assert(types[1] == "run_start", "first event is run_start: " .. seq)
assert(types[#types] == "run_end", "last event is run_end: " .. seq)
for _, want in ipairs{ "llm_retry", "llm_continuation", "tool_call_start", "tool_call_end",
                       "llm_call_end", "text_delta" } do
  assert(seq:find(want, 1, true), "no " .. want .. " event: " .. seq)
end
print("events ok: " .. n .. " lines")
