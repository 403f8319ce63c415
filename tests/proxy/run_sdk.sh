#!/bin/sh
# run_sdk.sh BUILD_DIR AGENTHOST - ctest proxy_sdk_matrix: the pinned SDKs (install.sh,
# cached in BUILD_DIR/proxy-node) through agenthost proxy (sdk_matrix.mjs). The CI matrix
# by default; AH_PROXY_FULL=1 runs every cut position. Exit 77 (skipped) without Node or
# without the packages.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
rc=0
sh "$here/install.sh" "$1/proxy-node" || rc=$?
[ "$rc" = 0 ] || exit "$rc"
mode=ci
[ "${AH_PROXY_FULL:-0}" = 1 ] && mode=full
exec node "$here/sdk_matrix.mjs" "$1/proxy-node" "$2" "$mode"
