#!/usr/bin/env bash
# test_oneshot_verbose.sh AGENTHOST_BIN - the command line without a script of one's own:
#   agenthost -p QUESTION [--provider P] [--model M]: the answer on stdout, exit 0; the
#     provider from the key that is set, the base URL from *_BASE_URL (the mock program
#     stands in for the provider); a failed run exits 1 with its error; nothing to ask
#     with exits 2 naming the variables; -p with a script, or --model without -p, is a
#     usage error;
#   -v: each request's and response's head on stderr as curl -v prints them, the key
#     and the auth header redacted, never a body.
set -u
bin=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
pass=0 fail=0
ok() { echo "ok: $1"; pass=$((pass + 1)); }
bad() { echo "FAIL: $1"; fail=$((fail + 1)); }
work=$(mktemp -d)
mock_pid=
cleanup() {
    [ -n "$mock_pid" ] && kill "$mock_pid" 2>/dev/null && wait "$mock_pid" 2>/dev/null
    rm -rf "$work"
}
trap cleanup EXIT
cd "$work" || exit 1
noenv=(env -u ANTHROPIC_API_KEY -u OPENAI_API_KEY -u GEMINI_API_KEY -u ANTHROPIC_BASE_URL
       -u OPENAI_BASE_URL -u AGENTHOST_MODEL -u AGENTHOST_MOCK_PLAN -u AGENTHOST_EVENTS)
want='You said: "What is a retry budget?". This is a deterministic reply from the agenthost mock provider.'

"${noenv[@]}" "$bin" -p "What is a retry budget?" --provider mock >out 2>err
rc=$?
[ "$rc" -eq 0 ] && [ "$(cat out)" = "$want" ] && [ ! -s err ] &&
    ok "-p --provider mock: the answer on stdout, nothing on stderr, exit 0" ||
    bad "-p --provider mock: rc=$rc out=$(cat out) err=$(cat err)"

# a real provider's way: the key and base URL from the environment (the mock program)
printf '[{"status": 503}, {"cut_after_events": 7}]' >plan.json
"$bin" mock --port 0 --plan plan.json >url.txt &
mock_pid=$!
for _ in $(seq 1 100); do [ -s url.txt ] && break; sleep 0.1; done
url=$(head -n1 url.txt)
"${noenv[@]}" ANTHROPIC_API_KEY=sk-ant-test-SECRET-0123456789 ANTHROPIC_BASE_URL="$url" \
    "$bin" -v -p "What is a retry budget?" >out 2>err
rc=$?
if [ "$rc" -eq 0 ] && tail -n1 out | grep -qxF "$want"; then
    ok "-p with ANTHROPIC_API_KEY and ANTHROPIC_BASE_URL: anthropic, answered through a 503 and a cut"
else
    bad "-p from the environment: rc=$rc out=$(cat out) err=$(cat err)"
fi
grep -q '^> POST /v1/messages HTTP/1.1$' err && grep -q '^> x-api-key: \[REDACTED\]$' err &&
    grep -q '^< HTTP/1.1 503 ' err && grep -q '^< HTTP/1.1 200 OK$' err &&
    grep -qi '^< content-type: text/event-stream' err &&
    [ "$(grep -c '^> POST ' err)" -eq 3 ] &&
    ok "-v: every request's and response's head, curl-style, the key header redacted" ||
    bad "-v heads: $(cat err)"
if ! grep -q '^> ' err || grep -q 'SECRET' err out || grep -q 'retry budget' err; then
    bad "-v shows a secret or a body: $(grep -n -e SECRET -e 'retry budget' err out)"
else
    ok "-v shows neither the key nor a request or response body"
fi
kill "$mock_pid" 2>/dev/null && wait "$mock_pid" 2>/dev/null
mock_pid=

AGENTHOST_MOCK_PLAN='[{"status": 400}]' "${noenv[@]}" AGENTHOST_MOCK_PLAN='[{"status": 400}]' \
    "$bin" -p "q" --provider mock >out 2>err
rc=$?
[ "$rc" -eq 1 ] && grep -q 'agenthost: failed: HTTP 400' err &&
    ok "a run that fails exits 1 with its error" || bad "failed run: rc=$rc $(cat out err)"

"${noenv[@]}" "$bin" -p "q" >out 2>err
rc=$?
[ "$rc" -eq 2 ] && grep -q 'set ANTHROPIC_API_KEY or OPENAI_API_KEY' err &&
    ok "no key anywhere: exit 2 naming the variables" || bad "no key: rc=$rc $(cat err)"
"${noenv[@]}" "$bin" -p "q" --provider openai >out 2>err
rc=$?
[ "$rc" -eq 2 ] && grep -q 'no API key for api.openai.com: set OPENAI_API_KEY' err &&
    ok "--provider openai without its key: exit 2, before any request" ||
    bad "--provider openai: rc=$rc $(cat err)"
"${noenv[@]}" "$bin" -p "q" --provider gemeni >out 2>err
[ $? -eq 2 ] && grep -q "unknown provider 'gemeni'" err && ok "an unknown provider" ||
    bad "unknown provider: $(cat err)"

echo 'print(1)' >s.lua
"$bin" -p "q" s.lua >out 2>err
[ $? -eq 2 ] && grep -q 'without a script' err && ok "-p and a script: usage error" ||
    bad "-p + script: $(cat err)"
"$bin" --model m s.lua >out 2>err
[ $? -eq 2 ] && grep -q -- '--model goes with -p' err && ok "--model without -p: usage error" ||
    bad "--model without -p: $(cat err)"
"$bin" -p >out 2>err
[ $? -eq 2 ] && grep -q -- '-p needs a value' err && ok "-p without a question" ||
    bad "-p alone: $(cat err)"
"$bin" --help | grep -q -- '-p QUESTION' && "$bin" --help | grep -q -- '-v, --verbose' &&
    ok "--help documents -p and -v" || bad "--help"

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
