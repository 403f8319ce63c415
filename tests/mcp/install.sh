#!/usr/bin/env bash
# install.sh DIR - the MCP servers the tests use, pinned by tests/mcp/package-lock.json,
# installed with `npm ci` into DIR/node_modules (a cache: done again only when the lock
# file changed). Prints DIR/node_modules on success; exits 77 (skip) when npm is absent.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
dir=${1:?usage: install.sh DIR}
command -v npm >/dev/null 2>&1 || { echo "install.sh: npm is not installed: MCP tests skipped" >&2; exit 77; }
mkdir -p "$dir"
stamp=$dir/.lock.sha
want=$(sha256sum "$here/package-lock.json" | cut -d' ' -f1)
if [ ! -d "$dir/node_modules" ] || [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
    # one install at a time (tests run in parallel)
    exec 9>"$dir/.lock"
    flock 9
    if [ ! -d "$dir/node_modules" ] || [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
        cp "$here/package.json" "$here/package-lock.json" "$dir/"
        (cd "$dir" && npm ci --no-audit --no-fund --loglevel=error >&2)
        echo "$want" >"$stamp"
    fi
fi
echo "$dir/node_modules"
