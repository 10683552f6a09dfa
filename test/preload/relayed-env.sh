# test/preload/relayed-env.sh - sourced, not run, by the scripts that run a test
# program at both ends under tools/rrpc-run (preload_test.sh, erm_test.sh).
# The caller sets `name` (its program in $build/test/preload/) and `here` (its
# own folder) first. Sets root, build, prog, run, want_rdma (1 when
# tools/run-rdma-tests named an RDMA address: relayed cases must be carried by
# RDMA), tmp (removed at exit), and exports RRPC_PRELOAD_LIB and
# PRELOAD_TEST_ADDR; exits 1 when the program or the preload is not built.
root=$(cd "$here/../.." && pwd)
build=${RRPC_BUILD:-build}
case $build in /*) ;; *) build=$root/$build ;; esac
prog=$build/test/preload/$name
run="$root/tools/rrpc-run"
export RRPC_PRELOAD_LIB=$build/librrpc_preload.so
[ -x "$prog" ] && [ -f "$RRPC_PRELOAD_LIB" ] || { echo "build $prog and $RRPC_PRELOAD_LIB first" >&2; exit 1; }
export PRELOAD_TEST_ADDR=${RRPC_TEST_RDMA_ADDR:-127.0.0.1}
want_rdma=0
[ -n "${RRPC_TEST_RDMA_ADDR:-}" ] && want_rdma=1
# SAN=1: the program links the ASan runtime itself; the preload (built with
# it too) comes first in LD_PRELOAD, which ASan would otherwise refuse.
export ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0
ulimit -l unlimited 2>/dev/null || true
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
