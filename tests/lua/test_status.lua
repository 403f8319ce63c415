-- test_status.lua - the status display's wording and terminal protocol (scripts/status.lua),
-- fed docs/lua.md event tables and writing into a fake stream, so every byte is checked.
-- Runs under `agenthost` (require finds agenthost.status) or a plain `lua5.4` (falls back
-- to the file next to this one). Prints "N passed, M failed"; exits 1 on a failure.
local here = (arg and arg[0] or ""):match("^(.*)/[^/]*$") or "."
local ok, status = pcall(require, "agenthost.status")
if not ok then status = dofile(here .. "/../../scripts/status.lua") end
-- utf8.len is 5.3+; ahtest.lua has the same in Lua for the other runtimes
local utf8_len = dofile(here .. "/ahtest.lua").utf8_len

local passed, failed = 0, 0
local function test(name, fn)
    local good, err = pcall(fn)
    if good then
        passed = passed + 1
        print("ok: " .. name)
    else
        failed = failed + 1
        print("FAIL: " .. name .. ": " .. tostring(err))
    end
end

local function eq(got, want, what)
    if got ~= want then
        error(string.format("%s: got %q, want %q", what or "value", tostring(got),
            tostring(want)), 2)
    end
end

-- A stream that records what is written.
local function sink()
    local s = { out = {} }
    function s:write(...)
        for _, v in ipairs({ ... }) do self.out[#self.out + 1] = v end
        return self
    end
    function s:flush() end
    function s:text() return table.concat(self.out) end
    function s:reset() self.out = {} end
    return s
end

local function display(opts)
    local s = sink()
    opts = opts or {}
    opts.stream = s
    if opts.tty == nil then opts.tty = true end
    if opts.unicode == nil and opts.tty then opts.unicode = true end
    if opts.width == nil then opts.width = 200 end
    return status.new(opts), s
end

local retry504 = { type = "llm_retry", llm_call = 1, failed_attempt = 1, max_attempts = 4,
    wait_ms = 1200, wait_source = "backoff", elapsed_ms = 300, status = 504,
    error = { kind = "http", status = 504, message = "gateway timeout" } }

test("a retry on a terminal is one transient line, no newline", function()
    local d, s = display()
    d:update(retry504)
    eq(s:text(), "\rretrying LLM request after HTTP 504 (attempt 2/4 in 1.2s)\27[K")
end)

test("the next progress event erases the transient line", function()
    for _, t in ipairs({ "llm_call_start", "text_delta", "run_end", "tool_call_end" }) do
        local d, s = display()
        d:update(retry504)
        s:reset()
        d:update({ type = t, text = "x", outcome = "completed" })
        eq(s:text(), "\r\27[K", t)
        s:reset()
        d:update({ type = t, text = "y", outcome = "completed" })
        eq(s:text(), "", t .. " twice erases nothing more")
    end
end)

test("a second retry replaces the first in place", function()
    local d, s = display()
    d:update(retry504)
    s:reset()
    local r = {}
    for k, v in pairs(retry504) do r[k] = v end
    r.failed_attempt, r.wait_ms = 2, 2500
    d:update(r)
    eq(s:text(), "\rretrying LLM request after HTTP 504 (attempt 3/4 in 2.5s)\27[K")
    eq(s:text():find("\n", 1, true), nil, "newline")
end)

test("a server hint says so; sub-second waits in ms", function()
    local d, s = display()
    d:update({ type = "llm_retry", failed_attempt = 2, max_attempts = 4, wait_ms = 2000,
        wait_source = "server", status = 529, error = { kind = "http", status = 529 } })
    eq(s:text(), "\rretrying LLM request after HTTP 529 (attempt 3/4 in 2.0s, server asked)\27[K")
    d, s = display()
    d:update({ type = "llm_retry", failed_attempt = 1, max_attempts = 3, wait_ms = 66,
        wait_source = "backoff", status = 503 })
    eq(s:text(), "\rretrying LLM request after HTTP 503 (attempt 2/3 in 66ms)\27[K")
end)

test("no status: the error kind is named", function()
    local d, s = display()
    d:update({ type = "llm_retry", failed_attempt = 1, max_attempts = 4, wait_ms = 400,
        wait_source = "backoff", status = nil, error = { kind = "connect",
        message = "Couldn't connect to server" } })
    eq(s:text(), "\rretrying LLM request after connect error (attempt 2/4 in 400ms)\27[K")
    d, s = display()
    d:update({ type = "llm_retry", failed_attempt = 1, max_attempts = 4, wait_ms = 400,
        wait_source = "backoff", error = { kind = "timeout" } })
    eq(s:text(), "\rretrying LLM request after timeout (attempt 2/4 in 400ms)\27[K")
end)

test("a JSON-null status (a non-number) counts as absent", function()
    local d, s = display()
    d:update({ type = "llm_retry", failed_attempt = 1, max_attempts = 2, wait_ms = 10,
        wait_source = "backoff", status = {}, error = { kind = "connect" } })
    eq(s:text(), "\rretrying LLM request after connect error (attempt 2/2 in 10ms)\27[K")
end)

test("a continuation says what was kept and discarded", function()
    local d, s = display()
    d:update({ type = "llm_continuation", llm_call = 2, continuation = 1,
        max_continuations = 3, committed_blocks = 2, discarded_blocks = 1,
        reason = "response stream broken: Transferred a partial file" })
    eq(s:text(), "\rstream cut — continuing (1/3), kept 2 blocks, discarded 1\27[K")
    d, s = display({ unicode = false })
    d:update({ type = "llm_continuation", continuation = 2, max_continuations = 3,
        committed_blocks = 1, discarded_blocks = 0, reason = "stream idle for 500 ms" })
    eq(s:text(), "\rstream stalled - continuing (2/3), kept 1 block\27[K")
    d, s = display()
    d:update({ type = "llm_continuation", continuation = 1, max_continuations = 3,
        mode = "resume", committed_blocks = 0, discarded_blocks = 0,
        reason = "response stream broken: Transferred a partial file" })
    eq(s:text(), "\rstream cut — resuming (1/3)\27[K")
end)

test("the prefill and prompt rungs both say continuing", function()
    for _, mode in ipairs({ "prefill", "prompt" }) do
        local d, s = display()
        d:update({ type = "llm_continuation", continuation = 1, max_continuations = 3,
            committed_blocks = 1, discarded_blocks = 0, mode = mode, reason = "cut" })
        eq(s:text(), "\rstream cut — continuing (1/3), kept 1 block\27[K")
    end
end)

test("giving up is a permanent line after erasing the transient one", function()
    local d, s = display()
    d:update(retry504)
    s:reset()
    d:update({ type = "llm_gave_up", attempts = 4, elapsed_ms = 9000, status = 503,
        reason = "attempts", error = { kind = "http", status = 503, message = "" } })
    eq(s:text(), "\r\27[Kgave up after 4 attempts: HTTP 503\n")
end)

test("give-up reasons are worded", function()
    local d, s = display()
    d:update({ type = "llm_gave_up", attempts = 1, status = 401, reason = "not_retryable",
        error = { kind = "http", status = 401, message = "invalid x-api-key" } })
    eq(s:text(), "gave up: HTTP 401 is not retryable — invalid x-api-key\n")
    d, s = display()
    d:update({ type = "llm_gave_up", attempts = 2, status = 429,
        reason = "retry_after_too_long", error = { kind = "http", status = 429 } })
    eq(s:text(), "gave up after 2 attempts: HTTP 429 "
        .. "(the server asked for a longer wait than allowed)\n")
    d, s = display()
    d:update({ type = "llm_gave_up", attempts = 1, reason = "deadline",
        error = { kind = "timeout" } })
    eq(s:text(), "gave up after 1 attempt: timeout (the deadline was reached)\n")
    d, s = display()
    d:update({ type = "llm_gave_up", attempts = 1, status = 429,
        reason = "retry_after_too_long",
        error = { kind = "http", status = 429, retry_after_ms = 90000 } })
    eq(s:text(), "gave up after 1 attempt: HTTP 429 "
        .. "(the server asked to wait 90 s, more than allowed)\n")
    -- the library's message says why itself: it is shown as it is
    d, s = display()
    d:update({ type = "llm_gave_up", attempts = 2, reason = "retry_budget",
        error = { kind = "stream", provider_type = "overloaded_error",
                  message = "Overloaded; not retried: the retry budget is spent" } })
    eq(s:text(), "gave up after 2 attempts: in-stream overloaded_error — "
        .. "Overloaded; not retried: the retry budget is spent\n")
end)

test("the outcomes of 2026: refused, context window, spend limit, in words", function()
    -- a refusal ends the run with its category; no give-up came before it
    local d, s = display()
    d:update({ type = "run_start", run_id = "r1" })
    d:update({ type = "run_end", run_id = "r1", outcome = "refused",
        error = { kind = "refused", message = "the model refused to answer (category cyber)",
                  category = "cyber" } })
    eq(s:text(), "the model refused to answer (category: cyber); the run ends here "
        .. "and the refused reply is not kept in the history\n")
    d, s = display({ tty = false })
    d:update({ type = "run_end", run_id = "r1", outcome = "refused",
        error = { kind = "refused", message = "the model refused to answer" } })
    eq(s:text(), "agenthost: the model refused to answer; the run ends here and the refused "
        .. "reply is not kept in the history\n")
    -- a response that stopped at the context window (no give-up: the model's stop reason)
    d, s = display({ tty = false })
    d:update({ type = "run_end", run_id = "r2", outcome = "context_exceeded",
        error = { kind = "context_exceeded",
                  message = "the response stopped at the model's context window" } })
    eq(s:text(), "agenthost: stopped: the conversation no longer fits the model's context "
        .. "window (shorten the history, or let on_context_exceeded do it)\n")
    -- the provider's 400: the give-up says it once, in the library's words, and run_end
    -- adds nothing
    local ctx = { kind = "context_exceeded", status = 400,
        message = "the request does not fit the model's context window, not retried: "
            .. "HTTP 400 invalid_request_error: prompt is too long: 212345 tokens > 200000 "
            .. "maximum" }
    d, s = display({ tty = false })
    d:update({ type = "llm_gave_up", run_id = "r3", attempts = 1, status = 400,
        reason = "not_retryable", error = ctx })
    d:update({ type = "run_end", run_id = "r3", outcome = "context_exceeded", error = ctx })
    eq(s:text(), "agenthost: gave up: " .. ctx.message .. "\n")
    -- ... and when the library's warning had the give-up, run_end still adds nothing
    d, s = display({ tty = false, log_retries = false })
    d:update({ type = "llm_gave_up", run_id = "r3", attempts = 1, status = 400,
        reason = "not_retryable", error = ctx })
    d:update({ type = "run_end", run_id = "r3", outcome = "context_exceeded", error = ctx })
    eq(s:text(), "")
    -- a spend limit: not retried, and the line says until when
    d, s = display()
    d:update({ type = "llm_gave_up", run_id = "r4", attempts = 1, status = 429,
        reason = "spend_limit", error = { kind = "spend_limit", status = 429,
            message = "spend limit reached, not retried (requests fail until the limit is "
                .. "raised or the period resets): HTTP 429 rate_limit_error: You have "
                .. "reached your specified workspace API usage limits." } })
    d:update({ type = "run_end", run_id = "r4", outcome = "failed" })
    eq(s:text(), "gave up: spend limit reached, not retried (requests fail until the "
        .. "limit is raised or the period resets): HTTP 429 rate_limit_error: You have "
        .. "reached your specified workspace API usage limits.\n")
    -- without a message, the display's own words
    d, s = display()
    d:update({ type = "llm_gave_up", attempts = 1, status = 429, reason = "spend_limit",
        error = { kind = "spend_limit", status = 429 } })
    eq(s:text(), "gave up: the spend limit is reached (HTTP 429, not retried: requests "
        .. "fail until the limit is raised or the period resets)\n")
    -- completed, cancelled and failed runs end without a line of their own
    d, s = display({ tty = false })
    for _, o in ipairs({ "completed", "cancelled", "failed", "max_steps" }) do
        d:update({ type = "run_end", run_id = "r5", outcome = o })
    end
    eq(s:text(), "")
end)

test("a tool wait is transient on a terminal and silent in a log", function()
    local d, s = display()
    d:update({ type = "tool_call_start", llm_call = 1, id = "t1", name = "add" })
    eq(s:text(), "\rwaiting for tool add…\27[K")
    s:reset()
    d:update({ type = "tool_call_end", id = "t1", name = "add", outcome = "ok" })
    eq(s:text(), "\r\27[K")
    d, s = display({ tty = false })
    d:update({ type = "tool_call_start", llm_call = 1, id = "t1", name = "add" })
    eq(s:text(), "")
end)

test("budget exhausted", function()
    local d, s = display()
    d:update({ type = "budget_exhausted", budget = "tool_calls", used = 4, limit = 4 })
    eq(s:text(), "\rbudget exhausted (4/4 tool calls)\27[K")
end)

test("not a terminal: plain prefixed lines, no control characters", function()
    local d, s = display({ tty = false })
    d:update({ type = "run_start", run_id = "r1" })
    d:update({ type = "llm_call_start", llm_call = 1, attempt = 1, continuation = 0 })
    d:update(retry504)
    d:update({ type = "text_delta", llm_call = 1, block = 0, text = "hi" })
    d:update({ type = "llm_continuation", continuation = 1, max_continuations = 3,
        committed_blocks = 0, discarded_blocks = 1, reason = "cut" })
    d:update({ type = "llm_gave_up", attempts = 4, status = 503, reason = "attempts" })
    d:update({ type = "run_end", outcome = "failed" })
    eq(s:text(), "agenthost: retrying LLM request after HTTP 504 (attempt 2/4 in 1.2s)\n"
        .. "agenthost: stream cut - continuing (1/3), kept 0 blocks, discarded 1\n"
        .. "agenthost: gave up after 4 attempts: HTTP 503\n")
    eq(s:text():find("[\r\27]"), nil, "control bytes")
end)

test("off a terminal, log_retries = false leaves retries and give-ups to the log", function()
    local d, s = display({ tty = false, log_retries = false })
    d:update(retry504)
    d:update({ type = "llm_gave_up", attempts = 4, status = 503, reason = "attempts" })
    eq(s:text(), "", "retry and give-up")
    d:update({ type = "llm_continuation", continuation = 1, max_continuations = 3,
        committed_blocks = 1, discarded_blocks = 0, reason = "cut" })
    eq(s:text(), "agenthost: stream cut - continuing (1/3), kept 1 block\n")
    -- on a terminal the option does not apply: the line is the display's job there
    d, s = display({ log_retries = false })
    d:update(retry504)
    eq(s:text(), "\rretrying LLM request after HTTP 504 (attempt 2/4 in 1.2s)\27[K")
end)

test("log_retries defaults: off only for stderr with the agenthost module loaded", function()
    eq(status.new({ stream = io.stderr, tty = false }).log_retries,
        package.loaded.agenthost == nil, "stderr")
    eq(display({ tty = false }).log_retries, true, "another stream")
    eq(status.new({ stream = io.stderr, tty = false, log_retries = true }).log_retries, true,
        "explicit")
end)

test("control characters in event text never reach the stream", function()
    local d, s = display({ tty = false })
    d:update({ type = "llm_gave_up", attempts = 1, reason = "not_retryable", status = 400,
        error = { kind = "http", message = "bad\r\27[2Jthing\nhere" } })
    eq(s:text(), "agenthost: gave up: HTTP 400 is not retryable - bad  [2Jthing here\n")
end)

test("a long transient line is cut to the terminal width", function()
    local d, s = display({ width = 30 })
    d:update(retry504)
    local line = s:text():match("^\r(.*)\27%[K$")
    eq(utf8_len(line), 29, "visible length")
    eq(line, "retrying LLM request after H…")
end)

test("wide characters count two columns when the line is cut", function()
    local d, s = display({ width = 21 })
    -- a tool named in CJK: each character takes two columns on a terminal
    d:update({ type = "tool_call_start", llm_call = 1, id = "t", name = "計算機計算機計算機" })
    local line = s:text():match("^\r(.*)\27%[K$")
    -- "waiting for tool " is 17 columns; 20 columns fit: one wide char (2) + "…" (1)
    eq(line, "waiting for tool 計…")
end)

test("streaming text left mid-line is kept: the status starts on a new line", function()
    local d, s = display({ streaming = true })
    d:update({ type = "text_delta", llm_call = 1, block = 0, text = "The answer" })
    d:update(retry504)
    eq(s:text(), "\n\rretrying LLM request after HTTP 504 (attempt 2/4 in 1.2s)\27[K")
    d, s = display({ streaming = true })
    d:update({ type = "text_delta", llm_call = 1, block = 0, text = "done\n" })
    d:update(retry504)
    eq(s:text():sub(1, 1), "\r", "no extra newline after a complete line")
end)

test("a continuation that kept nothing says it asks again", function()
    local d, s = display()
    d:update({ type = "llm_continuation", llm_call = 1, continuation = 1,
        max_continuations = 3, committed_blocks = 0, discarded_blocks = 1,
        discarded_bytes = 9, mode = "regenerate", reason = "response stream broken" })
    eq(s:text(), "\rstream cut — nothing kept, asking again (1/3)\27[K")
    -- off a terminal the library's retry warning is this fault's line
    d, s = display({ tty = false, log_retries = false })
    d:update({ type = "llm_continuation", continuation = 1, max_continuations = 3,
        committed_blocks = 0, mode = "regenerate", reason = "cut" })
    eq(s:text(), "")
    d, s = display({ tty = false })
    d:update({ type = "llm_continuation", continuation = 1, max_continuations = 3,
        committed_blocks = 0, mode = "regenerate", reason = "cut" })
    eq(s:text(), "agenthost: stream cut - nothing kept, asking again (1/3)\n")
end)

test("a tool retry is a transient line", function()
    local d, s = display()
    d:update({ type = "tool_retry", id = "t1", name = "charge", failed_attempt = 1,
        max_attempts = 3, wait_ms = 200, error = { kind = "transient", message = "busy" } })
    eq(s:text(), "\rretrying tool charge after a transient error (attempt 2/3 in 200ms)\27[K")
    d, s = display({ tty = false })
    d:update({ type = "tool_retry", name = "charge", failed_attempt = 2, max_attempts = 3,
        wait_ms = 1500 })
    eq(s:text(), "agenthost: retrying tool charge after an error (attempt 3/3 in 1.5s)\n")
end)

-- The display writes the answer too (opts.text): one sink for both streams shows the
-- bytes in the order a terminal gets them.
local function answer_display(opts)
    local s = sink()
    opts = opts or {}
    opts.stream = s
    opts.text = s
    if opts.tty == nil then opts.tty = true end
    if opts.text_tty == nil then opts.text_tty = opts.tty end
    opts.unicode = true
    opts.width = opts.width or 80
    return status.new(opts), s
end

local function delta(call, text) return { type = "text_delta", llm_call = call, block = 0, text = text } end
local function cut(call, bytes, mode)
    return { type = "llm_continuation", llm_call = call, continuation = 1,
        max_continuations = 3, committed_blocks = mode == "regenerate" and 0 or 1,
        discarded_blocks = 1, discarded_bytes = bytes, mode = mode or "regenerate",
        reason = "cut" }
end

test("text: a cut's discarded text is erased in place on the same row", function()
    local d, s = answer_display()
    d:update(delta(1, "Hello "))
    d:update(delta(1, "world"))
    eq(s:text(), "Hello world")
    s:reset()
    d:update(cut(1, 5, "prompt"))
    -- back to column 6, erase to the end of the screen, then the status line below
    eq(s:text(), "\r\27[6C\27[J\n\rstream cut — continuing (1/3), kept 1 block, discarded 1\27[K")
    s:reset()
    d:update({ type = "llm_call_start", llm_call = 2, attempt = 1, continuation = 1 })
    eq(s:text(), "\r\27[K\27[A\27[6C", "the status line goes, the cursor returns")
    s:reset()
    d:update(delta(2, "there"))
    eq(s:text(), "there")
end)

test("text: a take-back across wrapped rows and after a label", function()
    local d, s = answer_display({ width = 10 })
    d:start_answer("> ")
    d:update(delta(1, "abcdefgh"))   -- fills the row: "> abcdefgh"
    d:update(delta(1, "ijk"))        -- the next row
    s:reset()
    d:update(cut(1, 5))              -- "ghijk": back to column 8 of the first row
    eq(s:text():sub(1, 12), "\r\27[1A\27[8C\27[J")
    s:reset()
    d, s = answer_display({ width = 10 })
    d:update(delta(1, "line one\nline two"))
    s:reset()
    d:update(cut(1, 17))             -- all of it: back to the origin, one row up
    eq(s:text():sub(1, 8), "\r\27[1A\27[J")
end)

test("text: off a terminal, or scrolled away, the seam is marked", function()
    local d, s = answer_display({ tty = false })
    d:update(delta(1, "Hello world"))
    s:reset()
    d:update(cut(1, 5))
    eq(s:text(), "\n[cut: the last 5 bytes above are not kept]\n"
        .. "agenthost: stream cut — nothing kept, asking again (1/3)\n")
    d, s = answer_display({ width = 10 })
    d:update(delta(1, string.rep("0123456789", 30)))
    s:reset()
    d:update(cut(1, 300))            -- 30 rows up: not on screen any more
    eq(s:text():find("\n[cut: the last 300 bytes above are not kept]\n", 1, true), 1)
end)

test("text: a status line never covers the answer's row, and gives it back", function()
    local d, s = answer_display()
    d:start_answer("assistant> ")
    s:reset()
    d:update(retry504)              -- nothing streamed yet: below the label's row
    eq(s:text(), "\n\rretrying LLM request after HTTP 504 (attempt 2/4 in 1.2s)\27[K")
    s:reset()
    d:update({ type = "llm_call_start", llm_call = 1, attempt = 2, continuation = 0 })
    eq(s:text(), "\r\27[K\27[A\27[11C")
end)

local function waiting(wait, waited, remaining, call)
    return { type = "llm_waiting", llm_call = call or 1, wait = wait, waited_ms = waited,
             remaining_ms = remaining }
end

test("a retry's wait counts down in place, once a second", function()
    local d, s = display()
    d:update(retry504)
    s:reset()
    d:update(waiting("retry", 200, 1000))
    eq(s:text(), "\rretrying LLM request after HTTP 504 (attempt 2/4 in 1s)\27[K")
    s:reset()
    local hinted = { type = "llm_retry", llm_call = 1, failed_attempt = 2, max_attempts = 4,
        wait_ms = 7300, wait_source = "server", status = 529,
        error = { kind = "http", status = 529, message = "overloaded" } }
    d:update(hinted)
    d:update(waiting("retry", 300, 7000))
    d:update(waiting("retry", 1300, 6000))
    eq(s:text(), "\rretrying LLM request after HTTP 529 (attempt 3/4 in 7.3s, server asked)\27[K"
        .. "\rretrying LLM request after HTTP 529 (attempt 3/4 in 7s, server asked)\27[K"
        .. "\rretrying LLM request after HTTP 529 (attempt 3/4 in 6s, server asked)\27[K")
    s:reset()
    d:update(waiting("retry", 300, 5000, 2)) -- another call's wait: not this line's
    eq(s:text(), "", "a pulse without its retry")
    d:update({ type = "llm_paced", llm_call = 1, wait_ms = 2500, limit = "tokens_per_minute" })
    s:reset()
    d:update(waiting("pace", 500, 2000))
    eq(s:text(), "\rpacing: next LLM request in 2s (token rate limit)\27[K")
end)

test("a silent stream says so, counting, and the next delta erases it", function()
    local d, s = display()
    d:update(waiting("stream", 5000, 295000))
    eq(s:text(), "\rno data for 5s (cut at 5m)\27[K")
    s:reset()
    d:update(waiting("stream", 72000, -1))
    eq(s:text(), "\rno data for 1m12s\27[K")
    s:reset()
    d:update(waiting("response", 6000, 24000))
    eq(s:text(), "\rno response for 6s (time-out at 30s)\27[K")
    s:reset()
    d:update({ type = "text_delta", llm_call = 1, block = 0, text = "x" })
    eq(s:text(), "\r\27[K")
    -- bytes that make no event (a tool call's arguments) end a silence too: the call
    -- says so (waited_ms 0), and the line goes; a retry's line does not
    d:update(waiting("stream", 5000, 295000))
    s:reset()
    d:update(waiting("stream", 0, -1))
    eq(s:text(), "\r\27[K", "the silence is over")
    d:update(retry504)
    s:reset()
    d:update(waiting("stream", 0, -1))
    eq(s:text(), "", "a retry's line stays")
end)

test("a silence mid-answer shows below the answer's text, and gives its place back", function()
    local d, s = answer_display()
    d:start_answer("assistant> ")
    d:update(delta(1, "Hello"))
    s:reset()
    d:update(waiting("stream", 5000, 295000))
    d:update(waiting("stream", 6000, 294000))
    eq(s:text(), "\n\rno data for 5s (cut at 5m)\27[K\rno data for 6s (cut at 5m)\27[K")
    s:reset()
    d:update(delta(1, " world"))
    eq(s:text(), "\r\27[K\27[A\27[16C world")
end)

test("off a terminal, llm_waiting writes nothing", function()
    local d, s = display({ tty = false, log_retries = true })
    d:update(retry504)
    s:reset()
    d:update(waiting("retry", 200, 1000))
    d:update(waiting("stream", 5000, 295000))
    eq(s:text(), "")
end)

test("ignores: the events a host may skip change nothing on this output", function()
    local seq = { retry504, { type = "llm_call_start", llm_call = 2 },
                  { type = "text_delta", text = "hi" }, { type = "llm_call_end", llm_call = 2 },
                  { type = "run_end", run_id = "r", outcome = "completed" } }
    for _, tty in ipairs({ false, true }) do
        local d, s = display({ tty = tty, log_retries = true })
        local skips = d.ignores
        d.ignores = {} -- every event through update()'s own handling
        for _, ev in ipairs(seq) do d:update(ev) end
        local d2, s2 = display({ tty = tty, log_retries = true })
        for _, ev in ipairs(seq) do
            if not skips[ev.type] then d2:update(ev) end
        end
        eq(s2:text(), s:text(), "tty " .. tostring(tty))
    end
    eq(display({ tty = false }).ignores.llm_call_start, true, "off a terminal")
    eq(display({ tty = false }).ignores.llm_call_end, true, "off a terminal")
    eq(next(display({ tty = true }).ignores), nil, "on a terminal")
end)

test("unknown events, missing fields and non-tables are ignored", function()
    local d, s = display()
    d:update({ type = "something_new", x = 1 })
    d:update(nil)
    d:update("llm_retry")
    eq(s:text(), "")
    d:update({ type = "llm_retry" })
    eq(s:text(), "\rretrying LLM request after an error (attempt 1/0 in 0ms)\27[K")
end)

test("tty = nil detects: a regular file is not a terminal", function()
    local path = os.tmpname()
    local f = assert(io.open(path, "w"))
    local d = status.new({ stream = f })
    eq(d.tty, false, "tty")
    d:update(retry504)
    f:close()
    local text = assert(io.open(path)):read("*a")
    os.remove(path)
    eq(text, "agenthost: retrying LLM request after HTTP 504 (attempt 2/4 in 1.2s)\n")
end)

-- ah.isatty comes from the agenthost module (lua/tty.c); a plain lua5.4 without the
-- module tests the fallback above instead.
local has_ah, ah = pcall(require, "agenthost")
if has_ah and type(ah) == "table" and ah.isatty then
    test("ah.isatty: a file is not a terminal, a closed file neither, misuse raises", function()
        local path = os.tmpname()
        local f = assert(io.open(path, "w"))
        eq(ah.isatty(f), false, "open file")
        f:close()
        eq(ah.isatty(f), false, "closed file")
        os.remove(path)
        eq(pcall(ah.isatty, "stderr"), false, "a string is refused")
        eq(type(ah.isatty(io.stderr)), "boolean", "stderr")
    end)
end

print(string.format("%d passed, %d failed", passed, failed))
if failed > 0 then os.exit(1) end
