#!/usr/bin/env bash
# brpc_flags_test.sh - a server started with brpc's deploy flags, as a brpc
# service's command line has them (examples/echo server):
#   1. every flag rrpc accepts and ignores (src/rrpc/flags/brpc_unused.cc)
#      lets it start, and each is reported exactly once;
#   2. --graceful_quit_on_sigterm is honoured (accepted without a warning;
#      SIGTERM stops the server and the process exits 0);
#   3. --rdma_dialect=foo is refused when the flags are parsed, before any
#      server starts;
#   4. --version names rrpc's version.
# Needs the make build (build/examples/echo/server). Every run is bounded.
set -u
cd "$(dirname "$0")/../.."
BIN=${RRPC_BUILD:-build}/examples/echo/server
fails=0
check() { # check NAME CONDITION...
  if "${@:2}"; then echo "ok: $1"; else echo "FAILED: $1"; fails=$((fails + 1)); fi
}
dir=$(mktemp -d)
spid=
cleanup() { [ -n "$spid" ] && kill "$spid" 2>/dev/null && wait "$spid" 2>/dev/null; rm -rf "$dir"; }
trap cleanup EXIT

# The accepted flags, each set away from brpc's default.
ignored=(--bthread_concurrency=16 --bthread_min_concurrency=4 --stack_size_normal=2097152
  --task_group_runqueue_capacity=8192 --usercode_backup_threads=2 --enable_rpcz --rpc_dump
  --bvar_dump --bvar_dump_interval=5 --bvar_dump_file=/tmp/x --enable_dir_service
  --enable_threads_service --log_connection_close --log_connected --log_error_text
  --idle_timeout_second=30 --defer_close_second=1 --health_check_timeout_ms=100
  --socket_keepalive --http_verbose --pb_enum_as_number --crash_on_fatal_log
  --free_memory_to_system_interval=10)

# --foreground: timeout forwards our SIGTERM to the server once; without it, it signals its whole
# process group too, and the second SIGTERM meets the default action the first one restored.
timeout --foreground 20 "$BIN" --port=0 "${ignored[@]}" --graceful_quit_on_sigterm > "$dir/out" 2> "$dir/err" &
spid=$!
port=
for _ in $(seq 200); do  # bounded: 200 x 50 ms
  port=$(sed -n 's/^echo server on port \([0-9]*\).*/\1/p' "$dir/out")
  [ -n "$port" ] && break
  kill -0 $spid 2>/dev/null || break
  sleep 0.05
done
check "the server starts with brpc's flags" test -n "$port"
for f in "${ignored[@]}"; do
  name=${f%%=*}
  n=$(grep -c -- "$name=.* is a brpc flag with no meaning in rrpc" "$dir/err")
  check "$name reported once (got $n)" test "$n" -eq 1
done
check "graceful_quit_on_sigterm is not reported as ignored" \
  test "$(grep -c -- '--graceful_quit_on_sigterm=.*no meaning' "$dir/err")" -eq 0
if [ -n "$port" ]; then
  kill -TERM $spid
  wait $spid; rc=$?
  spid=
  check "SIGTERM stops it gracefully (exit $rc)" test "$rc" -eq 0
fi
[ "$fails" -eq 0 ] || { echo "--- server stderr:"; cat "$dir/err"; }

# --foreground: timeout forwards our SIGTERM to the server once; without it, it signals its whole
# process group too, and the second SIGTERM meets the default action the first one restored.
timeout --foreground 20 "$BIN" --port=0 --rdma_dialect=foo > "$dir/out2" 2> "$dir/err2"; rc=$?
check "--rdma_dialect=foo is refused at parsing (exit $rc)" test "$rc" -ne 0 -a "$rc" -ne 124
check "... saying why" grep -q -- "--rdma_dialect=foo: unknown (auto, imm, cursor or brpc)" "$dir/err2"
check "... before any server started" test ! -s "$dir/out2"
# --foreground: timeout forwards our SIGTERM to the server once; without it, it signals its whole
# process group too, and the second SIGTERM meets the default action the first one restored.
timeout --foreground 20 "$BIN" --port=0 --rdma_dialect=brpc --version > "$dir/v" 2>&1
version=$(sed -n 's/^#define RRPC_VERSION_\(MAJOR\|MINOR\|PATCH\) \([0-9]*\)$/\2/p' src/rrpc/version.h | paste -sd.)
check "--version names rrpc $version: $(head -1 "$dir/v")" grep -q "rrpc $version" "$dir/v"

[ "$fails" -eq 0 ] && echo PASS || { echo "FAIL ($fails)"; exit 1; }
