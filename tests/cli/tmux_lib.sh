# tmux_lib.sh NAME - sourced by the tmux tests (test_status_tty.sh, test_chat_tty.sh):
# pass/fail counters with ok/bad, a scratch dir $work, `tm` for a private tmux server
# named after NAME and this process, both cleaned up on exit; fails at once without tmux.
pass=0
fail=0
ok() { echo "ok: $1"; pass=$((pass + 1)); }
bad() { echo "FAIL: $1"; fail=$((fail + 1)); }

work=$(mktemp -d)
sock=ah-$1-test-$$
tm() { tmux -L "$sock" -f /dev/null "$@"; }
cleanup() {
    tm kill-server 2>/dev/null
    rm -rf "$work"
}
trap cleanup EXIT
if ! command -v tmux >/dev/null; then
    echo "FAIL: tmux is not installed (./run deps installs it)"
    exit 1
fi
