-- agenthost.nvim: agenthost driven by Neovim's own event loop (examples/nvim/README.md).
--
--   local ah = require "agenthost"
--   local nvim = require "agenthost.nvim"
--   nvim.attach()                          -- once; idempotent
--   agent:start(question, { on_done = function(result) ... end })   -- returns at once
--
-- attach() watches ah.backend_fd() with a vim.uv / vim.loop poll handle. The fd is
-- level-triggered: readable while agenthost has work ready. When it fires, the poll is
-- stopped (so a still-readable fd does not make libuv call us again and again) and
-- ah.step() is queued with vim.schedule; after the step the poll is started again, and
-- fires at once if more work is ready. Everything agenthost calls back — on_event,
-- retry_on, tool bodies, on_done — runs inside that step, on Neovim's main loop outside
-- any fast event, so it may touch buffers and windows (no E5560). The timerfd inside the
-- backend fd covers agenthost's own timers (backoff waits, Retry-After, idle timeouts),
-- so no editor timer is needed.
--
-- detach() stops driving: runs in flight wait (nothing is cancelled) until attach() is
-- called again. Works on Neovim 0.7 (vim.loop) and later (vim.uv).
--
-- Also here, for displays: M.status() (a status-line text from the same events and in the
-- same words as the terminal display, scripts/status.lua) and M.answer() / M.buffer()
-- (an answer streamed from text_delta events, a cut stream's discarded bytes taken back,
-- so no byte is shown twice).
--
-- Invariants: at most one poll handle and at most one queued step exist; ah.step() is
-- never called re-entrantly (a step queued while one runs, e.g. from a hook that calls
-- vim.wait, is dropped: the fd is level-triggered and the outer step re-arms the poll);
-- nothing here raises out of a libuv callback.
--
-- Valid Lua 5.1 to 5.4 (Neovim runs LuaJIT).
local M = {}

local function uv()
    return vim.uv or vim.loop
end

local function notify(msg, level)
    -- scheduled: safe from any context, also a fast one
    vim.schedule(function()
        vim.notify(msg, level or vim.log.levels.WARN)
    end)
end

-- ---- driving ah.step() from the editor's loop ------------------------------------------

local S = {
    ah = nil,          -- the agenthost module
    attached = false,
    poll = nil,        -- the poll handle on ah.backend_fd()
    queued = false,    -- a step is queued with vim.schedule
    in_step = false,
    generation = 0,    -- bumped by detach: a step queued before it does nothing
    wakeups = 0,       -- poll callbacks
    steps = 0,         -- ah.step() calls
    errors = 0,
    step_ns = 0,       -- time spent in ah.step(), and the longest one
    step_max_ns = 0,
    after = {},        -- functions to call once the running step is over
    log_set = false,
}

local on_readable -- forward

local function rearm()
    if S.attached and S.poll and not S.queued then
        S.poll:start("r", on_readable)
    end
end

local function step(gen)
    S.queued = false
    if not S.attached or gen ~= S.generation then
        return
    end
    if S.in_step then
        return -- a hook waited in vim.wait: the outer step re-arms the poll
    end
    S.in_step = true
    S.steps = S.steps + 1
    local t0 = uv().hrtime()
    local ok, err = pcall(S.ah.step)
    local dt = uv().hrtime() - t0
    S.step_ns = S.step_ns + dt
    if dt > S.step_max_ns then
        S.step_max_ns = dt
    end
    S.in_step = false
    if not ok then
        S.errors = S.errors + 1
        notify("agenthost: ah.step: " .. tostring(err), vim.log.levels.ERROR)
    end
    -- what the step's hooks queued for after it (buffer writers: one write per step)
    local after = S.after
    if #after > 0 then
        S.after = {}
        for i = 1, #after do
            local fine, e = pcall(after[i])
            if not fine then
                notify("agenthost.nvim: " .. tostring(e), vim.log.levels.ERROR)
            end
        end
    end
    rearm()
end

-- fn() once the running step is over (inside a step driven by attach), else from
-- vim.schedule. Returns nothing.
local function after_step(fn)
    if S.in_step then
        S.after[#S.after + 1] = fn
    else
        vim.schedule(fn)
    end
end

-- libuv callback (a fast event): no API calls here, only queue the step.
on_readable = function(err)
    S.wakeups = S.wakeups + 1
    if S.poll then
        S.poll:stop()
    end
    if err then
        notify("agenthost: polling the backend fd: " .. tostring(err), vim.log.levels.ERROR)
    end
    if S.queued then
        return
    end
    S.queued = true
    local gen = S.generation
    vim.schedule(function()
        step(gen)
    end)
end

local LEVELS = { error = "ERROR", warning = "WARN", info = "INFO", debug = "DEBUG" }

-- The library's log lines go to stderr by default, which is the terminal Neovim draws on:
-- route them to vim.notify. Lines that restate an event (retries, give-ups) are left out,
-- the status line shows those (opts.log = "all" keeps them; false leaves the handler alone).
local function set_log(ah, mode)
    if mode == false or S.log_set then
        return
    end
    S.log_set = true
    ah.log_handler(function(level, message, event_type)
        if event_type and mode ~= "all" then
            return
        end
        notify("agenthost: " .. tostring(message),
            vim.log.levels[LEVELS[level] or "WARN"] or vim.log.levels.WARN)
    end, "warning")
end

-- attach([opts]) -> true. opts (all optional):
--   ah   the agenthost module (default require "agenthost")
--   log  true (default): library warnings and errors to vim.notify, except those that
--        restate an event; "all": those too; false: leave ah.log_handler alone
function M.attach(opts)
    opts = opts or {}
    local ah = opts.ah or S.ah or require("agenthost")
    S.ah = ah
    set_log(ah, opts.log)
    if S.attached then
        return true
    end
    if not S.poll then
        -- the same fd for the state's life: one handle, kept across detach/attach
        S.poll = assert(uv().new_poll(ah.backend_fd()))
    end
    S.attached = true
    S.queued = false
    -- step once now: work that became ready while detached is done, and the poll is armed
    on_readable(nil)
    return true
end

-- detach(): stop driving. Runs in flight are not cancelled; they wait for attach().
function M.detach()
    if not S.attached then
        return
    end
    S.attached = false
    S.generation = S.generation + 1
    S.queued = false
    if S.poll then
        S.poll:stop()
    end
end

function M.is_attached()
    return S.attached
end

-- Counters since the module was loaded: wakeups (poll callbacks), steps, errors (raised
-- out of ah.step()), step_ms (time inside ah.step(), hooks included), step_max_ms (the
-- longest one: what a step can hold the editor up).
function M.stats()
    return { wakeups = S.wakeups, steps = S.steps, errors = S.errors,
             step_ms = S.step_ns / 1e6, step_max_ms = S.step_max_ns / 1e6 }
end

-- ---- the status line ----------------------------------------------------------------------

-- Events after which the terminal display erases its transient line (scripts/status.lua).
local PROGRESS = {
    llm_call_start = true, text_delta = true, reasoning_delta = true,
    tool_call_start = true, tool_call_end = true, llm_call_end = true, run_end = true,
}

local NULL_STREAM = { write = function() end, flush = function() end }
local describer -- nil: not tried yet; false: agenthost.status cannot run here

-- Fallback when agenthost.status cannot run on this runtime: the event's kind and its
-- numbers, plainly.
local function fallback(ev)
    local t = ev.type
    if t == "llm_retry" then
        return "transient", string.format("llm_retry: %s, attempt %s/%s in %s ms",
            ev.status and ("HTTP " .. tostring(ev.status)) or "error",
            tostring((tonumber(ev.failed_attempt) or 0) + 1), tostring(ev.max_attempts),
            tostring(ev.wait_ms))
    elseif t == "llm_continuation" then
        return "transient", string.format("llm_continuation: %s, continuing (%s/%s)",
            tostring(ev.mode), tostring(ev.continuation), tostring(ev.max_continuations))
    elseif t == "llm_gave_up" then
        return "permanent", "llm_gave_up: " .. tostring(ev.reason)
    elseif t == "tool_call_start" then
        return "transient", "tool " .. tostring(ev.name)
    elseif t == "llm_paced" or t == "budget_exhausted" then
        return "transient", t
    end
    return nil
end

-- kind ("transient" | "permanent" | nil), text: the terminal display's words for ev
function M.describe(ev)
    if describer == nil then
        describer = false
        local ok, mod = pcall(require, "agenthost.status")
        if ok and type(mod) == "table" and type(mod.new) == "function" then
            local made, d = pcall(mod.new, { stream = NULL_STREAM, tty = false,
                unicode = true, prefix = "", log_retries = true })
            if made and type(d) == "table" and type(d.describe) == "function" then
                describer = d
            end
        end
    end
    if describer then
        local ok, kind, text = pcall(describer.describe, describer, ev)
        if ok then
            return kind, text
        end
        describer = false
    end
    return fallback(ev)
end

local Status = {}
Status.__index = Status

-- Feed one event. Returns true when the text changed.
function Status:update(ev)
    if type(ev) ~= "table" then
        return false
    end
    local t = ev.type
    if (t == "text_delta" or t == "reasoning_delta") and self.kind ~= "transient" then
        return false -- the hot path: nothing to clear, and deltas have no words
    end
    local before = self.line
    if PROGRESS[ev.type] and self.kind == "transient" then
        self.line, self.kind = "", nil
    end
    local kind, text = M.describe(ev)
    if kind then
        self.line = (text:gsub("[%c]", " "))
        self.kind = kind
    end
    if self.line ~= before then
        if self.on_change then
            self.on_change(self.line, self.kind)
        end
        return true
    end
    return false
end

-- The text to show now ("" when nothing is going on). A transient text (a retry, a wait,
-- a continuation, a tool running) goes once work moves on; a permanent one (a give-up)
-- stays until the next.
function Status:text()
    return self.line
end

-- M.status([opts]) -> a status-line feeder; opts.on_change(text, kind) on every change.
function M.status(opts)
    opts = opts or {}
    return setmetatable({ line = "", kind = nil, on_change = opts.on_change }, Status)
end

-- ---- a streamed answer -------------------------------------------------------------------

local Answer = {}
Answer.__index = Answer

-- Feed one event of the run. text_delta text is appended (on_append); when a cut stream
-- is continued, the text of the blocks it dropped is taken back (on_discard(nbytes)):
-- llm_continuation.discarded_bytes counts the bytes of every dropped block (tool call
-- arguments included), so what is taken back is the text of the content blocks past
-- committed_blocks, at most discarded_bytes. A continuation that re-attaches (mode
-- "resume") drops nothing.
function Answer:update(ev)
    if type(ev) ~= "table" then
        return
    end
    local t = ev.type
    if t == "llm_call_start" then
        -- a new answer (not the continuation of a cut one): a separator before its text
        if (tonumber(ev.continuation) or 0) == 0 then
            self.new_call = true
        end
    elseif t == "text_delta" or t == "reasoning_delta" then
        local text = type(ev.text) == "string" and ev.text or ""
        if t == "text_delta" and text == "" then
            return -- an empty text block is neither kept nor dropped
        end
        local call = self.calls[ev.llm_call]
        if not call then
            call = { blocks = {}, order = {} }
            self.calls[ev.llm_call] = call
        end
        local b = call.blocks[ev.block]
        if not b then
            b = { bytes = 0, text = t == "text_delta" }
            call.blocks[ev.block] = b
            call.order[#call.order + 1] = b
        end
        if t == "text_delta" then
            if self.new_call and self.separator and self.len > 0 then
                self:_append(self.separator) -- stays if this block is dropped
            end
            self.new_call = false
            b.bytes = b.bytes + #text
            self:_append(text)
        end
    elseif t == "llm_continuation" then
        local call = self.calls[ev.llm_call]
        local budget = tonumber(ev.discarded_bytes) or 0
        if not call or budget <= 0 then
            return
        end
        local committed = tonumber(ev.committed_blocks) or 0
        local drop = 0
        for i = #call.order, committed + 1, -1 do
            local b = call.order[i]
            if b.text then
                drop = drop + b.bytes
            end
            b.bytes = 0
        end
        if drop > budget then
            drop = budget
        end
        if drop > self.len then
            drop = self.len
        end
        if drop > 0 then
            local s = self:text()
            self.parts = { s:sub(1, #s - drop) }
            self.len = #s - drop
            if self.on_discard then
                self.on_discard(drop)
            end
        end
    end
end

function Answer:_append(text)
    local parts = self.parts
    parts[#parts + 1] = text
    self.len = self.len + #text
    if self.on_append then
        self.on_append(text)
    end
end

-- What is shown now.
function Answer:text()
    local parts = self.parts
    if #parts > 1 then
        self.parts = { table.concat(parts) }
    end
    return self.parts[1] or ""
end

-- Nothing to do for a plain tracker; a buffer writer writes what it holds (M.buffer).
function Answer:flush()
end

-- M.answer([opts]) -> an answer tracker. opts: on_append(text), on_discard(nbytes),
-- separator (text put between the answers of two LLM calls, e.g. before and after a
-- tool round; default none).
function M.answer(opts)
    opts = opts or {}
    return setmetatable({ parts = {}, len = 0, calls = {}, new_call = false,
        on_append = opts.on_append, on_discard = opts.on_discard,
        separator = opts.separator }, Answer)
end

-- ---- an answer streamed into a buffer ----------------------------------------------------

-- Position (0-based row, byte col) after `text` written from (row, col).
local function advance(row, col, text)
    local last, n = 1, 0
    while true do
        local i = text:find("\n", last, true)
        if not i then
            break
        end
        n = n + 1
        last = i + 1
    end
    if n == 0 then
        return row, col + #text
    end
    return row + n, #text - last + 1
end

local function split_lines(text)
    local parts, last = {}, 1
    while true do
        local i = text:find("\n", last, true)
        if not i then
            break
        end
        parts[#parts + 1] = text:sub(last, i - 1)
        last = i + 1
    end
    parts[#parts + 1] = text:sub(last)
    return parts
end

-- fn() with buf modifiable (a 'nomodifiable' buffer is made modifiable for the call)
local function with_modifiable(buf, fn)
    local bo = vim.bo[buf]
    local was = bo.modifiable
    if not was then
        bo.modifiable = true
    end
    local ok, err = pcall(fn)
    if not was then
        bo.modifiable = false
    end
    if not ok then
        error(err, 0)
    end
end

-- M.buffer(buf [, opts]) -> an answer tracker (M.answer) that writes into buf, from the
-- end of its text when it is made (the writer owns what follows: do not edit it while
-- the answer streams). Text is written once per step, not once per delta: what the
-- deltas of one ah.step() added goes in with one nvim_buf_set_text right after the step
-- (or from vim.schedule when something else than attach() drives the step);
-- writer:flush() writes it at once (before you add lines of your own below the answer,
-- e.g. in on_done). A 'nomodifiable' buffer is made modifiable for each write.
-- opts: separator (as M.answer), on_change() after each write (e.g. to scroll).
function M.buffer(buf, opts)
    opts = opts or {}
    local api = vim.api
    local n = api.nvim_buf_line_count(buf)
    local lastline = api.nvim_buf_get_lines(buf, n - 1, n, false)[1] or ""
    local row0, col0 = n - 1, #lastline
    local row, col = row0, col0 -- the end of what is in the buffer
    local pending, npending = {}, 0 -- appended, not yet written
    local scheduled = false
    local ans

    local function flush()
        if npending == 0 or not api.nvim_buf_is_valid(buf) then
            pending, npending = {}, 0
            return
        end
        local text = table.concat(pending)
        pending, npending = {}, 0
        with_modifiable(buf, function()
            api.nvim_buf_set_text(buf, row, col, row, col, split_lines(text))
        end)
        row, col = advance(row, col, text)
        if opts.on_change then
            opts.on_change()
        end
    end
    local function scheduled_flush()
        scheduled = false
        flush()
    end
    local function append(text)
        pending[#pending + 1] = text
        npending = npending + #text
        if not scheduled then
            scheduled = true
            after_step(scheduled_flush)
        end
    end
    local function discard(nbytes)
        if nbytes <= npending then -- all of it still pending
            local s = table.concat(pending)
            pending, npending = { s:sub(1, #s - nbytes) }, #s - nbytes
            return
        end
        pending, npending = {}, 0
        if not api.nvim_buf_is_valid(buf) then
            return
        end
        local r, c = advance(row0, col0, ans:text()) -- already shortened
        with_modifiable(buf, function()
            api.nvim_buf_set_text(buf, r, c, row, col, { "" })
        end)
        row, col = r, c
        if opts.on_change then
            opts.on_change()
        end
    end
    ans = M.answer{ on_append = append, on_discard = discard, separator = opts.separator }
    ans.flush = flush
    return ans
end

return M
