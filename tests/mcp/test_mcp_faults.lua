-- test_mcp_faults.lua - the failure rule against a fault server written with the official
-- SDK (tests/mcp/fault_server.mjs), over stdio and streamable HTTP: the effect count per
-- key, the outcome, the events, and that a call ends by its own deadline (read from the
-- outcome and its error, never from wall time).
local ah = require "agenthost"
local fix = require "mcpfix"
local check = fix.check
local fast = { base_ms = 10, cap_ms = 50, max_attempts = 3 }

-- stdio --------------------------------------------------------------------------------
local events = {}
local s = ah.mcp{ name = "pay", command = fix.stdio_command(), env = fix.env(),
  policy = fast, restart = { max = 10, window_s = 60 },
  on_event = function(e) events[#events + 1] = e end }
local tools = s:tools()
check(#tools == 4 and s.state == "ready", "stdio: ready with 4 tools (" .. #tools .. ")")
check(s.protocol == "2025-11-25", "stdio: a 2025 server is detected (" .. tostring(s.protocol) .. ")")

local r = s:call("charge", { fault = "crash_after" }, { key = "c1" })
check(r.outcome == "outcome_unknown" and r.error.kind == "outcome_unknown",
  "crash after the effect, not safe to repeat: outcome_unknown (" .. r.outcome .. ")")
check(fix.effects("charge", "c1") == 1, "crash after the effect: applied once, never replayed")
r = s:call("charge", { fault = "crash_before" }, { key = "c2" })
check(r.outcome == "outcome_unknown", "crash before the effect: the outcome is unknown to us")
check(fix.effects("charge", "c2") == 0, "crash before the effect: not applied, not replayed")
r = s:call("charge", {}, { key = "c3" })
check(r.ok and r.text == "charge done for c3", "the restarted server answers")
local restarts, last = 0, nil
for _, e in ipairs(events) do
  if e.type == "mcp_server" then last = e end
  if e.state == "restarting" then restarts = restarts + 1 end
end
check(events[1].type == "mcp_server" and events[1].state == "starting", "mcp_server starting first")
check(restarts == 2 and last.state == "ready" and last.attempt == 2,
  "two restarts (mcp_server restarting, attempt 2), ready again")
local dup = s:call("charge", {}, { key = "c3" })
check(dup.ok and dup.duplicate and fix.effects("charge", "c3") == 1,
  "the same key again: the receipt from the ledger, no second effect")

r = s:call("charge", { fault = "hang" }, { key = "c4", timeout_ms = 300 })
check(r.outcome == "outcome_unknown" and r.error.message:find("timeout_ms 300 ms", 1, true),
  "a call that hangs ends at its timeout_ms: " .. tostring(r.error))
check(fix.effects("charge", "c4") == 1, "the hung call's effect: once")

r = s:call("declined", {})
check(not r.ok and r.is_error and r.attempts == 1 and r.text == "error: card declined",
  "isError is the tool's answer, not retried")

-- a trusted server's read-only tool is safe to repeat
local t = ah.mcp{ name = "shop", command = fix.stdio_command(), env = fix.env(),
  policy = fast, trust = true }
r = t:call("lookup", { fault = "crash_after" }, { key = "l1" })
check(r.ok and r.attempts == 2, "trusted readOnlyHint tool: repeated after the crash (" ..
  tostring(r.outcome) .. ")")
r = t:call("charge", { fault = "crash_after" }, { key = "t1" })
check(r.outcome == "outcome_unknown" and fix.effects("charge", "t1") == 1,
  "trusted but not annotated: still never replayed")
r = t:call("charge", { fault = "crash_after" }, { key = "t2", idempotent = true })
check(r.ok and fix.effects("charge", "t2") == 2, "the script's override idempotent = true repeats")
local progress = {}
r = t:call("slow", { steps = 3 }, { on_event = function(e)
  if e.type == "mcp_progress" then progress[#progress + 1] = e end end })
check(r.ok and #progress == 3 and progress[3].progress == 3 and progress[3].total == 3 and
  progress[1].server == "shop", "progress: three mcp_progress events")
-- the call's deadline (policy.deadline_ms) bounds the attempt in flight, whatever its
-- timeout_ms; progress never extends it; and nothing is repeated past it
local d = ah.mcp{ name = "dl", command = fix.stdio_command(), env = fix.env(), trust = true,
  policy = { base_ms = 10, cap_ms = 50, max_attempts = 3, deadline_ms = 400 } }
r = d:call("charge", { fault = "hang" }, { key = "d1", timeout_ms = 60000 })
check(r.outcome == "outcome_unknown" and r.error.message:find("policy.deadline_ms 400 ms", 1, true)
  and fix.effects("charge", "d1") == 1,
  "a hang with timeout_ms 60000 ends at policy.deadline_ms 400: " .. tostring(r.error))
progress = {}
r = d:call("slow", { steps = 300 }, { timeout_ms = 60000, on_event = function(e)
  if e.type == "mcp_progress" then progress[#progress + 1] = e end end })
-- 300 steps take at least 3 s (10 ms each): the deadline comes first at any speed
check(r.outcome == "outcome_unknown" and r.error.message:find("policy.deadline_ms", 1, true) and
  #progress < 300, "progress does not extend the deadline (" .. #progress .. " progress events): " ..
  tostring(r.error))
r = d:call("lookup", { fault = "hang" }, { key = "d2", timeout_ms = 60000 })
check(r.outcome == "outcome_unknown" and r.attempts == 1 and fix.effects("lookup", "d2") == 1,
  "safe to repeat, but the deadline is spent: not repeated (" .. r.attempts .. " attempts)")
d:close()
s:close()
t:close()

-- HTTP, resumable streams -------------------------------------------------------------
local url = fix.fault_http(true)
local h = ah.mcp{ name = "payh", url = url, policy = fast }
r = h:call("charge", { fault = "cut" }, { key = "h1" })
check(r.ok and r.attempts == 2 and fix.effects("charge", "h1") == 1,
  "a stream cut after an event id is resumed with Last-Event-ID: one effect (" ..
  tostring(r.outcome) .. " " .. tostring(r.error) .. ")")
r = h:call("charge", { fault = "busy" }, { key = "h2" })
check(r.ok and r.attempts == 2 and fix.effects("charge", "h2") == 1,
  "503 before acceptance: never sent, retried: one effect")
r = h:call("charge", { fault = "expire" }, { key = "h3" })
check(r.ok and fix.effects("charge", "h3") == 1, "404 session expiry: one new session, one effect (" ..
  tostring(r.error) .. ")")
r = h:call("charge", { fault = "expire2" }, { key = "h4" })
check(not r.ok and r.error.kind == "mcp_session" and fix.effects("charge", "h4") == 0,
  "404 twice in a row: mcp_session, never sent (" .. tostring(r.error) .. ")")
r = h:call("charge", {}, { key = "h4b" })
check(r.ok and fix.effects("charge", "h4b") == 1, "after that, the next call gets a new session")
h:close()
check(h.state == "closed" and fix.effects("session", "deleted") == 1,
  "close ends the session with DELETE (" .. h.state .. ")")
-- a server that does not allow DELETE (405): closed all the same
local hn = ah.mcp{ name = "payd", url = url .. "?nodelete=1", policy = fast }
r = hn:call("charge", {}, { key = "h5" })
check(r.ok, "a call on a server that refuses DELETE (" .. tostring(r.error) .. ")")
hn:close()
check(hn.state == "closed" and fix.effects("session", "refused") == 1,
  "405 for the DELETE is tolerated: closed (" .. hn.state .. ")")

-- HTTP, streams without event ids --------------------------------------------------------
url = fix.fault_http(false)
local n = ah.mcp{ name = "payn", url = url, policy = fast }
r = n:call("charge", { fault = "cut" }, { key = "n1" })
check(r.outcome == "outcome_unknown" and fix.effects("charge", "n1") == 1,
  "a cut without event ids: outcome_unknown, never replayed (" .. tostring(r.error) .. ")")
r = n:call("charge", { fault = "hang" }, { key = "n2", timeout_ms = 300 })
check(r.outcome == "outcome_unknown" and fix.effects("charge", "n2") == 1,
  "HTTP: a hung call ends at its timeout_ms")
n:close()

fix.finish()
