-- Every config table is validated when it is built, with errors naming the field.
local ah = require "agenthost"
local T = require "ahtest"

local client = ah.client{ provider = "anthropic", model = "m", base_url = "http://127.0.0.1:9" }
local function agent(t) t.client = t.client or client; return ah.agent(t) end

T.raises(function() agent{ policy = { max_attempt = 3 } } end,
  "ah.agent: policy.max_attempt: unknown policy field 'max_attempt' (did you mean 'max_attempts'?)")
T.raises(function() agent{ policy = { max_attempts = 0 } } end,
  "ah.agent: policy.max_attempts must be >= 1 (got 0)")
T.raises(function() agent{ policy = { base_ms = -5 } } end, "policy.base_ms must be >= 0")
T.raises(function() agent{ policy = { base_ms = 1.5 } } end, "policy.base_ms must be a whole number")
T.raises(function() agent{ policy = { jitter = "fuzzy" } } end, "jitter")
T.raises(function() agent{ policy = { retry_after = "sometimes" } } end, "retry_after")
T.raises(function() agent{ policy = { base_ms = 100, cap_ms = 10 } } end,
  "ah.agent: policy.cap_ms must be >= policy.base_ms")
T.raises(function() agent{ policy = { retry_on = true } } end,
  "ah.agent: policy.retry_on must be a function")
T.raises(function() agent{ policy = { max_attempts = true } } end,
  "policy.max_attempts: expected a number or a string")
T.raises(function() agent{ policy = { deadline_ms = "soon" } } end, "deadline_ms")
T.raises(function() agent{ policy = "fast" } end, "ah.agent: policy must be a table")
T.ok("policy fields are checked, with the field named")

T.raises(function() agent{ max_step = 3 } end,
  "ah.agent: unknown field 'max_step' (did you mean 'max_steps'?)")
T.raises(function() agent{ sytem = "x" } end, "unknown field 'sytem' (did you mean 'system'?)")
T.raises(function() agent{ frobnicate = 1 } end, "ah.agent: unknown field 'frobnicate'")
T.raises(function() ah.agent{ system = "x" } end, "ah.agent: client must be an ah.client")
T.raises(function() agent{ max_steps = 0 } end, "ah.agent: max_steps must be")
T.raises(function() agent{ on_event = 42 } end, "ah.agent: on_event must be a function")
T.raises(function() agent{ system = 7 } end, "ah.agent: system must be a string")
T.ok("agent fields")

local run = function() end
T.raises(function() agent{ tools = { add = { run = run, descripton = "x" } } } end,
  "ah.agent: tools.add: unknown field 'descripton' (did you mean 'description'?)")
T.raises(function() agent{ tools = { add = { description = "x" } } } end,
  "ah.agent: tools.add: run must be a function")
T.raises(function() agent{ tools = { add = { run = run, policy = { max_attempts = -1 } } } } end,
  "ah.agent: tools.add: policy.max_attempts must be >= 1")
T.raises(function() agent{ tools = { add = { run = run, policy = { retries = 2 } } } } end,
  "ah.agent: tools.add: policy.retries: unknown policy field 'retries'")
T.raises(function() agent{ tools = { add = { run = run, schema = 5 } } } end,
  "ah.agent: tools.add: schema must be a table")
T.raises(function() agent{ tools = { add = { run = run, idempotency_key = "k" } } } end,
  "ah.agent: tools.add: idempotency_key must be a function")
T.raises(function() agent{ tools = { { run = run } } } end, "ah.agent: tools[1]: name is required")
T.ok("tool specs")

T.raises(function() ah.client{ provider = "antropic", model = "m" } end,
  "ah.client: unknown provider 'antropic' (did you mean 'anthropic'?)")
T.raises(function() ah.client{ provider = "gemin", model = "m" } end,
  "ah.client: unknown provider 'gemin' (did you mean 'gemini'?)")
T.raises(function() ah.client{ model = "m" } end, "ah.client: provider is required")
T.raises(function() ah.client{ provider = "openai" } end, "ah.client: model is required")
T.raises(function() ah.client{ provider = "openai", model = "m", base_url = "ftp://x" } end,
  "ah.client: base_url must start with http:// or https://")
T.raises(function() ah.client{ provider = "openai", model = "m", apikey = "k" } end,
  "ah.client: unknown field 'apikey' (did you mean 'api_key'?)")
T.raises(function() ah.client{ provider = "openai", model = "m", max_tokens = 0 } end,
  "ah.client: max_tokens must be")
T.ok("client fields")

T.raises(function() ah.mock{ plan = { { cut_after_event = 1 } } } end,
  "ah.mock: plan step 1: unknown field 'cut_after_event'")
T.raises(function() ah.mock{ plan_json = "[{" } end, "ah.mock: plan: invalid JSON")
T.raises(function() ah.mock{ txt = "x" } end, "ah.mock: unknown field 'txt' (did you mean 'text'?)")
T.ok("mock fields and plans")

local a = agent{}
T.raises(function() a:run("x", { ouput = {} }) end,
  "agent:run: unknown field 'ouput' (did you mean 'output'?)")
T.raises(function() a:run("x", { output = { max_retries = -1 } }) end,
  "agent:run: output.max_retries must be")
T.raises(function() a:run("x", { output = { validate = 1 } }) end,
  "agent:run: output.validate must be a function")
T.raises(function() a:run("x", { output = { validator = print } }) end,
  "agent:run: output: unknown field 'validator' (did you mean 'validate'?)")
T.raises(function() a:run() end, "bad argument #1 to 'run'")
T.ok("run options")

T.raises(function() ah.retry_budget{ max_tokens = 0 } end, "ah.retry_budget: ")
T.raises(function() ah.retry_budget{ tokens = 3 } end, "ah.retry_budget: unknown field 'tokens'")
T.raises(function() ah.parallel{ 1 } end, "ah.parallel: item 1 is a number, not a function")
T.ok("process-level functions")
