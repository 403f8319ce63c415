#!/usr/bin/env bash
# test_client_env.sh AGENTHOST_BIN - ah.client's api_key from the environment, as the
# official SDKs read it (tests/lua/cli_client_env.lua): without the variables a client
# of a public host is refused at once, naming the variable; with them the key is sent.
set -u
bin=$1
here=$(cd "$(dirname "$0")" && pwd)
lua=$here/../lua
export LUA_PATH="$lua/?.lua;;"
pass=0 fail=0
run() { # description, env settings..., --, mode
    local what=$1; shift
    local envs=()
    while [ "$1" != -- ]; do envs+=("$1"); shift; done
    shift
    if env "${envs[@]}" "$bin" "$lua/cli_client_env.lua" "$@" >"$tmp" 2>&1; then
        echo "ok: $what"; pass=$((pass + 1))
    else
        echo "FAIL: $what"; sed 's/^/   | /' "$tmp"; fail=$((fail + 1))
    fi
}
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
run "no key in the environment: refused when built, naming the variable" \
    -u ANTHROPIC_API_KEY -u OPENAI_API_KEY -u GEMINI_API_KEY -- missing
run "an empty variable is no key" \
    -u GEMINI_API_KEY ANTHROPIC_API_KEY= OPENAI_API_KEY= -- missing
run "keys in the environment are sent" \
    ANTHROPIC_API_KEY=sk-ant-env-0123456789 OPENAI_API_KEY=sk-env-0123456789 -- present
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
