-- cli_client_env.lua MODE - the API key from the environment, as the official SDKs read
-- it (run by tests/cli/test_client_env.sh, which sets or unsets the variables):
--   missing  no ANTHROPIC_API_KEY / OPENAI_API_KEY: a client of a public host is refused
--            when it is built, naming the variable (no request, no retries); one of any
--            other host is fine (a local server needs no key)
--   present  the variables hold keys: clients of the public hosts build, and a client of
--            the mock sends the key (x-api-key / Authorization, redacted by the mock);
--            an authentication header given instead means no key is read
local ah = require "agenthost"
local T = require "ahtest"
local mode = arg[1]

if mode == "missing" then
  for provider, var in pairs({ anthropic = "ANTHROPIC_API_KEY", openai = "OPENAI_API_KEY",
                               responses = "OPENAI_API_KEY" }) do
    T.raises(function() ah.client{ provider = provider, model = "m" } end,
      "ah.client: api_key: no API key for api." .. (provider == "anthropic" and "anthropic"
        or "openai") .. ".com: set " .. var .. " (or pass api_key)", provider)
  end
  -- the public host named by hand, with a path or a port: the same
  T.raises(function() ah.client{ provider = "openai", model = "m",
    base_url = "https://API.openai.com:443/v1" } end, "set OPENAI_API_KEY", "by hand")
  local m = ah.mock{}
  local c = ah.client{ provider = "anthropic", model = "m", base_url = m.url }
  local r = ah.agent{ client = c, on_event = false }:run("hi")
  T.eq(r.outcome, "completed", "a local server needs no key")
  T.eq(m:requests()[1].headers["x-api-key"], nil, "and gets none")
  m:close()
  T.ok("no key for a public host is an error when the client is built, naming the variable")
elseif mode == "present" then
  ah.client{ provider = "anthropic", model = "m" }
  ah.client{ provider = "responses", model = "m" }
  local m = ah.mock{}
  for _, p in ipairs({ "anthropic", "openai" }) do
    local c = ah.client{ provider = p, model = "m", base_url = m.url }
    T.eq(ah.agent{ client = c, on_event = false }:run("hi").outcome, "completed", p)
  end
  local reqs = m:requests()
  T.eq(reqs[1].headers["x-api-key"], "[REDACTED]", "anthropic: the key from the environment")
  T.eq(reqs[2].headers.authorization, "[REDACTED]", "openai: the key from the environment")
  -- an explicit "" is no key, even with the variable set
  local none = ah.client{ provider = "anthropic", model = "m", base_url = m.url, api_key = "" }
  ah.agent{ client = none, on_event = false }:run("hi")
  T.eq(m:requests()[3].headers["x-api-key"], nil, "api_key = \"\" sends none")
  -- Azure's api-key header instead of a key: OPENAI_API_KEY stays at home
  local az = ah.client{ provider = "openai", model = "m", base_url = m.url,
                        headers = { ["api-key"] = "azure-1" } }
  ah.agent{ client = az, on_event = false }:run("hi")
  T.eq(m:requests()[4].headers.authorization, nil, "no Bearer from the environment")
  T.eq(m:requests()[4].headers["api-key"], "[REDACTED]", "the api-key header")
  m:close()
  T.ok("the keys come from the environment; an auth header stands instead of one")
else
  error("usage: cli_client_env.lua missing|present")
end
