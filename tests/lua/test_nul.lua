-- test_nul.lua - NUL bytes in tool names and idempotency keys are refused with a clear
-- error (C sees a string up to its first NUL: "rec\0evil" was the tool "rec", and the
-- keys "order\0A" and "order\0B" collided, so the second call got the first's receipt).
local ah = require "agenthost"
local T = require "toolcheck"

T.test("a tool name with a NUL byte is refused", function()
  T.raises(function() ah.tool { name = "rec\0evil", run = function() end } end,
           "ah.tool: name contains a NUL byte at offset 3", "ah.tool")
  local mock = ah.mock {}
  local client = ah.client { provider = "anthropic", model = "m", base_url = mock.url,
                             api_key = "k" }
  T.raises(function()
    ah.agent { client = client, tools = { ["rec\0evil"] = { run = function() end } } }
  end, "a tool name contains a NUL byte", "ah.agent tools key")
  T.raises(function()
    ah.agent { client = client, tools = { { name = "rec\0evil", run = function() end } } }
  end, "a tool name contains a NUL byte", "ah.agent tools list")
  mock:close()
end)

T.test("idempotency keys with a NUL byte are refused and never collide", function()
  local runs = 0
  local t = ah.tool { name = "charge", run = function() runs = runs + 1 return runs end }
  local ledger = ah.ledger {}
  T.raises(function() t:call({}, { key = "order\0A", ledger = ledger }) end,
           "the idempotency key contains a NUL byte at offset 5", "opts.key")
  T.raises(function() t:call({}, { key = "order\0B", ledger = ledger }) end,
           "NUL byte", "opts.key again")
  T.eq({ runs, #ledger }, { 0, 0 }, "nothing ran, nothing recorded")
  local hooked = ah.tool { name = "h", run = function() runs = runs + 1 end,
                           idempotency_key = function(args) return "order\0" .. args.id end }
  T.raises(function() hooked:call({ id = "A" }, { ledger = ledger }) end,
           "tool 'h' idempotency_key contains a NUL byte", "idempotency_key result")
  T.eq(runs, 0, "the hooked tool never ran")
  T.raises(function() ah.ledger { path = "a\0b.db" } end, "path contains a NUL", "path")
end)

T.test("an agent tool whose key hook returns a NUL byte answers the model an error", function()
  local mock = ah.mock {}
  local runs = 0
  local a = ah.agent {
    client = ah.client { provider = "anthropic", model = "m", base_url = mock.url,
                         api_key = "k" },
    max_steps = 3,
    tools = { charge = { description = "charge", schema = { type = "object", properties = {} },
                         idempotency_key = function() return "order\0A" end,
                         run = function() runs = runs + 1 end } },
  }
  local r = a:run("x")
  T.eq(r.outcome, "completed", "the run goes on")
  T.eq(runs, 0, "the body never ran")
  local body = mock:requests()[2].body
  T.ok(body:find("NUL byte", 1, true), "the model is told")
  mock:close()
end)

T.done()
