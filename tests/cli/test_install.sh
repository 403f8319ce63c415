#!/usr/bin/env bash
# The install is relocatable: `cmake --install` into a temporary prefix, the tree is then
# moved elsewhere and the source tree is out of reach (the scripts are read from a copy
# of the checkout-free temp dir), and from the moved tree:
#   - the program finds its shipped scripts (agenthost.status) under the moved prefix;
#   - a plain lua5.4 loads the module and its scripts from the moved prefix;
#   - every Lua runtime's interpreter loads its module and the scripts from the moved
#     prefix with the LUA_CPATH / LUA_PATH the README gives (the scripts first, before
#     the module could add its own searcher);
#   - the pc file's prefix is the moved tree, and a pkg-config build of the installed
#     examples/embed.c (share/doc/agenthost/examples) with the README's -Wl,-rpath runs
#     against the moved library without LD_LIBRARY_PATH;
#   - a find_package(agenthost) CMake build does likewise;
#   - the man page, the docs and the examples are installed.
set -u
prog=$1
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/../.." && pwd)
# The build tree is the program's directory (a valgrind wrapper lives there too).
build=$(cd "$(dirname "$prog")" && pwd)
fail=0 pass=0
ok() { echo "ok: $1"; pass=$((pass + 1)); }
bad() { echo "FAIL: $1"; fail=$((fail + 1)); }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cmake --install "$build" --prefix "$tmp/first" >"$tmp/install.log" 2>&1 ||
    { cat "$tmp/install.log"; echo "0 passed, 1 failed"; exit 1; }
mv "$tmp/first" "$tmp/moved"
P=$tmp/moved
libdir=$(cd "$P" && ls -d lib lib64 lib/*-linux-gnu 2>/dev/null | while read -r d; do
    [ -e "$P/$d/pkgconfig/agenthost.pc" ] && echo "$d"; done | head -n1)
[ -n "$libdir" ] || { bad "agenthost.pc installed"; echo "$pass passed, $fail failed"; exit 1; }

# Everything below runs from an empty directory with no path into the build or source tree.
work=$tmp/work
mkdir -p "$work"
cd "$work" || exit 1
cat >where.lua <<'EOF'
local ah = require "agenthost"
local _, where = require "agenthost.status"
print(where)
print(type(ah.agent))
EOF
unset AGENTHOST_SCRIPTS LUA_PATH LUA_CPATH LUA_PATH_5_4 LUA_CPATH_5_4
out=$("$P/bin/agenthost" where.lua 2>&1)
case "$out" in
"$P/"*"/agenthost/status.lua"*function*) ok "the moved program reads its scripts from the moved prefix" ;;
*) bad "the moved program reads its scripts from the moved prefix: $out" ;;
esac

# A sanitized module needs the sanitizer runtime preloaded into lua5.4, and a sanitized
# library needs -fsanitize to link: the ASan build checks the same paths with them.
san=()
nm -D "$P/$libdir/libagenthost.so" 2>/dev/null | grep -q __asan_init && san=(-fsanitize=address,undefined)
if command -v lua5.4 >/dev/null; then
    pre=
    [ ${#san[@]} -gt 0 ] && pre=$(cc -print-file-name=libasan.so)
    out=$(LD_PRELOAD=$pre ASAN_OPTIONS=detect_leaks=0 LUA_CPATH="$P/$libdir/lua/5.4/?.so;;" \
          lua5.4 where.lua 2>&1)
    case "$out" in
    "$P/"*"/agenthost/status.lua"*function*) ok "lua5.4 loads the moved module and its scripts" ;;
    *) bad "lua5.4 loads the moved module and its scripts: $out" ;;
    esac
fi

# The README's LUA_CPATH / LUA_PATH for a prefix, for every runtime whose module was
# installed: require "agenthost.status" first (LUA_PATH alone finds it), then the module.
cat >first.lua <<'EOF'
local status = require "agenthost.status"
local ah = require "agenthost"
print(type(status.new), type(ah.agent), ah.runtime)
EOF
for v in 5.1 5.2 5.3 5.4; do
    [ -e "$P/$libdir/lua/$v/agenthost.so" ] || continue
    interps=("lua$v")
    [ "$v" = 5.1 ] && interps+=(luajit)
    for lua in "${interps[@]}"; do
        command -v "$lua" >/dev/null || continue
        pre=
        [ ${#san[@]} -gt 0 ] && pre=$(cc -print-file-name=libasan.so)
        out=$(LD_PRELOAD=$pre ASAN_OPTIONS=detect_leaks=0 \
              LUA_CPATH="$P/$libdir/lua/$v/?.so;;" LUA_PATH="$P/share/lua/$v/?.lua;;" \
              "$lua" first.lua 2>&1)
        case "$out" in
        function*function*) ok "$lua: LUA_CPATH and LUA_PATH of the moved prefix ($out)" ;;
        *) bad "$lua with the README's LUA_CPATH/LUA_PATH: $out" ;;
        esac
    done
done

ex=$P/share/doc/agenthost/examples
[ -f "$ex/embed.c" ] && [ -f "$ex/chat.lua" ] && [ -f "$ex/demo.lua" ] &&
    ok "the examples are installed (share/doc/agenthost/examples)" ||
    bad "the examples are installed in share/doc/agenthost/examples"
[ -f "$ex/embed.c" ] || ex=$src/examples

export PKG_CONFIG_PATH=$P/$libdir/pkgconfig
pcprefix=$(pkg-config --variable=prefix agenthost)
[ "$(cd "$pcprefix" 2>/dev/null && pwd)" = "$P" ] && ok "pkg-config's prefix is the moved tree" ||
    bad "pkg-config's prefix is the moved tree: $pcprefix"
# embed.c parses tool arguments with cJSON itself, hence libcjson (as the README says), and
# runs against the built-in mock provider, hence agenthost-mock.
# The README's command: the library's directory as the program's run path, so it runs
# from a custom prefix without LD_LIBRARY_PATH (or ldconfig).
unset LD_LIBRARY_PATH
# shellcheck disable=SC2046
if cc "${san[@]}" "$ex/embed.c" \
    $(pkg-config --cflags --libs agenthost-mock agenthost libcjson) \
    -Wl,-rpath,"$(pkg-config --variable=libdir agenthost)" -o app_pc 2>"$tmp/cc.log"; then
    got=$(ldd ./app_pc | awk '/libagenthost\.so/ {print $3}')
    if ./app_pc >"$tmp/app_pc.out" 2>&1 && [ -n "$got" ] &&
        [ "$(readlink -f "$got")" = "$(readlink -f "$P/$libdir/libagenthost.so")" ]; then
        ok "a pkg-config build with -Wl,-rpath runs against the moved library, no LD_LIBRARY_PATH"
    else
        bad "a pkg-config build runs against the moved library"; cat "$tmp/app_pc.out"
        ldd ./app_pc
    fi
else
    bad "a pkg-config build compiles"; cat "$tmp/cc.log"
fi

# The libuv adapter's pc file, with examples/embed_uv.c.
if [ -e "$P/$libdir/pkgconfig/agenthost-uv.pc" ]; then
    # shellcheck disable=SC2046
    if cc "${san[@]}" "$src/examples/embed_uv.c" \
        $(pkg-config --cflags --libs agenthost-mock agenthost-uv) \
        -o app_uv 2>"$tmp/ccuv.log" && LD_LIBRARY_PATH=$P/$libdir ./app_uv >"$tmp/app_uv.out" 2>&1
    then
        ok "a pkg-config build of the libuv example runs against the moved library"
    else
        bad "a pkg-config build of the libuv example runs"; cat "$tmp/ccuv.log" "$tmp/app_uv.out"
    fi
fi

mkdir -p cm
cat >cm/CMakeLists.txt <<EOF
cmake_minimum_required(VERSION 3.20)
project(app C)
find_package(agenthost REQUIRED)
add_executable(app_cm $ex/embed.c)
target_compile_options(app_cm PRIVATE ${san[*]})
target_link_options(app_cm PRIVATE ${san[*]})
target_link_libraries(app_cm PRIVATE agenthost::mock agenthost::agenthost)
EOF
if cmake -S cm -B cm/build -DCMAKE_PREFIX_PATH="$P" >"$tmp/cm.log" 2>&1 &&
    cmake --build cm/build >>"$tmp/cm.log" 2>&1; then
    if cm/build/app_cm >"$tmp/app_cm.out" 2>&1; then
        ok "a find_package build runs against the moved library (CMake's run path)"
    else
        bad "a find_package build runs"; cat "$tmp/app_cm.out"
    fi
else
    bad "a find_package build compiles"; tail -n 30 "$tmp/cm.log"
fi

[ -f "$P/share/man/man1/agenthost.1" ] && ok "man page installed" || bad "man page installed"
[ -f "$P/share/doc/agenthost/docs/lua.md" ] && ok "docs installed" || bad "docs installed"

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
