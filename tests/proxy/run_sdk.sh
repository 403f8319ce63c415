#!/bin/sh
# run_sdk.sh BUILD_DIR AGENTHOST [SCRIPT] - ctest proxy_sdk_matrix (and proxy_sdk_overload):
# the pinned SDKs (install.sh, cached in BUILD_DIR/proxy-node) through agenthost proxy
# (SCRIPT, default sdk_matrix.mjs: the CI matrix by default; AH_PROXY_FULL=1 runs every cut
# position; sdk_overload.mjs: --max-in-flight). Exit 77 (skipped) without Node or without
# the packages.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
rc=0
sh "$here/install.sh" "$1/proxy-node" || rc=$?
[ "$rc" = 0 ] || exit "$rc"
mode=ci
[ "${AH_PROXY_FULL:-0}" = 1 ] && mode=full
script=${3:-sdk_matrix.mjs}
exec node "$here/$script" "$1/proxy-node" "$2" "$mode"
