#!/bin/sh
# test/preload/policy_smcopt_vm.sh - the SMC option sock_ops program in the
# Soft-RoCE VM (Debian kernel, root): mounts cgroup v2 if the guest has none,
# then runs build/test/preload/policy_smcopt_test on the loopback and on
# the rxe0 address (10.99.0.1), and its --unprivileged half as an
# unprivileged user. Run: tools/rxe-vm -- test/preload/policy_smcopt_vm.sh
set -eu
BUILD=${RRPC_BUILD:-build}
T=$BUILD/test/preload/policy_smcopt_test
uname -r
if ! grep -q ' - cgroup2 ' /proc/self/mountinfo; then
  mount -t cgroup2 none /sys/fs/cgroup
fi
echo "== loopback"; "$T" 127.0.0.1 lo
if ip -4 addr show dev dummy0 2>/dev/null | grep -q 10.99.0.1; then
  # A connection to one of the host's own addresses goes through lo.
  echo "== 10.99.0.1 (rxe0's address; the packets go through lo)"; "$T" 10.99.0.1 lo
fi
echo "== syncookies for every SYN (no saved SYN: nobody offers)"
old=$(cat /proc/sys/net/ipv4/tcp_syncookies)
echo 2 > /proc/sys/net/ipv4/tcp_syncookies
"$T" --syncookies 127.0.0.1 lo
echo "$old" > /proc/sys/net/ipv4/tcp_syncookies
echo "== unprivileged"
setpriv --reuid=65534 --regid=65534 --clear-groups --inh-caps=-all --bounding-set=-all "$T" --unprivileged
echo "policy_smcopt_vm: PASS"
