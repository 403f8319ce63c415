-- nvim_rhythm.lua - the editor's rhythm while agents stream (a benchmark, not a test):
-- run by tests/bench/nvim_rhythm.sh inside `nvim --headless -u NONE`.
--
-- Four agents against four `agenthost mock` processes (one fault each: a 503, a 529 with
-- Retry-After: 1, a stream cut mid-text, a stream cut mid-tool-call), each text delta
-- written into a buffer, while a 10 ms Neovim timer (timer_start, repeating) records the
-- largest gap between two of its calls. Clients:
--   agenthost     require("agenthost.nvim").attach(), agent:start + on_event + on_done,
--                 every delta written into its buffer (nvim.buffer)
--   coalesced     the same with on_event_coalesce = 50 (deltas merged for the display)
--   curl          the plugins' way: one `curl -sN` job per request under vim.loop.spawn,
--                 SSE lines parsed in a scheduled callback; no retries, so curl gets the
--                 503, the 529 and the cuts as they are
-- Two paces: "burst" (the mock sends each answer, BURST_DELTAS deltas, as fast as the
-- socket takes it: a whole answer may arrive in one read) and "paced" (PACED_DELTAS
-- deltas through tests/bench/pace_proxy.py at RATE bytes/s per connection, the pace of a
-- fast model). Then "idle": the agenthost client on the paced streams without the timer,
-- the editor's CPU time, then its wake-ups and CPU while it sits attached with nothing to
-- do. RUNS times each, fresh mocks every run; medians. key=value lines on stdout. CPU
-- is the editor process's own (getrusage): curl's processes and the mocks are not in it.
-- Environment: AH_BUILD_DIR, RUNS (5), BURST_DELTAS (2000), PACED_DELTAS (400),
-- RATE (16384), IDLE_MS (2000), PROXY (tests/bench/pace_proxy.py).
local uv = vim.uv or vim.loop
local api = vim.api

local build = vim.fn.fnamemodify(assert(os.getenv("AH_BUILD_DIR"), "AH_BUILD_DIR"), ":p"):gsub("/$", "")
package.cpath = build .. "/lua-5.1/?.so;" .. package.cpath
package.path = build .. "/lua/?.lua;" .. package.path
local function envnum(name, default)
    return tonumber(os.getenv(name) or "") or default
end
local RUNS = envnum("RUNS", 5)
local BURST_DELTAS = envnum("BURST_DELTAS", 2000)
local PACED_DELTAS = envnum("PACED_DELTAS", 400)
local RATE = envnum("RATE", 16384)
local IDLE_MS = envnum("IDLE_MS", 2000)
local PROXY = assert(os.getenv("PROXY"), "PROXY")
local AH_BIN = build .. "/agenthost"
local tmp = vim.fn.tempname()
vim.fn.mkdir(tmp, "p")

local ah = require("agenthost")
local nvim = require("agenthost.nvim")
ah.log_handler(false)

-- The benchmark is a coroutine resumed from callbacks, so between its steps the editor
-- sits in its own main loop (as when it waits for a key), not inside vim.wait.
local co
local function wake()
    vim.schedule(function()
        local ok, err = coroutine.resume(co)
        if not ok then
            io.stderr:write(debug.traceback(co, tostring(err)), "\n")
            vim.cmd("cquit 1")
        end
    end)
end
local function sleep(ms)
    vim.defer_fn(wake, ms)
    coroutine.yield()
end
-- w.until_(cond) yields until cond() holds; callbacks call w.check() to re-test it
local function waiter()
    local w = {}
    function w.check()
        if w.cond and w.cond() then
            w.cond = nil
            wake()
        end
    end
    function w.until_(cond)
        w.cond = cond
        w.check()
        coroutine.yield()
    end
    return w
end

local function out(k, v)
    io.stdout:write(k, "=", tostring(v), "\n")
end

local function cpu_ms()
    local r = uv.getrusage()
    return (r.utime.sec + r.stime.sec) * 1000 + (r.utime.usec + r.stime.usec) / 1000
end

local function median(t)
    local s = {}
    for i, v in ipairs(t) do s[i] = v end
    table.sort(s)
    local n = #s
    if n % 2 == 1 then return s[(n + 1) / 2] end
    return (s[n / 2] + s[n / 2 + 1]) / 2
end

local function list(t)
    local s = {}
    for i, v in ipairs(t) do s[i] = string.format("%.1f", v) end
    return table.concat(s, ",")
end

-- ---- mocks (and pacing proxies): a child whose first stdout line is its URL ----------
local NAMES = { "A", "B", "C", "D" }
-- message_start, content_block_start, ping, N deltas, content_block_stop, tool_use
-- start, the empty input_json_delta, one argument fragment: D is cut there
local function plans(n)
    return {
        A = '[{"status":503}]',
        B = '[{"status":529,"headers":{"Retry-After":"1"}}]',
        C = string.format('[{"cut_after_events":%d}]', 3 + math.floor(n / 2)),
        D = string.format('[{"cut_after_events":%d}]', 3 + n + 4),
    }
end

local function spawn_url(cmd, args, on_url)
    local stdout = uv.new_pipe(false)
    local c = {}
    c.handle = uv.spawn(cmd, { args = args, stdio = { nil, stdout, 2 } }, function() end)
    assert(c.handle, "cannot start " .. cmd)
    local buf = ""
    stdout:read_start(function(_, data)
        if data and not c.url then
            buf = buf .. data
            local line = buf:match("^(.-)\n")
            if line then
                c.url = line
                on_url()
            end
        end
    end)
    c.pipe = stdout
    return c
end

local function stop_child(c)
    c.pipe:read_stop()
    c.pipe:close()
    c.handle:kill("sigterm")
    c.handle:close()
end

-- -> { A = url, ... }, and the children to stop
local function start_mocks(pace)
    local deltas = pace == "burst" and BURST_DELTAS or PACED_DELTAS
    local p = plans(deltas)
    local kids, urls, w = {}, {}, waiter()
    local function all_up(list_)
        for _, n in ipairs(NAMES) do
            if not (list_[n] and list_[n].url) then return false end
        end
        return true
    end
    local mocks = {}
    for _, n in ipairs(NAMES) do
        local plan = tmp .. "/plan_" .. n .. ".json"
        local f = assert(io.open(plan, "w"))
        f:write(p[n])
        f:close()
        mocks[n] = spawn_url(AH_BIN, { "mock", "--port", "0", "--plan", plan,
            "--text-deltas", tostring(deltas) }, w.check)
        kids[#kids + 1] = mocks[n]
    end
    w.until_(function() return all_up(mocks) end)
    if pace == "burst" then
        for _, n in ipairs(NAMES) do urls[n] = mocks[n].url end
        return urls, kids
    end
    local proxies = {}
    for _, n in ipairs(NAMES) do
        proxies[n] = spawn_url("python3", { PROXY, mocks[n].url, tostring(RATE) }, w.check)
        kids[#kids + 1] = proxies[n]
    end
    w.until_(function() return all_up(proxies) end)
    for _, n in ipairs(NAMES) do urls[n] = proxies[n].url end
    return urls, kids
end

local ADD = {
    description = "Add two integers.",
    schema = { type = "object", required = { "a", "b" },
               properties = { a = { type = "integer" }, b = { type = "integer" } } },
}

-- ---- the rhythm probe: a 10 ms repeating Neovim timer -----------------------------------
local function start_probe()
    local p = { max = 0, last = uv.hrtime() }
    p.id = vim.fn.timer_start(10, function()
        local now = uv.hrtime()
        local gap = (now - p.last) / 1e6
        if gap > p.max then p.max = gap end
        p.last = now
    end, { ["repeat"] = -1 })
    return p
end
local function stop_probe(p)
    vim.fn.timer_stop(p.id)
    return p.max
end

-- ---- the clients: each runs the 4 agents once, returns right answers (of 4) ----------
local function run_agenthost(urls, coalesce)
    nvim.attach{ log = false }
    local done, ok, w = 0, 0, waiter()
    local tool_runs = 0
    for _, n in ipairs(NAMES) do
        local buf = api.nvim_create_buf(false, true)
        local answer = nvim.buffer(buf)
        local agent = ah.agent{
            client = ah.client{ provider = "anthropic", model = "mock-model", base_url = urls[n] },
            tools = n == "D" and { add = { description = ADD.description, schema = ADD.schema,
                run = function(a) tool_runs = tool_runs + 1 return tostring(a.a + a.b) end } } or nil,
            on_event_coalesce = coalesce,
            on_event = function(ev) answer:update(ev) end,
        }
        agent:start("agent " .. n, { on_done = function(r)
            done = done + 1
            -- right: completed, and the buffer ends with the answer, each byte once
            if r.outcome == "completed" and answer:text():sub(-#r.text) == r.text then
                ok = ok + 1
            end
            api.nvim_buf_delete(buf, { force = true })
            w.check()
        end })
    end
    w.until_(function() return done == 4 end)
    assert(tool_runs == 1, "the tool ran " .. tool_runs .. " times")
    return ok
end

local function body(n)
    local b = { model = "mock-model", max_tokens = 1024, stream = true,
                messages = { { role = "user", content = "agent " .. n } } }
    if n == "D" then
        b.tools = { { name = "add", description = ADD.description, input_schema = ADD.schema } }
    end
    return vim.fn.json_encode(b)
end

local function run_curl(urls)
    local done, ok, w = 0, 0, waiter()
    for _, n in ipairs(NAMES) do
        local buf = api.nvim_create_buf(false, true)
        local stdout = uv.new_pipe(false)
        local pending, stop_seen = "", false
        local handle
        local function consume(chunk) -- on the main loop, as the plugins do
            pending = pending .. chunk
            while true do
                local i = pending:find("\n", 1, true)
                if not i then break end
                local line = pending:sub(1, i - 1)
                pending = pending:sub(i + 1)
                local data = line:match("^data: (.*)")
                if data then
                    local okj, ev = pcall(vim.fn.json_decode, data)
                    if okj and type(ev) == "table" then
                        if ev.type == "content_block_delta" and ev.delta and ev.delta.text then
                            local last = api.nvim_buf_line_count(buf)
                            local l = api.nvim_buf_get_lines(buf, last - 1, last, false)[1]
                            api.nvim_buf_set_lines(buf, last - 1, last, false,
                                vim.split(l .. ev.delta.text, "\n", true))
                        elseif ev.type == "message_stop" then
                            stop_seen = true
                        end
                    end
                end
            end
        end
        handle = uv.spawn("curl", {
            args = { "-sN", urls[n] .. "/v1/messages", "-H", "content-type: application/json",
                     "-H", "anthropic-version: 2023-06-01", "-d", body(n) },
            stdio = { nil, stdout, nil },
        }, function(code)
            handle:close()
            vim.schedule(function()
                done = done + 1
                -- right: the whole answer without an error (D would still need its tool
                -- run and a second request, which a one-request job does not make)
                if code == 0 and stop_seen and n ~= "D" then ok = ok + 1 end
                api.nvim_buf_delete(buf, { force = true })
                w.check()
            end)
        end)
        stdout:read_start(function(_, data)
            if data then
                vim.schedule(function() consume(data) end)
            else
                stdout:close()
            end
        end)
    end
    w.until_(function() return done == 4 end)
    return ok
end

local CLIENTS = {
    { name = "agenthost", run = function(urls) return run_agenthost(urls, nil) end },
    { name = "coalesced", run = function(urls) return run_agenthost(urls, 50) end },
    { name = "curl", run = run_curl },
}

local function main()
    out("runs", RUNS)
    -- the probe alone, nothing else to do: the machine's own jitter
    local base = {}
    for _ = 1, RUNS do
        local p = start_probe()
        sleep(1000)
        base[#base + 1] = stop_probe(p)
    end
    out("idle_timer_max_gap_ms", string.format("%.1f", median(base)))
    out("idle_timer_max_gap_all_ms", list(base))

    for _, pace in ipairs({ "paced", "burst" }) do
        out(pace .. "_deltas_per_reply", pace == "burst" and BURST_DELTAS or PACED_DELTAS)
        local r = {}
        for _, c in ipairs(CLIENTS) do r[c.name] = { gap = {}, ok = {}, wall = {}, cpu = {} } end
        for _ = 1, RUNS do
            for _, c in ipairs(CLIENTS) do
                local urls, kids = start_mocks(pace)
                local p = start_probe()
                local t0, c0 = uv.hrtime(), cpu_ms()
                local ok = c.run(urls)
                local x = r[c.name]
                x.wall[#x.wall + 1] = (uv.hrtime() - t0) / 1e6
                x.cpu[#x.cpu + 1] = cpu_ms() - c0
                x.gap[#x.gap + 1] = stop_probe(p)
                x.ok[#x.ok + 1] = ok
                for _, k in ipairs(kids) do stop_child(k) end
                sleep(100)
            end
        end
        for _, c in ipairs(CLIENTS) do
            local x, k = r[c.name], pace .. "_" .. c.name
            out(k .. "_timer_max_gap_ms", string.format("%.1f", median(x.gap)))
            out(k .. "_timer_max_gap_all_ms", list(x.gap))
            out(k .. "_right_answers", median(x.ok) .. "/4")
            out(k .. "_wall_ms", string.format("%.0f", median(x.wall)))
            out(k .. "_editor_cpu_ms", string.format("%.0f", median(x.cpu)))
        end
        -- the longest ah.step() so far (paced runs first, so this is theirs, then burst's)
        out(pace .. "_longest_step_ms", string.format("%.1f", nvim.stats().step_max_ms))
    end

    -- idle: the editor otherwise idle, paced streams; CPU while the 4 agents run, then
    -- wake-ups and CPU while attached with nothing to do
    local cpu_run, wall_run, wake_run, step_run, idle_cpu, idle_wake = {}, {}, {}, {}, {}, {}
    for _ = 1, RUNS do
        local urls, kids = start_mocks("paced")
        local s0, c0, t0 = nvim.stats(), cpu_ms(), uv.hrtime()
        run_agenthost(urls, nil)
        local s1, c1 = nvim.stats(), cpu_ms()
        cpu_run[#cpu_run + 1] = c1 - c0
        wall_run[#wall_run + 1] = (uv.hrtime() - t0) / 1e6
        wake_run[#wake_run + 1] = s1.wakeups - s0.wakeups
        step_run[#step_run + 1] = s1.step_ms - s0.step_ms
        for _, k in ipairs(kids) do stop_child(k) end
        sleep(200) -- the connections close
        local s2, c2 = nvim.stats(), cpu_ms()
        sleep(IDLE_MS)
        local s3, c3 = nvim.stats(), cpu_ms()
        idle_cpu[#idle_cpu + 1] = c3 - c2
        idle_wake[#idle_wake + 1] = s3.wakeups - s2.wakeups
    end
    out("idle_run_cpu_ms", string.format("%.0f", median(cpu_run)))
    out("idle_run_wall_ms", string.format("%.0f", median(wall_run)))
    out("idle_run_in_steps_ms", string.format("%.0f", median(step_run)))
    out("idle_run_wakeups", median(wake_run))
    out("idle_ms", IDLE_MS)
    out("idle_attached_cpu_ms", string.format("%.1f", median(idle_cpu)))
    out("idle_attached_wakeups", median(idle_wake))
end

co = coroutine.create(function()
    main()
    vim.fn.delete(tmp, "rf")
    vim.cmd("qall!")
end)
wake()
