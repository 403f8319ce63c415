#!/usr/bin/env bash
# A script gets every argument it is given (issue 26, finding 4: with 44 or more the main
# chunk's arguments overflowed the new coroutine's stack: SIGSEGV, or free(): invalid
# pointer with 60).
set -u
bin=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cat >"$tmp/args.lua" <<'LUA'
local n, last = select("#", ...), select(select("#", ...), ...)
print(n, last, #arg, arg[#arg])
LUA
fail=0
for n in 1 44 60 300; do
    out=$("$bin" "$tmp/args.lua" $(seq "$n") 2>&1)
    rc=$?
    if [ "$rc" -ne 0 ] || [ "$out" != "$(printf '%s\t%s\t%s\t%s' "$n" "$n" "$n" "$n")" ]; then
        echo "FAIL: $n arguments: rc $rc, output '$out'"
        fail=1
    else
        echo "ok: $n arguments reach the script (... and arg)"
    fi
done
exit $fail
