-- test_attach.lua - agenthost inside Neovim (scripts/nvim.lua, examples/nvim/), headless:
--
--   AH_BUILD_DIR=build nvim --headless -u NONE -c "luafile tests/nvim/test_attach.lua"
--
-- Exits 0 when every check holds, 1 (cquit) on the first that does not, 3 when the
-- watchdog fires. Works on Neovim 0.7 (vim.loop, LuaJIT) and later. Nothing here
-- depends on timing: every wait is "until this holds" with a generous bound.
--
-- 1. attach() drives several agents concurrently through a 503, a 529 with Retry-After,
--    a cut mid-text and a cut mid-tool-call; on_event writes the stream into buffers,
--    on_done writes each answer into a buffer and starts one more run; exact texts, one
--    tool run, no hook error.
-- 2. A run started while attached and idle, from outside any step, completes (the fd
--    becomes readable for it).
-- 3. detach() stops driving (a run started meanwhile does not progress, no step runs);
--    attach() resumes it.
-- 4. The example plugin: :AgentAsk streams into its scratch buffer; :AgentCancel and
--    <C-c> end a stalled run as cancelled.
local uv = vim.uv or vim.loop
local api = vim.api

local here = debug.getinfo(1, "S").source:gsub("^@", "")
local src = vim.fn.fnamemodify(here, ":p:h:h:h")
local build = os.getenv("AH_BUILD_DIR") or (src .. "/build")
build = vim.fn.fnamemodify(build, ":p"):gsub("/$", "")
package.cpath = build .. "/lua-5.1/?.so;" .. package.cpath
package.path = build .. "/lua/?.lua;" .. build .. "/lua/?/init.lua;" .. package.path

local watchdog = uv.new_timer()
watchdog:start(150000, 0, function()
    io.stderr:write("test_attach: watchdog: the test did not end in 150 s\n")
    os.exit(3)
end)

local function check(cond, what)
    if not cond then
        error("FAILED: " .. what, 2)
    end
    io.stdout:write("ok - ", what, "\n")
end
local function eq(got, want, what)
    if got ~= want then
        error(string.format("FAILED: %s\n  got:  %q\n  want: %q", what, tostring(got),
            tostring(want)), 2)
    end
    io.stdout:write("ok - ", what, "\n")
end
local function wait_for(what, cond, ms)
    local ok = vim.wait(ms or 30000, cond, 5)
    if not ok then
        error("FAILED: timed out waiting for " .. what, 2)
    end
end
local function buf_text(buf)
    return table.concat(api.nvim_buf_get_lines(buf, 0, -1, false), "\n")
end
local function reply(q)
    return 'You said: "' .. q .. '". This is a deterministic reply from the agenthost mock provider.'
end

local function main()
    local ah = require("agenthost")
    local nvim = require("agenthost.nvim")

    -- every library warning (a failing hook, an E5560 inside one) is a failure
    local warnings = {}
    check(nvim.attach() == true, "attach() returns true")
    check(nvim.attach() == true and nvim.is_attached(), "attach() again is a no-op")
    ah.log_handler(function(level, message, event_type)
        if not event_type then
            warnings[#warnings + 1] = level .. ": " .. tostring(message)
        end
    end, "warning")

    -- ---- 0. the answer writer on events made here ------------------------------------
    do
        local buf = api.nvim_create_buf(false, true)
        api.nvim_buf_set_lines(buf, 0, -1, false, { "> q", "" })
        vim.bo[buf].modifiable = false
        local w = nvim.buffer(buf, { separator = "\n\n" })
        local function delta(call, block, text)
            w:update({ type = "text_delta", llm_call = call, block = block, text = text })
        end
        local function cont(call, committed, dropped, bytes)
            w:update({ type = "llm_continuation", llm_call = call, committed_blocks = committed,
                       discarded_blocks = dropped, discarded_bytes = bytes, mode = "prompt" })
        end
        w:update({ type = "llm_call_start", llm_call = 1, continuation = 0 })
        delta(1, 0, "Hello")
        delta(1, 0, " wo\nrl")
        w:flush()
        eq(buf_text(buf), "> q\nHello wo\nrl", "writer: text written on flush")
        cont(1, 0, 1, 11) -- the open block, already in the buffer, is dropped
        w:flush()
        eq(buf_text(buf), "> q\n", "writer: a dropped block taken back from the buffer")
        w:update({ type = "llm_call_start", llm_call = 2, continuation = 1 })
        delta(2, 0, "Hello")
        delta(2, 0, " world.")
        cont(2, 0, 1, 12) -- dropped before it was written
        delta(2, 1, "x") -- (never in one call; only the bookkeeping matters)
        w:update({ type = "llm_call_start", llm_call = 3, continuation = 2 })
        delta(3, 0, "Hello world.")
        delta(3, 1, " Calling.")
        w:flush()
        eq(buf_text(buf), "> q\nxHello world. Calling.", "writer: pending text taken back")
        -- both text blocks kept, the tool call's 8 argument bytes dropped: nothing shown goes
        cont(3, 2, 1, 8)
        w:flush()
        eq(buf_text(buf), "> q\nxHello world. Calling.", "writer: a dropped tool call takes no text")
        w:update({ type = "llm_call_start", llm_call = 4, continuation = 0 })
        delta(4, 0, "Done.")
        w:flush()
        eq(buf_text(buf), "> q\nxHello world. Calling.\n\nDone.", "writer: the separator")
        eq(w:text(), "xHello world. Calling.\n\nDone.", "writer: its text")
        check(not vim.bo[buf].modifiable, "writer: the buffer stays nomodifiable")
        api.nvim_buf_delete(buf, { force = true })
    end

    -- ---- 1. four agents through four faults, concurrently -----------------------------
    local tool_runs = 0
    local add = {
        description = "Add two integers.",
        schema = { type = "object", required = { "a", "b" },
                   properties = { a = { type = "integer" }, b = { type = "integer" } } },
        run = function(args)
            tool_runs = tool_runs + 1
            return tostring(args.a + args.b)
        end,
    }
    local cases = {
        { name = "A", plan = { { status = 503 } }, retries = 1 },
        { name = "B", plan = { { status = 529, headers = { ["Retry-After"] = "1" } } },
          retries = 1, server = true },
        -- a cut inside the only text block keeps nothing: the request goes again, a
        -- continuation (mode "regenerate") that is also a retry
        { name = "C", plan = { { cut_after_events = 5 } }, continuations = 1, retries = 1 },
        -- 12 events: the text block closed, the tool call begun (one argument fragment)
        { name = "D", plan = { { cut_after_events = 12 } }, continuations = 1, tools = true,
          question = "What is 42 + 42?", want = "The tool returned: 84",
          stream = "I will call add now.\n\nThe tool returned: 84" },
    }
    local mocks = {}
    local done, extra = {}, nil
    local log_buf = api.nvim_create_buf(false, true)
    local tool_ends = 0
    for i, c in ipairs(cases) do
        c.question = c.question or ("agent " .. c.name)
        c.want = c.want or reply(c.question)
        c.stream = c.stream or c.want
        mocks[i] = ah.mock{ plan = c.plan }
        c.stream_buf = api.nvim_create_buf(false, true)
        c.result_buf = api.nvim_create_buf(false, true)
        c.answer = nvim.buffer(c.stream_buf, { separator = "\n\n" })
        c.seen = {}
        c.status = nvim.status{ on_change = function(text)
            if text ~= "" then c.seen[#c.seen + 1] = text end
        end }
        c.agent = ah.agent{
            client = ah.client{ provider = "anthropic", model = "mock-model",
                                base_url = mocks[i].url },
            tools = c.tools and { add = add } or nil,
            policy = { max_attempts = 4, base_ms = 50, cap_ms = 200 },
            on_event = function(ev)
                c.answer:update(ev)
                c.status:update(ev)
                -- a hook that touches a buffer: fails with E5560 in a fast event
                api.nvim_buf_set_lines(log_buf, -1, -1, false, { c.name .. " " .. ev.type })
                if ev.type == "tool_call_end" then tool_ends = tool_ends + 1 end
            end,
        }
    end
    -- an agent of its own for the runs below (its events are nobody's stream)
    local plain = ah.agent{ client = ah.client{ provider = "anthropic", model = "mock-model",
        base_url = mocks[1].url }, on_event = false }
    for i, c in ipairs(cases) do
        c.run = c.agent:start(c.question, { on_done = function(r)
            c.result = r
            api.nvim_buf_set_lines(c.result_buf, 0, -1, false, vim.split(r.text or "", "\n"))
            done[#done + 1] = c.name
            if c.name == "A" then
                -- on_done runs outside the loop: it may start another run
                extra = { run = plain:start("one more", { on_done = function(r2)
                    extra.result = r2
                end }) }
            end
        end })
        check(type(c.run) == "userdata" and c.run.id ~= nil, c.name .. ": agent:start returns a handle at once")
    end
    wait_for("the four runs", function() return #done == 4 end)
    for _, c in ipairs(cases) do
        local r = c.result
        eq(r.outcome, "completed", c.name .. ": completed")
        eq(r.text, c.want, c.name .. ": the answer")
        eq(buf_text(c.result_buf), c.want, c.name .. ": on_done wrote the answer into a buffer")
        eq(buf_text(c.stream_buf), c.stream, c.name .. ": the streamed text, no byte twice")
        eq(c.answer:text(), c.stream, c.name .. ": the answer tracker's text")
        eq(r.stats.retries, c.retries or 0, c.name .. ": retries")
        eq(r.stats.continuations, c.continuations or 0, c.name .. ": continuations")
        eq(c.status:text(), "", c.name .. ": the status line is clear at the end")
        check(#c.seen >= 1, c.name .. ": the status line showed the fault")
    end
    -- the status line says what the terminal display says (scripts/status.lua)
    local retry = { type = "llm_retry", failed_attempt = 1, max_attempts = 4, wait_ms = 50,
                    status = 503, wait_source = "backoff" }
    local ok_mod, status_mod = pcall(require, "agenthost.status")
    local made, d = false, nil
    if ok_mod then
        made, d = pcall(status_mod.new, { stream = { write = function() end,
            flush = function() end }, tty = false, unicode = true })
    end
    if made and pcall(d.describe, d, retry) then
        local _, words = d:describe(retry)
        local _, ours = nvim.describe(retry)
        eq(ours, words, "the status text is agenthost.status's wording")
        check(cases[1].seen[1]:find("^retrying LLM request after HTTP 503") ~= nil,
            "A: status line: " .. cases[1].seen[1])
        check(cases[2].seen[1]:find("after HTTP 529", 1, true) and
            cases[2].seen[1]:find("server asked", 1, true), "B: status line: " .. cases[2].seen[1])
        check(cases[3].seen[1]:find("nothing kept, asking again (1/3)", 1, true) ~= nil,
            "C: status line: " .. cases[3].seen[1])
    else
        io.stdout:write("# agenthost.status does not run on this Lua (", _VERSION,
            "): the status line uses agenthost.nvim's fallback wording\n")
        check(cases[1].seen[1]:find("503", 1, true) ~= nil, "A: status line: " .. cases[1].seen[1])
        check(cases[2].seen[1]:find("529", 1, true) ~= nil, "B: status line: " .. cases[2].seen[1])
        check(cases[3].seen[1]:find("continu", 1, true) ~= nil, "C: status line: " .. cases[3].seen[1])
    end
    eq(tool_runs, 1, "D: the tool body ran exactly once")
    eq(tool_ends, 1, "D: one tool_call_end")
    eq(cases[4].result.stats.tool_calls, 1, "D: stats.tool_calls")
    check(api.nvim_buf_line_count(log_buf) > 20, "on_event wrote every event into a buffer")
    wait_for("the run on_done started", function() return extra and extra.result end)
    eq(extra.result.text, reply("one more"), "a run started from on_done completes")

    -- ---- 2. a run started while attached and idle -----------------------------------
    vim.wait(50) -- let the last steps settle: nothing is left to do
    local idle = {}
    local g = plain
    g:start("from idle", { on_done = function(r) idle.result = r end })
    wait_for("a run started while idle", function() return idle.result end, 10000)
    eq(idle.result.text, reply("from idle"), "a run started while idle completes")

    -- ---- 3. detach stops, attach resumes -------------------------------------------
    nvim.detach()
    check(not nvim.is_attached(), "detach()")
    nvim.detach() -- twice: a no-op
    local steps = nvim.stats().steps
    local det = {}
    g:start("while detached", { on_done = function(r) det.result = r end })
    vim.wait(300)
    check(det.result == nil, "no progress while detached")
    eq(nvim.stats().steps, steps, "no ah.step() while detached")
    nvim.attach()
    wait_for("the run after attach()", function() return det.result end, 10000)
    eq(det.result.text, reply("while detached"), "attach() again: the run completes")
    for _, m in ipairs(mocks) do m:close() end

    -- ---- 4. the example plugin ------------------------------------------------------
    vim.opt.runtimepath:append(src .. "/examples/nvim")
    vim.cmd("runtime plugin/agenthost.lua")
    check(vim.fn.exists(":AgentAsk") == 2 and vim.fn.exists(":AgentCancel") == 2,
        "the plugin defines :AgentAsk and :AgentCancel")
    local plugin = require("agenthost_ask")
    plugin.setup{ mock = { plan = { { status = 503 }, { cut_after_events = 6 } } },
                  policy = { base_ms = 50, cap_ms = 200 } }
    vim.cmd("AgentAsk what is up")
    local asks = plugin.asks()
    local a1 = asks[#asks]
    eq(api.nvim_get_current_buf(), a1.buf, ":AgentAsk shows its scratch buffer")
    local seen = {}
    local prev_change = a1.status.on_change
    a1.status.on_change = function(text, kind)
        if text ~= "" then seen[#seen + 1] = text end
        prev_change(text, kind)
    end
    wait_for(":AgentAsk's answer", function() return a1.result end)
    eq(a1.result.outcome, "completed", ":AgentAsk: completed")
    eq(buf_text(a1.buf), "> what is up\n\n" .. reply("what is up"),
        ":AgentAsk: the answer in the scratch buffer, once")
    check(#seen >= 2, ":AgentAsk: the status line showed the retry and the continuation")
    local state = vim.b[a1.buf].agenthost_state or api.nvim_buf_get_var(a1.buf, "agenthost_state")
    -- the 503 and the cut that kept nothing: two retries, one continuation
    check(state:find("^completed %(2 retries, 1 continuation%)") ~= nil,
        ":AgentAsk: b:agenthost_state = " .. state)
    eq(vim.bo[a1.buf].buftype, "nofile", ":AgentAsk: a scratch buffer")
    local win = vim.fn.bufwinid(a1.buf)
    local line = api.nvim_eval_statusline(vim.wo[win].statusline,
        { winid = win, maxwidth = 200 }).str
    check(line:find("completed (2 retries, 1 continuation)", 1, true) ~= nil,
        ":AgentAsk: the window's status line: " .. line)

    -- a stalled stream: :AgentCancel ends it as cancelled
    plugin.setup{ mock = { plan = { { stall_after_events = 6 }, { stall_after_events = 6 } } } }
    vim.cmd("AgentAsk stall now")
    local a2 = plugin.asks()[#plugin.asks()]
    wait_for("the stalled stream's first text", function() return a2.answer:text() ~= "" end)
    vim.wait(100)
    check(a2.result == nil, "the stalled run is still going")
    vim.cmd("AgentCancel")
    wait_for(":AgentCancel's run end", function() return a2.result end, 10000)
    eq(a2.result.outcome, "cancelled", ":AgentCancel: cancelled")
    local lines = api.nvim_buf_get_lines(a2.buf, 0, -1, false)
    check(lines[#lines]:find("^%-%- cancelled") ~= nil, ":AgentCancel: the buffer says so: " .. lines[#lines])

    -- <C-c> in the answer's buffer
    vim.cmd("AgentAsk stall again")
    local a3 = plugin.asks()[#plugin.asks()]
    wait_for("the second stalled stream", function() return a3.answer:text() ~= "" end)
    eq(api.nvim_get_current_buf(), a3.buf, "the answer's buffer is current")
    api.nvim_feedkeys(api.nvim_replace_termcodes("<C-c>", true, false, true), "x", false)
    wait_for("<C-c>'s run end", function() return a3.result end, 10000)
    eq(a3.result.outcome, "cancelled", "<C-c>: cancelled")
    plugin.setup{} -- closes the mock

    eq(#warnings, 0, "no library warning (hooks ran without error): " .. table.concat(warnings, "; "))
    eq(nvim.stats().errors, 0, "no ah.step() error")
    local st = nvim.stats()
    io.stdout:write(string.format("# %d wake-ups, %d steps\n", st.wakeups, st.steps))
end

local ok, err = xpcall(main, debug.traceback)
watchdog:stop()
if ok then
    io.stdout:write("test_attach: all checks passed\n")
    vim.cmd("qall!")
else
    io.stderr:write(tostring(err), "\n")
    vim.cmd("cquit 1")
end
