-- test_client_transport.lua - the client fields that reach the transport, from Lua: a
-- private CA given with ca_file (the mock serves HTTPS with a certificate made by the
-- openssl program here) verifies, and without it one attempt fails for good; ca_file is
-- type-checked and must be readable; client.url and tostring(client) mask a password in
-- base_url's userinfo and a key in its query; base_url's query stays after the path.
local ah = require "agenthost"
local T = require "ahtest"

-- url and tostring: secrets in base_url masked, the query after the path
local c = ah.client{ provider = "openai", model = "m",
  base_url = "https://bob:hunter22@gw.example/v1?api-version=2024-10-21&key=abcd1234" }
T.eq(c.url, "https://bob:[REDACTED]@gw.example/v1/chat/completions?api-version=2024-10-21&"
  .. "key=[REDACTED]", "client.url")
T.eq(tostring(c):find("hunter22", 1, true), nil, "tostring hides the password")
T.eq(tostring(c):find("abcd1234", 1, true), nil, "tostring hides the key")
T.contains(tostring(c), "gw.example/v1/chat/completions?api-version=2024-10-21", "tostring")
T.ok("client.url and tostring mask base_url's secrets; the query stays after the path")

T.raises(function() ah.client{ provider = "anthropic", model = "m", ca_file = 5 } end,
  "ca_file must be a string", "ca_file type")
T.raises(function()
  ah.client{ provider = "anthropic", model = "m", ca_file = "/nonexistent/ca.pem" }
end, "ca_file '/nonexistent/ca.pem' cannot be read", "ca_file unreadable")
T.ok("ca_file is checked")

local dir = os.tmpname()
os.remove(dir)
local made = os.execute("mkdir " .. dir .. " && cd " .. dir .. " && ("
  .. "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes"
  .. " -keyout ca.key -out ca.pem -days 2 -subj /CN=agenthost-test-ca"
  .. " -addext basicConstraints=critical,CA:TRUE"
  .. " -addext keyUsage=critical,keyCertSign,cRLSign"
  .. " && openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes"
  .. " -keyout server.key -out server.csr -subj /CN=127.0.0.1"
  .. " && printf 'subjectAltName=IP:127.0.0.1\\n' > ext.cnf"
  .. " && openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial"
  .. " -out server.pem -days 2 -extfile ext.cnf) >/dev/null 2>&1")
if made ~= true and made ~= 0 then -- Lua 5.1 returns the status, 5.2+ true
  os.execute("rm -rf " .. dir)
  print("skip - no openssl program: the HTTPS checks")
  return
end

local m = ah.mock{ tls_cert = dir .. "/server.pem", tls_key = dir .. "/server.key" }
T.eq(m.url:sub(1, 8), "https://", "the mock serves HTTPS")
local trusted = ah.client{ provider = "anthropic", model = "mock-model", base_url = m.url,
  ca_file = dir .. "/ca.pem" }
local r = ah.agent{ client = trusted, policy = T.fast(), on_event = false }:run("hi")
T.eq(r.outcome, "completed", "with ca_file: " .. tostring(r.error and r.error.message))
T.eq(r.stats.attempts, 1, "one attempt")
T.ok("ca_file: the private CA verifies the mock's certificate")

local untrusted = ah.client{ provider = "anthropic", model = "mock-model", base_url = m.url }
r = ah.agent{ client = untrusted, policy = T.fast(), on_event = false }:run("hi")
T.eq(r.outcome, "failed", "without ca_file")
T.eq(r.stats.attempts, 1, "a certificate failure is not retried")
T.eq(r.error.kind, "connect", "kind")
T.contains(r.error.message, "ca_file", "the message says what to set")
T.ok("a certificate failure ends the run after one attempt")
m:close()
os.execute("rm -rf " .. dir)
