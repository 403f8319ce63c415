#!/usr/bin/env bash
# `agenthost proxy` on the command line: bad arguments are refused naming the flag and
# the value (exit 2); with --max-in-flight 1 and one request held open upstream (a stream
# the mock stalls), the next requests are answered at once with the format's overload
# error (Anthropic 529 overloaded_error, OpenAI 503); once the
# held request ends, requests go through again; at SIGTERM the proxy says how many it
# turned away. The client's key appears in none of its output.
set -u
bin=$1
. "$(dirname "$0")/wait_lib.sh"
tmp=$(mktemp -d)
pass=0 fail=0
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
    rm -rf "$tmp"
}
trap cleanup EXIT
ok() { echo "ok: $1"; pass=$((pass + 1)); }
bad() { echo "FAIL: $1"; fail=$((fail + 1)); }
check() { # description, condition command...
    local what=$1
    shift
    if "$@"; then ok "$what"; else bad "$what"; fi
}

refused() { # description, expected stderr pattern, args...
    local what=$1 pat=$2
    shift 2
    "$bin" proxy "$@" >"$tmp/out" 2>"$tmp/err"
    local rc=$?
    check "$what: exit 2" test "$rc" -eq 2
    check "$what: the error names it" grep -q -- "$pat" "$tmp/err"
    check "$what: nothing on stdout" test ! -s "$tmp/out"
}
refused "--max-in-flight 0" "--max-in-flight '0'" --listen 127.0.0.1:0 --max-in-flight 0
refused "--max-in-flight abc" "--max-in-flight 'abc'" --listen 127.0.0.1:0 --max-in-flight abc
refused "--max-in-flight -3" "--max-in-flight '-3'" --listen 127.0.0.1:0 --max-in-flight -3
refused "--max-in-flight 5x" "--max-in-flight '5x'" --listen 127.0.0.1:0 --max-in-flight 5x
refused "--max-in-flight without a value" "missing value '--max-in-flight'" --max-in-flight
refused "an unknown option" "unknown option or missing value '--nope'" --nope 1
refused "--listen without a port" "--listen 'localhost' is not HOST:PORT" --listen localhost

# the mock: the first request's stream stalls after 4 events (held open, no timeout of
# the mock's own); every later one is answered normally
cat >"$tmp/plan.json" <<'PLAN'
{"steps": [{"stall_after_events": 4}]}
PLAN
"$bin" mock --port 0 --plan "$tmp/plan.json" >"$tmp/mock.url" 2>"$tmp/mock.err" &
mock=$!
pids+=("$mock")
wait_until "$mock" test -s "$tmp/mock.url"
murl=$(head -n 1 "$tmp/mock.url")
cat >"$tmp/policy.lua" <<'LUA'
return { policy = { idle_timeout_ms = 600000, attempt_timeout_ms = 600000 } }
LUA
"$bin" proxy --listen 127.0.0.1:0 --anthropic-url "$murl" --openai-url "$murl" \
    --policy "$tmp/policy.lua" --max-in-flight 1 >"$tmp/proxy.url" 2>"$tmp/proxy.err" &
proxy=$!
pids+=("$proxy")
wait_until "$proxy" test -s "$tmp/proxy.url"
purl=$(head -n 1 "$tmp/proxy.url")
check "the proxy prints its URL" grep -Eq '^http://127\.0\.0\.1:[0-9]+$' "$tmp/proxy.url"

key="sk-ant-SECRET-clitest"
abody='{"model":"claude-test","max_tokens":64,"stream":true,"messages":[{"role":"user","content":"hi"}]}'
cbody='{"model":"gpt-test","stream":false,"messages":[{"role":"user","content":"hi"}]}'
ahdr=(-H "x-api-key: $key" -H "anthropic-version: 2023-06-01" -H "content-type: application/json")
curl -sN "${ahdr[@]}" "$purl/v1/messages" -d "$abody" >"$tmp/held" 2>/dev/null &
held=$!
pids+=("$held")
wait_until "$held" grep -q content_block_delta "$tmp/held" # the head and bytes came: in flight
check "the held request is streaming" grep -q content_block_delta "$tmp/held"

code=$(curl -s -o "$tmp/b1" -D "$tmp/h1" -w '%{http_code}' "${ahdr[@]}" "$purl/v1/messages" -d "$abody")
check "a Messages request past the bound gets 529" test "$code" = 529
check "with Anthropic's overloaded_error body" grep -q '"type":"error","error":{"type":"overloaded_error"' "$tmp/b1"
check "naming the bound" grep -q -- 'agenthost proxy: overloaded: --max-in-flight 1 reached' "$tmp/b1"
check "as JSON" grep -qi '^content-type: application/json' "$tmp/h1"
code=$(curl -s -o "$tmp/b2" -w '%{http_code}' -H "Authorization: Bearer sk-SECRET-clitest" \
    -H "content-type: application/json" "$purl/v1/chat/completions" -d "$cbody")
check "a Chat request past the bound gets 503" test "$code" = 503
check "with OpenAI's error body" grep -q '"error":{"message":"agenthost proxy: overloaded: --max-in-flight 1 reached"' "$tmp/b2"
code=$(curl -s -o "$tmp/b3" -w '%{http_code}' "${ahdr[@]}" "$purl/v1/models")
check "a passed-through path past the bound gets the client's format (529)" test "$code" = 529

kill "$held" 2>/dev/null
wait "$held" 2>/dev/null
# the hang-up cancels the held call; until the proxy has seen it, requests may still be
# turned away: ask until one goes through (the mock's plan is exhausted: it answers)
through() {
    code=$(curl -s -o "$tmp/b4" -w '%{http_code}' -H "Authorization: Bearer sk-SECRET-clitest" \
        -H "content-type: application/json" "$purl/v1/chat/completions" -d "$cbody")
    [ "$code" != 503 ]
}
wait_until "$proxy" through
check "after the held request ends, a request goes through (200)" test "$code" = 200
check "with the mock's answer" grep -q '"object":"chat.completion"' "$tmp/b4"

kill -TERM "$proxy"
wait "$proxy"
rc=$?
check "SIGTERM: exit 0" test "$rc" -eq 0
check "it says how many it turned away" grep -Eq 'agenthost proxy: [0-9]+ of [0-9]+ requests answered overloaded at --max-in-flight 1' "$tmp/proxy.err"
check "the key is in none of its output" bash -c "! grep -q SECRET '$tmp/proxy.err' '$tmp/proxy.url'"

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
