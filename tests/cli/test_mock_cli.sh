#!/usr/bin/env bash
# `agenthost mock`: starts on a free port and prints its URL, serves one failing and one
# ok request from a plan file, refuses a bad plan naming the step and the field (exit 2),
# refuses a busy port (exit 1), and stops cleanly on SIGTERM.
set -u
bin=$1
. "$(dirname "$0")/wait_lib.sh"
tmp=$(mktemp -d)
pass=0 fail=0
pid=
cleanup() {
    [ -n "$pid" ] && kill "$pid" 2>/dev/null
    rm -rf "$tmp"
}
trap cleanup EXIT
ok() { echo "ok: $1"; pass=$((pass + 1)); }
bad() { echo "FAIL: $1"; fail=$((fail + 1)); }
check() { # description, condition command...
    local what=$1; shift
    if "$@"; then ok "$what"; else bad "$what"; fi
}

cat >"$tmp/plan.json" <<'PLAN'
[{"status": 503, "headers": {"retry-after": "7"}}]
PLAN
"$bin" mock --port 0 --plan "$tmp/plan.json" >"$tmp/url" 2>"$tmp/err" &
pid=$!
wait_until "$pid" test -s "$tmp/url" # until it prints its URL or exits
url=$(head -n 1 "$tmp/url")
check "prints its URL on one line" grep -Eq '^http://127\.0\.0\.1:[0-9]+$' "$tmp/url"
check "prints nothing else on stdout" test "$(wc -l <"$tmp/url")" -eq 1

body='{"model":"m","max_tokens":64,"stream":true,"messages":[{"role":"user","content":"hi"}]}'
code=$(curl -sN -o "$tmp/b1" -D "$tmp/h1" -w '%{http_code}' "$url/v1/messages" -d "$body")
check "first request gets the plan's 503" test "$code" = 503
check "with the plan's retry-after header" grep -qi '^retry-after: 7' "$tmp/h1"
check "and an Anthropic error body" grep -q '"type":"error"' "$tmp/b1"

code=$(curl -sN -o "$tmp/b2" -w '%{http_code}' "$url/v1/messages" -d "$body")
check "second request (plan exhausted) is ok" test "$code" = 200
check "and streams to message_stop" grep -q '^event: message_stop$' "$tmp/b2"

port=${url##*:}
"$bin" mock --port "$port" >/dev/null 2>"$tmp/busy"
rc=$?
check "a busy port exits 1" test "$rc" -eq 1
check "and names the port" grep -q "cannot listen on 127.0.0.1:$port" "$tmp/busy"

kill -TERM "$pid"
wait "$pid"
rc=$?
pid=
check "SIGTERM stops it with exit 0" test "$rc" -eq 0

printf '[{"ok": true},\n {"cut_after_event": 2}]\n' >"$tmp/bad.json"
"$bin" mock --port 0 --plan "$tmp/bad.json" >"$tmp/out" 2>"$tmp/err"
rc=$?
check "a bad plan exits 2" test "$rc" -eq 2
check "naming the step and the field" \
    grep -q "bad.json: plan step 2: unknown field 'cut_after_event'" "$tmp/err"
check "and printing no URL" test ! -s "$tmp/out"

"$bin" mock --plan "$tmp/missing.json" >/dev/null 2>"$tmp/err"
rc=$?
check "a missing plan file exits 2" test "$rc" -eq 2
"$bin" mock --port nope >/dev/null 2>&1
rc=$?
check "a bad --port exits 2" test "$rc" -eq 2
"$bin" mock --help | grep -q -- '--plan' && ok "mock --help lists --plan" || bad "mock --help"

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
