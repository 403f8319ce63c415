-- demo.lua - agenthost in one screen, no API key needed (`./run demo`).
--
-- An agent with one tool talks to the built-in mock provider, whose fault plan fails the
-- way real providers do: a 503, then a 529 with Retry-After, then a stream that dies in
-- the middle of the tool call. The agent retries, waits what the server asked, continues
-- the cut stream from what was complete (the half-streamed tool call is dropped, never
-- run), runs the tool once, and answers. The model id is a Claude 4.6 one, so, as with
-- the real API, the continuation cannot be a prefill: it is a visible "continue" prompt,
-- and the model, like real ones, begins its reply by repeating what it already said;
-- that restatement is trimmed before anyone sees it. The status line on stderr shows
-- each fault while it happens; afterwards we print the answer, what happened, and the
-- counters.
local ah = require "agenthost"
local display = require "agenthost.status"
local status = display.new()   -- the default status line, on stderr

-- One plan step per request, in order; requests after the last step succeed.
local mock = ah.mock{ plan = {
    { status = 503 },                                       -- overloaded gateway
    { status = 529, headers = { ["Retry-After"] = "1" } },  -- "come back in 1 s"
    { cut_after_events = 11 },  -- the text block is complete, the tool call is not
    { ok = true, restate = true },  -- asked to continue, it repeats itself first
} }

-- Claude 4.6 and later refuse a trailing assistant message (prefill) with HTTP 400, and
-- the mock does too; agenthost's capability table knows, so it continues with a prompt.
local client = ah.client{ provider = "anthropic", model = "claude-opus-4-6",
                          base_url = mock.url }

local happened = {}   -- one line per fault, for the summary
local function note(fmt, ...) happened[#happened + 1] = fmt:format(...) end

local agent = ah.agent{
    client = client,
    system = "You are a careful calculator. Use the add tool.",
    tools = {
        add = {
            description = "Add two integers.",
            schema = { type = "object", required = { "a", "b" },
                       properties = { a = { type = "integer" }, b = { type = "integer" } } },
            run = function(args) return tostring(args.a + args.b) end,
        },
    },
    on_event = function(ev)
        status:update(ev)
        if ev.type == "llm_retry" then
            note("%-15s retried after %s (%s)",
                 ev.status and ("HTTP " .. ev.status) or (ev.error.kind .. " error"),
                 display.duration(ev.wait_ms),
                 ev.wait_source == "server" and "the server asked" or "backoff")
        elseif ev.type == "llm_continuation" then
            note("stream cut      continued (%s rung): kept %d block, dropped %d (the unfinished tool call)",
                 ev.mode, ev.committed_blocks, ev.discarded_blocks)
        elseif ev.type == "llm_call_end" and ev.trimmed_bytes > 0 then
            note("restatement     trimmed %d bytes the model repeated from before the cut",
                 ev.trimmed_bytes)
        elseif ev.type == "tool_call_end" then
            note("tool %-10s %s, ran %d time%s", ev.name, ev.outcome, ev.attempts,
                 ev.attempts == 1 and "" or "s")
        end
    end,
}

local question = "What is 42 + 42?"
print("agenthost demo: one agent, one tool, a provider that fails like real ones")
print("(the built-in mock at " .. mock.url .. ": a 503, a 529 asking for 1 s, a cut stream)")
print()
print("> " .. question)
local result = agent:run(question)
mock:close()

print("< " .. result.text)
if result.error then print("error: " .. result.error.message) end
print()
print("what happened:")
for _, line in ipairs(happened) do print("  " .. line) end
print()
local s = result.stats
print("outcome: " .. result.outcome)
print(("llm calls: %d, attempts: %d, retries: %d, continuations: %d, tool calls: %d")
      :format(s.llm_calls, s.attempts, s.retries, s.continuations, s.tool_calls))
os.exit(result.outcome == "completed" and 0 or 1)
