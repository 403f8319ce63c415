-- Structured output (docs/worker.md): the final text is parsed as JSON and validated; a bad
-- answer is shown to the model in history and asked for again, at most max_retries
-- times, then the run ends bad_output.
local ah = require "agenthost"
local T = require "ahtest"

local m = ah.mock{}
local client = ah.client{ provider = "openai", model = "m", base_url = m.url }
local agent = ah.agent{ client = client, on_event = false, policy = T.fast() }

local function has_number(obj)
  if type(obj) ~= "table" or type(obj.answer) ~= "number" then
    return false, "field 'answer' must be a number"
  end
  return true
end

-- success at once
m:set_plan{ { ok = true, text = '{"answer": 42, "why": "because"}' } }
local r = agent:run("answer in JSON", { output = { validate = has_number, max_retries = 2 } })
T.eq(r.outcome, "completed", "outcome")
T.eq(r.output.answer, 42, "result.output is the decoded value")
T.eq(r.output.why, "because", "result.output field")
T.eq(r.stats.output_retries, 0, "no retry")
T.eq(r.stats.llm_calls, 1, "one call")
T.ok("valid JSON that validates completes at once, decoded in result.output")

-- not JSON, then a value that fails validation, then a good one
m:set_plan{ { ok = true, text = "Sure! The answer is 42." },
            { ok = true, text = '{"answer": "forty-two"}' },
            { ok = true, text = '```json\n{"answer": 42}\n```' } }
r = agent:run("answer in JSON", { output = { validate = has_number, max_retries = 2 } })
T.eq(r.outcome, "completed", "outcome after two retries")
T.eq(r.output.answer, 42, "the fenced JSON is accepted")
T.eq(r.stats.output_retries, 2, "two output retries")
T.eq(r.stats.llm_calls, 3, "three calls")
-- the model was told what was wrong, visibly, in history
T.eq(r.history[3].role, "user", "rejection 1 is a user message")
T.contains(r.history[3].content[1].text, "not valid JSON", "rejection 1 names the parse failure")
T.contains(r.history[5].content[1].text, "field 'answer' must be a number",
           "rejection 2 carries validate's reason")
local reqs = m:requests()
T.contains(reqs[#reqs].body, "field 'answer' must be a number", "the reason was sent")
T.ok("parse failure and validation failure are retried with the reason in history")

-- bad_output after max_retries
m:set_plan{ steps = { { ok = true, text = "no" } }, ["then"] = { ok = true, text = "still no" } }
r = agent:run("answer in JSON", { output = { validate = has_number, max_retries = 1 } })
T.eq(r.outcome, "bad_output", "bad_output")
T.eq(r.error.kind, "output", "error.kind")
T.contains(r.error.message, "not valid JSON", "error.message")
T.eq(r.stats.output_retries, 1, "output_retries = max_retries")
T.eq(r.stats.llm_calls, 2, "the answer and one retry")
T.eq(r.output, nil, "no output")
T.ok("bad_output after max_retries")

-- the default max_retries is 1; output = true asks for JSON with no validator
m:set_plan{ steps = { { ok = true, text = "nope" } }, ["then"] = { ok = true, text = "[1, 2, 3]" } }
r = agent:run("JSON please", { output = true })
T.eq(r.outcome, "completed", "output = true")
T.eq(r.output[3], 3, "array output")
T.eq(r.stats.output_retries, 1, "one retry by default")
T.ok("output = true and the default of one retry")

-- validate raising: logged once, the answer is rejected with the error as the reason
local broken = function(obj) return obj.missing.field end
m:set_plan{ steps = { { ok = true, text = '{"a": 1}' } }, ["then"] = { ok = true, text = '{"a": 2}' } }
r = agent:run("JSON please", { output = { validate = broken, max_retries = 1 } })
T.eq(r.outcome, "bad_output", "a raising validator rejects")
T.contains(r.error.message, "checking it failed", "the reason says the check failed")
T.ok("validate raising rejects the answer and the run ends cleanly")

-- max_retries = 0: no second chance
m:set_plan{ { ok = true, text = "plain text" } }
r = agent:run("JSON please", { output = { max_retries = 0 } })
T.eq(r.outcome, "bad_output", "max_retries 0")
T.eq(r.stats.llm_calls, 1, "no retry")
T.ok("max_retries = 0")
m:close()
