-- Conversations: agent:run(input, { history = h }) continues one; ah.history_save /
-- ah.history_load keep it in a versioned file; a foreign or damaged history is refused
-- naming the first bad element (and the file). A history holding a partial message,
-- tool calls and results and signed reasoning round-trips exactly and every wire format
-- accepts it (the mock decodes each request; we check what it was sent).
local ah = require "agenthost"
local T = require "ahtest"
local cjson = require "cjson"

local tmp = os.tmpname()
os.remove(tmp)
local dir = tmp .. ".d"
os.execute("mkdir -p " .. dir)

local function deep_eq(a, b, path)
  path = path or "h"
  if type(a) ~= type(b) then error(path .. ": " .. type(a) .. " vs " .. type(b), 2) end
  if type(a) ~= "table" then
    if a ~= b then error(path .. ": " .. tostring(a) .. " vs " .. tostring(b), 2) end
    return
  end
  for k, v in pairs(a) do deep_eq(v, b[k], path .. "." .. tostring(k)) end
  for k in pairs(b) do
    if a[k] == nil then error(path .. "." .. tostring(k) .. ": missing on the left", 2) end
  end
end

-- A conversation with everything a history can hold.
local RICH = {
  { role = "user", partial = false, content = { { type = "text", text = "What is 2+3?" } } },
  { role = "assistant", partial = false, content = {
      { type = "reasoning", text = "Use the tool.", signature = "sig-abc==", item_id = "rs_1",
        encrypted_content = "enc-xyz" },
      { type = "text", text = "Let me compute." },
      { type = "tool_use", id = "toolu_1", name = "add", arguments = '{"a":2,"b":3}',
        input = { a = 2, b = 3 } } } },
  { role = "user", partial = false, content = {
      { type = "tool_result", tool_use_id = "toolu_1", content = "5", is_error = false } } },
  { role = "assistant", partial = true, content = { { type = "text", text = "It is 5, " } } },
}

-- ---- save / load ----------------------------------------------------------------------
do
  local path = dir .. "/rich.json"
  T.eq(ah.history_save(RICH, path), true, "save")
  local f = assert(io.open(path))
  local doc = cjson.decode(f:read("*a"))
  f:close()
  T.eq(doc.format, "agenthost.history", "the file says what it is")
  T.eq(doc.version, 1, "and its version")
  local h = assert(ah.history_load(path))
  deep_eq(h, RICH)
  T.ok("a history with reasoning, tool calls, results and a partial message round-trips")
  -- no temporary file left behind
  local p = io.popen("ls " .. dir)
  local names = p:read("*a")
  p:close()
  T.eq(names, "rich.json\n", "only the history file is in the directory")
  T.ok("the save is a rename of a temporary file")
end

-- ---- refusals name the file and the first bad element --------------------------------
local function write(name, text)
  local path = dir .. "/" .. name
  local f = assert(io.open(path, "w"))
  f:write(text)
  f:close()
  return path
end

do
  local h, msg = ah.history_load(dir .. "/none.json")
  T.eq(h, nil, "missing file")
  T.contains(msg, dir .. "/none.json", "missing file names it")
  local cases = {
    { "garbage.json", "{not json", "not a JSON document" },
    { "truncated.json", '{"format":"agenthost.history","version":1,"messages":[{"role":"us',
      "not a JSON document" },
    { "trailing.json", '{"format":"agenthost.history","version":1,"messages":[]} {"x":1}',
      "not a JSON document" },
    { "foreign.json", '{"messages":[]}', 'not an agenthost history' },
    { "chat.json", '[{"role":"user","content":"hi"}]', 'not an agenthost history' },
    { "future.json", '{"format":"agenthost.history","version":2,"messages":[]}',
      "unsupported history version" },
    { "image.json", '{"format":"agenthost.history","version":1,"messages":[' ..
      '{"role":"user","content":[{"type":"text","text":"a"}]},' ..
      '{"role":"user","content":[{"type":"text","text":"b"},{"type":"image","source":"x"}]}]}',
      "history[2].content[2]: unknown field 'source'" },
    { "video.json", '{"format":"agenthost.history","version":1,"messages":[' ..
      '{"role":"user","content":[{"type":"video"}]}]}',
      "history[1].content[1].type: unknown block type 'video'" },
    { "png.json", '{"format":"agenthost.history","version":1,"messages":[' ..
      '{"role":"user","content":[{"type":"image","media_type":"image/bmp","data":"AAAA"}]}]}',
      "history[1].content[1].media_type: 'image/bmp' is not one of image/jpeg" },
    { "role.json", '{"format":"agenthost.history","version":1,"messages":[' ..
      '{"role":"system","content":[{"type":"text","text":"a"}]}]}',
      "history[1].role: unknown role 'system'" },
    { "field.json", '{"format":"agenthost.history","version":1,"messages":[' ..
      '{"role":"user","content":[{"type":"text","text":"a","cache_control":{}}]}]}',
      "history[1].content[1]: unknown field 'cache_control'" },
    { "orphan.json", '{"format":"agenthost.history","version":1,"messages":[' ..
      '{"role":"user","content":[{"type":"tool_result","tool_use_id":"t9","content":"5"}]}]}',
      "history[1].content[1].tool_use_id: 't9' answers no tool_use" },
    { "wrongrole.json", '{"format":"agenthost.history","version":1,"messages":[' ..
      '{"role":"user","content":[{"type":"tool_use","id":"t","name":"n","arguments":"{}"}]}]}',
      "history[1].content[1]: a tool_use block belongs to an assistant message" },
    { "type.json", '{"format":"agenthost.history","version":1,"messages":[' ..
      '{"role":"user","content":[{"type":"text","text":7}]}]}',
      "history[1].content[1].text: must be a string, got number" },
  }
  for _, c in ipairs(cases) do
    local path = write(c[1], c[2])
    local h2, m2 = ah.history_load(path)
    T.eq(h2, nil, c[1] .. " is refused")
    T.contains(m2, path .. ": ", c[1] .. ": the message names the file")
    T.contains(m2, c[3], c[1])
  end
  T.ok("foreign and damaged histories are refused naming the file and the first bad element")
  T.raises(function() ah.history_save({ { role = "user", content = {} } }, dir .. "/x.json") end,
           "history[1].content: empty", "save checks the history")
  local ok, err = ah.history_save(RICH, dir .. "/no/such/dir/h.json")
  T.eq(ok, nil, "save to a missing directory")
  T.contains(err, "cannot save the history to", "says why")
  T.ok("save refuses a bad history (raises) and reports an unwritable path (nil, msg)")
end

-- ---- runs continue a conversation ----------------------------------------------------
for _, provider in ipairs(T.providers) do
  local m = ah.mock{}
  local client = ah.client{ provider = provider, model = "m", base_url = m.url }
  local agent = ah.agent{ client = client, on_event = false, policy = T.fast() }
  local r1 = agent:run("first question")
  T.eq(r1.outcome, "completed", provider .. " turn 1")
  local r2 = agent:run("second question", { history = r1.history })
  T.eq(r2.outcome, "completed", provider .. " turn 2")
  T.eq(#r2.history, 4, provider .. ": the whole conversation")
  T.eq(r2.history[1].content[1].text, "first question", provider .. ": it starts with turn 1")
  T.eq(r2.history[3].content[1].text, "second question", provider .. ": then turn 2")
  T.eq(#r1.history, 2, provider .. ": the run worked on a copy")
  local reqs = m:requests()
  T.contains(reqs[2].body, "first question", provider .. ": turn 2's request carries turn 1")
  T.contains(reqs[2].body, "deterministic reply", provider .. ": and its answer")

  -- the rich history (loaded from its file) is accepted by this wire format's encoder
  local h = assert(ah.history_load(dir .. "/rich.json"))
  local r3 = agent:run("and now?", { history = h })
  T.eq(r3.outcome, "completed", provider .. ": a run from the rich history completes")
  for i = 1, #RICH do deep_eq(r3.history[i], RICH[i], provider .. " history[" .. i .. "]") end
  local body = m:requests()[3].body
  T.contains(body, "toolu_1", provider .. ": the tool call is sent")
  T.contains(body, "It is 5, ", provider .. ": the partial message is sent")
  if provider == "anthropic" then
    T.contains(body, "sig-abc==", "anthropic: the thinking block travels with its signature")
  elseif provider == "responses" then
    T.contains(body, "enc-xyz", "responses: the reasoning item travels with its content")
  end
  T.ok(provider .. ": two turns share one history; a saved rich history is accepted")
  m:close()
end

-- ---- bad histories at agent:run --------------------------------------------------------
do
  local m = ah.mock{}
  local agent = ah.agent{ client = ah.client{ provider = "anthropic", model = "m",
                                              base_url = m.url }, on_event = false }
  local r0 = agent:run("first")
  T.raises(function() agent:run("x", { history = r0 }) end,
           "agent:run: history: got a run result; pass its .history", "a result, not its history")
  T.raises(function() agent:run("x", { history = "nope" }) end,
           "agent:run: history: must be a list of messages", "a string")
  T.raises(function()
    agent:run("x", { history = { { role = "user", content = { { type = "video" } } } } })
  end, "agent:run: history[1].content[1].type: unknown block type 'video'", "unknown block")
  T.raises(function() agent:start("x", { history = { { role = "bot", content = {} } } }) end,
           "agent:start: history[1].role: unknown role 'bot'", "agent:start checks it too")
  T.eq(#m:requests(), 1, "nothing was sent (but the first run's request)")
  T.ok("agent:run refuses a bad history before sending anything")
  m:close()
end

-- image and document blocks keep their fields in result.history, so the history can be
-- passed on (it was the block's type alone: the next run refused it)
do
  local m = ah.mock{}
  local agent = ah.agent{ client = ah.client{ provider = "anthropic", model = "m",
                                              base_url = m.url } }
  local r = agent:run{ { type = "text", text = "look" },
                       { type = "image", media_type = "image/png", data = "iVBORw0KGgo=" },
                       { type = "document", url = "https://example.com/a.pdf",
                         name = "a.pdf" } }
  local img, doc = r.history[1].content[2], r.history[1].content[3]
  T.eq(img.type, "image", "image type")
  T.eq(img.media_type, "image/png", "image media_type")
  T.eq(img.data, "iVBORw0KGgo=", "image data")
  T.eq(doc.url, "https://example.com/a.pdf", "document url")
  T.eq(doc.name, "a.pdf", "document name")
  local r2 = agent:run("again", { history = r.history })
  T.eq(r2.outcome, "completed", "the history with media is passed on")
  T.contains(m:requests()[2].body, '"data":"iVBORw0KGgo="', "the image is resent")
  T.ok("media blocks survive result.history")
  m:close()
end

os.execute("rm -rf " .. dir)
