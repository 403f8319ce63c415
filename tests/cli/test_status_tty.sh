#!/usr/bin/env bash
# test_status_tty.sh AGENTHOST_BIN - the status display in a REAL terminal (tmux), and in
# a log file.
#
# Terminal: agenthost runs a script against the in-process mock whose plan answers the
# first request with 503 + Retry-After: 2, so the retry wait is long enough to be seen.
# We poll the pane (bounded) until the transient line "retrying LLM request after HTTP
# 503" is on screen, then until it is gone and the answer is printed, and check the final
# screen holds exactly what the script printed: the retry line was rewritten in place and
# erased, never stacked into the transcript (and no log line leaked onto the terminal).
# Done twice: with the default display (an agent without on_event) and with an explicit
# on_event = status:update.
# Log file: a 503 and a cut stream with stderr redirected to a file give plain prefixed
# lines, exactly one per fault, and not one control byte. The cut comes inside the only
# text block, so nothing is kept and the same request goes out again: a retry, whose
# line is the library's warning like the 503's (the display adds the lines the library
# does not log: continuations that kept something, exhausted budgets).
set -u
bin=${1:?usage: test_status_tty.sh AGENTHOST_BIN}
bin=$(cd "$(dirname "$bin")" && pwd)/$(basename "$bin")
# shellcheck source=tmux_lib.sh
. "$(dirname "$0")/tmux_lib.sh" status

ANSWER='You said: "hello". This is a deterministic reply from the agenthost mock provider.'

# $1 = the 503's headers (a Lua table body), $2 = "default" | "explicit",
# $3 = more plan steps (Lua, optional)
write_script() {
    local hook=""
    [ "$2" = explicit ] && hook='on_event = function(ev) status:update(ev) end,'
    cat <<EOF
local ah = require "agenthost"
local status = require("agenthost.status").new()
local m = ah.mock{ plan = { { status = 503, headers = { $1 } }, ${3:-} } }
local client = ah.client{ provider = "anthropic", model = "mock-model", base_url = m.url }
local agent = ah.agent{ client = client, policy = { base_ms = 10, cap_ms = 20 }, $hook }
local r = agent:run("hello")
m:close()
print("FINAL: " .. r.text)
print("outcome: " .. r.outcome .. ", retries: " .. r.stats.retries)
EOF
}

# Poll the pane until grep -E "$2" matches (want=1) or stops matching (want=0), at most
# $4 tenths of a second; give up early once the optional regex $5 matches (the script
# ended). Leaves the last capture in $work/screen.
wait_screen() { # session, regex, want, tenths[, stop regex]
    local i
    for ((i = 0; i < $4; i++)); do
        tm capture-pane -p -t "$1" >"$work/screen" 2>/dev/null
        [ -n "${5:-}" ] && grep -Eq "$5" "$work/screen" && ! grep -Eq "$2" "$work/screen" &&
            return 1
        if grep -Eq "$2" "$work/screen"; then
            [ "$3" = 1 ] && return 0
        else
            [ "$3" = 0 ] && return 0
        fi
        sleep 0.1
    done
    return 1
}

tty_case() { # name: default | explicit
    local name=$1 s=status-$1
    write_script '["Retry-After"] = "2"' "$1" >"$work/$name.lua"
    # The pane stays open after the script ends (sleep), so the final screen can be read.
    tm new-session -d -s "$s" -x 120 -y 12 \
        "cd '$work' && '$bin' '$work/$name.lua'; echo \"[exit \$?]\"; sleep 60"
    if wait_screen "$s" 'retrying LLM request after HTTP 503' 1 100 '^\[exit [0-9]+\]'; then
        ok "$name: the retry line appears on the terminal"
        echo "   seen: $(grep -E 'retrying LLM' "$work/screen" | head -n1 | sed 's/ *$//')"
        grep -q 'server asked' "$work/screen" &&
            ok "$name: it says the server asked for the wait" ||
            bad "$name: the retry line does not say 'server asked'"
    else
        bad "$name: no retry line within 10 s; screen:"
        sed 's/^/   | /' "$work/screen"
    fi
    if wait_screen "$s" '^\[exit [0-9]+\]' 1 150 &&
        wait_screen "$s" 'retrying' 0 10; then
        ok "$name: the retry line is gone when the run ends"
    else
        bad "$name: the run did not end cleanly, or the retry line stayed; screen:"
        sed 's/^/   | /' "$work/screen"
    fi
    # Exactly the script's own output: nothing stacked, nothing leaked.
    sed -e 's/ *$//' -e '/^$/d' "$work/screen" >"$work/final"
    printf '%s\n' "FINAL: $ANSWER" "outcome: completed, retries: 1" "[exit 0]" >"$work/want"
    if diff -u "$work/want" "$work/final" >"$work/diff"; then
        ok "$name: the final screen holds only the answer (retry line not stacked)"
    else
        bad "$name: the final screen differs from the script's output:"
        sed 's/^/   | /' "$work/diff"
    fi
    tm kill-session -t "$s" 2>/dev/null
}

tty_case default
tty_case explicit

# A terminal narrower than the retry line (40 columns, and no $COLUMNS): the line is cut
# to the real width (TIOCGWINSZ), so it never wraps, and nothing of it is left behind.
narrow_case() {
    local s=status-narrow
    write_script '["Retry-After"] = "2"' default >"$work/narrow.lua"
    tm new-session -d -s "$s" -x 40 -y 12 \
        "cd '$work' && unset COLUMNS && '$bin' '$work/narrow.lua'; echo \"[exit \$?]\"; sleep 60"
    if wait_screen "$s" 'retrying LLM' 1 100 '^\[exit [0-9]+\]'; then
        local line
        line=$(grep -E 'retrying LLM' "$work/screen" | head -n1 | sed 's/ *$//')
        if [ "$(printf '%s' "$line" | wc -m)" -le 39 ] && ! grep -q 'asked)' "$work/screen"; then
            ok "narrow: the retry line fits 40 columns (no wrapped fragment): $line"
        else
            bad "narrow: the retry line does not fit 40 columns; screen:"
            sed 's/^/   | /' "$work/screen"
        fi
    else
        bad "narrow: no retry line within 10 s; screen:"
        sed 's/^/   | /' "$work/screen"
    fi
    if wait_screen "$s" '^\[exit [0-9]+\]' 1 150 &&
        ! grep -Eq 'retrying|attempt|asked' "$work/screen"; then
        ok "narrow: nothing of the retry line is left on screen"
    else
        bad "narrow: a fragment of the retry line stayed; screen:"
        sed 's/^/   | /' "$work/screen"
    fi
    tm kill-session -t "$s" 2>/dev/null
}
narrow_case

# ---- not a terminal: stderr to a file ---------------------------------------------------
write_script '["retry-after-ms"] = "200"' explicit '{ cut_after_events = 5 }' >"$work/log.lua"
(cd "$work" && "$bin" "$work/log.lua" >"$work/log.out" 2>"$work/log.err" </dev/null)
rc=$?
[ "$rc" -eq 0 ] && ok "log: the script exits 0" || bad "log: the script exited $rc"
if [ "$(grep -c '503' "$work/log.err")" -eq 1 ] &&
    grep -q '^agenthost: warning: LLM request 1 of run_[0-9a-f]*: HTTP 503, retrying (attempt 2/4 in 200 ms, server)' \
        "$work/log.err" &&
    grep -q '^agenthost: warning: LLM request 1 of run_[0-9a-f]*: stream cut, retrying (attempt 3/4 in [0-9]* ms, backoff)' \
        "$work/log.err" && [ "$(wc -l <"$work/log.err")" -eq 2 ]; then
    ok "log: one plain line per fault (the 503, the cut that kept nothing)"
else
    bad "log: expected the two retry lines in stderr:"
    sed 's/^/   | /' "$work/log.err"
fi
if LC_ALL=C grep -q "$(printf '[\r\033]')" "$work/log.err" "$work/log.out"; then
    bad "log: control bytes (CR or ESC) in the output"
    od -c "$work/log.err" | head -n 10
else
    ok "log: no control bytes"
fi
grep -qxF "FINAL: $ANSWER" "$work/log.out" && ok "log: the answer is on stdout" ||
    bad "log: the answer is missing from stdout"

# The same off a terminal with an agent WITHOUT on_event: it still gets the display's
# plain lines (the continuation), beside the library's retry warning; the retry's
# attempt is numbered as the status line numbers it.
write_script '["retry-after-ms"] = "200"' default '{ cut_after_events = 5 }' >"$work/logd.lua"
(cd "$work" && "$bin" "$work/logd.lua" >"$work/logd.out" 2>"$work/logd.err" </dev/null)
if grep -q '^agenthost: warning: LLM request 1 of run_[0-9a-f]*: HTTP 503, retrying (attempt 2/4 in 200 ms, server)' \
        "$work/logd.err" &&
    grep -q '^agenthost: warning: LLM request 1 of run_[0-9a-f]*: stream cut, retrying (attempt 3/4 in [0-9]* ms, backoff)' \
        "$work/logd.err" && [ "$(wc -l <"$work/logd.err")" -eq 2 ]; then
    ok "log, no on_event: the 503 and the cut that kept nothing, one line each"
else
    bad "log, no on_event: expected the two retry lines in stderr:"
    sed 's/^/   | /' "$work/logd.err"
fi

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
