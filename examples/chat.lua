-- chat.lua - an interactive chat with a real provider, answers streamed as they arrive.
--
--   ANTHROPIC_API_KEY=... agenthost examples/chat.lua
--   OPENAI_API_KEY=...    agenthost examples/chat.lua
--   agenthost examples/chat.lua [anthropic|openai|responses|mock] [MODEL]
--
-- The provider is the one named, else the one whose key is set (Anthropic first).
-- ANTHROPIC_BASE_URL / OPENAI_BASE_URL point it at a proxy or a compatible server, and
-- AGENTHOST_MODEL (or the second argument) picks the model. `mock` chats with the
-- built-in mock provider, no key needed. Type a message and Enter; an empty line, /quit
-- or end of input (Ctrl-D) ends the chat.
--
-- Retries and cut streams are handled by the library; the status display shows them on
-- stderr while they happen and erases them afterwards.
local ah = require "agenthost"

local PROVIDERS = {
    anthropic = { key = "ANTHROPIC_API_KEY", url = "ANTHROPIC_BASE_URL",
                  model = "claude-sonnet-4-5" },
    openai = { key = "OPENAI_API_KEY", url = "OPENAI_BASE_URL", model = "gpt-4o-mini" },
    responses = { key = "OPENAI_API_KEY", url = "OPENAI_BASE_URL", model = "gpt-4o-mini" },
}

local function fail(msg, code)
    io.stderr:write("chat.lua: ", msg, "\n")
    os.exit(code or 2)
end

local name = arg[1]
if name == nil then
    name = (os.getenv("ANTHROPIC_API_KEY") or "") ~= "" and "anthropic"
        or (os.getenv("OPENAI_API_KEY") or "") ~= "" and "openai" or nil
    if not name then
        fail("no API key found. Set ANTHROPIC_API_KEY (Anthropic) or OPENAI_API_KEY "
            .. "(OpenAI),\nand optionally ANTHROPIC_BASE_URL / OPENAI_BASE_URL and "
            .. "AGENTHOST_MODEL.\nNo key? `agenthost examples/chat.lua mock` chats with "
            .. "the built-in mock,\nand `./run demo` shows the fault handling.")
    end
elseif name ~= "mock" and not PROVIDERS[name] then
    fail(("unknown provider '%s': use anthropic, openai, responses or mock"):format(name))
end

local mock, client
local model = arg[2] or os.getenv("AGENTHOST_MODEL")
if name == "mock" then
    mock = ah.mock{}
    client = ah.client{ provider = "anthropic", model = model or "mock-model",
                        base_url = mock.url }
else
    local p = PROVIDERS[name]
    local key = os.getenv(p.key)
    if (key or "") == "" then
        fail(("provider %s needs %s to be set (and optionally %s)"):format(name, p.key, p.url))
    end
    local url = os.getenv(p.url)
    client = ah.client{ provider = name, model = model or p.model, api_key = key,
                        base_url = url ~= "" and url or nil, max_tokens = 2048 }
end

-- The answer streams to stdout; the status line (stderr) starts on a fresh line when it
-- has to appear in the middle of a streamed answer.
local status = require("agenthost.status").new{ streaming = true }
local agent = ah.agent{
    client = client,
    system = "You are a helpful assistant in a terminal chat. Answer concisely.",
    on_event = function(ev)
        status:update(ev)
        if ev.type == "text_delta" then
            io.stdout:write(ev.text)
            io.stdout:flush()
        elseif ev.type == "llm_continuation" and (ev.discarded_bytes or 0) > 0 then
            -- The stream was cut inside a block: what it showed of that block is not
            -- kept (the model says it again), so say so rather than let it pass as said.
            io.stdout:write(("\n[stream cut: the last %d bytes above were discarded]\n")
                :format(ev.discarded_bytes))
            io.stdout:flush()
        end
    end,
}

-- agent:run starts each conversation afresh, so the chat so far goes with each message.
local turns = {}
local function input_with_history(message)
    if #turns == 0 then return message end
    local lines = { "The conversation so far:" }
    for _, t in ipairs(turns) do
        lines[#lines + 1] = "User: " .. t.user
        lines[#lines + 1] = "Assistant: " .. t.assistant
    end
    lines[#lines + 1] = ""
    lines[#lines + 1] = "The user's new message: " .. message
    return table.concat(lines, "\n")
end

print(("chatting with %s (%s) at %s; empty line or Ctrl-D to quit"):format(name,
    model or (PROVIDERS[name] or {}).model or "mock-model", client.url))
while true do
    io.stdout:write("you> ")
    io.stdout:flush()
    local line = io.read("l")
    if line == nil or line == "" or line == "/quit" then break end
    io.stdout:write("assistant> ")
    local r = agent:run(input_with_history(line))
    io.stdout:write("\n")
    if r.outcome == "completed" then
        turns[#turns + 1] = { user = line, assistant = r.text }
    else
        io.stdout:write(("(%s: %s)\n"):format(r.outcome, r.error and r.error.message or "?"))
    end
end
if mock then mock:close() end
