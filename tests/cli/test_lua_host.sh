#!/usr/bin/env bash
# The Lua host program: --events / AGENTHOST_EVENTS JSON Lines (no API key in them), the
# arg table, hooks that fail logged once, and errors: a syntax or runtime error exits 1
# with file:line: on stderr, a missing script or a bad option exits 2.
set -u
bin=$1
here=$(cd "$(dirname "$0")/../lua" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0 passed=0
ok() { echo "ok: $1"; passed=$((passed + 1)); }
bad() { echo "FAIL: $1"; shift; [ $# -gt 0 ] && cat "$@"; fail=$((fail + 1)); }
KEY="sk-ant-api03-PLANTED-KEY-0123456789abcdefXYZ"

# --events FILE
if "$bin" --events "$tmp/ev.jsonl" "$here/cli_events.lua" "$KEY" >"$tmp/out" 2>"$tmp/err" &&
   "$bin" "$here/cli_check_events.lua" "$tmp/ev.jsonl" "$KEY" >"$tmp/chk" 2>&1; then
    ok "--events writes JSON Lines from run_start to run_end"
else
    bad "--events" "$tmp/out" "$tmp/err" "$tmp/chk"
fi
if grep -q "$KEY" "$tmp/ev.jsonl" "$tmp/err" "$tmp/out"; then
    bad "the API key leaked into events or output"
else
    ok "no API key in events, stdout or stderr"
fi
# AGENTHOST_EVENTS=FILE, and --events=FILE
if AGENTHOST_EVENTS="$tmp/env.jsonl" "$bin" "$here/cli_events.lua" "$KEY" >/dev/null 2>&1 &&
   "$bin" "$here/cli_check_events.lua" "$tmp/env.jsonl" "$KEY" >"$tmp/chk" 2>&1; then
    ok "AGENTHOST_EVENTS=FILE"
else
    bad "AGENTHOST_EVENTS" "$tmp/chk"
fi
if "$bin" --events="$tmp/eq.jsonl" "$here/cli_events.lua" "$KEY" >/dev/null 2>&1 &&
   [ -s "$tmp/eq.jsonl" ]; then
    ok "--events=FILE"
else
    bad "--events=FILE"
fi
# the run_id printed by the script is the one in the events
rid=$(sed -n 's/^ran //p' "$tmp/out")
if [ -n "$rid" ] && grep -q "\"run_id\":\"$rid\"" "$tmp/ev.jsonl"; then
    ok "run_start carries the run's id"
else
    bad "run_id in events" "$tmp/out"
fi

# arg handling like lua
out=$("$bin" "$here/cli_args.lua" one "two words" 2>&1)
want="n=2	arg0=$here/cli_args.lua	arg1=one	arg2=two words	dots1=one	argneg1=$bin	#arg=2"
if [ "$out" = "$want" ]; then ok "arg table and ..."; else bad "arg: got '$out' want '$want'"; fi
out=$("$bin" --events "$tmp/x.jsonl" -- "$here/cli_args.lua" -x 2>&1)
case "$out" in
    *"arg1=-x"*"argneg1=--"*) ok "options before the script, -- and a dash argument" ;;
    *) bad "arg after --: $out" ;;
esac
out=$(echo 'print(select("#", ...), ...)' | "$bin" - a b 2>&1)
if [ "$out" = "2	a	b" ]; then ok "script from stdin"; else bad "stdin: $out"; fi

# hooks failing on every call: each logged once, runs complete
if "$bin" "$here/cli_hooks.lua" >"$tmp/out" 2>"$tmp/err" && grep -q "completed twice" "$tmp/out"; then
    ok "runs complete despite failing hooks"
else
    bad "failing hooks" "$tmp/out" "$tmp/err"
fi
n_ev=$(grep -c "^agenthost: warning: on_event (run_[0-9a-f]*): .*on_event is broken" "$tmp/err")
n_ro=$(grep -c "^agenthost: warning: policy.retry_on (run_[0-9a-f]*): .*retry_on is broken" "$tmp/err")
if [ "$n_ev" -eq 1 ] && [ "$n_ro" -eq 1 ]; then
    ok "each failing hook is logged once (with its traceback)"
else
    bad "hook log lines: on_event $n_ev, retry_on $n_ro (want 1 each)" "$tmp/err"
fi
if grep -q "stack traceback" "$tmp/err"; then ok "the log has the traceback"; else bad "no traceback" "$tmp/err"; fi

# errors
"$bin" "$here/cli_syntax_error.lua" >"$tmp/out" 2>"$tmp/err"; rc=$?
if [ $rc -eq 1 ] && grep -q "cli_syntax_error.lua:3:" "$tmp/err"; then
    ok "a syntax error exits 1 with file:line:"
else
    bad "syntax error: exit $rc" "$tmp/err"
fi
"$bin" "$here/cli_runtime_error.lua" >"$tmp/out" 2>"$tmp/err"; rc=$?
if [ $rc -eq 1 ] && grep -q "^agenthost: .*cli_runtime_error.lua:2: deliberate failure" "$tmp/err" &&
   grep -q "stack traceback" "$tmp/err"; then
    ok "a runtime error exits 1 with file:line: message and a traceback"
else
    bad "runtime error: exit $rc" "$tmp/err"
fi
"$bin" "$tmp/no-such-script.lua" >"$tmp/out" 2>"$tmp/err"; rc=$?
if [ $rc -eq 2 ] && grep -q "cannot open script '.*no-such-script.lua'" "$tmp/err"; then
    ok "a missing script exits 2 with a clear message"
else
    bad "missing script: exit $rc" "$tmp/err"
fi
"$bin" --events >"$tmp/out" 2>"$tmp/err"; rc=$?
[ $rc -eq 2 ] && ok "--events without a file is a usage error" || bad "--events alone: $rc" "$tmp/err"
"$bin" --events "$tmp/nodir/x.jsonl" "$here/cli_args.lua" >"$tmp/out" 2>"$tmp/err"; rc=$?
if [ $rc -eq 2 ] && grep -q "cannot open events file" "$tmp/err"; then
    ok "an events file that cannot be opened is a usage error"
else
    bad "bad events file: $rc" "$tmp/err"
fi

echo "$passed passed, $fail failed"
[ "$fail" -eq 0 ]
