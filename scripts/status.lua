-- agenthost.status: the default terminal status display (docs/status-display.md).
--
--   local status = require("agenthost.status").new{ stream = io.stderr }
--   agent = ah.agent{ ..., on_event = function(ev) status:update(ev) end }
--
-- On a terminal it keeps ONE transient line, rewritten in place with "\r" + erase-line
-- ("\27[K") and never ended with a newline, so retries never stack up in the transcript:
--   retrying LLM request after HTTP 503 (attempt 2/4 in 1.2s)
--   stream cut — continuing (1/3), kept 2 blocks, discarded 1
--   stream cut — resuming (1/3)                 (re-attached to the same response)
--   waiting for tool add…
-- The next progress event (llm_call_start, text/reasoning deltas, tool_call_start,
-- tool_call_end, llm_call_end, run_end) erases it. Giving up is not transient: it is
-- printed as a normal line. When the stream is not a terminal (a log file, a pipe, CI)
-- each retry, continuation, give-up and exhausted budget is one plain line prefixed
-- "agenthost: ", with no control characters at all — except that retries and give-ups
-- are left to the library's own warning lines when those already go to the same stderr.
--
-- Invariants: at most one transient line exists; the display only ever writes to its
-- stream; text taken from events (error messages, tool names) is stripped of control
-- characters before it is written; an event it does not know is ignored, never an error.
local M = {}

local Status = {}
Status.__index = Status

-- The library logs these itself as warnings, which the agenthost host and module print on
-- stderr (off a terminal; on one they leave them to this display).
local LOGGED_BY_HOST = { llm_retry = true, llm_gave_up = true }

-- Events that mean "work is moving again": the transient line has done its job.
local PROGRESS = {
    llm_call_start = true, text_delta = true, reasoning_delta = true,
    tool_call_start = true, tool_call_end = true, llm_call_end = true, run_end = true,
}

-- ---- terminal detection -------------------------------------------------------------
-- Plain Lua has no isatty. The agenthost module provides ah.isatty(file) (lua/tty.c);
-- without it (a plain lua5.4 with only this file on package.path) the shell's `test -t`
-- answers for stdout and stderr, whose descriptors a child process inherits.
local function isatty(stream)
    local ok, ah = pcall(require, "agenthost")
    if ok and type(ah) == "table" and type(ah.isatty) == "function" then
        local called, r = pcall(ah.isatty, stream)
        if called then return r == true end
    end
    local fd = (stream == io.stderr and 2) or (stream == io.stdout and 1) or nil
    if not fd then return false end
    return os.execute("test -t " .. fd) == true
end

local function utf8_locale()
    local v = os.getenv("LC_ALL") or os.getenv("LC_CTYPE") or os.getenv("LANG") or ""
    return v:lower():gsub("%-", ""):find("utf8", 1, true) ~= nil
end

-- ---- wording --------------------------------------------------------------------------

-- Event fields may be nil, or a JSON null sentinel when events came from a decoder.
local function num(v)
    if type(v) == "number" then return v end
    return tonumber(v)
end

local function clean(s)
    s = tostring(s or "")
    s = s:gsub("[%c\127]", " ")
    return s
end

-- 66 -> "66ms", 1200 -> "1.2s", 30000 -> "30.0s"
local function duration(ms)
    ms = num(ms) or 0
    if ms < 1000 then return string.format("%dms", math.floor(ms + 0.5)) end
    return string.format("%.1fs", ms / 1000)
end

local function plural(n, word)
    return string.format("%d %s%s", n, word, n == 1 and "" or "s")
end

-- "HTTP 503", or the error's kind when there was no status: "connect error", "timeout".
local function what_failed(ev)
    local status = num(ev.status)
    if status and status > 0 then return "HTTP " .. math.floor(status) end
    local err = ev.error
    local kind = type(err) == "table" and err.kind or nil
    if type(err) == "table" and num(err.status) and num(err.status) > 0 then
        return "HTTP " .. math.floor(num(err.status))
    end
    if kind == "timeout" then return "timeout" end
    if type(kind) == "string" then return clean(kind) .. " error" end
    if type(err) == "string" then return clean(err) end
    return "an error"
end

local function error_message(ev)
    local err = ev.error
    if type(err) == "table" and type(err.message) == "string" and err.message ~= "" then
        return clean(err.message)
    end
    return nil
end

local GIVE_UP_WHY = {
    deadline = "deadline reached",
    retry_after_too_long = "the server asked for a longer wait than allowed",
    retry_budget = "retry budget spent",
}

local BUDGET_UNITS = { tool = "tool calls", tool_calls = "tool calls", tools = "tool calls",
                       llm = "LLM attempts", llm_attempts = "LLM attempts" }

-- The continuation's cause, from the stream error message the core puts in `reason`.
local function interruption(reason)
    reason = tostring(reason or ""):lower()
    if reason:find("idle", 1, true) then return "stream stalled" end
    if reason:find("provider error", 1, true) then return "provider error mid-stream" end
    if reason:find("malformed", 1, true) or reason:find("json", 1, true) then
        return "bad stream event"
    end
    return "stream cut"
end

-- MCP servers (docs/mcp.md): "fs: restarting (2/5)", "fs__search 40%"; a server that
-- failed stays as a line. Kept apart from describe so the wording of the other events
-- can change beside it.
local function mcp_words(self, ev)
    if ev.type == "mcp_server" then
        local name = clean(ev.server)
        if ev.state == "restarting" then
            return "transient", string.format("%s: restarting (%d/%d)", name,
                num(ev.attempt) or 0, num(ev.max_attempts) or 0)
        elseif ev.state == "failed" then
            local why = ev.reason and (" " .. self.dash .. " " .. clean(ev.reason)) or ""
            return "permanent", "MCP server " .. name .. " failed" .. why
        end
        return nil
    end
    local p, total = num(ev.progress), num(ev.total)
    local name = clean(ev.name)
    if p and total and total > 0 then
        return "transient", string.format("%s %d%%", name, math.floor(100 * p / total))
    elseif ev.message then
        return "transient", name .. ": " .. clean(ev.message)
    end
    return "transient", name .. " " .. self.ellipsis
end

-- Returns kind ("transient" | "permanent" | nil), text.
function Status:describe(ev)
    local t = ev.type
    if t == "mcp_server" or t == "mcp_progress" then return mcp_words(self, ev) end
    if t == "llm_retry" then
        local failed = num(ev.failed_attempt) or 0
        local text = string.format("retrying LLM request after %s (attempt %d/%d in %s%s)",
            what_failed(ev), failed + 1, num(ev.max_attempts) or 0, duration(ev.wait_ms),
            ev.wait_source == "server" and ", server asked" or "")
        return "transient", text
    elseif t == "llm_continuation" and ev.mode == "resume" then
        -- Re-attached to the same response: nothing kept or dropped, nothing regenerated.
        return "transient", string.format("%s %s resuming (%d/%d)", interruption(ev.reason),
            self.dash, num(ev.continuation) or 0, num(ev.max_continuations) or 0)
    elseif t == "llm_continuation" then
        local kept, dropped = num(ev.committed_blocks) or 0, num(ev.discarded_blocks) or 0
        local text = string.format("%s %s continuing (%d/%d), kept %s",
            interruption(ev.reason), self.dash, num(ev.continuation) or 0,
            num(ev.max_continuations) or 0, plural(kept, "block"))
        if dropped > 0 then text = text .. ", discarded " .. dropped end
        return "transient", text
    elseif t == "llm_gave_up" then
        local attempts = num(ev.attempts) or 0
        local text
        if ev.reason == "not_retryable" then
            text = string.format("gave up: %s is not retryable", what_failed(ev))
        else
            text = string.format("gave up after %s: %s", plural(attempts, "attempt"),
                what_failed(ev))
            local why = GIVE_UP_WHY[ev.reason]
            if why then text = text .. " (" .. why .. ")" end
        end
        local msg = error_message(ev)
        if msg then text = text .. " " .. self.dash .. " " .. msg end
        return "permanent", text
    elseif t == "llm_paced" then
        local which = ev.limit == "tokens_per_minute" and "token" or "request"
        return "transient", string.format("pacing: next LLM request in %s (%s rate limit)",
            duration(ev.wait_ms), which)
    elseif t == "tool_call_start" then
        return "transient", "waiting for tool " .. clean(ev.name) .. self.ellipsis
    elseif t == "budget_exhausted" then
        local name = clean(ev.budget)
        local unit = BUDGET_UNITS[name] or name:gsub("_", " ")
        return "transient", string.format("budget exhausted (%d/%d %s)", num(ev.used) or 0,
            num(ev.limit) or 0, unit)
    end
    return nil
end

-- ---- output ----------------------------------------------------------------------------

-- Terminal columns of one code point: 2 for the wide East Asian ranges and most emoji,
-- 1 otherwise (combining marks are rare in these lines; counting them 1 only cuts early).
local function columns_of(cp)
    if cp < 0x1100 then return 1 end
    if (cp <= 0x115F) or (cp >= 0x2E80 and cp <= 0xA4CF) or (cp >= 0xAC00 and cp <= 0xD7A3)
        or (cp >= 0xF900 and cp <= 0xFAFF) or (cp >= 0xFE30 and cp <= 0xFE4F)
        or (cp >= 0xFF00 and cp <= 0xFF60) or (cp >= 0xFFE0 and cp <= 0xFFE6)
        or (cp >= 0x1F300 and cp <= 0x1F64F) or (cp >= 0x1F900 and cp <= 0x1F9FF)
        or (cp >= 0x20000 and cp <= 0x3FFFD) then
        return 2
    end
    return 1
end

-- Cut text to at most `width` terminal columns, the ellipsis (one column) included.
local function fit(text, width, ellipsis)
    if not utf8.len(text) then -- not UTF-8: bytes are columns
        return #text <= width and text or text:sub(1, width - 1) .. ellipsis
    end
    local total = 0
    for _, cp in utf8.codes(text) do total = total + columns_of(cp) end
    if total <= width then return text end
    local used, cut = 0, 1
    for pos, cp in utf8.codes(text) do
        local w = columns_of(cp)
        if used + w > width - 1 then cut = pos; break end
        used = used + w
    end
    return text:sub(1, cut - 1) .. ellipsis
end

function Status:write(s)
    self.stream:write(s)
    self.stream:flush()
end

-- The width to fit: opts.width, else the terminal's real width (asked on every line:
-- terminals get resized), else $COLUMNS, else 80.
function Status:columns()
    if self.width then return self.width end
    if self.term_width == nil then -- looked up once: without the module, false
        local ok, ah = pcall(require, "agenthost")
        self.term_width = ok and type(ah) == "table" and type(ah.term_width) == "function"
            and ah.term_width or false
    end
    if self.term_width then
        local got, cols = pcall(self.term_width, self.stream)
        if got and math.type(cols) == "integer" and cols > 1 then return cols end
    end
    local cols = num(os.getenv("COLUMNS"))
    if cols and cols > 1 then return math.floor(cols) end
    return 80
end

-- Erase the transient line, if one is showing.
function Status:clear()
    if self.shown then
        self:write("\r\27[K")
        self.shown = false
    end
end

-- Show text as the transient line (terminal) or log it as one line (otherwise).
function Status:transient(text)
    if not self.tty then
        self:write(self.prefix .. text .. "\n")
        return
    end
    if self.midline then -- streamed text left the cursor mid-line: keep it on screen
        self:write("\n")
        self.midline = false
    end
    -- one column short of the edge: a line that fills the last column wraps on some
    -- terminals, and "\r" would then leave its first row behind
    self:write("\r" .. fit(text, self:columns() - 1, self.ellipsis) .. "\27[K")
    self.shown = true
end

-- A normal line that stays in the transcript (the transient one is erased first).
function Status:print(text)
    if self.tty then
        self:clear()
        if self.midline then
            self:write("\n")
            self.midline = false
        end
        self:write(text .. "\n")
    else
        self:write(self.prefix .. text .. "\n")
    end
end

-- Feed one event (the event table of docs/lua.md). Unknown events and missing fields are tolerated.
function Status:update(ev)
    if type(ev) ~= "table" then return end
    if self.streaming and ev.type == "text_delta" and type(ev.text) == "string"
        and ev.text ~= "" then
        self.midline = ev.text:sub(-1) ~= "\n"
    end
    if PROGRESS[ev.type] then self:clear() end
    local kind, text = self:describe(ev)
    if not self.tty and (ev.type == "tool_call_start" or
        (not self.log_retries and LOGGED_BY_HOST[ev.type])) then
        return -- progress noise, or a line the log already has
    end
    if kind == "transient" then
        self:transient(text)
    elseif kind == "permanent" then
        self:print(text)
    end
end

-- opts (all optional):
--   stream    file to write to (default io.stderr)
--   tty       true / false; nil = detect whether stream is a terminal
--   width     terminal columns for the transient line (default: the terminal's real
--             width, TIOCGWINSZ, asked on every line; else $COLUMNS; else 80)
--   unicode   use "—" and "…" (default: on a terminal whose locale is UTF-8; log lines
--             are plain ASCII unless an event's own text is not)
--   prefix    prefix of non-terminal lines (default "agenthost: ")
--   streaming true when your on_event also writes text deltas to the same terminal: a
--             transient line then starts on a fresh line instead of erasing that text
--   log_retries  off a terminal, also write retry and give-up lines. Default: unless
--             they would repeat the library's own warnings, i.e. unless the stream is
--             io.stderr and the agenthost module is loaded (its log handler prints them)
function M.new(opts)
    opts = opts or {}
    local self = setmetatable({}, Status)
    self.stream = opts.stream or io.stderr
    if opts.tty == nil then
        self.tty = isatty(self.stream)
    else
        self.tty = opts.tty and true or false
    end
    self.width = num(opts.width)
    if self.width and self.width < 2 then self.width = 2 end
    local unicode = opts.unicode
    if unicode == nil then unicode = self.tty and utf8_locale() end
    self.dash = unicode and "—" or "-"
    self.ellipsis = unicode and "…" or "..."
    self.prefix = opts.prefix or "agenthost: "
    self.streaming = opts.streaming and true or false
    if opts.log_retries == nil then
        self.log_retries = not (self.stream == io.stderr and package.loaded.agenthost ~= nil)
    else
        self.log_retries = opts.log_retries and true or false
    end
    self.shown = false
    self.midline = false
    return self
end

-- Exposed for tests and for displays that reuse the wording.
M.duration = duration

return M
