# wait_lib.sh - waiting for another process in the shell tests, without a clock of our own.
# A bounded wait ("at most 5 s for the URL") fails a test on a slow machine: valgrind with
# the other core busy took longer than that to start the mock, and the test then ran on
# against nothing. These waits end when the condition holds or when the process they wait
# for has exited; ctest's timeout ends a real hang. Source it: . "$here/wait_lib.sh"

# wait_until PID COMMAND...: run COMMAND until it succeeds or process PID is gone, then
# return COMMAND's last status (a process that did it and exited still counts).
wait_until() {
    local pid=$1
    shift
    until "$@"; do
        kill -0 "$pid" 2>/dev/null || { "$@"; return; }
        sleep 0.05
    done
}

# has_lines FILE N: FILE exists and has at least N lines.
has_lines() {
    [ -f "$1" ] && [ "$(wc -l <"$1")" -ge "$2" ]
}
