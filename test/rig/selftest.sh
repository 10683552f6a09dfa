#!/usr/bin/env bash
# test/rig/selftest.sh - self-test of the Soft-RoCE VM rig (tools/rxe-vm, tools/run-rdma-tests).
# Boots the VM a few times and checks what the rig promises: real verbs (rxe0 PORT_ACTIVE, a
# perftest client+server pair) work, a command's exit status, stdout, stderr, --env and the
# --out share come back, a hang is killed at --timeout with 124, a crashed guest is a failure
# (125) and never a pass, run-rdma-tests counts passes and failures in one boot, and picks
# direct mode where a port is active (checked inside the guest, where rxe0 is).
# Prints "N passed, M failed"; exit status non-zero if any check failed. Takes a few minutes.
# --peers (or RIG_SELFTEST_PEERS=1) adds the optional two-guest check (about a minute more).
set -u -o pipefail

PEERS=${RIG_SELFTEST_PEERS:-0}
case ${1:-} in
    --peers) PEERS=1 ;;
    "") ;;
    *) echo "usage: test/rig/selftest.sh [--peers]" >&2; exit 2 ;;
esac

ROOT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
RXE_VM=$ROOT_DIR/tools/rxe-vm
WORK=$ROOT_DIR/build/rxe-vm/selftest
rm -rf "$WORK" && mkdir -p "$WORK" || exit 2
cd "$ROOT_DIR" || exit 2

PASS=0 FAIL=0
ok() { echo "selftest: PASS: $*"; PASS=$((PASS + 1)); }
bad() { echo "selftest: FAIL: $*"; FAIL=$((FAIL + 1)); }
# Failed runs keep their run directory for debugging; the failures here are on purpose.
drop_run_dir() {  # drop_run_dir STDERR_FILE
    local d
    d=$(sed -n 's/^rxe-vm: run directory kept: //p' "$1" | tail -n 1)
    case $d in "$ROOT_DIR"/build/rxe-vm/run.*) rm -rf "$d" ;; esac
}
check() {  # check DESCRIPTION CONDITION...
    local what=$1; shift
    if "$@"; then ok "$what"; else bad "$what"; fi
}
has() { grep -q -- "$2" "$1"; }

"$RXE_VM" --check || { echo "0 passed, 1 failed"; exit 1; }

# The hang check mostly waits, and an idle guest costs little CPU: run it alongside the rest.
echo "selftest: [background] a hanging command with --timeout 60"
(
    start=$(date +%s)
    "$RXE_VM" --timeout 60 -- sh -c 'echo hanging; while :; do sleep 1; done' \
        > "$WORK/hang.out" 2> "$WORK/hang.err"
    echo "$? $(($(date +%s) - start))" > "$WORK/hang.status"
) &
HANG=$!

echo "selftest: [1] ibv_devinfo + perftest pair in the VM"
start=$(date +%s)
"$RXE_VM" --out "$WORK/out1" -- sh -c 'ibv_devinfo -d rxe0 && test/rig/verbs-check.sh' \
    2>&1 | tee "$WORK/verbs.log"
rc=$?
echo "selftest: [1] took $(($(date +%s) - start))s"
check "verbs: tools/rxe-vm exit 0 (got $rc)" [ "$rc" -eq 0 ]
check "verbs: rxe0 PORT_ACTIVE" has "$WORK/verbs.log" "PORT_ACTIVE"
check "verbs: ib_send_lat pair passed" has "$WORK/verbs.log" "PASS ib_send_lat"
check "verbs: ib_write_bw pair passed" has "$WORK/verbs.log" "PASS ib_write_bw"
check "verbs: logs came back through --out" [ -s "$WORK/out1/verbs-check/ib_write_bw.client.txt" ]

echo "selftest: [2] exit status 3, stdout/stderr, --env, --out"
start=$(date +%s)
"$RXE_VM" --out "$WORK/out2" --env RIG_PROBE='two words' -- sh -c \
    'echo "stdout:$RIG_PROBE"; echo "stderr:$RXE_VM_DEV" >&2; echo written > "$RXE_VM_OUT/probe.txt"; exit 3' \
    > "$WORK/st.out" 2> "$WORK/st.err"
rc=$?
echo "selftest: [2] took $(($(date +%s) - start))s"
check "status: COMMAND exit 3 => tools/rxe-vm exit 3 (got $rc)" [ "$rc" -eq 3 ]
check "status: stdout streamed back" has "$WORK/st.out" "^stdout:two words$"
check "status: stderr streamed back separately" has "$WORK/st.err" "^stderr:rxe0$"
check "status: file written to the --out share" has "$WORK/out2/probe.txt" "^written$"

echo "selftest: [3] a crashing guest is a failure, not a pass"
"$RXE_VM" -- sh -c 'echo c > /proc/sysrq-trigger; sleep 60' > "$WORK/crash.out" 2> "$WORK/crash.err"
rc=$?
sed 's/^/    /' "$WORK/crash.err" | head -n 3
check "crash: kernel panic in the guest => exit 125 (got $rc)" [ "$rc" -eq 125 ]
drop_run_dir "$WORK/crash.err"

echo "selftest: [4] run-rdma-tests: one boot, counts a pass and a failure"
mkdir -p "$WORK/bin" && ln -sf /bin/true "$WORK/bin/passes" && ln -sf /bin/false "$WORK/bin/fails" &&
    ln -sf /bin/true "$WORK/bin/passes2"
"$ROOT_DIR/tools/run-rdma-tests" --vm --out "$WORK/out4" "$WORK/bin/passes" "$WORK/bin/fails" \
    2>&1 | tee "$WORK/runner.log"
rc=$?
check "runner: exit non-zero when one binary fails (got $rc)" [ "$rc" -ne 0 ]
check "runner: summary line '1 passed, 1 failed'" has "$WORK/runner.log" "^1 passed, 1 failed$"

echo "selftest: [5] run-rdma-tests on a machine with an active port runs binaries directly"
# Inside the guest rxe0 is ACTIVE, so auto mode must pick the host path (no nested VM).
"$RXE_VM" --out "$WORK/out5" -- "$ROOT_DIR/tools/run-rdma-tests" --out "$WORK/out5/results" \
    "$WORK/bin/passes" "$WORK/bin/fails" "$WORK/bin/passes2" > "$WORK/direct.log" 2>&1
rc=$?
cat "$WORK/direct.log"
check "direct: exit non-zero when one binary fails (got $rc)" [ "$rc" -ne 0 -a "$rc" -lt 124 ]
check "direct: chose host mode on an active port" has "$WORK/direct.log" "mode: host"
check "direct: summary line '2 passed, 1 failed'" has "$WORK/direct.log" "^2 passed, 1 failed$"

if [ "$PEERS" = 1 ]; then
    echo "selftest: [6] two guests joined by a UDP socket netdev (--peers 2)"
    "$RXE_VM" --peers 2 --out "$WORK/out6" -- test/rig/verbs-check.sh 2>&1 | tee "$WORK/peers.log"
    rc=$?
    check "peers: both guests exit 0 (got $rc)" [ "$rc" -eq 0 ]
    check "peers: vm1 ran the perftest clients" has "$WORK/peers.log" "^\[vm1\] verbs-check: OK"
    check "peers: vm0 ran the perftest servers" has "$WORK/peers.log" "^\[vm0\] verbs-check: OK"
fi

wait "$HANG"
read -r rc secs < "$WORK/hang.status"
sed 's/^/    /' "$WORK/hang.err" | head -n 1
check "timeout: hanging COMMAND killed with exit 124 (got $rc after ${secs}s)" [ "$rc" -eq 124 ]
check "timeout: killed near --timeout 60 (${secs}s)" [ "$secs" -ge 60 -a "$secs" -le 100 ]
check "timeout: its output streamed before the kill" has "$WORK/hang.out" "^hanging$"
drop_run_dir "$WORK/hang.err"

echo "$PASS passed, $FAIL failed"
[ "$FAIL" -eq 0 ]
