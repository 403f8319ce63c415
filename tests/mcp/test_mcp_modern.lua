-- test_mcp_modern.lua - the stateless 2026-07-28 era (tests/mcp/modern_server.mjs, the
-- official v2 SDK) over stdio and streamable HTTP, under the fault matrix: the effect
-- count per key, the outcome, and that each call ends by its own deadline (read from
-- the outcome and its error, never from wall time). The era has no sessions and no
-- resumable streams: a cut loses the answer, so it is outcome_unknown unless the tool
-- is safe to repeat.
local ah = require "agenthost"
local fix = require "mcpfix"
local check = fix.check
local fast = { base_ms = 10, cap_ms = 50, max_attempts = 3 }
local function told(key)
  for _ = 1, 100 do -- the server records the cancel when it gets it
    if fix.effects("cancelled", key) == 1 then return true end
    ah.sleep(20)
  end
  return false
end

-- stdio ---------------------------------------------------------------------------------
local events = {}
local s = ah.mcp{ name = "mpay", command = fix.modern_stdio_command(), env = fix.env(),
  policy = fast, restart = { max = 10, window_s = 60 },
  on_event = function(e) events[#events + 1] = e end }
local tools = s:tools()
check(#tools == 7 and s.protocol == "2026-07-28",
  "stdio: a 2026-07-28 server is discovered (" .. tostring(s.protocol) .. ", " .. #tools .. " tools)")
local r = s:call("charge", { amount = 1 }, { key = "ms1" })
check(r.ok and r.text == "charge done for ms1" and fix.effects("charge", "ms1") == 1,
  "stdio: a call, the key in _meta (" .. tostring(r.text or r.error) .. ")")
r = s:call("charge", { fault = "crash_after" }, { key = "ms2" })
check(r.outcome == "outcome_unknown" and fix.effects("charge", "ms2") == 1,
  "stdio: crash after the effect: outcome_unknown, applied once (" .. tostring(r.error) .. ")")
r = s:call("charge", { fault = "crash_before" }, { key = "ms3" })
check(r.outcome == "outcome_unknown" and fix.effects("charge", "ms3") == 0,
  "stdio: crash before the effect: outcome_unknown, not applied")
r = s:call("charge", {}, { key = "ms4" })
check(r.ok and s.protocol == "2026-07-28", "stdio: the restarted server answers, still 2026-07-28")
local restarts = 0
for _, e in ipairs(events) do if e.state == "restarting" then restarts = restarts + 1 end end
check(restarts == 2, "stdio: two restarts (" .. restarts .. ")")
r = s:call("charge", { fault = "hang" }, { key = "ms5", timeout_ms = 300 })
check(r.outcome == "outcome_unknown" and r.error.message:find("timeout_ms 300 ms", 1, true) and
  fix.effects("charge", "ms5") == 1, "stdio: a hung call ends at its timeout_ms, once")
check(told("ms5"), "stdio: the server was told (notifications/cancelled)")
r = s:call("declined", {})
check(not r.ok and r.is_error and r.attempts == 1, "stdio: isError is the tool's answer")
local progress = {}
r = s:call("slow", { steps = 3 }, { on_event = function(e)
  if e.type == "mcp_progress" then progress[#progress + 1] = e end end })
check(r.ok and #progress == 3 and progress[3].progress == 3 and progress[3].total == 3,
  "stdio: progress, three mcp_progress events (" .. #progress .. ")")
s:close()

local t = ah.mcp{ name = "mshop", command = fix.modern_stdio_command(), env = fix.env(),
  policy = fast, trust = true }
r = t:call("lookup", { fault = "crash_after" }, { key = "ml1" })
check(r.ok and r.attempts == 2 and fix.effects("lookup", "ml1") == 2,
  "stdio: a trusted read-only tool is repeated after the crash (" .. tostring(r.error) .. ")")
r = t:call("charge", { fault = "crash_after" }, { key = "ml2" })
check(r.outcome == "outcome_unknown" and fix.effects("charge", "ml2") == 1,
  "stdio: trusted but not annotated: never replayed")
t:close()

-- HTTP ------------------------------------------------------------------------------------
local url = fix.modern_http()
local h = ah.mcp{ name = "mpayh", url = url, policy = fast }
r = h:call("charge", {}, { key = "mh1" })
check(h.protocol == "2026-07-28" and r.ok and fix.effects("charge", "mh1") == 1,
  "HTTP: a 2026-07-28 call (" .. tostring(h.protocol) .. ")")
r = h:call("charge", { fault = "cut" }, { key = "mh2" })
check(r.outcome == "outcome_unknown" and fix.effects("charge", "mh2") == 1,
  "HTTP: a cut after the effect (no resumable streams): outcome_unknown, once (" ..
  tostring(r.error) .. ")")
r = h:call("charge", { fault = "busy" }, { key = "mh3" })
check(r.ok and r.attempts == 2 and fix.effects("charge", "mh3") == 1,
  "HTTP: 503 before acceptance: never sent, retried: one effect (" .. tostring(r.error) .. ")")
r = h:call("charge", { fault = "hang" }, { key = "mh4", timeout_ms = 300 })
check(r.outcome == "outcome_unknown" and fix.effects("charge", "mh4") == 1,
  "HTTP: a hung call ends at its timeout_ms, once (" .. tostring(r.error) .. ")")
check(told("mh4"), "HTTP: the stream closed is the cancel: the server's handler was aborted")
r = h:call("declined", {})
check(not r.ok and r.is_error and r.attempts == 1, "HTTP: isError is the tool's answer")
-- x-mcp-header: parameters mirrored into Mcp-Param-* headers (the SDK's handler rejects
-- a call whose headers do not match its body with -32020)
local names = {}
for _, tool in ipairs(h:tools()) do names[tool.name] = true end
check(names.route and not names.bad_header,
  "HTTP: a tool with x-mcp-header on a number is left out, the valid one is offered")
r = h:call("route", { region = "us-west1", shard = 42, dry = false, where = { zone = "Zürich" },
  note = "not mirrored" })
check(r.ok, "HTTP: a call with mirrored parameters is accepted (" .. tostring(r.error) .. ")")
local got = r.text or ""
check(got:find('"mcp-param-region":"us-west1"', 1, true) and got:find('"mcp-param-shard":"42"', 1, true)
  and got:find('"mcp-param-dry":"false"', 1, true)
  and got:find('"mcp-param-zone":"=?base64?WsO8cmljaA==?="', 1, true)
  and not got:find("note", 1, true),
  "HTTP: Mcp-Param-Region, -Shard, -Dry as they are, -Zone (not ASCII) in Base64: " .. got)
r = h:call("route", { region = " padded " })
check(r.ok and (r.text or ""):find('"mcp-param-region":"=?base64?IHBhZGRlZCA=?="', 1, true) and
  not (r.text or ""):find("shard", 1, true),
  "HTTP: leading spaces go in Base64, absent parameters send no header: " .. tostring(r.text or r.error))
-- a declaration that appeared after the listing: the server answers -32020 before running
-- the call; the tools are listed again and the call sent again with the header, once
os.execute("touch '" .. fix.tmp .. "/modern-route2-v2'")
r = h:call("route2", { region = "eu-north1" })
check(r.ok and r.attempts == 1 and (r.text or ""):find('"mcp-param-region":"eu-north1"', 1, true),
  "HTTP: -32020 HeaderMismatch: listed again, sent again with the new header (" ..
  tostring(r.text or r.error) .. ")")
progress = {}
r = h:call("slow", { steps = 2 }, { on_event = function(e)
  if e.type == "mcp_progress" then progress[#progress + 1] = e end end })
check(r.ok and #progress == 2, "HTTP: progress over the request's stream (" .. #progress .. ")")
-- an agent through the mock in all three wire formats: a cut after the effect is an
-- outcome the model is told is unknown, never a replay
for _, provider in ipairs({ "anthropic", "openai", "responses" }) do
  local m = ah.mock{ plan = { { ok = true, tool_calls = { { name = "mpayh__charge",
    arguments = { fault = "cut" } } } }, { ok = true } } }
  local start, finish, result
  local agent = ah.agent{ client = ah.client{ provider = provider, model = "mock-model",
    base_url = m.url }, mcp = { h }, on_event = function(e)
      if e.type == "tool_call_start" then start = e end
      if e.type == "tool_call_end" then finish = e end end }
  local ar = agent:run("charge it")
  for _, msg in ipairs(ar.history) do
    for _, b in ipairs(msg.content or {}) do if b.type == "tool_result" then result = b end end
  end
  local key = start and (start.run_id .. ":" .. start.id)
  check(ar.outcome == "completed" and start.server == "mpayh" and finish.outcome == "outcome_unknown"
    and fix.effects("charge", key) == 1 and result and result.is_error and
    tostring(result.content):find("may or may not have happened", 1, true),
    provider .. ": an agent's 2026-era tool cut after the effect: outcome_unknown, once, the model told")
  m:close()
end
h:close()
local ht = ah.mcp{ name = "mshoph", url = url, policy = fast, trust = true }
r = ht:call("lookup", { fault = "cut" }, { key = "mh5" })
check(r.ok and r.attempts == 2 and fix.effects("lookup", "mh5") == 2,
  "HTTP: a trusted read-only tool is repeated after a cut (" .. tostring(r.error) .. ")")
ht:close()

fix.finish()
