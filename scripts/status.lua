-- agenthost.status: the default terminal status display (docs/status-display.md).
--
--   local status = require("agenthost.status").new{ text = io.stdout }
--   agent = ah.agent{ ..., on_event = function(ev) status:update(ev) end }
--
-- On a terminal it keeps ONE transient line, rewritten in place with "\r" + erase-line
-- ("\27[K") and never ended with a newline, so retries never stack up in the transcript:
--   retrying LLM request after HTTP 503 (attempt 2/4 in 1.2s)   (then "in 1s", ...)
--   no data for 12s (cut at 5m)                   (a stream that has gone quiet)
--   stream cut — continuing (1/3), kept 2 blocks, discarded 1
--   stream cut — nothing kept, asking again (1/3)
--   stream cut — resuming (1/3)                 (re-attached to the same response)
--   retrying tool add after a transient error (attempt 2/3 in 200ms)
--   waiting for tool add…
-- It counts: a wait's line is redrawn with what is left, and a stream that has sent
-- nothing for 5 s says so, every second. The display has no clock of its own: the
-- library sends llm_waiting once a second while a call waits (a retry's or pacing's
-- wait, a request without an answer, a silent stream), and the display redraws from it.
-- The next progress event (llm_call_start, text/reasoning deltas, tool_call_start,
-- tool_call_end, llm_call_end, run_end) erases it. Giving up is not transient: it is
-- printed as a normal line, and so is a run that ends because the model refused
-- ("the model refused to answer (category: cyber); ...") or its context window is full. When the stream is not a terminal (a log file, a pipe, CI)
-- each retry, continuation, give-up and exhausted budget is one plain line prefixed
-- "agenthost: ", with no control characters at all — except that retries and give-ups
-- are left to the library's own warning lines when those already go to the same stderr.
--
-- With `text = io.stdout` the display also writes the answer as it streams (text_delta)
-- and takes back what a cut discards (llm_continuation.discarded_bytes: the last bytes
-- of that LLM call's text): on a terminal the discarded text is erased in place while it
-- is still on screen, else (scrolled away, or not a terminal) the seam is marked with a
-- line saying so. So no reader sees a byte twice as if it were said twice.
--
-- Invariants: at most one transient line exists; the display only ever writes to its
-- stream (and to `text`); text taken from events (error messages, tool names) is
-- stripped of control characters before it is written; an event it does not know is
-- ignored, never an error. Valid Lua 5.1 to 5.4 and LuaJIT.
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
-- without it (a plain lua with only this file on package.path) the shell's `test -t`
-- answers for stdout and stderr, whose descriptors a child process inherits.
local function isatty(stream)
    local ok, ah = pcall(require, "agenthost")
    if ok and type(ah) == "table" and type(ah.isatty) == "function" then
        local called, r = pcall(ah.isatty, stream)
        if called then return r == true end
    end
    local fd = (stream == io.stderr and 2) or (stream == io.stdout and 1) or nil
    if not fd then return false end
    local r = os.execute("test -t " .. fd)
    return r == true or r == 0 -- 5.2+: true; 5.1: the exit status
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

-- 90000 -> "90 s", 1500 -> "1.5 s", 250 -> "250 ms": a wait in words
local function words_ms(ms)
    ms = num(ms) or 0
    if ms < 1000 then return string.format("%d ms", math.floor(ms + 0.5)) end
    if ms % 1000 == 0 or ms >= 100000 then
        return string.format("%d s", math.floor(ms / 1000 + 0.5))
    end
    return string.format("%.1f s", ms / 1000)
end

-- A countdown or a count up, in whole seconds: 7000 -> "7s", 90000 -> "1m30s", 300000 ->
-- "5m".
local function secs(ms)
    local n = math.floor((num(ms) or 0) / 1000 + 0.5)
    if n < 60 then return n .. "s" end
    local m, r = math.floor(n / 60), n % 60
    return r == 0 and (m .. "m") or string.format("%dm%02ds", m, r)
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
    if kind == "stream" then
        local pt = err.provider_type
        if type(pt) == "string" and pt ~= "" then return "in-stream " .. clean(pt) end
        return "stream cut"
    end
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

-- Why a call gave up, in words, when its error's message does not already say it (the
-- library adds "not retried: ..." to the message of these give-ups).
local function give_up_why(ev)
    local r = ev.reason
    local err = type(ev.error) == "table" and ev.error or {}
    if r == "retry_after_too_long" then
        local hint = num(err.retry_after_ms)
        if hint and hint >= 0 then
            return "the server asked to wait " .. words_ms(hint) .. ", more than allowed"
        end
        return "the server asked for a longer wait than allowed"
    elseif r == "deadline" then
        return "the deadline was reached"
    elseif r == "retry_budget" then
        return "the retry budget is spent"
    end
    return nil
end

-- run_end: the outcomes that no give-up line has explained (the model's own stop
-- reasons: a refusal, a response that reached the context window). Everything else ends
-- without a line of its own (completed, cancelled), or its give-up said it (failed).
local function outcome_words(self, ev)
    local err = type(ev.error) == "table" and ev.error or {}
    if ev.outcome == "refused" then
        local cat = type(err.category) == "string" and err.category ~= "" and
            (" (category: " .. clean(err.category) .. ")") or ""
        return "permanent", "the model refused to answer" .. cat
            .. "; the run ends here and the refused reply is not kept in the history"
    elseif ev.outcome == "context_exceeded" and not (self.gave_up or {})[ev.run_id or ""] then
        return "permanent", "stopped: the conversation no longer fits the model's context "
            .. "window (shorten the history, or let on_context_exceeded do it)"
    end
    return nil
end

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

local function retry_words(ev, wait)
    local failed = num(ev.failed_attempt) or 0
    return string.format("retrying LLM request after %s (attempt %d/%d in %s%s)",
        what_failed(ev), failed + 1, num(ev.max_attempts) or 0, wait,
        ev.wait_source == "server" and ", server asked" or "")
end

local function paced_words(ev, wait)
    local which = ev.limit == "tokens_per_minute" and "token" or "request"
    return string.format("pacing: next LLM request in %s (%s rate limit)", wait, which)
end

-- llm_waiting, once a second: the wait's line with what is left, or the silence.
local function waiting_words(self, ev)
    local left = num(ev.remaining_ms) or -1
    local w = ev.wait
    if w == "retry" or w == "pace" then
        local last = self.waits and self.waits[w]
        if not last or last.llm_call ~= ev.llm_call or left < 0 then return nil end
        return "transient", (w == "retry" and retry_words or paced_words)(last, secs(left))
    end
    local waited = num(ev.waited_ms) or 0
    local text = (w == "response" and "no response for " or "no data for ") .. secs(waited)
    if left >= 0 then
        text = text .. string.format(" (%s at %s)", w == "response" and "time-out" or "cut",
            secs(waited + left))
    end
    return "transient", text
end

-- Returns kind ("transient" | "permanent" | nil), text.
function Status:describe(ev)
    local t = ev.type
    if t == "mcp_server" or t == "mcp_progress" then return mcp_words(self, ev) end
    if t == "llm_waiting" then return waiting_words(self, ev) end
    if t == "llm_retry" then
        return "transient", retry_words(ev, duration(ev.wait_ms))
    elseif t == "llm_continuation" and ev.mode == "resume" then
        -- Re-attached to the same response: nothing kept or dropped, nothing regenerated.
        return "transient", string.format("%s %s resuming (%d/%d)", interruption(ev.reason),
            self.dash, num(ev.continuation) or 0, num(ev.max_continuations) or 0)
    elseif t == "llm_continuation" and ev.mode == "regenerate" then
        -- Nothing was kept: the same request goes out again (its text is said again).
        return "transient", string.format("%s %s nothing kept, asking again (%d/%d)",
            interruption(ev.reason), self.dash, num(ev.continuation) or 0,
            num(ev.max_continuations) or 0)
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
        local err = type(ev.error) == "table" and ev.error or {}
        local msg = error_message(ev)
        if ev.reason == "spend_limit" or err.kind == "spend_limit" then
            -- the library's message says it in words (spend limit reached, not retried,
            -- until when) before the provider's own: the line is that message
            return "permanent", "gave up: " .. (msg or string.format(
                "the spend limit is reached (%s, not retried: requests fail until the "
                .. "limit is raised or the period resets)", what_failed(ev)))
        elseif err.kind == "context_exceeded" then
            return "permanent", "gave up: " .. (msg or string.format(
                "the request does not fit the model's context window (%s, not retried)",
                what_failed(ev)))
        end
        if ev.reason == "not_retryable" then
            text = string.format("gave up: %s is not retryable", what_failed(ev))
        else
            text = string.format("gave up after %s: %s", plural(attempts, "attempt"),
                what_failed(ev))
        end
        if msg then
            text = text .. " " .. self.dash .. " " .. msg
        else
            local why = give_up_why(ev)
            if why then text = text .. " (" .. why .. ")" end
        end
        return "permanent", text
    elseif t == "tool_retry" then
        local failed = num(ev.failed_attempt) or 0
        local err = type(ev.error) == "table" and ev.error or {}
        local kind = type(err.kind) == "string" and clean(err.kind) or "an"
        return "transient", string.format("retrying tool %s after %s error (attempt %d/%d in %s)",
            clean(ev.name), kind == "an" and "an" or ("a " .. kind), failed + 1,
            num(ev.max_attempts) or 0, duration(ev.wait_ms))
    elseif t == "llm_paced" then
        return "transient", paced_words(ev, duration(ev.wait_ms))
    elseif t == "tool_call_start" then
        return "transient", "waiting for tool " .. clean(ev.name) .. self.ellipsis
    elseif t == "run_end" then
        return outcome_words(self, ev)
    elseif t == "budget_exhausted" then
        local name = clean(ev.budget)
        local unit = BUDGET_UNITS[name] or name:gsub("_", " ")
        return "transient", string.format("budget exhausted (%d/%d %s)", num(ev.used) or 0,
            num(ev.limit) or 0, unit)
    end
    return nil
end

-- ---- columns ---------------------------------------------------------------------------

-- The code points of s as {cp, bytes} pairs (invalid UTF-8: one byte each, cp nil).
-- Plain Lua 5.1 has no utf8 library, so this decodes by hand.
local function chars(s)
    local out, i, n = {}, 1, #s
    while i <= n do
        local b = s:byte(i)
        local len, cp = 1, nil
        if b < 0x80 then
            cp = b
        elseif b >= 0xC2 and b <= 0xF4 then
            len = b >= 0xF0 and 4 or b >= 0xE0 and 3 or 2
            cp = b % (len == 2 and 0x20 or len == 3 and 0x10 or 0x08)
            for k = 1, len - 1 do
                local c = s:byte(i + k)
                if not c or c < 0x80 or c > 0xBF then cp = nil; len = 1; break end
                cp = cp * 64 + (c - 0x80)
            end
        end
        out[#out + 1] = { cp, s:sub(i, i + len - 1) }
        i = i + len
    end
    return out
end

-- Terminal columns of one code point: 2 for the wide East Asian ranges and most emoji,
-- 1 otherwise (combining marks are rare in these lines; counting them 1 only cuts early).
local function columns_of(cp)
    if not cp or cp < 0x1100 then return 1 end
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
    local cs = chars(text)
    local total = 0
    for _, c in ipairs(cs) do total = total + columns_of(c[1]) end
    if total <= width then return text end
    local used, out = 0, {}
    for _, c in ipairs(cs) do
        local w = columns_of(c[1])
        if used + w > width - 1 then break end
        used = used + w
        out[#out + 1] = c[2]
    end
    return table.concat(out) .. ellipsis
end

-- ---- output ----------------------------------------------------------------------------

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
        if got and type(cols) == "number" and cols > 1 then return math.floor(cols) end
    end
    local cols = num(os.getenv("COLUMNS"))
    if cols and cols > 1 then return math.floor(cols) end
    return 80
end

-- ---- the answer on screen (opts.text) ---------------------------------------------------
-- The display writes the answer's text itself and keeps a model of where it lies on the
-- terminal: the column where the current LLM call's text began (`origin`) and what was
-- written since (`log`: text pieces, and the line breaks the status line forced). From
-- it a take-back finds how many rows up the discarded text begins.

local MAX_ROWS_UP = 20 -- a take-back that starts further up may have scrolled away

function Status:text_write(s)
    if s == "" or not self.text then return end
    self.text:write(s)
    self.text:flush()
end

-- Move the model's cursor over s, from (row, col); returns the new (row, col), or nil
-- when s holds a character the model cannot place (a control character).
local function advance(s, row, col, width)
    for _, c in ipairs(chars(s)) do
        local cp = c[1]
        if cp == 10 then
            row, col = row + 1, 0
        elseif cp == 9 then
            if col >= width then row, col = row + 1, 0 end
            col = math.min(width, (math.floor(col / 8) + 1) * 8)
        elseif cp and (cp < 32 or cp == 127) then
            return nil
        else
            local w = columns_of(cp)
            if col + w > width then row, col = row + 1, 0 end
            col = col + w
        end
    end
    return row, col
end

-- The model after the log: the cursor's (row, col) relative to the origin's row.
function Status:text_layout(upto)
    local width = self:columns()
    local row, col = 0, self.origin
    for i = 1, upto or #self.log do
        local item = self.log[i]
        row, col = advance(item, row, col, width)
        if not row then return nil end
    end
    return row, col
end

-- The cursor is at the start of a line (after input the user typed, your own print):
-- write prefix there (a label such as "assistant> ") and track the answer from it.
function Status:start_answer(prefix)
    self.col = 0
    self.origin = 0
    self.log = {}
    self.counted = {}
    self.call = nil
    if prefix and prefix ~= "" then self:track(prefix, false) end
end

-- Write s (a line break, a label) to the text stream yourself: the display keeps track
-- of where the answer is. Never taken back.
function Status:write_text(s)
    if type(s) == "string" and s ~= "" then self:track(s, false) end
end

-- Write s to the text stream and into the model (`counted`: it is the call's text, which
-- a take-back may remove).
function Status:track(s, counted)
    self:text_write(s)
    self.log[#self.log + 1] = s
    if counted then self.counted[#self.log] = true end
    local width = self:columns()
    local _, col = advance(s, 0, self.col, width)
    self.col = col or 0
end

function Status:on_text(ev)
    local s = ev.text
    if type(s) ~= "string" or s == "" then return end
    if ev.llm_call ~= self.call then -- a new call's text: its own take-back window
        self.call = ev.llm_call
        self.origin = self.col
        self.log = {}
        self.counted = {}
    end
    self:track(s, true)
end

-- Take back the last n bytes of the call's text: erased in place when it is still on a
-- terminal screen, else the seam is marked.
function Status:take_back(ev)
    local n = math.floor(num(ev.discarded_bytes) or 0)
    if n <= 0 then return end
    if ev.llm_call ~= self.call then
        self:mark_seam(n)
        return
    end
    -- find the log item (and the byte in it) where the discarded text begins; the
    -- core counts whole characters, so the cut is never inside one
    local i, left = #self.log, n
    while i >= 1 do
        if self.counted[i] then
            if #self.log[i] >= left then break end
            left = left - #self.log[i]
        end
        i = i - 1
    end
    if i < 1 then -- more was discarded than this display showed: all of it goes
        i = 1
        while i <= #self.log and not self.counted[i] do i = i + 1 end
        if i > #self.log then
            self:mark_seam(n)
            return
        end
        left = #self.log[i]
    end
    local item = self.log[i]
    local keep = item:sub(1, #item - left)
    local r0, c0 = self:text_layout(i - 1)
    local r1 = self:text_layout()
    if r0 and r1 then r0, c0 = advance(keep, r0, c0, self:columns()) end
    if not (self.text_tty and r0 and r1) then
        self:mark_seam(n)
        return
    end
    if c0 >= self:columns() then r0, c0 = r0 + 1, 0 end -- the start is on the next row
    local up = r1 - r0
    if up < 0 or up > MAX_ROWS_UP then
        self:mark_seam(n)
        return
    end
    self:text_write("\r" .. (up > 0 and ("\27[" .. up .. "A") or "")
        .. (c0 > 0 and ("\27[" .. c0 .. "C") or "") .. "\27[J")
    for k = #self.log, i + 1, -1 do
        self.log[k] = nil
        self.counted[k] = nil
    end
    self.log[i] = keep
    self.col = c0
end

-- The discarded text cannot be erased: say where it ends, on a line of its own, so the
-- text that follows is read as said once.
function Status:mark_seam(n)
    local mark = string.format("[cut: the last %s above %s not kept]", plural(n, "byte"),
        n == 1 and "is" or "are")
    self:text_write((self.col > 0 and "\n" or "") .. mark .. "\n")
    self.col = 0
    self.origin = 0
    self.log = {}
    self.counted = {}
end

-- ---- the transient line ----------------------------------------------------------------

-- Erase the transient line, if one is showing; when it sat below the answer, the cursor
-- goes back to where the answer's text ends.
function Status:clear()
    if self.shown then
        local s = "\r\27[K"
        if self.below then
            local width = self:columns()
            if self.col > 0 and self.col < width then
                s = s .. "\27[A\27[" .. self.col .. "C"
            else
                -- the text filled its row: the next character starts this one anyway
                self.log[#self.log + 1] = "\n"
                self.col = 0
            end
            self.below = false
        end
        self:write(s)
        self.shown = false
        self.silence_shown = false
    end
end

-- Show text as the transient line (terminal) or log it as one line (otherwise).
function Status:transient(text)
    if not self.tty then
        self:write(self.prefix .. text .. "\n")
        return
    end
    if self.text and self.text_tty and self.col > 0 and not self.shown then
        self:write("\n") -- below the answer's last row, never over it
        self.below = true
    elseif self.midline then -- streamed text left the cursor mid-line: keep it on screen
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
        if self.text and self.text_tty and self.col > 0 then
            self:text_write("\n")
            self.col = 0
            self.log = {}
            self.counted = {}
            self.origin = 0
        elseif self.midline then
            self:write("\n")
            self.midline = false
        end
        self:write(text .. "\n")
    else
        self:write(self.prefix .. text .. "\n")
    end
end

-- Feed one event (the event table of docs/lua.md). Unknown events and missing fields are
-- tolerated.
function Status:update(ev)
    if type(ev) ~= "table" or self.ignores[ev.type] then return end
    if self.streaming and ev.type == "text_delta" and type(ev.text) == "string"
        and ev.text ~= "" then
        self.midline = ev.text:sub(-1) ~= "\n"
    end
    if PROGRESS[ev.type] then self:clear() end
    if ev.type == "llm_gave_up" then
        -- its line (or the library's warning) says why the run ends: run_end need not
        self.gave_up[ev.run_id or ""] = true
    end
    if ev.type == "llm_retry" or ev.type == "llm_paced" then
        -- what llm_waiting's countdown redraws (the events are the library's: copy)
        self.waits = self.waits or {}
        self.waits[ev.type == "llm_retry" and "retry" or "pace"] = {
            llm_call = ev.llm_call, failed_attempt = ev.failed_attempt,
            max_attempts = ev.max_attempts, wait_source = ev.wait_source,
            status = ev.status, error = ev.error, limit = ev.limit }
    elseif ev.type == "llm_waiting" then
        if not self.tty then
            return -- a count on a terminal; a log line per second would be noise
        end
        local silence = ev.wait == "stream" or ev.wait == "response"
        if silence and (num(ev.waited_ms) or 0) < 1000 then
            -- the silence is over (bytes came that made no event of their own)
            if self.silence_shown then self:clear() end
            return
        end
        local kind, text = self:describe(ev)
        if kind then
            self:transient(text)
            self.silence_shown = silence
        end
        return
    end
    if self.text then
        if ev.type == "text_delta" then
            self:on_text(ev)
        elseif ev.type == "llm_continuation" then
            self:clear() -- the take-back moves from the end of the answer's text
            self:take_back(ev)
        end
    end
    local kind, text = self:describe(ev)
    if ev.type == "run_end" then self.gave_up[ev.run_id or ""] = nil end
    if not self.tty and (ev.type == "tool_call_start" or
        (not self.log_retries and (LOGGED_BY_HOST[ev.type] or
            -- the library's retry warning is this fault's line: the same request again
            (ev.type == "llm_continuation" and ev.mode == "regenerate")))) then
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
--   text      a file (io.stdout) the display writes the answer to as it streams, taking
--             back what a cut discards (erased in place on a terminal, else marked);
--             status:start_answer(prefix) says the cursor is at a line start
--   text_tty  whether `text` is a terminal; nil = detect
--   streaming true when your on_event writes text deltas to the same terminal itself: a
--             transient line then starts on a fresh line instead of erasing that text
--             (use `text` instead to have the display write it and take it back)
--   log_retries  off a terminal, also write retry and give-up lines. Default: unless
--             they would repeat the library's own warnings, i.e. unless the stream is
--             io.stderr and the agenthost module is loaded (its log handler prints them)
-- The display an agent without on_event gets (ah.agent calls this): a new one on
-- stderr, except inside Neovim, where stderr is the screen the editor draws on (there
-- require("agenthost.nvim").status() shows the same words in a status line).
function M.default()
    if type(vim) == "table" and type(vim.api) == "table" then return nil end
    return M.new()
end

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
    self.text = opts.text
    if self.text then
        if opts.text_tty == nil then
            self.text_tty = isatty(self.text)
        else
            self.text_tty = opts.text_tty and true or false
        end
    end
    -- Events update() does nothing with on this output (a call's start and end only
    -- erase the transient line, drawn on a terminal alone): a host that calls update()
    -- from C may skip them (lua/proxy.c does, two Lua calls per request).
    self.ignores = self.tty and {} or { llm_call_start = true, llm_call_end = true }
    self.shown = false
    self.midline = false
    self.below = false
    self.gave_up = {} -- run ids whose give-up was told
    self.col, self.origin, self.log, self.counted = 0, 0, {}, {}
    return self
end

-- Exposed for tests and for displays that reuse the wording.
M.duration = duration

return M
