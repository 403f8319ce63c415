#!/usr/bin/env bash
# agenthost-dev-1.rockspec installs a working module with `luarocks make`: from a copy of
# the files the rock needs (one copy, one version after another, as a user would), for
# Lua 5.1 to 5.4 and LuaJIT (luarocks' 5.1 configured for LuaJIT through a config file),
# into scratch trees, with no rocks server reachable. Then the copy (and its
# build.luarocks/) is deleted, and tests/cli/luarocks_check.lua runs from an empty
# directory with LUA_PATH/LUA_CPATH from `luarocks path` alone: an agent through a 503
# and a cut stream, agenthost.status and agenthost.policy from the tree, and no mapped
# agenthost file outside the tree. The installed agenthost.so has no RPATH/RUNPATH and
# exports luaopen_agenthost alone.
# AH_LUAROCKS_VERSIONS="5.1 5.4" picks fewer (the first make takes 20-30 s on 2 cores,
# each further one about 7 s: the core's objects are reused). Skips, exit 0, without
# luarocks or cmake; a runtime whose interpreter or headers are missing is skipped alone.
set -u
prog=$1
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/../.." && pwd)
build=$(cd "$(dirname "$prog")" && pwd)
fail=0 pass=0
ok() { echo "ok: $1"; pass=$((pass + 1)); }
bad() { echo "FAIL: $1"; fail=$((fail + 1)); }
skip() { echo "SKIP: $1"; exit 0; }

command -v luarocks >/dev/null || skip "luarocks is not installed (Debian: luarocks)"
command -v cmake >/dev/null || skip "cmake is not installed"
# luarocks builds the rock with its own flags, whatever this build's are: once is enough,
# in the plain build (not again under ASan or valgrind).
if grep -q '^AH_SANITIZE:BOOL=ON' "$build/CMakeCache.txt" 2>/dev/null ||
    grep -q '^AH_TEST_LAUNCHER:STRING=.' "$build/CMakeCache.txt" 2>/dev/null; then
    skip "the rock is checked in the plain build only (its flags are luarocks', not this build's)"
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# luarocks reads no user config (a ~/.luarocks/config-5.1.lua could point 5.1 at LuaJIT)
# and writes nothing into the real home.
mkdir -p "$tmp/home"
unset LUAROCKS_CONFIG LUAROCKS_CONFIG_5_1 LUAROCKS_CONFIG_5_2 LUAROCKS_CONFIG_5_3 \
    LUAROCKS_CONFIG_5_4 XDG_CONFIG_HOME
export HOME=$tmp/home
# An empty directory as the only server: anything the rockspec would fetch fails.
mkdir -p "$tmp/no-server"
export CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-2}

# LuaJIT: luarocks' Lua 5.1 with the luajit interpreter and LuaJIT's headers.
jit_inc=$(pkg-config --variable=includedir luajit 2>/dev/null)
[ -n "$jit_inc" ] || jit_inc=/usr/include/luajit-2.1
cat >"$tmp/luajit-config.lua" <<EOF
lua_interpreter = "luajit"
variables = { LUA_INCDIR = "$jit_inc" }
EOF

# luarocks for runtime $1, then its arguments.
lr() {
    local rt=$1
    shift
    if [ "$rt" = luajit ]; then
        LUAROCKS_CONFIG_5_1=$tmp/luajit-config.lua luarocks --lua-version 5.1 "$@"
    else
        luarocks --lua-version "$rt" "$@"
    fi
}

# The copy: only what the rock is built from (rockspec, CMake, sources, scripts, docs).
mkdir -p "$tmp/src"
(cd "$src" && cp -r agenthost-dev-1.rockspec CMakeLists.txt cmake core lua scripts docs \
    "$tmp/src/") || { bad "copy the checkout"; echo "$pass passed, $fail failed"; exit 1; }
mkdir -p "$tmp/work"
cp "$here/luarocks_check.lua" "$tmp/work/"
scripts=$(cd "$src/scripts" && ls -- *.lua)

built=()
for rt in ${AH_LUAROCKS_VERSIONS:-5.1 5.2 5.3 5.4 luajit}; do
    abi=$rt
    [ "$rt" = luajit ] && abi=5.1
    interp=$(lr "$rt" config variables.LUA 2>/dev/null)
    incdir=$(lr "$rt" config variables.LUA_INCDIR 2>/dev/null)
    # luarocks names an interpreter even when it found none: ask it what it is
    want="Lua $rt"
    [ "$rt" = luajit ] && want=LuaJIT
    if [ -n "$interp" ] && [ -x "$interp" ]; then
        case $("$interp" -e 'io.write(jit and "LuaJIT" or _VERSION)' 2>/dev/null) in
        "$want") ;;
        *) interp= ;;
        esac
    else
        interp=
    fi
    if [ -z "$interp" ]; then
        echo "SKIP $rt: no interpreter (Debian: lua$rt / luajit)"
        continue
    fi
    if [ -z "$incdir" ] || [ ! -f "$incdir/lua.h" ]; then
        echo "SKIP $rt: no Lua headers (Debian: liblua$rt-dev / libluajit-5.1-dev)"
        continue
    fi
    tree=$tmp/tree-$rt
    t0=$(date +%s%N)
    if (cd "$tmp/src" && lr "$rt" --tree "$tree" --only-server "$tmp/no-server" make) \
        >"$tmp/make-$rt.log" 2>&1; then
        ok "$rt: luarocks make ($(( ($(date +%s%N) - t0) / 1000000 )) ms, headers $incdir)"
    else
        bad "$rt: luarocks make"
        tail -n 40 "$tmp/make-$rt.log"
        continue
    fi
    so=$tree/lib/lua/$abi/agenthost.so
    [ -f "$so" ] && ok "$rt: lib/lua/$abi/agenthost.so installed" || bad "$rt: $so installed"
    for s in $scripts; do
        [ -f "$tree/share/lua/$abi/agenthost/$s" ] && ok "$rt: share/lua/$abi/agenthost/$s" ||
            bad "$rt: share/lua/$abi/agenthost/$s installed"
    done
    if command -v readelf >/dev/null && [ -f "$so" ]; then
        dyn=$(readelf -d "$so")
        echo "$dyn" | grep -qE 'RPATH|RUNPATH' && bad "$rt: no run path: $(echo "$dyn" | grep -E 'RPATH|RUNPATH')" ||
            ok "$rt: no RPATH/RUNPATH"
        echo "$dyn" | grep -qE 'NEEDED.*lib(agenthost|lua|luajit)' &&
            bad "$rt: needs no libagenthost or liblua: $(echo "$dyn" | grep NEEDED)" ||
            ok "$rt: the core is inside the module (no libagenthost, no liblua NEEDED)"
    fi
    if command -v nm >/dev/null && [ -f "$so" ]; then
        exports=$(nm -D --defined-only "$so" | awk '{print $3}' | tr '\n' ' ')
        [ "$exports" = "luaopen_agenthost " ] && ok "$rt: exports luaopen_agenthost alone" ||
            bad "$rt: exports luaopen_agenthost alone: $exports"
    fi
    built+=("$rt:$interp")
done
[ ${#built[@]} -gt 0 ] || [ "$fail" -gt 0 ] ||
    skip "no Lua runtime with interpreter and headers for luarocks"

# Nothing of the copy or its build.luarocks/ is left to load from.
rm -rf "$tmp/src"
cd "$tmp/work" || exit 1
for b in "${built[@]}"; do
    rt=${b%%:*} interp=${b#*:}
    tree=$tmp/tree-$rt
    lpath=$(lr "$rt" --tree "$tree" path --lr-path)
    lcpath=$(lr "$rt" --tree "$tree" path --lr-cpath)
    # the tree's paths only: no LUA_INIT, no checkout, no build dir
    if out=$(env -i PATH=/usr/bin:/bin HOME="$HOME" LUA_PATH="$lpath" LUA_CPATH="$lcpath" \
        "$interp" luarocks_check.lua "$tree" 2>&1); then
        ok "$rt: $interp runs an agent with the installed module alone"
    else
        bad "$rt: $interp runs an agent with the installed module alone"
        echo "$out"
    fi
done

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
