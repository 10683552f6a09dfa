# test/rdma/suite-pass.sh - sourced by the scripts that run RDMA suite binaries again under one
# setting (ring-mode.sh, polling-mode.sh), not run itself. The caller sets PASS to its name and
# exports its setting first; then it calls `run` per binary and ends with `finish`.
# Its gtest XML goes beside the default pass's, not over it.
[ -n "${GTEST_OUTPUT:-}" ] && export GTEST_OUTPUT=${GTEST_OUTPUT%/}/$PASS/
DIR=${RRPC_BUILD:-build}/test/rdma
fail=0
# run NAME LOG LIMIT CMD...: one bounded binary; its last line, or all of its output on failure.
run() {
  local name=$1 log=${TMPDIR:-/tmp}/$PASS.$2.log limit=$3
  shift 3
  echo "--- $name"
  if timeout -k 10 "$limit" "$@" > "$log" 2>&1; then
    tail -1 "$log"
  else
    echo "FAIL: $name (exit $?); its output:"
    cat "$log"
    fail=1
  fi
}
# finish: PASS or FAIL for the whole pass, as the exit status too.
finish() {
  [ "$fail" = 0 ] && echo "PASS $PASS" || { echo "FAIL $PASS"; exit 1; }
}
