#!/usr/bin/env bash
# test_build_options.sh AGENTHOST_BIN - the core library built without the mock, Redis and
# SQLite (cmake -DAH_WITH_MOCK=OFF -DAH_WITH_REDIS=OFF -DAH_WITH_SQLITE=OFF), from this
# source tree into a scratch build:
#   - it configures without libmicrohttpd, hiredis and SQLite in the way (no test suite);
#   - libagenthost.so NEEDs none of them, and its pc file requires and announces only
#     what was built (Requires.private libcurl libcjson, features empty);
#   - a program linked against it runs, and what was left out says so when asked for:
#     ah_ledger_open and ah_redis_new fail naming the option; an agent with the memory
#     ledger works as ever (tools included) against a local server.
# Only the library is built (about a minute on 2 cores); the sanitizer and valgrind runs
# skip it: it checks a build configuration, which they do not change.
set -u
prog=$1
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/../.." && pwd)
build=$(cd "$(dirname "$prog")" && pwd)
pass=0 fail=0
ok() { echo "ok: $1"; pass=$((pass + 1)); }
bad() { echo "FAIL: $1"; fail=$((fail + 1)); }
if nm -D "$build/libagenthost.so" 2>/dev/null | grep -q __asan_init ||
    [ "$(basename "$prog")" = agenthost-launched ]; then
    echo "skipped: a sanitizer or valgrind build (the options are checked by the plain one)"
    exit 0
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
b=$tmp/build
if cmake -S "$src" -B "$b" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DAH_WERROR=ON \
    -DAH_WITH_MOCK=OFF -DAH_WITH_REDIS=OFF -DAH_WITH_SQLITE=OFF >"$tmp/cfg.log" 2>&1 &&
    cmake --build "$b" -j "${JOBS:-2}" --target agenthost_shared >"$tmp/build.log" 2>&1; then
    ok "the core library builds without the mock, Redis and SQLite (-Werror)"
else
    bad "the minimal build"; tail -n 30 "$tmp/cfg.log" "$tmp/build.log"
    echo "$pass passed, $fail failed"; exit 1
fi
grep -q 'no test suite' "$tmp/cfg.log" && ok "no test suite without them (it uses all three)" ||
    bad "the configure log should say there is no test suite"
needed=$(readelf -d "$b/libagenthost.so" | grep NEEDED)
if echo "$needed" | grep -Eq 'sqlite|hiredis|microhttpd'; then
    bad "libagenthost.so NEEDs what was left out: $needed"
else
    ok "libagenthost.so NEEDs neither SQLite nor hiredis nor libmicrohttpd"
fi
req=$(sed -n 's/^Requires.private: //p' "$b/agenthost.pc")
feat=$(sed -n 's/^features=//p' "$b/agenthost.pc")
[ "$req" = "libcurl libcjson" ] && [ -z "$feat" ] && [ ! -e "$b/agenthost-mock.pc" ] &&
    ok "the pc file requires libcurl libcjson only, features is empty, no agenthost-mock.pc" ||
    bad "pc file: Requires.private '$req', features '$feat'"
# the full build's pc file says what it has
grep -qx 'features=sqlite redis mock' "$build/agenthost.pc" &&
    ok "the full build's pc file: features=sqlite redis mock" ||
    bad "full pc file: $(grep features= "$build/agenthost.pc")"

cat >"$tmp/app.c" <<'C'
#include <agenthost.h>
#include <agenthost/redis.h>
#include <stdio.h>
#include <string.h>
int main(void)
{
    char err[256] = "";
    ah_ledger *l = NULL;
    int rc = 0;
    if (ah_ledger_open("x.db", &l, err, sizeof err) == AH_OK || !strstr(err, "AH_WITH_SQLITE=OFF"))
        rc |= 1;
    printf("%s\n", err);
    ah_loop *loop = ah_loop_new(NULL, NULL);
    ah_redis *r = NULL;
    if (ah_redis_new(loop, "redis://127.0.0.1:6379", NULL, &r, err, sizeof err) == AH_OK ||
        !strstr(err, "AH_WITH_REDIS=OFF"))
        rc |= 2;
    printf("%s\n", err);
    ah_ledger *mem = ah_ledger_new_memory();
    if (!mem)
        rc |= 4;
    ah_ledger_free(mem);
    ah_loop_free(loop);
    return rc;
}
C
if cc -std=c11 -I"$src/core/include" "$tmp/app.c" -L"$b" -lagenthost -Wl,-rpath,"$b" \
    -o "$tmp/app" 2>"$tmp/cc.log" && "$tmp/app" >"$tmp/app.out" 2>&1; then
    ok "what was left out says so: $(head -n1 "$tmp/app.out" | cut -c1-60)..."
else
    bad "the program against the minimal library"; cat "$tmp/cc.log" "$tmp/app.out"
fi
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
