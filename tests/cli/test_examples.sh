#!/usr/bin/env bash
# test_examples.sh AGENTHOST_BIN - the examples run and say what they should.
#
# demo.lua, tools.lua, custom_policy.lua and chat.lua run against the built-in mock (no
# API key), examples/embed.c as the agenthost-embed program next to AGENTHOST_BIN. Each
# check is on output the example computes from the run (its result, its events), so a
# change in retry, continuation, tool or budget behaviour shows up here.
set -u
bin=${1:?usage: test_examples.sh AGENTHOST_BIN}
bin=$(cd "$(dirname "$bin")" && pwd)/$(basename "$bin")
root=$(cd "$(dirname "$0")/../.." && pwd)
. "$root/tests/cli/wait_lib.sh"
embed=$(dirname "$bin")/agenthost-embed
pass=0
fail=0
work=$(mktemp -d)
mock_pid=
cleanup() {
    [ -n "$mock_pid" ] && kill "$mock_pid" 2>/dev/null && wait "$mock_pid" 2>/dev/null
    rm -rf "$work"
}
trap cleanup EXIT

ok() { echo "ok: $1"; pass=$((pass + 1)); }
bad() { echo "FAIL: $1"; fail=$((fail + 1)); }

# run NAME CMD... : stdout to $work/NAME.out, stderr to $work/NAME.err, exit code in $rc
run() {
    local name=$1
    shift
    (cd "$work" && "$@" >"$work/$name.out" 2>"$work/$name.err" </dev/null)
    rc=$?
}

# expect NAME FILE FIXED-LINE-OR-SUBSTRING...: every string occurs in FILE
expect() {
    local name=$1 file=$2 s missing=0
    shift 2
    for s in "$@"; do
        grep -qF -- "$s" "$file" || { echo "   missing: $s"; missing=1; }
    done
    if [ "$missing" -eq 0 ]; then ok "$name"; else
        bad "$name; got:"
        sed 's/^/   | /' "$file"
    fi
}

no_control_bytes() { # name file
    if LC_ALL=C grep -q "$(printf '[\r\033]')" "$2"; then bad "$1 (CR/ESC found)"; else ok "$1"; fi
}

# ---- demo.lua ---------------------------------------------------------------------------
run demo "$bin" "$root/examples/demo.lua"
[ "$rc" -eq 0 ] && ok "demo.lua exits 0" || bad "demo.lua exited $rc: $(cat "$work/demo.err")"
expect "demo.lua: answer and counters" "$work/demo.out" \
    "< The tool returned: 84" "outcome: completed" \
    "llm calls: 2, attempts: 5, retries: 2, continuations: 1, tool calls: 1"
expect "demo.lua: what happened" "$work/demo.out" \
    "HTTP 503        retried after" "HTTP 529        retried after 1.0s (the server asked)" \
    "continued (prompt rung): kept 1 block, dropped 1" \
    "restatement     trimmed 20 bytes the model repeated" "tool add        ok, ran 1 time"
# stderr is a file here: one plain line per fault, the retries from the library's log,
# the continuation from the status display.
# The log names the run and numbers the attempt that comes next, as the status line does.
sed -i 's/ of run_[0-9a-f]*:/ of RUN:/' "$work/demo.err"
expect "demo.lua: plain lines on stderr" "$work/demo.err" \
    "agenthost: warning: LLM request 1 of RUN: HTTP 503, retrying (attempt 2/4 in" \
    "agenthost: warning: LLM request 1 of RUN: HTTP 529, retrying (attempt 3/4 in 1000 ms, server)" \
    "agenthost: stream cut - continuing (1/3), kept 1 block, discarded 1"
[ "$(grep -c 'HTTP 529' "$work/demo.err")" -eq 1 ] && [ "$(wc -l <"$work/demo.err")" -eq 3 ] &&
    ok "demo.lua: one line per fault on stderr" ||
    bad "demo.lua: stderr has other than one line per fault: $(cat "$work/demo.err")"
no_control_bytes "demo.lua: no control bytes in its output" "$work/demo.err"

# ---- tools.lua --------------------------------------------------------------------------
run tools "$bin" "$root/examples/tools.lua"
[ "$rc" -eq 0 ] && ok "tools.lua exits 0" || bad "tools.lua exited $rc: $(cat "$work/tools.err")"
expect "tools.lua: a transient failure retried, then a duplicate from the ledger" \
    "$work/tools.out" \
    "tool charge: ok, 2 attempts" \
    "tool charge: ok, 0 attempts (duplicate: the ledger answered, the body did not run)" \
    "quote: ok, amount 420" "gateway: 2 attempts, 1 charge" "#1 charge-order-42 -> ch_1"
# Both answers carry the one original receipt (key order in the JSON may vary).
[ "$(grep -c '< The tool returned: {.*"charge_id":"ch_1"' "$work/tools.out")" -eq 2 ] &&
    ok "tools.lua: both runs answer with the original receipt" ||
    bad "tools.lua: the runs' answers do not both carry receipt ch_1"
[ "$(grep -c 'charge-order' "$work/tools.out")" -eq 1 ] &&
    ok "tools.lua: one ledger entry" || bad "tools.lua: ledger entries differ from one"

# ---- custom_policy.lua ------------------------------------------------------------------
run policy "$bin" "$root/examples/custom_policy.lua"
[ "$rc" -eq 0 ] && ok "custom_policy.lua exits 0" ||
    bad "custom_policy.lua exited $rc: $(cat "$work/policy.err")"
expect "custom_policy.lua: retry_on retries a 409 the default refuses" "$work/policy.out" \
    "default policy:  outcome failed after 1 attempt (0 retries), gave up: not_retryable" \
    "with retry_on:   outcome completed after 2 attempts (1 retry)"
expect "custom_policy.lua: a hint past the deadline ends the call" "$work/policy.out" \
    "outcome failed after 1 attempt (0 retries), gave up: retry_after_too_long"
expect "custom_policy.lua: max_attempts" "$work/policy.out" \
    "outcome failed after 3 attempts (2 retries), gave up: attempts" \
    "error: HTTP 503"
expect "custom_policy.lua: a shared retry budget throttles an outage" "$work/policy.out" \
    "each on its own:                           16 requests, 12 of them retries" \
    "sharing ah.retry_budget{max_tokens = 10}:   8 requests,  4 of them retries"
expect "custom_policy.lua: the tool budget stops retries" "$work/policy.out" \
    "the body ran 3 times (not 10), tool outcome budget_exhausted, event budget_exhausted tool_calls 3/3" \
    "the run goes on (completed)"

# ---- chat.lua ---------------------------------------------------------------------------
run chat_nokey env -u ANTHROPIC_API_KEY -u OPENAI_API_KEY "$bin" "$root/examples/chat.lua"
if [ "$rc" -eq 2 ] && grep -q ANTHROPIC_API_KEY "$work/chat_nokey.err" &&
    grep -q OPENAI_API_KEY "$work/chat_nokey.err" && ! grep -q traceback "$work/chat_nokey.err"
then
    ok "chat.lua without a key: says what to set, exit 2, no traceback"
else
    bad "chat.lua without a key: exit $rc; stderr:"
    sed 's/^/   | /' "$work/chat_nokey.err"
fi
# Two turns of one conversation: the first calls a tool (the mock calls the first tool
# while the conversation has no tool result), the second is answered from it.
printf 'hello there\nand then?\n/quit\n' >"$work/chat.in"
(cd "$work" && "$bin" "$root/examples/chat.lua" mock <"$work/chat.in" >"$work/chat.out" 2>&1)
rc=$?
[ "$rc" -eq 0 ] && grep -qF 'assistant> I will call add now.' "$work/chat.out" &&
    grep -qxF 'The tool returned: 84' "$work/chat.out" &&
    grep -qF 'assistant> You said: "and then?".' "$work/chat.out" &&
    ok "chat.lua mock: two turns, a tool call in the first" ||
    { bad "chat.lua mock: exit $rc"; cat "$work/chat.out"; }
# The real-provider path (keys and base URLs from the environment) against the mock
# program, in the OpenAI formats.
"$bin" mock --port 0 >"$work/mock.url" 2>"$work/mock.err" &
mock_pid=$!
wait_until "$mock_pid" test -s "$work/mock.url"
url=$(head -n1 "$work/mock.url")
for p in openai responses; do
    (cd "$work" && env -u ANTHROPIC_API_KEY OPENAI_API_KEY=sk-test-not-a-key \
        OPENAI_BASE_URL="$url" "$bin" "$root/examples/chat.lua" "$p" <"$work/chat.in" \
        >"$work/chat_$p.out" 2>&1)
    rc=$?
    if [ "$rc" -eq 0 ] && grep -qxF 'The tool returned: 84' "$work/chat_$p.out" &&
        grep -qF 'assistant> You said: "and then?".' "$work/chat_$p.out"; then
        ok "chat.lua $p: key and base URL from the environment"
    else
        bad "chat.lua $p: exit $rc"
        sed 's/^/   | /' "$work/chat_$p.out"
    fi
done

# ---- embed.c ----------------------------------------------------------------------------
if [ -x "$embed" ]; then
    run embed "$embed"
    [ "$rc" -eq 0 ] && ok "agenthost-embed exits 0" || bad "agenthost-embed exited $rc"
    expect "agenthost-embed: events, answer and counters" "$work/embed.out" \
        "retry: HTTP 503, attempt 2/4" "retry: HTTP 529, attempt 3/4 in 300 ms (server asked)" \
        "stream cut: continuing (1/3), kept 1 block(s), discarded 1" \
        'tool add({"a":42,"b":42}) -> 84' "outcome: completed" \
        "answer: The tool returned: 84" \
        "llm_calls: 2, attempts: 5, retries: 2, continuations: 1, tool_calls: 1"
else
    bad "agenthost-embed not built next to $bin"
fi

# ---- embed_uv.c (built when libuv is there, which ./run installs) ------------------------
embed_uv=$(dirname "$bin")/agenthost-embed_uv
if [ -x "$embed_uv" ]; then
    run embed_uv "$embed_uv"
    [ "$rc" -eq 0 ] && ok "agenthost-embed_uv exits 0" || bad "agenthost-embed_uv exited $rc"
    expect "agenthost-embed_uv: three agents through faults beside the app's heartbeat" \
        "$work/embed_uv.out" "retrying after HTTP 503" "retrying after HTTP 529, in 200 ms" \
        "stream cut, continuing (1/3)" "agent 0: completed" "agent 1: completed" \
        "agent 2: completed" "heartbeat 1:" "the application's heartbeat ran"
else
    bad "agenthost-embed_uv not built next to $bin"
fi

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
