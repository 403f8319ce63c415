#!/usr/bin/env bash
# The one Lua gate (lua/gate.c): no other file of the binding calls lua_pcall, lua_call
# or lua_resume itself; an error anywhere in the host's main chunk gives a message, a
# traceback and exit status 1 (never a Lua panic); a failing log handler is reported
# once with its traceback and the program goes on; a log handler cannot wait.
set -u
bin=$1
root=$(cd "$(dirname "$0")/../.." && pwd)
here=$root/tests/lua
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0 passed=0
ok() { echo "ok: $1"; passed=$((passed + 1)); }
bad() { echo "FAIL: $1"; shift; [ $# -gt 0 ] && cat "$@"; fail=$((fail + 1)); }

# 1. Raw calls into Lua only in the gate. The files allowed to hold them:
allowed="lua/gate.c"
raw=$(cd "$root" && grep -nE '\blua_(pcallk?|callk?|resume)[[:space:]]*\(' lua/*.c lua/*.h |
      grep -vE "^($(echo $allowed | tr ' ' '|')):")
if [ -z "$raw" ]; then
    ok "lua_pcall / lua_call / lua_resume appear only in: $allowed"
else
    { echo "$raw"
      echo "(call through lua/gate.c instead: lah_gate_call, lah_gate_callk, lah_gate_resume,"
      echo " lah_gate_protect, lah_gate_call_raising, lah_pcall_hook_at; or list the file in"
      echo " 'allowed' above with the reason)"; } >"$tmp/raw"
    bad "raw calls into Lua outside the gate" "$tmp/raw"
fi
n=$(cd "$root" && grep -cE '\blua_(pcallk?|callk?|resume)[[:space:]]*\(' lua/gate.c)
if [ "$n" -ge 1 ]; then ok "the gate holds the raw calls ($n)"; else bad "the grep finds nothing in the gate"; fi

# 2. Errors in the main chunk: message, traceback, status 1, no panic.
for how in string table tostring nested; do
    "$bin" "$here/cli_gate_errors.lua" "$how" >"$tmp/out" 2>"$tmp/err"
    rc=$?
    if [ "$rc" -eq 1 ] && grep -q "stack traceback:" "$tmp/err" &&
       ! grep -qi "panic" "$tmp/err" && [ "$(grep -c '^agenthost: ' "$tmp/err")" -eq 1 ]; then
        ok "main chunk error ($how): one message with a traceback, status 1"
    else
        bad "main chunk error ($how): status $rc" "$tmp/err"
    fi
done
"$bin" "$here/cli_gate_errors.lua" string 2>"$tmp/err"
if grep -q "cli_gate_errors.lua:4: main chunk failed" "$tmp/err" &&
   grep -q "in local 'f'\|in function 'f'\|in upvalue 'f'" "$tmp/err"; then
    ok "the message names file:line and the traceback the function"
else
    bad "message or traceback content" "$tmp/err"
fi
"$bin" "$here/cli_gate_errors.lua" table 2>"$tmp/err"
if grep -q "error object is a table value" "$tmp/err"; then
    ok "a table error value without __tostring is described"
else
    bad "table error value" "$tmp/err"
fi

# 3. A failing log handler: reported once, with its traceback; the program goes on.
"$bin" "$here/cli_gate_errors.lua" log_handler >"$tmp/out" 2>"$tmp/err"
rc=$?
if [ "$rc" -eq 0 ] && grep -q "went on" "$tmp/out" &&
   [ "$(grep -c 'log handler:' "$tmp/err")" -eq 1 ] &&
   grep -q "the handler broke on" "$tmp/err" && grep -q "stack traceback:" "$tmp/err"; then
    ok "a failing log handler is reported once with a traceback; the script goes on"
else
    bad "failing log handler: status $rc" "$tmp/out" "$tmp/err"
fi
# 4. A log handler is a hook: it must not wait.
"$bin" "$here/cli_gate_errors.lua" log_handler_waits >"$tmp/out" 2>"$tmp/err"
rc=$?
if [ "$rc" -eq 0 ] && grep -q "went on" "$tmp/out" &&
   grep -q "ah.sleep cannot be called inside a hook" "$tmp/err"; then
    ok "a log handler that waits is refused (hook depth), the script goes on"
else
    bad "log handler that waits: status $rc" "$tmp/out" "$tmp/err"
fi

echo "$passed passed, $fail failed"
[ "$fail" -eq 0 ]
