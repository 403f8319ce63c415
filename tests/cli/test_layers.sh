#!/usr/bin/env bash
# Include hygiene and layering, checked by the compiler and on the objects:
#   - every public header compiles on its own, twice in a row (guards), -Werror;
#   - agenthost.h, the stable surface, pulls in none of the advanced tiers (mock, SSE,
#     timeline and decoders, call, transport, Redis, manual clock);
#   - no core or mock file includes a Lua header or one from lua/, and nothing below the
#     worker (every core file but the worker and those beside it, listed in layers.py)
#     reaches the worker, history, tools, ledgers or budgets: `cc -MM` closures with the
#     build's own flags (tests/cli/layers.py);
#   - the decoders have no cycle: the per-format files and the helpers they use
#     (decode_util.c, timeline.c) call nothing defined in decode.c, the driver, and the
#     helpers call no format.
set -u
prog=$1
build=$(cd "$(dirname "$prog")" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/../.." && pwd)
inc=$src/core/include
fail=0 pass=0
ok() { echo "ok: $1"; pass=$((pass + 1)); }
bad() { echo "FAIL: $1"; fail=$((fail + 1)); }
cc=${CC:-cc}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

uvflags=
pkg-config --exists libuv 2>/dev/null && uvflags=$(pkg-config --cflags libuv)
alone=
for h in "$inc"/agenthost.h "$inc"/agenthost/*.h; do
    name=${h#"$inc"/}
    if [ "$name" = agenthost/uv.h ] && [ -z "$uvflags" ] && ! echo '#include <uv.h>' |
        $cc -fsyntax-only -x c - 2>/dev/null; then
        continue
    fi
    printf '#include "%s"\n#include "%s"\n' "$name" "$name" >"$tmp/one.c"
    # shellcheck disable=SC2086
    $cc -std=c11 -D_POSIX_C_SOURCE=200809L -Wall -Wextra -Wstrict-prototypes -Werror -fsyntax-only -I"$inc" $uvflags \
        "$tmp/one.c" 2>"$tmp/err" ||
        alone="$alone $name ($(grep -m1 'error' "$tmp/err" | sed 's|^.*/include/||'))"
done
[ -z "$alone" ] && ok "every public header compiles on its own" ||
    bad "headers that do not compile on their own:$alone"

cat >"$tmp/tiers.c" <<'C'
#include <agenthost.h>
#if defined(AGENTHOST_MOCK_H) || defined(AGENTHOST_SSE_H) || defined(AGENTHOST_TIMELINE_H) || \
    defined(AGENTHOST_CALL_H) || defined(AGENTHOST_TRANSPORT_H) || defined(AGENTHOST_REDIS_H) || \
    defined(AGENTHOST_MANUAL_CLOCK_H) || defined(AGENTHOST_PROTO_H) || defined(AGENTHOST_UV_H)
#error "agenthost.h includes an advanced tier"
#endif
int main(void) { return AH_VERSION_NUM > 0 ? 0 : 1; }
C
$cc -std=c11 -fsyntax-only -I"$inc" "$tmp/tiers.c" 2>"$tmp/err" &&
    ok "agenthost.h includes none of the advanced tiers" ||
    bad "agenthost.h includes an advanced tier: $(cat "$tmp/err")"

if [ -f "$build/compile_commands.json" ]; then
    while read -r line; do
        case "$line" in
        ok:*) ok "${line#ok: }" ;;
        *) bad "${line#FAIL: }" ;;
        esac
    done < <(python3 "$here/layers.py" "$build" "$src" 2>&1)
else
    bad "no compile_commands.json in $build"
fi

objs=$build/CMakeFiles/agenthost_obj.dir/core
if [ -f "$objs/decode.c.o" ]; then
    def() { nm --defined-only "$@" | awk '$2 ~ /^[TDBR]$/ {print $3}' | sort -u; }
    und() { nm -u "$1" | awk '{print $2}' | sort -u; }
    cyc=
    for f in "$objs"/decode_*.c.o "$objs/timeline.c.o"; do
        [ -f "$f" ] || continue
        up=$(comm -12 <(und "$f") <(def "$objs/decode.c.o") | tr '\n' ' ')
        [ -n "$up" ] && cyc="$cyc $(basename "$f" .o) calls decode.c's $up;"
    done
    formats=$(ls "$objs"/decode_*.c.o | grep -v decode_util)
    # shellcheck disable=SC2086
    for f in "$objs/decode_util.c.o" "$objs/timeline.c.o"; do
        [ -f "$f" ] || continue
        up=$(comm -12 <(und "$f") <(def $formats) | tr '\n' ' ')
        [ -n "$up" ] && cyc="$cyc $(basename "$f" .o) calls the format functions $up;"
    done
    [ -z "$cyc" ] && ok "decoders: helpers < formats < driver, no cycle" || bad "decoder layering:$cyc"
else
    bad "no decoder objects under $objs"
fi

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
