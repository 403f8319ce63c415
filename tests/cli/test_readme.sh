#!/usr/bin/env bash
# test_readme.sh AGENTHOST_BIN - the README's snippets run and say what the README says.
#
# The code blocks are taken from README.md itself (tests/cli/readme_blocks.lua), so an
# edit that breaks a snippet or changes its output fails here: hello.lua and its shown
# output, the real-provider script against `agenthost mock` with the README's fault plan
# (through the README's own shell lines), the tools and on_event fragments inside a
# minimal agent, the C program compiled against the build tree, and the demo's output
# (wait times aside).
set -u
bin=${1:?usage: test_readme.sh AGENTHOST_BIN}
bin=$(cd "$(dirname "$bin")" && pwd)/$(basename "$bin")
build=$(dirname "$bin")
root=$(cd "$(dirname "$0")/../.." && pwd)
. "$root/tests/cli/wait_lib.sh"
pass=0
fail=0
work=$(mktemp -d)
cleanup() {
    [ -n "${mock_pid:-}" ] && kill "$mock_pid" 2>/dev/null && wait "$mock_pid" 2>/dev/null
    rm -rf "$work"
}
trap cleanup EXIT
ok() { echo "ok: $1"; pass=$((pass + 1)); }
bad() { echo "FAIL: $1"; fail=$((fail + 1)); }
same() { # what, expected file, got file
    if diff -u "$2" "$3" >"$work/diff"; then ok "$1"; else
        bad "$1:"
        sed 's/^/   | /' "$work/diff"
    fi
}

if ! "$bin" "$root/tests/cli/readme_blocks.lua" "$root/README.md" "$work"; then
    bad "README blocks"
    echo "$pass passed, $fail failed"
    exit 1
fi
cd "$work" || exit 1

# hello.lua: the output shown under it.
"$bin" hello.lua >hello.out 2>hello.err
same "hello.lua prints what the README shows" hello.expected hello.out

# The JSON Lines sample is hello.lua's --events output: each of its lines has the keys of
# a real line of that type, in the same order (run_id and ts_ms right after type), and
# the same values but for the run id, the times and the (random) backoff.
"$bin" --events hello.jsonl hello.lua >/dev/null 2>&1
if python3 - events.sample hello.jsonl >events.diff 2>&1 <<'PY'
import json, sys
vary = {"run_id", "ts_ms", "wait_ms", "elapsed_ms"}
def lines(p):
    return [json.loads(l, object_pairs_hook=list) for l in open(p) if l.strip()]
real = lines(sys.argv[2])
bad = 0
for s in lines(sys.argv[1]):
    t = dict(s)["type"]
    keys = [k for k, _ in s]
    match = [r for r in real if dict(r)["type"] == t and [k for k, _ in r] == keys and
             all(v == dict(r)[k] for k, v in s if k not in vary)]
    if not match:
        bad = 1
        print("README line of type %s matches no real line: %s" % (t, json.dumps(dict(s))))
        for r in real:
            if dict(r)["type"] == t:
                print("  real: " + json.dumps(dict(r)))
sys.exit(bad)
PY
then
    ok "the README's JSON Lines are hello.lua's --events lines (keys, order, values)"
else
    bad "the README's JSON Lines sample: $(cat events.diff)"
fi

# The command-line section's two lines, with `build/agenthost` being this build, run
# real.lua against the mock program serving the README's fault plan.
mkdir -p build && ln -s "$bin" build/agenthost
sed 's/ &$/ \& echo $! >mock.pid/' cli.sh >cli_run.sh
# The timeouts only turn a hang into a failure, so they are far above any slow run
# (valgrind on a busy machine took over 20 s for the broken-plan lines below).
timeout 240 bash cli_run.sh >real.out 2>real.err
mock_pid=$(cat mock.pid 2>/dev/null)
if grep -q '^completed	You said: "Say hello.".' real.out; then
    ok "real.lua through the README's mock command line completes"
else
    bad "real.lua: $(cat real.out real.err)"
fi
# 503 and 429 before the stream; the cut after 6 events keeps nothing (inside the first
# text block), so the same request goes out again: a third retry.
grep -c 'retrying' real.err | grep -qx 3 && ok "the README's plan gave three retries" ||
    bad "expected three retry warnings: $(cat real.err)"
kill "$mock_pid" 2>/dev/null && wait "$mock_pid" 2>/dev/null
mock_pid=
# The same lines when the mock cannot start (a broken plan): they end, with an error,
# instead of waiting forever for url.txt.
echo '[{"status": 503, "bogus": 1}]' >faults_bad.json
sed -e 's/faults\.json/faults_bad.json/' -e 's/ &$/ \& echo $! >mock.pid/' cli.sh >cli_bad.sh
timeout 240 bash cli_bad.sh >bad.out 2>bad.err
rc=$?
if [ "$rc" -ne 124 ] && [ "$rc" -ne 0 ] && grep -q 'base_url must not be empty' bad.err; then
    ok "the README's mock lines end (with an error) when the mock fails to start"
else
    bad "README mock lines with a broken plan: rc=$rc $(cat bad.out bad.err)"
fi

# The tools fragment inside an agent, and the on_event fragment around a client.
{
    echo 'local ah = require "agenthost"'
    echo 'local mock = ah.mock{}'
    echo 'local client = ah.client{ provider = "anthropic", model = "m", base_url = mock.url }'
    echo 'local agent = ah.agent{ client = client, on_event = false,'
    cat tools_fragment.lua
    echo '}'
    echo 'print(agent:run("What is 42 + 42?").text)'
} >tools.lua
"$bin" tools.lua >tools.out 2>&1
grep -qx 'The tool returned: 84' tools.out && ok "the tools fragment runs" ||
    bad "tools fragment: $(cat tools.out)"
{
    echo 'local ah = require "agenthost"'
    echo 'local mock = ah.mock{ plan = { { status = 503 }, { cut_after_events = 5 } } }'
    echo 'local client = ah.client{ provider = "anthropic", model = "m", base_url = mock.url }'
    cat on_event_fragment.lua
    echo 'io.write("\n", agent:run("hi").outcome, "\n")'
} >on_event.lua
"$bin" on_event.lua >on_event.out 2>on_event.err
# stderr is a file: the retries are the library's warnings (the 503, and the cut that
# kept nothing, sent again); stdout is a file too, so the display cannot erase the cut
# answer's text: it marks the seam once, then the whole answer follows.
if grep -q 'You said: "hi".' on_event.out && grep -qx completed on_event.out &&
    [ "$(grep -c '^\[cut: the last [0-9]* bytes above are not kept\]$' on_event.out)" -eq 1 ] &&
    grep -q '^agenthost: warning: LLM request 1 of run_[0-9a-f]*: HTTP 503' on_event.err &&
    grep -q '^agenthost: warning: LLM request 1 of run_[0-9a-f]*: stream cut, retrying' on_event.err; then
    ok "the on_event fragment streams text, marks the cut's seam, keeps the status display"
else
    bad "on_event fragment: $(cat on_event.out on_event.err)"
fi

# The C program, compiled against this build tree (sanitized like it, if it is).
san=()
grep -q '^AH_SANITIZE:BOOL=ON' "$build/CMakeCache.txt" 2>/dev/null &&
    san=(-fsanitize=address,undefined)
if [ -f "$build/libagenthost.a" ] && command -v pkg-config >/dev/null &&
    cc -std=c11 -Wall -Wextra -Werror "${san[@]}" -I"$root/core/include" app.c \
        "$build/libagenthost.a" \
        $(pkg-config --cflags --libs libcurl libcjson libmicrohttpd sqlite3 hiredis) -lpthread -lm \
        -o app 2>cc.err; then
    ok "the C program compiles (-Wall -Wextra -Werror)"
    "$bin" mock --port 0 --plan faults.json >app_url.txt 2>/dev/null &
    mock_pid=$!
    wait_until "$mock_pid" test -s app_url.txt
    ANTHROPIC_BASE_URL=$(head -n1 app_url.txt) ./app >app.out 2>app.err
    rc=$?
    if [ "$rc" -eq 0 ] && grep -q '^completed: You said: "Say hello."' app.out &&
        [ "$(grep -c '^retrying (attempt [23]/4 in' app.err)" -eq 2 ]; then
        ok "the C program runs through the faults"
    else
        bad "the C program: exit $rc: $(cat app.out app.err)"
    fi
else
    bad "the C program does not compile: $(cat cc.err 2>/dev/null)"
fi

# The demo's output, with the random backoff and the port masked.
"$bin" "$root/examples/demo.lua" >demo.out 2>/dev/null
mask() { sed -E 's/127\.0\.0\.1:[0-9]+/127.0.0.1:PORT/; s/after [0-9]+ms/after Nms/' "$1"; }
mask demo.expected >demo.want
mask demo.out >demo.got
same "the demo prints what the README shows" demo.want demo.got

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
