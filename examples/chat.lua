-- chat.lua - an interactive chat: one conversation over many turns, answers streamed as
-- they arrive, tools, the status line, Ctrl-C to stop an answer, /save and /load.
--
--   ANTHROPIC_API_KEY=... agenthost examples/chat.lua
--   OPENAI_API_KEY=...    agenthost examples/chat.lua
--   agenthost examples/chat.lua [anthropic|openai|responses|mock] [MODEL]
--
-- The provider is the one named, else the one whose key is set (Anthropic first).
-- ANTHROPIC_BASE_URL / OPENAI_BASE_URL point it at a proxy or a compatible server, and
-- AGENTHOST_MODEL (or the second argument) picks the model. `mock` chats with the
-- built-in mock provider, no key needed; AGENTHOST_MOCK_PLAN (a JSON fault plan, see
-- docs/mock.md) gives it faults to show.
--
-- Type a message and Enter. Commands:
--   /save FILE   write the conversation to FILE (versioned JSON, written atomically)
--   /load FILE   continue the conversation saved in FILE
--   /new         start a new conversation
--   /quit        (or an empty line, or Ctrl-D) end the chat
-- Ctrl-C while an answer streams stops that answer; the conversation keeps everything
-- before it (and the question). Ctrl-C at the prompt, or twice within 3 s, quits.
--
-- Retries and cut streams are handled by the library; the status line (stderr) shows them
-- while they happen and erases them afterwards. The answer streams through the same
-- display (agenthost.status with `text`), so what a cut stream discards is taken back:
-- erased in place while it is still on the screen, else marked, never shown as if it
-- were said twice. Valid Lua 5.1 to 5.4 and LuaJIT.
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
    local plan = os.getenv("AGENTHOST_MOCK_PLAN")
    mock = ah.mock{ plan_json = plan ~= "" and plan or nil, delta_bytes = 6 }
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

-- Two small tools the model may call; their calls and results stay in the conversation.
local tools = {
    add = {
        description = "Add two integers and return the sum.",
        schema = { type = "object", required = { "a", "b" },
                   properties = { a = { type = "integer" }, b = { type = "integer" } } },
        run = function(args) return args.a + args.b end,
    },
    clock = {
        description = "The local date and time.",
        schema = { type = "object", properties = {} },
        run = function() return os.date("%Y-%m-%d %H:%M:%S") end,
    },
}

-- The answer streams to stdout through the display, which knows where it is on the
-- screen: the status line (stderr) appears below it, never over it, and a cut's
-- discarded text is erased (or marked) before the rest comes.
local status = require("agenthost.status").new{ text = io.stdout }
local answered = false -- this answer has text on the screen (after the label)
local agent = ah.agent{
    client = client,
    system = "You are a helpful assistant in a terminal chat. Answer concisely.",
    tools = tools,
    on_event = function(ev)
        status:update(ev)
        if ev.type == "text_delta" then
            answered = true
        elseif ev.type == "llm_call_start" and ev.continuation == 0 and ev.attempt == 1
            and answered and status.col > 0 then
            status:write_text("\n") -- the next step (after a tool) starts its own line
        end
    end,
}

local history = {} -- the conversation: every turn, tool calls and results included
local COMMANDS = "/save FILE, /load FILE, /new, /quit"

local function command(line)
    local cmd, rest = line:match("^(/%S+)%s*(.-)%s*$")
    if cmd == "/save" and rest ~= "" then
        local ok, err = ah.history_save(history, rest)
        print(ok and ("saved %d messages to %s"):format(#history, rest) or err)
    elseif cmd == "/load" and rest ~= "" then
        local h, err = ah.history_load(rest)
        if h then
            history = h
            print(("loaded %d messages from %s"):format(#history, rest))
        else
            print(err)
        end
    elseif cmd == "/new" then
        history = {}
        print("a new conversation")
    else
        print("commands: " .. COMMANDS)
    end
end

print(("chatting with %s (%s) at %s"):format(name,
    model or (PROVIDERS[name] or {}).model or "mock-model", client.url))
print("commands: " .. COMMANDS .. "; Ctrl-C stops an answer")
while true do
    io.stdout:write("you> ")
    io.stdout:flush()
    local line = io.read("*l")
    if line == nil or line == "" or line == "/quit" then break end
    if line:sub(1, 1) == "/" then
        command(line)
    else
        status:start_answer("assistant> ")
        answered = false
        local r = agent:run(line, { history = history })
        status:write_text("\n")
        -- the conversation goes on from wherever the run got to: a completed answer, or
        -- (cancelled, failed) the question and whatever was complete before it stopped
        history = r.history
        if r.outcome == "cancelled" then
            print("[answer stopped]")
        elseif r.outcome ~= "completed" then
            print(("(%s: %s)"):format(r.outcome, r.error and r.error.message or "?"))
        end
    end
end
if mock then mock:close() end
