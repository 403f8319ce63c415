-- agenthost_ask: a small Neovim plugin over agenthost (examples/nvim/README.md).
--
--   :AgentAsk {question}   the answer streams into a scratch buffer; its status line
--                          shows retries, waits and continuations while they happen
--   :AgentCancel           cancel that buffer's answer (or the latest); <C-c> in it too
--
-- require("agenthost_ask").setup{ ... } is optional (see M.setup). The provider comes
-- from the environment: ANTHROPIC_API_KEY (and ANTHROPIC_BASE_URL), else OPENAI_API_KEY
-- (and OPENAI_BASE_URL), else agenthost's built-in mock provider with a fault plan, so
-- the plugin can be tried without a key.
--
-- Nothing here waits: agent:start returns at once, agenthost.nvim drives the run from the
-- editor's loop, and on_event / on_done run there, where they may edit buffers.
local M = {}

local api = vim.api

local cfg = {}
local state = { client = nil, mock = nil, asks = {}, by_buf = {}, n = 0 }

-- The demo plan for the mock: what real providers do on a bad day.
local DEMO_PLAN = {
    { status = 503 },                                       -- an overloaded gateway
    { status = 529, headers = { ["Retry-After"] = "1" } },  -- "come back in 1 s"
    { cut_after_events = 7 },                               -- the stream dies mid-text
}

-- setup(opts), all optional:
--   provider, model, base_url, api_key   the client (default: from the environment)
--   mock = { plan = {...} } or true      use the built-in mock (default: without a key)
--   system                               the system prompt
--   policy                               the agent's retry policy (docs: "Retry policy")
--   tools                                the agent's tools (docs: "Tools")
--   open = "botright split"              the command that opens the answer's window
function M.setup(opts)
    cfg = opts or {}
    if state.mock then
        state.mock:close()
    end
    state.client, state.mock = nil, nil
end

local function getenv(name)
    local v = os.getenv(name)
    if v == "" then
        return nil
    end
    return v
end

local function client()
    if state.client then
        return state.client
    end
    local ah = require("agenthost")
    local anthropic, openai = getenv("ANTHROPIC_API_KEY"), getenv("OPENAI_API_KEY")
    local c
    if cfg.mock or (not cfg.provider and not anthropic and not openai) then
        local plan = type(cfg.mock) == "table" and cfg.mock.plan or DEMO_PLAN
        state.mock = ah.mock{ plan = plan }
        c = { provider = "anthropic", model = cfg.model or "claude-opus-4-6",
              base_url = state.mock.url }
        if not cfg.mock then
            vim.notify("agenthost: no ANTHROPIC_API_KEY or OPENAI_API_KEY: answering from "
                .. "the built-in mock provider (a 503, a 529, a cut stream)",
                vim.log.levels.INFO)
        end
    elseif cfg.provider then
        c = { provider = cfg.provider, model = cfg.model, base_url = cfg.base_url,
              api_key = cfg.api_key }
    elseif anthropic then
        c = { provider = "anthropic", model = cfg.model or "claude-sonnet-4-5",
              api_key = anthropic, base_url = getenv("ANTHROPIC_BASE_URL") }
    else
        c = { provider = "openai", model = cfg.model or "gpt-4.1-mini",
              api_key = openai, base_url = getenv("OPENAI_BASE_URL") }
    end
    state.client = ah.client(c)
    return state.client
end

local STATUSLINE = "%<agenthost %{get(b:,'agenthost_status','')}%="
    .. "%{get(b:,'agenthost_state','')} "

local function set_var(buf, name, value)
    if api.nvim_buf_is_valid(buf) then
        api.nvim_buf_set_var(buf, name, value)
        vim.cmd("redrawstatus!")
    end
end

-- Keep the windows that show buf at its end while the answer streams, unless the user
-- moved the cursor away from the last line.
local function follow(buf)
    for _, win in ipairs(api.nvim_list_wins()) do
        if api.nvim_win_get_buf(win) == buf then
            local last = api.nvim_buf_line_count(buf)
            local row = api.nvim_win_get_cursor(win)[1]
            if row >= last - 1 then
                api.nvim_win_set_cursor(win, { last, 0 })
            end
        end
    end
end

local function summary(r)
    local s = r.stats or {}
    local parts = {}
    local function add(n, one, many)
        if n and n > 0 then
            parts[#parts + 1] = string.format("%d %s", n, n == 1 and one or many)
        end
    end
    add(s.retries, "retry", "retries")
    add(s.continuations, "continuation", "continuations")
    add(s.tool_calls, "tool call", "tool calls")
    if #parts == 0 then
        return r.outcome
    end
    return r.outcome .. " (" .. table.concat(parts, ", ") .. ")"
end

local function finish(ask, r)
    ask.result = r
    ask.running = false
    local buf = ask.buf
    if not api.nvim_buf_is_valid(buf) then
        return
    end
    ask.answer:flush() -- the answer's last text, before the line below it
    if r.outcome ~= "completed" then
        local msg = r.error and tostring(r.error.message or r.error) or r.outcome
        if msg:sub(1, #r.outcome) ~= r.outcome then -- "cancelled: by the user" as it is
            msg = r.outcome .. ": " .. msg
        end
        local lines = { "", "-- " .. (msg:gsub("\n", " ")) }
        local was = vim.bo[buf].modifiable
        vim.bo[buf].modifiable = true
        api.nvim_buf_set_lines(buf, -1, -1, false, lines)
        vim.bo[buf].modifiable = was
    end
    set_var(buf, "agenthost_state", summary(r))
end

-- ask(question) -> the ask record { buf, run, status, answer, result, running }
function M.ask(question)
    local ah = require("agenthost")
    local nvim = require("agenthost.nvim")
    nvim.attach()
    state.n = state.n + 1
    local buf = api.nvim_create_buf(false, true) -- unlisted scratch: nofile, no swap
    api.nvim_buf_set_name(buf, "agenthost://ask/" .. state.n)
    vim.bo[buf].filetype = "markdown"
    api.nvim_buf_set_lines(buf, 0, -1, false, { "> " .. question, "", "" })
    vim.bo[buf].modifiable = false
    vim.cmd(cfg.open or "botright split")
    local win = api.nvim_get_current_win()
    api.nvim_win_set_buf(win, buf)
    vim.wo[win].statusline = STATUSLINE
    vim.wo[win].wrap = true

    local ask = { buf = buf, question = question, running = true }
    ask.status = nvim.status{ on_change = function(text)
        set_var(buf, "agenthost_status", text)
    end }
    ask.answer = nvim.buffer(buf, { separator = "\n\n", on_change = function()
        follow(buf)
    end })
    local agent = ah.agent{
        client = client(),
        system = cfg.system or "You are a helpful assistant inside a text editor. "
            .. "Answer concisely.",
        policy = cfg.policy,
        tools = cfg.tools,
        on_event = function(ev)
            ask.answer:update(ev)
            ask.status:update(ev)
        end,
    }
    set_var(buf, "agenthost_state", "streaming")
    ask.run = agent:start(question, { on_done = function(r)
        finish(ask, r)
    end })
    state.asks[#state.asks + 1] = ask
    state.by_buf[buf] = ask
    vim.keymap.set("n", "<C-c>", function()
        M.cancel(buf)
    end, { buffer = buf, desc = "agenthost: cancel this answer" })
    follow(buf)
    return ask
end

-- cancel([buf]): cancel the answer of buf (default: the current buffer), else the
-- latest answer still running. Returns true if a run was cancelled.
function M.cancel(buf)
    local ask = state.by_buf[buf or api.nvim_get_current_buf()]
    if not ask or not ask.running then
        ask = nil
        for i = #state.asks, 1, -1 do
            if state.asks[i].running then
                ask = state.asks[i]
                break
            end
        end
    end
    if not ask then
        vim.notify("agenthost: no answer is running", vim.log.levels.INFO)
        return false
    end
    return ask.run:cancel("by the user")
end

-- Every ask of this session, oldest first.
function M.asks()
    return state.asks
end

return M
