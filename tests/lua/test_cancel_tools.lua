-- A run cancelled while its tools run leaves a conversation that goes on: every tool call
-- of the round is answered in result.history (the one that answered with its result, a
-- running one as cancelled "its effect may or may not have happened", one not started
-- as "it did not run"), so the next turn - also after ah.history_save / history_load -
-- is accepted by the mock, which refuses an unanswered tool call with each provider's own
-- 400 as the real APIs do. A history that holds an unanswered call (saved by an older
-- agenthost, or edited) is repaired by the check, with one warning naming the call.
-- Valid in Lua 5.1 and 5.4.
local ah = require "agenthost"
local T = require "ahtest"

local RUNNING = "error: the tool call was cancelled before it finished; its effect may or may not have happened"
local WAITING = "error: the tool call was cancelled before it started; it did not run"
local UNANSWERED = "error: the tool call has no result (the run that made it ended before the tool answered); its effect may or may not have happened"

local tmp = os.tmpname()
os.remove(tmp)

local m = ah.mock{}

local function last_body()
  local reqs = m:requests()
  return reqs[#reqs]
end

-- ---- run:cancel() in a tool round, for each provider ----------------------------------
for _, provider in ipairs(T.providers) do
  m:set_plan{ { ok = true, tool_calls = 3 } }
  local client = ah.client{ provider = provider, model = "m", base_url = m.url }
  local started, after = 0, 0
  local run
  local agent = ah.agent{
    client = client, max_tool_concurrency = 1, policy = T.fast(),
    tools = { slow = { description = "slow", schema = { type = "object" },
      run = function()
        started = started + 1
        if started == 1 then return "first done" end
        run:cancel("stop") -- the second call is running; the third has not started
        ah.sleep(30000)
        after = after + 1
        return "never"
      end } },
    on_event = function() end,
  }
  run = agent:start("use slow")
  local r = run:wait()
  T.eq(r.outcome, "cancelled", provider .. ": cancelled")
  T.eq(started, 2, provider .. ": two bodies started")
  local h = r.history
  T.eq(#h, 3, provider .. ": question, calls, results")
  T.eq(h[3].role, "user", provider .. ": the results message")
  local results = h[3].content
  T.eq(#results, 3, provider .. ": every call answered")
  T.eq(results[1].content, "first done", provider .. ": the answered call keeps its result")
  T.eq(results[1].is_error, false, provider .. ": and is no error")
  T.eq(results[2].content, RUNNING, provider .. ": the running call")
  T.eq(results[2].is_error, true, provider .. ": is a tool error")
  T.eq(results[3].content, WAITING, provider .. ": the call not started")
  local k = 0
  for _, b in ipairs(h[2].content) do
    if b.type == "tool_use" then
      k = k + 1
      T.eq(results[k].tool_use_id, b.id, provider .. ": results in call order")
    end
  end
  T.eq(k, 3, provider .. ": three calls")

  -- the next turn is accepted (the mock refuses an unanswered call with a 400)
  local before = #m:requests()
  local plain = ah.agent{ client = client, policy = T.fast(), on_event = function() end }
  local r2 = plain:run("and now?", { history = h })
  T.eq(r2.outcome, "completed", provider .. ": the next turn completes")
  T.eq(#m:requests(), before + 1, provider .. ": one request")
  T.contains(last_body().body, "its effect may or may not have happened",
             provider .. ": the model is told")

  -- and after a save and a load
  T.eq(ah.history_save(h, tmp), true, provider .. ": save")
  local loaded = assert(ah.history_load(tmp))
  T.eq(loaded[3].content[2].content, RUNNING, provider .. ": load keeps the results")
  T.eq(plain:run("and now?", { history = loaded }).outcome, "completed",
       provider .. ": the loaded conversation goes on")
  ah.sleep(10)
  T.eq(after, 0, provider .. ": the cancelled body never went on")
  T.ok(provider .. ": a cancelled tool round is answered in history and the chat goes on")
end

-- ---- a history with an unanswered call (an older agenthost's Ctrl-C) is repaired -------
do
  m:set_plan(nil)
  local warnings = {}
  ah.log_handler(function(level, msg) warnings[#warnings + 1] = msg end)
  local call = { type = "tool_use", id = "toolu_1", name = "slow", arguments = "{}" }
  local call2 = { type = "tool_use", id = "toolu_2", name = "slow", arguments = "{}" }
  local broken = {
    { role = "user", content = { { type = "text", text = "use slow" } } },
    { role = "assistant", content = { { type = "text", text = "I will." }, call } },
  }
  local f = assert(io.open(tmp, "w"))
  f:write('{"format":"agenthost.history","version":1,"messages":[',
    '{"role":"user","content":[{"type":"text","text":"use slow"}]},',
    '{"role":"assistant","content":[{"type":"tool_use","id":"toolu_1","name":"slow",',
    '"arguments":"{}"}]}]}')
  f:close()
  local h = assert(ah.history_load(tmp))
  T.eq(#h, 3, "load: the unanswered call gets a results message")
  T.eq(h[3].content[1].tool_use_id, "toolu_1", "load: for that call")
  T.eq(h[3].content[1].content, UNANSWERED, "load: saying what may have happened")
  T.eq(h[3].content[1].is_error, true, "load: as a tool error")
  T.eq(#warnings, 1, "load: one warning")
  T.contains(warnings[1], "history[2].content[1]: tool call 'toolu_1' (slow) has no tool_result",
             "load: naming the call")

  local client = ah.client{ provider = "anthropic", model = "m", base_url = m.url }
  local agent = ah.agent{ client = client, policy = T.fast(), on_event = function() end }
  T.eq(agent:run("again", { history = h }).outcome, "completed", "load: the chat goes on")
  local r = agent:run("again", { history = broken })
  T.eq(r.outcome, "completed", "run: an unrepaired table is repaired on the run's copy")
  T.eq(#broken, 2, "run: the caller's table is not changed")
  T.eq(r.history[3].content[1].content, UNANSWERED, "run: its history has the result")

  -- answered in part, with the user's next words in the same message: the missing result
  -- joins that message, first
  local partly = {
    { role = "user", content = { { type = "text", text = "use slow twice" } } },
    { role = "assistant", content = { call, call2 } },
    { role = "user", content = { { type = "tool_result", tool_use_id = "toolu_2", content = "ok" },
                                 { type = "text", text = "and?" } } },
  }
  r = agent:run("again", { history = partly })
  T.eq(r.outcome, "completed", "partly: the chat goes on")
  local u = r.history[3]
  T.eq(#u.content, 3, "partly: one result added to the message")
  T.eq(u.content[1].tool_use_id, "toolu_1", "partly: the missing one first")
  T.eq(u.content[2].tool_use_id, "toolu_2", "partly: then what was there")
  T.eq(u.content[3].text, "and?", "partly: and the text")
  ah.log_handler(nil)
  T.ok("a history holding an unanswered tool call is repaired, with a warning naming it")
end

os.remove(tmp)
m:close()
