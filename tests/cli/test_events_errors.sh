#!/usr/bin/env bash
# --events write errors are said, once, and end the sink: with the events going to
# /dev/full the script still runs to its end, stderr says why no event was written, and
# the program exits 1 (it used to lose every event with status 0 and nothing said). When
# the disk fills up mid-file (here RLIMIT_FSIZE, with SIGXFSZ ignored as a full disk
# sends none), the file keeps only complete lines: the torn one is cut off. "-" writes
# the events to standard output.
set -u
bin=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
cat >"$tmp/script.lua" <<'LUA'
local ah = require "agenthost"
local m = ah.mock{}
local a = ah.agent{ client = ah.client{ provider = "anthropic", model = "m", base_url = m.url },
                    on_event = false }
for i = 1, tonumber(arg[1]) do
  assert(a:run("hello number " .. i).outcome == "completed")
end
m:close()
print("the script ran to its end")
LUA

"$bin" --events /dev/full "$tmp/script.lua" 3 >"$tmp/out" 2>"$tmp/err"
rc=$?
n=$(grep -c "cannot write events to '/dev/full': No space left on device; no more events are written" "$tmp/err")
if [ "$rc" -eq 1 ] && [ "$n" -eq 1 ] && grep -q "ran to its end" "$tmp/out"; then
    echo "ok: --events /dev/full: said once on stderr, the script ran on, exit status 1"
else
    echo "FAIL: --events /dev/full: exit $rc, $n messages"; cat "$tmp/err"; fail=1
fi

# 2 KiB of events file (bash counts ulimit -f in KiB): a few runs' events do not fit.
(trap '' XFSZ; ulimit -f 2; exec "$bin" --events "$tmp/ev.jsonl" "$tmp/script.lua" 10) \
    >"$tmp/out" 2>"$tmp/err"
rc=$?
if [ "$rc" -eq 1 ] && grep -q "cannot write events to '$tmp/ev.jsonl': File too large; no more events are written (the file ends with the last complete event)" "$tmp/err" &&
    grep -q "ran to its end" "$tmp/out" &&
    python3 - "$tmp/ev.jsonl" <<'PY'
import json, sys
raw = open(sys.argv[1], "rb").read()
assert raw and raw.endswith(b"\n"), "the file does not end with a complete line"
for line in raw.split(b"\n")[:-1]:
    json.loads(line)
print("ok: %d bytes, %d complete event lines" % (len(raw), raw.count(b"\n")))
PY
then
    echo "ok: a file that cannot grow keeps only complete lines, and the program says so"
else
    echo "FAIL: full file: exit $rc"; cat "$tmp/err"; tail -c 200 "$tmp/ev.jsonl"; echo; fail=1
fi

"$bin" --events - "$tmp/script.lua" 1 >"$tmp/out" 2>"$tmp/err"
rc=$?
if [ "$rc" -eq 0 ] && grep -q '^{"type":"run_end"' "$tmp/out" &&
    [ "$(tail -n 1 "$tmp/out")" = "the script ran to its end" ]; then
    echo "ok: --events - writes the events to standard output, in order with the script's"
else
    echo "FAIL: --events -: exit $rc"; cat "$tmp/out" "$tmp/err"; fail=1
fi
exit $fail
