#!/usr/bin/env bash
# The agenthost program's command line: --help, --version, exit codes for misuse.
set -u
bin=$1
fail=0
check() { # description, expected exit code, command...
    local what=$1 want=$2; shift 2
    "$@" >/tmp/ah_cli_out.$$ 2>&1
    local got=$?
    if [ "$got" -ne "$want" ]; then
        echo "FAIL: $what: exit $got, want $want"; cat /tmp/ah_cli_out.$$; fail=$((fail + 1))
    else
        echo "ok: $what"
    fi
}
check "--help exits 0" 0 "$bin" --help
"$bin" --help | grep -q '^usage: agenthost' || { echo "FAIL: --help prints usage"; fail=$((fail+1)); }
"$bin" --help | grep -q '^       agenthost mock ' ||
    { echo "FAIL: --help documents the mock command"; fail=$((fail+1)); }
check "--version exits 0" 0 "$bin" --version
"$bin" --version | grep -Eq '^agenthost [0-9]+\.[0-9]+\.[0-9]+$' ||
    { echo "FAIL: --version format"; fail=$((fail+1)); }
check "no arguments is a usage error" 2 "$bin"
check "unknown option is a usage error" 2 "$bin" --no-such-flag
rm -f /tmp/ah_cli_out.$$
echo "$(( 6 - fail )) passed, $fail failed"
[ "$fail" -eq 0 ]
