#!/usr/bin/env bash
# What the shared objects export: libagenthost.so only functions declared in the public
# headers (core/include), none of the internal ah__* ones; the Lua module agenthost.so
# only luaopen_agenthost (cmake/libagenthost.map, cmake/lua_module.map).
set -u
prog=$1
build=$(cd "$(dirname "$prog")" && pwd)
inc=$(cd "$(dirname "$0")/../../core/include" && pwd)
fail=0 pass=0
ok() { echo "ok: $1"; pass=$((pass + 1)); }
bad() { echo "FAIL: $1"; fail=$((fail + 1)); }
syms() { nm -D --defined-only "$1" | awk '$2 ~ /^[TDBRVW]$/ {print $3}' | sed 's/@.*//' | sort -u; }

lib=$build/libagenthost.so
mod=$build/agenthost.so
[ -f "$lib" ] && [ -f "$mod" ] || { bad "built objects exist"; echo "$pass passed, $fail failed"; exit 1; }
all=$(syms "$lib")
n=$(echo "$all" | grep -c .)
internal=$(echo "$all" | grep '^ah__' | head -n 5)
[ -z "$internal" ] && ok "libagenthost.so exports no ah__ internals ($n symbols)" ||
    bad "libagenthost.so exports internals: $internal"
undeclared=
for s in $(echo "$all" | grep -v '^_'); do
    grep -rqE "\\b$s\\b *\\(" "$inc" || undeclared="$undeclared $s"
done
[ -z "$undeclared" ] && ok "every exported symbol is declared in a public header" ||
    bad "exported but not declared in core/include:$undeclared"
m=$(syms "$mod" | grep -v '^_')
[ "$m" = luaopen_agenthost ] && ok "agenthost.so exports luaopen_agenthost alone" ||
    bad "agenthost.so exports: $(echo "$m" | head -n 5 | tr '\n' ' ')"
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
