#!/usr/bin/env bash
# host_check.sh LUA - checks tests/lua/host.lua under the interpreter LUA (lua5.1, luajit,
# lua5.4, ...; LUA_CPATH/LUA_PATH find that runtime's module): the script's arg and ...,
# its main chunk in a scheduler coroutine (a plain coroutine.yield there is a cooperative
# yield, not "outside a coroutine"), status 1 with file:line: and a traceback for a
# runtime or syntax error, 2 for a missing script, and os.exit(n) after a wait ending the
# process with n.
set -u
lua=$1
here=$(cd "$(dirname "$0")" && pwd)
host=$here/host.lua
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
ok() { echo "ok: $1"; }
bad() { echo "FAIL: $1"; shift; [ $# -gt 0 ] && cat "$@"; fail=$((fail + 1)); }

out=$("$lua" "$host" "$here/cli_args.lua" one two 2>"$tmp/err")
want="n=2	arg0=$here/cli_args.lua	arg1=one	arg2=two	dots1=one	argneg1=$host	#arg=2"
if [ "$out" = "$want" ]; then ok "arg and ... as lua gives them"; else
    bad "arg: got '$out', want '$want'" "$tmp/err"; fi

cat >"$tmp/yield.lua" <<'EOF'
local ah = require "agenthost"
local seen = {}
local r = ah.parallel { function() seen[#seen + 1] = "child" end }
coroutine.yield() -- a cooperative yield of the main chunk's coroutine
print("resumed", #seen, r.n)
EOF
out=$("$lua" "$host" "$tmp/yield.lua" 2>"$tmp/err")
if [ "$out" = "resumed	1	1" ]; then ok "the main chunk is a scheduler coroutine"; else
    bad "main chunk coroutine: got '$out'" "$tmp/err"; fi

"$lua" "$host" "$here/cli_runtime_error.lua" >"$tmp/out" 2>"$tmp/err"
rc=$?
if [ $rc -eq 1 ] && grep -q "cli_runtime_error.lua:2: deliberate failure" "$tmp/err" &&
   grep -q "stack traceback:" "$tmp/err"; then ok "a runtime error: status 1, file:line:, traceback"
else bad "runtime error (status $rc)" "$tmp/err"; fi

"$lua" "$host" "$here/cli_syntax_error.lua" >"$tmp/out" 2>"$tmp/err"
rc=$?
if [ $rc -eq 1 ] && grep -q "cli_syntax_error.lua:3:" "$tmp/err"; then
    ok "a syntax error: status 1, file:line:"
else bad "syntax error (status $rc)" "$tmp/err"; fi

"$lua" "$host" "$tmp/none.lua" >"$tmp/out" 2>"$tmp/err"
rc=$?
if [ $rc -eq 2 ] && grep -q "cannot open script" "$tmp/err"; then ok "a missing script: status 2"
else bad "missing script (status $rc)" "$tmp/err"; fi

printf 'local ah = require "agenthost"\nah.sleep(1)\nos.exit(7)\n' >"$tmp/exit.lua"
"$lua" "$host" "$tmp/exit.lua" >"$tmp/out" 2>"$tmp/err"
rc=$?
if [ $rc -eq 7 ]; then ok "os.exit(7) after a wait: status 7"; else
    bad "os.exit (status $rc)" "$tmp/err"; fi

[ $fail -eq 0 ] || { echo "$fail check(s) failed"; exit 1; }
