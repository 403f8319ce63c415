#!/usr/bin/env bash
# What the shared objects export and need:
#   - libagenthost.so exports only functions declared AH_EXPORT in the public headers
#     (core/include), none of the internal ah__* ones (hidden visibility, and
#     cmake/libagenthost.map as a second guard); its SONAME carries the ABI version; it
#     does not need libmicrohttpd (the mock provider is libagenthost_mock);
#   - the Lua module agenthost.so exports only luaopen_agenthost (cmake/lua_module.map),
#     needs libagenthost.so and defines none of its functions: one core per process.
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
    grep -rqE "^AH_EXPORT .*\\b$s\\b *\\(" "$inc" || undeclared="$undeclared $s"
done
[ -z "$undeclared" ] && ok "every exported symbol is declared AH_EXPORT in a public header" ||
    bad "exported but not declared AH_EXPORT in core/include:$undeclared"
# The other direction: a function declared in a public header without AH_EXPORT is
# hidden (no error anywhere until a program fails to link or load), so every top-level
# prototype of an ah_ function must carry the mark.
unmarked=$(grep -nE '^[a-z][A-Za-z0-9_ *]*[ *]ah_[a-z0-9_]+ *\(' "$inc"/agenthost.h "$inc"/agenthost/*.h |
    grep -vE ':(typedef|return|static|extern) ' | sed "s|^$inc/||" | cut -c1-100)
[ -z "$unmarked" ] && ok "every ah_ prototype in the public headers is AH_EXPORT" ||
    bad "public prototypes without AH_EXPORT (they would not be exported; prefix them):
$unmarked"
needed() { readelf -d "$1" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'; }
lib_needed=$(needed "$lib")
echo "$lib_needed" | grep -q microhttpd && bad "libagenthost.so needs libmicrohttpd" ||
    ok "libagenthost.so does not need libmicrohttpd ($(echo $lib_needed | tr ' ' ','))"
echo "$all" | grep -q '^ah_mock_' && bad "libagenthost.so exports the mock" ||
    ok "libagenthost.so exports no ah_mock_ function"
soname=$(readelf -d "$lib" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
ver=$(sed -n 's/^#define AH_VERSION_STRING "\(.*\)"/\1/p' "$inc/agenthost/status.h")
case "$ver" in 0.*) want=libagenthost.so.${ver%.*} ;; *) want=libagenthost.so.${ver%%.*} ;; esac
[ "$soname" = "$want" ] && ok "SONAME $soname (the ABI version of $ver)" ||
    bad "SONAME is '$soname', want $want for version $ver"
m=$(syms "$mod" | grep -v '^_')
[ "$m" = luaopen_agenthost ] && ok "agenthost.so exports luaopen_agenthost alone" ||
    bad "agenthost.so exports: $(echo "$m" | head -n 5 | tr '\n' ' ')"
uvlib=$build/libagenthost_uv.so
if [ -f "$uvlib" ]; then
    uvx=$(syms "$uvlib" | grep -v '^_' | grep -v '^ah_uv_')
    [ -z "$uvx" ] && ok "libagenthost_uv.so exports only ah_uv_ functions" ||
        bad "libagenthost_uv.so also exports: $(echo $uvx | cut -c1-200)"
fi
mod_needed=$(needed "$mod")
echo "$mod_needed" | grep -qx "$soname" && ok "agenthost.so needs $soname" ||
    bad "agenthost.so does not need $soname: $(echo $mod_needed)"
# Defined anywhere in the module, local symbols included (the build tree is not stripped):
# a core function compiled into it would be a second core.
copies=$(comm -12 <(nm --defined-only "$mod" | awk '{print $3}' | sort -u) <(echo "$all"))
[ -z "$copies" ] && ok "agenthost.so defines none of libagenthost.so's functions" ||
    bad "agenthost.so has its own copy of: $(echo $copies | cut -c1-200)"
# The mock library carries no core of its own (its user links one beside it).
mocklib=$build/libagenthost_mock.a
if [ -f "$mocklib" ]; then
    mcore=$(comm -12 <(nm --defined-only "$mocklib" 2>/dev/null | awk 'NF == 3 && $2 ~ /^[TDBR]$/ {print $3}' | sort -u) <(echo "$all"))
    [ -z "$mcore" ] && ok "libagenthost_mock.a defines none of libagenthost.so's functions" ||
        bad "libagenthost_mock.a has its own copy of: $(echo $mcore | cut -c1-200)"
fi
# With libagenthost.so found, the module's only unresolved symbols are Lua's (the
# interpreter provides them): nothing it calls is hidden in the library.
unres=$(ldd -r "$mod" 2>&1 | sed -n 's/^undefined symbol: \([^ ,	]*\).*/\1/p' | grep -vE '^luaL?_' | head -n 5)
[ -z "$unres" ] && ok "agenthost.so resolves everything but Lua's API against its NEEDED libraries" ||
    bad "agenthost.so leaves unresolved: $(echo $unres)"
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
