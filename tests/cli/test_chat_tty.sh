#!/usr/bin/env bash
# test_chat_tty.sh AGENTHOST_BIN - examples/chat.lua in a REAL terminal (tmux) against
# the built-in mock: two turns (the first with a tool call), a third whose stream stalls
# and is stopped with Ctrl-C mid-answer, a fourth turn in the same conversation, /save,
# and /quit. stderr is the terminal too, so the status line ("waiting for tool add...")
# shows and is erased in place. Waits are bounded polls of the pane, never timed
# assertions.
#
# The mock's plan (AGENTHOST_MOCK_PLAN): requests 1-3 answer (turn 1 is two requests: the
# tool call, then the answer from its result), request 4 (turn 3) stalls after 8 events,
# request 5 (turn 4) answers, request 6 (turn 5) is cut after 8 events inside its only
# text block, so the same request goes out again: what it showed is erased in place and
# the answer is on the screen once. The rest answer.
set -u
bin=${1:?usage: test_chat_tty.sh AGENTHOST_BIN}
bin=$(cd "$(dirname "$bin")" && pwd)/$(basename "$bin")
root=$(cd "$(dirname "$0")/../.." && pwd)
# shellcheck source=tmux_lib.sh
. "$(dirname "$0")/tmux_lib.sh" chat

plan='{"steps":[{"ok":true},{"ok":true},{"ok":true},{"stall_after_events":8},{"ok":true},{"cut_after_events":8}],"then":{"ok":true}}'
s=chat
tm new-session -d -s "$s" -x 110 -y 40 \
    "cd '$work' && AGENTHOST_MOCK_PLAN='$plan' '$bin' '$root/examples/chat.lua' mock; echo \"[exit \$?]\"; sleep 60"

# wait until the pane matches the regex (at most $2 tenths of a second)
wait_for() {
    local i
    for ((i = 0; i < $2; i++)); do
        tm capture-pane -p -t "$s" -S -100 >"$work/screen" 2>/dev/null
        grep -Eq "$1" "$work/screen" && return 0
        sleep 0.1
    done
    echo "   (waited for: $1)"
    sed 's/^/   | /' "$work/screen"
    return 1
}
# the number of lines matching the regex on the pane
count() { grep -Ec "$1" "$work/screen"; }
say() { tm send-keys -t "$s" -l "$1"; tm send-keys -t "$s" Enter; }

wait_for '^you> ?$' 100 && ok "the chat starts and prompts" || bad "no prompt"

say "hello there"
wait_for '^The tool returned: 84$' 100 && wait_for '^you> ?$' 50 &&
    ok "turn 1: the model calls the add tool and answers from its result" ||
    bad "turn 1: no answer from the tool's result"

say "second turn"
wait_for '^assistant> You said: "second turn"\. This is a deterministic reply' 100 &&
    ok "turn 2: answered in the same conversation" || bad "turn 2: no answer"

say "third turn"
# the answer starts streaming, then the stream stalls
if wait_for '^assistant> You said: "third turn"' 100; then
    sleep 0.3
    tm capture-pane -p -t "$s" -S -100 >"$work/screen"
    if grep -q 'This is a deterministic reply from the agenthost mock provider.$' <(grep 'third turn' "$work/screen"); then
        bad "turn 3: the stream did not stall (the whole answer arrived)"
    else
        ok "turn 3: the answer streams, then stalls mid-answer"
    fi
    tm send-keys -t "$s" C-c
    if wait_for '^\[answer stopped\]$' 50 && wait_for '^you> ?$' 20; then
        ok "Ctrl-C stops the answer in progress and the chat goes on"
    else
        bad "Ctrl-C did not stop the answer"
    fi
else
    bad "turn 3: the answer never started"
fi

say "fourth turn"
wait_for '^assistant> You said: "fourth turn"\. This is a deterministic reply' 100 &&
    ok "turn 4: the conversation continues after the Ctrl-C" || bad "turn 4: no answer"

say "fifth turn"
if wait_for '^assistant> You said: "fifth turn"\. This is a deterministic reply from the agenthost mock provider\.$' 100 &&
    wait_for '^you> ?$' 50; then
    if [ "$(count 'fifth turn')" -eq 2 ] && ! grep -q '\[cut:' "$work/screen"; then
        ok "turn 5: a cut answer's shown text is erased in place; the answer appears once"
    else
        bad "turn 5: the cut answer's text is on the screen twice (or marked):"
        sed 's/^/   | /' "$work/screen"
    fi
else
    bad "turn 5: no answer after the cut"
fi

say "/save $work/conv.json"
if wait_for '^saved [0-9]+ messages to ' 50 && [ -s "$work/conv.json" ] &&
    grep -q '"format":"agenthost.history"' "$work/conv.json" &&
    grep -q '"type":"tool_use"' "$work/conv.json" && grep -q '"type":"tool_result"' "$work/conv.json" &&
    grep -q 'hello there' "$work/conv.json" && grep -q 'third turn' "$work/conv.json" &&
    grep -q 'fourth turn' "$work/conv.json"; then
    ok "/save: one conversation with all four turns, the tool call and its result"
else
    bad "/save: the saved conversation is incomplete"
    cat "$work/conv.json" 2>/dev/null | head -c 2000; echo
fi

say "/load $work/conv.json"
wait_for '^loaded [0-9]+ messages from ' 50 && ok "/load reads it back" || bad "/load"

say "/quit"
if wait_for '^\[exit 0\]$' 50; then
    ok "/quit ends the chat with status 0"
else
    bad "/quit: the chat did not end cleanly"
fi
# One Ctrl-C was pressed: one answer stopped, nothing else lost or repeated.
[ "$(count '^\[answer stopped\]$')" -eq 1 ] && [ "$(count '^you>')" -ge 8 ] &&
    ok "the transcript: one stopped answer, every prompt" ||
    bad "unexpected transcript"
# stderr is the terminal too (the status line): no warning or traceback reached it
if grep -Eq 'traceback|warning|waiting for tool' "$work/screen"; then
    bad "the screen has a warning, traceback or a left-over status line:"
    sed 's/^/   | /' "$work/screen"
else
    ok "no warning, traceback or left-over status line on the screen"
fi

# Ctrl-C at the prompt ends the chat (status 130) and ends the prompt's line first, so
# what comes next (here the exit line, else the shell's prompt) starts on its own line.
# (a second session: killing the first could end the tmux server under the new one)
s=chat2
tm new-session -d -s "$s" -x 110 -y 40 \
    "cd '$work' && '$bin' '$root/examples/chat.lua' mock; echo \"[exit \$?]\"; sleep 60"
if wait_for '^you> ?$' 100; then
    tm send-keys -t "$s" C-c
    if wait_for '\[exit 130\]' 50 && grep -Eq '^\[exit 130\]$' "$work/screen" &&
        grep -Eq '^you> ?(\^C)?$' "$work/screen"; then
        ok "Ctrl-C at the prompt exits 130 and ends the prompt's line"
    else
        bad "Ctrl-C at the prompt left the line unended:"
        sed 's/^/   | /' "$work/screen"
    fi
else
    bad "no prompt for the Ctrl-C check"
fi

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
