#!/bin/sh
# install.sh DIR - the pinned SDKs (package.json + package-lock.json beside this file)
# installed with `npm ci` into DIR/node_modules, once: a stamp of the lock file's hash
# says whether DIR already holds exactly these versions. Exit 77 (skipped) when node or
# npm is missing or the registry cannot be reached.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
dir=$1
command -v node >/dev/null 2>&1 || { echo "install.sh: node not installed" >&2; exit 77; }
command -v npm >/dev/null 2>&1 || { echo "install.sh: npm not installed" >&2; exit 77; }
mkdir -p "$dir"
# one install at a time into DIR (the SDK tests may start together)
if command -v flock >/dev/null 2>&1; then
    exec 9>"$dir/.install.lock"
    flock 9
fi
want=$(sha256sum "$here/package-lock.json" | cut -d' ' -f1)
if [ -f "$dir/.lock-sha256" ] && [ "$(cat "$dir/.lock-sha256")" = "$want" ] &&
   [ -d "$dir/node_modules/openai" ] && [ -d "$dir/node_modules/@anthropic-ai/sdk" ]; then
    exit 0
fi
cp "$here/package.json" "$here/package-lock.json" "$dir/"
if ! (cd "$dir" && timeout 300 npm ci --no-audit --no-fund --loglevel=error >/dev/null 2>&1); then
    echo "install.sh: npm ci failed (registry unreachable?)" >&2
    exit 77
fi
echo "$want" >"$dir/.lock-sha256"
