-- test_client_headers.lua - ah.client{ headers = ..., query = ... } as the SDKs take
-- them (default_headers, default_query): sent with every request (the mock records them,
-- m:requests()), checked when the client is built (a name that is no HTTP token, a value
-- with CR/LF, a header agenthost writes itself, an auth header beside api_key, a name
-- given twice), a provider's fixed header replaced, Azure OpenAI's two forms (the v1
-- API's base URL; the dated API's deployment path + api-version + api-key header, which
-- is redacted like a key); base_url = "" says it must not be empty.
-- (The API key from the environment: tests/cli/test_client_env.sh.)
local ah = require "agenthost"
local T = require "ahtest"

local m = ah.mock{}

local c = ah.client{ provider = "anthropic", model = "m", base_url = m.url, api_key = "k",
  headers = { ["anthropic-beta"] = "prompt-caching-2024-07-31,output-128k-2025-02-19",
              ["anthropic-version"] = "2023-01-01", ["X-Trace"] = "a\tb" },
  query = { ["api-version"] = "2024-10-21", note = "a b&c=d/é" } }
T.eq(c.url, m.url .. "/v1/messages?api-version=2024-10-21&note=a%20b%26c%3Dd%2F%C3%A9",
  "the query is percent-encoded, after the path")
local agent = ah.agent{ client = c, on_event = false, tools = {
  add = { description = "Add.", schema = { type = "object", properties = {
            a = { type = "integer" }, b = { type = "integer" } } },
          run = function(args) return tostring(args.a + args.b) end } } }
local r = agent:run("What is 2 + 2?")
T.eq(r.outcome, "completed", "outcome")
local reqs = m:requests()
T.eq(#reqs, 2, "two requests (the tool call, then the answer)")
for i, q in ipairs(reqs) do
  T.eq(q.headers["anthropic-beta"], "prompt-caching-2024-07-31,output-128k-2025-02-19",
    "anthropic-beta of request " .. i)
  T.eq(q.headers["anthropic-version"], "2023-01-01", "the fixed header is replaced, " .. i)
  T.eq(q.headers["x-trace"], "a\tb", "a tab is a value's character")
  T.eq(q.headers["x-api-key"], "[REDACTED]", "the key header")
  T.eq(q.query["api-version"], "2024-10-21", "api-version of request " .. i)
  T.eq(q.query.note, "a b&c=d/é", "decoded back by the server")
end
T.ok("headers and query go with every request; a provider's fixed header is replaced")

local function bad(fields, needle, what)
  fields.provider = fields.provider or "anthropic"
  fields.model = "m"
  if fields.base_url == nil then fields.base_url = m.url end
  T.raises(function() ah.client(fields) end, needle, what)
end
bad({ headers = { ["bad name"] = "x" } }, "headers: 'bad name' is not a header name", "name")
bad({ headers = { ["x:y"] = "x" } }, "is not a header name", "a colon")
bad({ headers = { x = "a\r\nInjected: 1" } }, "the value of 'x' holds a control character",
  "CR/LF")
bad({ headers = { x = "a\0b" } }, "headers['x'] holds a NUL byte", "NUL")
bad({ headers = { ["Content-Type"] = "text/plain" } },
  "'Content-Type' is set by agenthost itself", "a header agenthost writes")
bad({ headers = { host = "evil.example" } }, "'host' is set by agenthost itself", "Host")
bad({ headers = { ["x-api-key"] = "k1" }, api_key = "k2" },
  "'x-api-key' would authenticate beside api_key: give the key or the header, not both",
  "auth header beside a key")
bad({ provider = "openai", headers = { Authorization = "Bearer k1" }, api_key = "k2" },
  "'Authorization' would authenticate beside api_key", "Authorization beside a key")
bad({ headers = { A = "1", a = "2" } }, "headers: 'a' is given twice", "twice")
bad({ headers = { a = 1 } }, "headers['a'] must be a string, got number", "a number")
bad({ headers = "anthropic-beta: x" }, "headers must be a table of name = value strings",
  "not a table")
bad({ headers = { [1] = "x" } }, "headers: every name must be a string", "a list")
bad({ query = { [""] = "x" } }, "query: parameter 1 has no name", "empty query name")
bad({ base_url = "" }, "ah.client: base_url must not be empty (leave it out for the "
  .. "provider's public API, https://api.anthropic.com)", "base_url = \"\"")
bad({ base_url = "https://api.anthropic.com", api_key = "" },
  "ah.client: api_key is empty, and api.anthropic.com needs a key", "an empty key")
T.ok("bad headers and query are refused when the client is built, naming the field")

-- Azure OpenAI, the v1 API: the base URL ends in /openai/v1, the key is a Bearer token.
local az = ah.client{ provider = "openai", model = "my-deployment", api_key = "k",
  base_url = "https://my-resource.openai.azure.com/openai/v1" }
T.eq(az.url, "https://my-resource.openai.azure.com/openai/v1/chat/completions", "Azure v1")
-- The dated API: the whole deployment path, api-version, the key in an api-key header
-- (instead of api_key: then no OPENAI_API_KEY is read from the environment).
local dated = ah.client{ provider = "openai", model = "gpt-4o", base_url = m.url
  .. "/openai/deployments/my-deployment/chat/completions",
  query = { ["api-version"] = "2024-10-21" }, headers = { ["api-key"] = "azure-secret-1234" } }
T.eq(dated.url, m.url .. "/openai/deployments/my-deployment/chat/completions"
  .. "?api-version=2024-10-21", "the dated path is taken whole, without /v1")
local n0 = #m:requests()
local out = ah.agent{ client = dated, on_event = false }:run("hello")
local q = m:requests()[n0 + 1]
T.eq(q.path, "/openai/deployments/my-deployment/chat/completions", "the path sent")
T.eq(q.query["api-version"], "2024-10-21", "api-version sent")
T.eq(q.headers["api-key"], "[REDACTED]", "the api-key header is sent, redacted by the mock")
T.eq(q.headers.authorization, nil, "no Bearer beside it")
T.eq(tostring(out.error and out.error.message or ""):find("azure-secret", 1, true), nil,
  "the header's secret is in no message")
T.ok("Azure OpenAI: the v1 base URL, and the dated path with api-version and api-key")
m:close()
