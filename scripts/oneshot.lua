-- agenthost.oneshot: `agenthost -p "question" [--provider P] [--model M]`, one question
-- answered without a script of your own, on the same Lua API a script uses (docs/lua.md,
-- "One question: -p"). The program runs require("agenthost.oneshot").run(question,
-- provider, model) as its main chunk.
--
--   provider  the one given (anthropic, openai, responses, or mock: the built-in mock,
--             no key), else the one whose key is set: ANTHROPIC_API_KEY, else
--             OPENAI_API_KEY (for the openai provider, Chat Completions)
--   model     the one given, else $AGENTHOST_MODEL, else the provider's default below
--   base URL  $ANTHROPIC_BASE_URL / $OPENAI_BASE_URL, as the official SDKs read them
--   key       from the provider's variable (ah.client's default)
--
-- The answer streams to stdout as it arrives, through the status display (text =
-- io.stdout), which also writes the status line (retries counting down, a silent
-- stream, a cut) on stderr and takes back what a cut discards. Exit status: 0 answered,
-- 1 the run failed (its error on stderr), 2 nothing to ask with (no provider, no key,
-- a bad model or URL: said on stderr), 130 Ctrl-C. Valid Lua 5.1 to 5.4 and LuaJIT.
local ah = require "agenthost"

local M = {}

-- The defaults, as in examples/chat.lua. `key`/`url`: the variables the SDKs read.
M.providers = {
    anthropic = { key = "ANTHROPIC_API_KEY", url = "ANTHROPIC_BASE_URL",
                  model = "claude-sonnet-4-5" },
    openai = { key = "OPENAI_API_KEY", url = "OPENAI_BASE_URL", model = "gpt-4o-mini" },
    responses = { key = "OPENAI_API_KEY", url = "OPENAI_BASE_URL", model = "gpt-4o-mini" },
}

local function say(msg)
    io.stderr:write("agenthost: ", msg, "\n")
end

local function set(name)
    local v = os.getenv(name)
    return v ~= nil and v ~= "" and v or nil
end

-- The client for provider (or the one whose key is set), or nil and why.
function M.client(provider, model)
    model = model or set("AGENTHOST_MODEL")
    if provider == "mock" then
        local mock = ah.mock{ plan_json = set("AGENTHOST_MOCK_PLAN") }
        local ok, c = pcall(ah.client, { provider = "anthropic", base_url = mock.url,
                                         model = model or "mock-model" })
        if not ok then return nil, c end
        return c, nil, mock
    end
    if not provider then
        provider = set("ANTHROPIC_API_KEY") and "anthropic"
            or set("OPENAI_API_KEY") and "openai" or nil
        if not provider then
            return nil, "-p needs a provider: set ANTHROPIC_API_KEY or OPENAI_API_KEY "
                .. "(or give --provider anthropic|openai|responses|mock)"
        end
    end
    local p = M.providers[provider]
    if not p then
        return nil, ("unknown provider '%s' (anthropic, openai, responses or mock)")
            :format(tostring(provider))
    end
    local ok, c = pcall(ah.client, { provider = provider, model = model or p.model,
                                     base_url = set(p.url) })
    if not ok then return nil, tostring(c) end
    return c
end

function M.run(question, provider, model)
    if type(question) ~= "string" or question == "" then
        say("-p needs a question (agenthost -p \"What is a retry budget?\")")
        os.exit(2)
    end
    local client, why, mock = M.client(provider, model)
    if not client then
        say(why)
        os.exit(2)
    end
    local status = require("agenthost.status").new{ text = io.stdout }
    local agent = ah.agent{ client = client, on_event = function(ev) status:update(ev) end }
    local r = agent:run(question)
    if status.col > 0 then status:write_text("\n") end
    io.stdout:flush()
    if mock then mock:close() end
    if r.outcome == "cancelled" then os.exit(130) end
    if r.outcome ~= "completed" then
        local err = r.error and r.error.message or r.outcome
        say(r.outcome .. ": " .. tostring(err))
        os.exit(1)
    end
end

return M
