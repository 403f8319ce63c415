#!/usr/bin/env bash
# Nothing in the library or the Lua layer sleeps: every wait (a retry's backoff, a tool's
# retry, a key in flight elsewhere, a paced attempt) is a timer on the event loop, so one
# stalled call never stalls the other streams of its loop. Checks core/ and lua/ (comments
# stripped by the C preprocessor, so prose about sleeping does not count) for calls of
# the sleep family, and first checks that the check itself finds one.
set -u
src=$(cd "$(dirname "$0")/../.." && pwd)
cc=${CC:-cc}
fail=0 pass=0
ok() { echo "ok: $1"; pass=$((pass + 1)); }
bad() { echo "FAIL: $1"; fail=$((fail + 1)); }

pattern='(^|[^A-Za-z0-9_])(nanosleep|clock_nanosleep|usleep|sleep|thrd_sleep|sqlite3_sleep|Sleep)[[:space:]]*\('

# The code of one file without its comments (strings and #defines kept), each line
# prefixed with its line number in the file (from the preprocessor's line markers).
code_of() {
    "$cc" -fpreprocessed -dD -E -x c "$1" 2>/dev/null |
        awk '/^# [0-9]+ "/ { n = $2; next } { print n ": " $0; n++ }'
}

# Sleep calls of a file, as "line: code". A call whose line in the file says
# "blocking-ok: <why>" is a reviewed exception (not in a step of a running call) and is
# listed apart by exceptions_in.
sleep_lines() { code_of "$1" | grep -E "^[0-9]+: .*$pattern" | cut -d: -f1; }
sleeps_in() {
    for l in $(sleep_lines "$1"); do
        sed -n "${l}p" "$1" | grep -q 'blocking-ok:' || echo "$l: $(sed -n "${l}p" "$1")"
    done
}
exceptions_in() {
    for l in $(sleep_lines "$1"); do
        sed -n "${l}p" "$1" | grep -q 'blocking-ok:' && echo "$l"
    done
}

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cat >"$tmp/sample.c" <<'EOF'
/* a comment may say nanosleep(&ts, NULL) and sleep(1) */
static void wait_a_bit(void) { struct timespec ts = {0, 1}; nanosleep(&ts, 0); }
EOF
cat >"$tmp/clean.c" <<'EOF'
/* nanosleep(&ts, NULL) in a comment is prose, not a call; ah_timer_start is a wait */
static void arm(ah_timer *t) { ah_timer_start(t, 10); } /* usleep(5) */
EOF
[ -n "$(sleeps_in "$tmp/sample.c")" ] && ok "the check finds a nanosleep call" ||
    bad "the check missed a nanosleep call"
[ -z "$(sleeps_in "$tmp/clean.c")" ] && ok "the check ignores comments" ||
    bad "the check counted a comment: $(sleeps_in "$tmp/clean.c")"
printf '/* x */\n\n\nvoid f(void) { usleep(1); /* blocking-ok: test */ }\nvoid g(void) { sleep (2); }\n' \
    >"$tmp/marked.c"
[ "$(sleeps_in "$tmp/marked.c" | cut -d: -f1)" = 5 ] &&
    [ "$(exceptions_in "$tmp/marked.c")" = 4 ] &&
    ok "a marked call is an exception, an unmarked one is not (by file line)" ||
    bad "markers: found '$(sleeps_in "$tmp/marked.c")', exceptions '$(exceptions_in "$tmp/marked.c")'"

found= excepted=
n=0
while IFS= read -r f; do
    n=$((n + 1))
    hits=$(sleeps_in "$f")
    [ -n "$hits" ] && found="$found
${f#"$src"/}:$(echo "$hits" | head -n 3 | tr '\n' ' ')"
    for l in $(exceptions_in "$f"); do excepted="$excepted ${f#"$src"/}:$l"; done
done < <(find "$src/core" "$src/lua" -name '*.[ch]' | sort)
[ "$n" -gt 50 ] && ok "scanned $n files of core/ and lua/" || bad "only $n files found"
[ -z "$found" ] && ok "no sleep call in core/ or lua/" || bad "sleep calls:$found"
# Exceptions are few and named here, so a new one is a visible change to this test.
[ "$excepted" = " core/ledger_sqlite.c:$(grep -n 'blocking-ok:' "$src/core/ledger_sqlite.c" | cut -d: -f1)" ] &&
    ok "one reviewed exception:$excepted" || bad "exceptions changed:$excepted"

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
